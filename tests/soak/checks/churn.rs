//! The churn's checks (no rest between its cycles): once the run is over and at rest, the
//! last cycle gets every check at rest, and each earlier cycle the checks its journal records
//! allow (4 and 7), over the records written while it ran.

use lvms_journal::Record;

use crate::cycle::{Cycle, Soak};
use crate::journals::read_journal;
use crate::who::Who;

impl Soak<'_> {
    pub(crate) async fn after_churn(&mut self, done: usize) {
        if done == 0 {
            return;
        }
        if !self.chaos.quiesce().await {
            self.report.add(
                done,
                "not-converged",
                "churn/rest",
                "processes not ready at rest after the churn".into(),
            );
        }
        let [name, vga, vgb] = self.names.clone();
        let last = Cycle {
            k: done,
            name,
            vga,
            vgb,
        };
        self.check_at_rest(&last).await;
        for who in [Who::NodeA, Who::NodeB] {
            let Some(node) = who.node() else { continue };
            let recs = match read_journal(self.s, who) {
                Ok(r) => r,
                Err(e) => {
                    self.report
                        .add(done, "journal-verify", &format!("churn/{who}"), e);
                    continue;
                }
            };
            for k in 1..done {
                let window = self.timeline.start_ms(k)..self.timeline.start_ms(k + 1);
                let cycle: Vec<Record> = recs
                    .iter()
                    .filter(|r| window.contains(&r.at_ms))
                    .cloned()
                    .collect();
                self.check_vgcreate(k, node, last.vg_of(node), &cycle);
                self.check_host_commands(k, node, &recs, window, false);
            }
        }
    }
}
