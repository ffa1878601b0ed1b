//! `UnitHealth`: the journal projection of each unit's last pass result. The operator's
//! status fold reads it (ResourcesAvailable), so status is a function of the journal.

use std::collections::BTreeMap;

use lvms_journal::{Body, OutcomeResult, Projection, Record, Seq};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitState {
    pub ok: bool,
    /// `reason: message` of the failure, or what the pass did.
    pub message: String,
    /// Seq of the Outcome this state comes from.
    pub seq: Seq,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitHealth {
    /// Intent seq → unit, for pass intents still waiting for their outcome.
    open_passes: BTreeMap<Seq, String>,
    pub units: BTreeMap<String, UnitState>,
}

impl Projection for UnitHealth {
    const NAME: &'static str = "unit-health";

    fn apply(&mut self, record: &Record) {
        match &record.body {
            Body::Intent(i) if i.action == crate::steps::PASS_ACTION => {
                self.open_passes.insert(record.seq, i.unit.clone());
            }
            Body::Outcome(o) => {
                if self.open_passes.remove(&o.intent_seq).is_none() {
                    return; // a step outcome, not a pass
                }
                let (ok, message) = match &o.result {
                    // A pass without a summary still succeeded: the text is only shown.
                    OutcomeResult::Ok(d) => (true, d.summary.clone().unwrap_or_default()),
                    OutcomeResult::Err {
                        reason, message, ..
                    } => (false, format!("{reason}: {message}")),
                };
                self.units.insert(
                    o.unit.clone(),
                    UnitState {
                        ok,
                        message,
                        seq: record.seq,
                    },
                );
            }
            _ => {}
        }
    }
}

impl UnitHealth {
    /// Fold the records after `upto` into `self`; returns the new high-water seq.
    pub fn catch_up(
        &mut self,
        journal: &lvms_journal::Journal,
        upto: Seq,
    ) -> lvms_journal::Result<Seq> {
        let mut last = upto;
        for rec in journal.iter_range(upto.saturating_add(1)..) {
            let rec = rec?;
            last = rec.seq;
            self.apply(&rec);
        }
        Ok(last)
    }
}
