//! Check 4: one vgcreate effect per VG.

use std::collections::BTreeMap;

use lvms_journal::{Body, OutcomeResult, Record, Replayed};

use crate::cycle::Soak;

impl Soak<'_> {
    pub(crate) fn check_vgcreate(&mut self, k: usize, node: &str, vg: &str, recs: &[Record]) {
        let unit = format!("vg/{vg}");
        let outcomes: BTreeMap<u64, &OutcomeResult> = recs
            .iter()
            .filter_map(|r| match &r.body {
                Body::Outcome(o) => Some((o.intent_seq, &o.result)),
                _ => None,
            })
            .collect();
        let mut effects = 0;
        let mut verdicts = Vec::new();
        for r in recs {
            let Body::Intent(i) = &r.body else { continue };
            if i.unit != unit || i.action != "vgcreate" {
                continue;
            }
            let verdict = match outcomes.get(&r.seq) {
                None => "open".to_string(),
                Some(OutcomeResult::Err { reason, .. }) => format!("failed ({reason})"),
                Some(OutcomeResult::Ok(d)) => match d.replay {
                    None => {
                        effects += 1;
                        "ran".to_string()
                    }
                    Some(Replayed::AlreadyDone) => {
                        effects += 1;
                        "already-done (ran once, before a crash)".to_string()
                    }
                    Some(v) => format!("replay={v}"),
                },
            };
            verdicts.push(format!("seq {}: {verdict}", r.seq));
        }
        if effects != 1 {
            self.report.add(
                k,
                "vgcreate-effects",
                &format!("{k}/{vg}"),
                format!(
                    "{node}: {effects} vgcreate effect(s) for {vg} (want exactly 1): [{}]",
                    verdicts.join(", ")
                ),
            );
        }
    }
}
