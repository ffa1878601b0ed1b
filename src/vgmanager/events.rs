//! Which vg-manager journal records become Events: steps carrying `event.*` detail, failed
//! passes of a volume group (their reason is LVMS's Event reason), and a pass that made a
//! volume group ready.

use lvms_actors::{EventSpec, EventType, PASS_ACTION};
use lvms_journal::{Body, Journal, OutcomeResult, Record};

use crate::node::events::{EVENT_ACTION, EventReason, MSG_VOLUME_GROUP_READY};

pub fn event_for(journal: &Journal, rec: &Record) -> Option<EventSpec> {
    let Body::Outcome(o) = &rec.body else {
        return None;
    };
    let spec = |type_, reason: &str, note: String| EventSpec {
        regarding: o.object.clone(),
        type_,
        reason: reason.to_string(),
        note,
        action: EVENT_ACTION.into(),
    };
    if let OutcomeResult::Ok { detail, .. } = &o.result
        && let Some(reason) = detail.get("event.reason")
    {
        let t = if detail.get("event.type").map(String::as_str) == Some("Warning") {
            EventType::Warning
        } else {
            EventType::Normal
        };
        // Host steps regard the host; their Events go to the volume group of the pass.
        let mut s = spec(
            t,
            reason,
            detail.get("event.note").cloned().unwrap_or_default(),
        );
        if o.object.kind == "Host"
            && let Some(subject) = pass_subject(journal, o.intent_seq)
        {
            s.regarding = subject;
        }
        return Some(s);
    }
    let Some(Record {
        body: Body::Intent(i),
        ..
    }) = journal.get(o.intent_seq).ok()?
    else {
        return None;
    };
    if i.action != PASS_ACTION || !o.unit.starts_with("vg/") || o.object.uid.is_empty() {
        return None;
    }
    match &o.result {
        OutcomeResult::Ok { .. } => Some(spec(
            EventType::Normal,
            EventReason::VolumeGroupReady.as_str(),
            MSG_VOLUME_GROUP_READY.into(),
        )),
        OutcomeResult::Err {
            reason, message, ..
        } => Some(spec(EventType::Warning, reason, message.clone())),
    }
}

/// The open pass intent of the same unit just before `seq` (host steps run inside one).
fn pass_subject(journal: &Journal, seq: u64) -> Option<lvms_journal::ObjectRef> {
    let unit = match journal.get(seq).ok()?? {
        Record {
            body: Body::Intent(i),
            ..
        } => i.unit,
        _ => return None,
    };
    (seq.saturating_sub(64)..seq)
        .rev()
        .find_map(|s| match journal.get(s).ok()?? {
            Record {
                body: Body::Intent(i),
                ..
            } if i.unit == unit && i.action == PASS_ACTION => Some(i.object),
            _ => None,
        })
}
