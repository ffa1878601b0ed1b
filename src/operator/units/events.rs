//! Which journal records become Events (LVMS's reasons), for the EventPublisher.

use lvms_actors::{EventSpec, EventType, PASS_ACTION};
use lvms_journal::{Body, Journal, OutcomeResult, Record};

use super::lifecycle::REASON_DELETION_PENDING;

pub const REASON_SUCCESS: &str = "ResourceReconciliationSuccess";
pub const REASON_INCOMPLETE: &str = "ResourceReconciliationIncomplete";

/// A step outcome carrying an event → that Event; a pass outcome → success or
/// incomplete (DeletionPending keeps its own reason); anything else → no Event. An intent that
/// cannot be read is an error (the publisher retries), never "no Event".
pub fn event_for(journal: &Journal, rec: &Record) -> lvms_journal::Result<Option<EventSpec>> {
    let Body::Outcome(o) = &rec.body else {
        return Ok(None);
    };
    if let Some(e) = o.result.done().and_then(|d| d.event.as_ref()) {
        return Ok(Some(EventSpec {
            regarding: o.object.clone(),
            type_: e.into(),
            reason: e.reason.clone(),
            note: e.note.clone(),
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
        // A pass without a summary is formatted with an empty one.
        OutcomeResult::Ok(d) => (
            EventType::Normal,
            REASON_SUCCESS.to_string(),
            format!("{}: {}", o.unit, d.summary.as_deref().unwrap_or_default()),
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
