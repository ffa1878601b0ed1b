//! What the crate's unit tests share: a counting projection (a snapshot to compact against)
//! and closed intent/outcome pairs.

use std::time::Duration;

use crate::journal::Journal;
use crate::projection::Projection;
use crate::record::{Intent, ObjectRef, OutcomeResult, Record, Seq, Trace};

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Count(pub u64);

impl Projection for Count {
    const NAME: &'static str = "count";
    fn apply(&mut self, _: &Record) {
        self.0 += 1;
    }
}

/// An `apply` intent about `object` with this idempotency key, and its outcome; returns the
/// intent's seq.
pub(crate) fn closed_pair(j: &Journal, object: &ObjectRef, key: &str) -> Seq {
    let i = j
        .append_intent(
            Intent {
                unit: "u".into(),
                object: object.clone(),
                action: "apply".into(),
                args: Vec::new(),
                desired_digest: String::new(),
                idempotency_key: key.into(),
                lease_epoch: 0,
                regarding: Vec::new(),
            },
            Trace::default(),
        )
        .expect("intent");
    j.append_outcome(
        i,
        OutcomeResult::Ok(crate::Done::default()),
        Duration::ZERO,
        Trace::default(),
    )
    .expect("outcome");
    i
}
