//! Check 4: one vgcreate effect per VG.

use lvms_journal::Record;
use lvms_testkit::journal::effects;

use crate::cycle::Soak;

impl Soak<'_> {
    pub(crate) fn check_vgcreate(&mut self, k: usize, node: &str, vg: &str, recs: &[Record]) {
        let fx = effects(recs, &format!("vg/{vg}"))
            .remove("vgcreate")
            .unwrap_or_default();
        if fx.took != 1 {
            self.report.add(
                k,
                "vgcreate-effects",
                &format!("{k}/{vg}"),
                format!(
                    "{node}: {} vgcreate effect(s) for {vg} (want exactly 1): [{}]",
                    fx.took,
                    fx.verdicts.join(", ")
                ),
            );
        }
    }
}
