//! Which journal records become Events (LVMS's reasons), for the EventPublisher.

use lvms_actors::{EventSpec, EventType, PASS_ACTION};
use lvms_journal::{Body, Journal, OutcomeResult, Record};

use super::lifecycle::REASON_DELETION_PENDING;

pub const REASON_SUCCESS: &str = "ResourceReconciliationSuccess";
pub const REASON_INCOMPLETE: &str = "ResourceReconciliationIncomplete";

/// A step outcome carrying `event.*` detail → that Event; a pass outcome → success or
/// incomplete (DeletionPending keeps its own reason); anything else → no Event. An intent that
/// cannot be read is an error (the publisher retries), never "no Event".
pub fn event_for(journal: &Journal, rec: &Record) -> lvms_journal::Result<Option<EventSpec>> {
    let Body::Outcome(o) = &rec.body else {
        return Ok(None);
    };
    // Absent detail keys are empty text: formatting only.
    if let OutcomeResult::Ok { detail, .. } = &o.result
        && let Some(reason) = detail.get("event.reason")
    {
        return Ok(Some(EventSpec {
            regarding: o.object.clone(),
            type_: if detail.get("event.type").map(String::as_str) == Some("Warning") {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.clone(),
            note: detail.get("event.note").cloned().unwrap_or_default(),
            action: "Reconcile".into(),
        }));
    }
    let intent = match journal.get(o.intent_seq)? {
        Some(Record {
            body: Body::Intent(i),
            ..
        }) => i,
        _ => return Ok(None),
    };
    // The status projector's own passes are status, not news.
    if intent.action != PASS_ACTION
        || o.object.uid.is_empty()
        || o.unit == super::status_projector::UNIT
    {
        return Ok(None);
    }
    let (type_, reason, note) = match &o.result {
        OutcomeResult::Ok { detail, .. } => (
            EventType::Normal,
            REASON_SUCCESS.to_string(),
            format!(
                "{}: {}",
                o.unit,
                detail.get("summary").cloned().unwrap_or_default()
            ),
        ),
        OutcomeResult::Err {
            reason, message, ..
        } if reason == REASON_DELETION_PENDING => {
            (EventType::Warning, reason.clone(), message.clone())
        }
        OutcomeResult::Err {
            reason, message, ..
        } => (
            EventType::Warning,
            REASON_INCOMPLETE.to_string(),
            format!("{}: {reason}: {message}", o.unit),
        ),
    };
    Ok(Some(EventSpec {
        regarding: o.object.clone(),
        type_,
        reason,
        note,
        action: "Reconcile".into(),
    }))
}
