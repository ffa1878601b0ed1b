//! Records of earlier on-disk formats, decoded and lifted to the current types. bincode is
//! not self-describing, so each older layout is spelled out once here and nowhere else.

use serde::Deserialize;

use crate::record::{
    Body, Intent, ObjectRef, Observed, Outcome, OutcomeResult, Published, Record, Seq, Snapshot,
    Trace,
};

/// Format 1 (lvms up to stop 10): intents and outcomes without `regarding`.
#[derive(Deserialize)]
pub(crate) struct RecordV1 {
    seq: Seq,
    at_ms: u64,
    trace: Trace,
    body: BodyV1,
}

/// Variant order is the wire order: never reorder.
#[derive(Deserialize)]
enum BodyV1 {
    Observed(Observed),
    Intent(IntentV1),
    Outcome(OutcomeV1),
    Published(Published),
    Snapshot(Snapshot),
}

#[derive(Deserialize)]
struct IntentV1 {
    unit: String,
    object: ObjectRef,
    action: String,
    desired_digest: String,
    idempotency_key: String,
    lease_epoch: u64,
}

#[derive(Deserialize)]
struct OutcomeV1 {
    intent_seq: Seq,
    unit: String,
    object: ObjectRef,
    result: OutcomeResult,
    duration_ms: u64,
}

impl From<RecordV1> for Record {
    fn from(r: RecordV1) -> Record {
        let body = match r.body {
            BodyV1::Observed(o) => Body::Observed(o),
            BodyV1::Intent(i) => Body::Intent(Intent {
                unit: i.unit,
                object: i.object,
                action: i.action,
                desired_digest: i.desired_digest,
                idempotency_key: i.idempotency_key,
                lease_epoch: i.lease_epoch,
                regarding: Vec::new(),
            }),
            BodyV1::Outcome(o) => Body::Outcome(Outcome {
                intent_seq: o.intent_seq,
                unit: o.unit,
                object: o.object,
                result: o.result,
                duration_ms: o.duration_ms,
                regarding: Vec::new(),
            }),
            BodyV1::Published(p) => Body::Published(p),
            BodyV1::Snapshot(s) => Body::Snapshot(s),
        };
        Record {
            seq: r.seq,
            at_ms: r.at_ms,
            trace: r.trace,
            body,
        }
    }
}
