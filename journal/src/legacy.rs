//! Records of earlier on-disk formats, decoded and lifted to the current types. bincode is
//! not self-describing, so each older layout is spelled out once here and nowhere else.
//!
//! * Format 1 (lvms up to stop 10): intents and outcomes without `regarding`.
//! * Format 2 (stop 11): `regarding`; outcome details were a string map read by key
//!   (`event.type`, `replay`, `summary`, ...), host steps kept their argv in the digest, and
//!   an `observed` record kind existed that no release ever wrote.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::error::DecodeError;
use crate::record::{
    Body, Done, EventNote, Intent, ObjectRef, Outcome, OutcomeResult, Published, Record, Replayed,
    Seq, Snapshot, Trace,
};

#[derive(Deserialize)]
pub(crate) struct RecordV1 {
    seq: Seq,
    at_ms: u64,
    trace: Trace,
    body: BodyV1,
}

#[derive(Deserialize)]
pub(crate) struct RecordV2 {
    seq: Seq,
    at_ms: u64,
    trace: Trace,
    body: BodyV2,
    /// The frame's format, for messages (not on the wire).
    #[serde(skip, default = "format_2")]
    format: u8,
}

fn format_2() -> u8 {
    2
}

/// Variant order is the wire order: never reorder.
#[derive(Deserialize)]
enum BodyV1 {
    Observed(ObservedV2),
    Intent(IntentV1),
    Outcome(OutcomeV1),
    Published(Published),
    Snapshot(Snapshot),
}

#[derive(Deserialize)]
enum BodyV2 {
    Observed(ObservedV2),
    Intent(IntentV2),
    Outcome(OutcomeV2),
    Published(Published),
    Snapshot(Snapshot),
}

/// Decoded only to say what it was.
#[derive(Deserialize)]
#[allow(dead_code)]
struct ObservedV2 {
    unit: String,
    object: ObjectRef,
    digest: String,
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
struct IntentV2 {
    unit: String,
    object: ObjectRef,
    action: String,
    desired_digest: String,
    idempotency_key: String,
    lease_epoch: u64,
    regarding: Vec<ObjectRef>,
}

#[derive(Deserialize)]
enum ResultV2 {
    Ok {
        resource_version: Option<String>,
        detail: BTreeMap<String, String>,
    },
    Err {
        reason: String,
        message: String,
        retryable: bool,
    },
}

#[derive(Deserialize)]
struct OutcomeV1 {
    intent_seq: Seq,
    unit: String,
    object: ObjectRef,
    result: ResultV2,
    duration_ms: u64,
}

#[derive(Deserialize)]
struct OutcomeV2 {
    intent_seq: Seq,
    unit: String,
    object: ObjectRef,
    result: ResultV2,
    duration_ms: u64,
    regarding: Vec<ObjectRef>,
}

/// What a format-2 replay note said, as a verdict. The free-text notes of units that
/// recompute every pass ("status is rewritten", "... is re-checked by the next pass") are
/// `Rechecked`.
fn replayed(note: &str) -> Replayed {
    match note {
        "already-done" | "already-applied" | "already-deleted" => Replayed::AlreadyDone,
        "reapplied" => Replayed::Redone,
        "not-done" => Replayed::NotDone,
        "superseded" => Replayed::Superseded,
        _ => Replayed::Rechecked,
    }
}

/// The typed report hidden in a format-1/2 detail map; keys no code read stay as facts.
fn done(resource_version: Option<String>, mut detail: BTreeMap<String, String>) -> Done {
    let event = match (
        detail.remove("event.type"),
        detail.remove("event.reason"),
        detail.remove("event.note"),
    ) {
        (t, Some(reason), note) => Some(EventNote {
            warning: t.as_deref() == Some("Warning"),
            reason,
            note: note.unwrap_or_default(),
        }),
        _ => None,
    };
    detail.remove("resourceVersion");
    Done {
        resource_version,
        event,
        replay: detail.remove("replay").as_deref().map(replayed),
        summary: detail.remove("summary"),
        applied: detail.remove("applied").and_then(|n| n.parse().ok()),
        quiet: detail.remove("quiet").is_some_and(|q| q == "true"),
        facts: detail,
    }
}

impl From<ResultV2> for OutcomeResult {
    fn from(r: ResultV2) -> Self {
        match r {
            ResultV2::Ok {
                resource_version,
                detail,
            } => OutcomeResult::Ok(done(resource_version, detail)),
            ResultV2::Err {
                reason,
                message,
                retryable,
            } => OutcomeResult::Err {
                reason,
                message,
                retryable,
            },
        }
    }
}

fn observed(format: u8, o: ObservedV2) -> DecodeError {
    DecodeError::RetiredKind {
        format,
        kind: "observed",
        unit: o.unit,
        object: Box::new(o.object),
    }
}

/// Format 1 is format 2 with nothing regarded.
impl From<RecordV1> for RecordV2 {
    fn from(r: RecordV1) -> RecordV2 {
        let body = match r.body {
            BodyV1::Observed(o) => BodyV2::Observed(o),
            BodyV1::Intent(i) => BodyV2::Intent(IntentV2 {
                unit: i.unit,
                object: i.object,
                action: i.action,
                desired_digest: i.desired_digest,
                idempotency_key: i.idempotency_key,
                lease_epoch: i.lease_epoch,
                regarding: Vec::new(),
            }),
            BodyV1::Outcome(o) => BodyV2::Outcome(OutcomeV2 {
                intent_seq: o.intent_seq,
                unit: o.unit,
                object: o.object,
                result: o.result,
                duration_ms: o.duration_ms,
                regarding: Vec::new(),
            }),
            BodyV1::Published(p) => BodyV2::Published(p),
            BodyV1::Snapshot(s) => BodyV2::Snapshot(s),
        };
        RecordV2 {
            seq: r.seq,
            at_ms: r.at_ms,
            trace: r.trace,
            body,
            format: 1,
        }
    }
}

impl TryFrom<RecordV1> for Record {
    type Error = DecodeError;
    fn try_from(r: RecordV1) -> Result<Record, DecodeError> {
        RecordV2::from(r).try_into()
    }
}

impl TryFrom<RecordV2> for Record {
    type Error = DecodeError;
    fn try_from(r: RecordV2) -> Result<Record, DecodeError> {
        let body = match r.body {
            BodyV2::Observed(o) => return Err(observed(r.format, o)),
            BodyV2::Intent(i) => Body::Intent(Intent {
                unit: i.unit,
                object: i.object,
                action: i.action,
                args: Vec::new(),
                desired_digest: i.desired_digest,
                idempotency_key: i.idempotency_key,
                lease_epoch: i.lease_epoch,
                regarding: i.regarding,
            }),
            BodyV2::Outcome(o) => Body::Outcome(Outcome {
                intent_seq: o.intent_seq,
                unit: o.unit,
                object: o.object,
                result: o.result.into(),
                duration_ms: o.duration_ms,
                regarding: o.regarding,
            }),
            BodyV2::Published(p) => Body::Published(p),
            BodyV2::Snapshot(s) => Body::Snapshot(s),
        };
        Ok(Record {
            seq: r.seq,
            at_ms: r.at_ms,
            trace: r.trace,
            body,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_format_2_detail_map_becomes_the_typed_report() {
        let d = done(
            None,
            m(&[
                ("argv", "/usr/sbin/pvremove /dev/loop8"),
                ("event.type", "Normal"),
                ("event.reason", "DeviceRemoved"),
                ("event.note", "gone"),
                ("replay", "already-done"),
            ]),
        );
        assert_eq!(d.event, Some(EventNote::normal("DeviceRemoved", "gone")));
        assert_eq!(d.replay, Some(Replayed::AlreadyDone));
        assert_eq!(d.facts, m(&[("argv", "/usr/sbin/pvremove /dev/loop8")]));
        // And back: the flat view is the map it came from.
        assert_eq!(d.flat()["event.reason"], "DeviceRemoved");

        let pass = done(
            Some("7".into()),
            m(&[
                ("summary", "ready"),
                ("applied", "3"),
                ("quiet", "true"),
                ("resourceVersion", "7"),
                ("event.type", "Warning"),
                ("event.reason", "X"),
            ]),
        );
        assert_eq!(
            (
                pass.summary.as_deref(),
                pass.applied,
                pass.quiet,
                pass.facts.len()
            ),
            (Some("ready"), Some(3), true, 0)
        );
        assert_eq!(pass.resource_version.as_deref(), Some("7"));
        assert_eq!(pass.event, Some(EventNote::warning("X", "")));
    }

    #[test]
    fn free_text_replay_notes_are_rechecks() {
        for (note, want) in [
            ("already-applied", Replayed::AlreadyDone),
            ("already-deleted", Replayed::AlreadyDone),
            ("reapplied", Replayed::Redone),
            ("not-done", Replayed::NotDone),
            ("superseded", Replayed::Superseded),
            ("status is rewritten", Replayed::Rechecked),
            (
                "remove-finalizer is re-checked by the next pass",
                Replayed::Rechecked,
            ),
        ] {
            assert_eq!(replayed(note), want, "{note}");
        }
    }
}
