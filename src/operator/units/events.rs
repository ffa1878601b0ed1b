//! Which journal records become Events (LVMS's reasons), for the EventPublisher.

use lvms_actors::{EventSpec, EventType, PASS_ACTION};
use lvms_journal::{Body, Journal, OutcomeResult, Record};

use super::lifecycle::REASON_DELETION_PENDING;

pub const REASON_SUCCESS: &str = "ResourceReconciliationSuccess";
pub const REASON_INCOMPLETE: &str = "ResourceReconciliationIncomplete";

/// Which Normal Events the operator sends (Warnings always go out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NormalEvents {
    /// One success per reconcile of the LVMCluster: when the status reaches Ready for a
    /// generation (what a user reading `kubectl get events` needs).
    #[default]
    Summary,
    /// Also every unit's successful pass (LVMS sends these only at raised verbosity).
    All,
}

impl std::str::FromStr for NormalEvents {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "summary" => Ok(NormalEvents::Summary),
            "all" => Ok(NormalEvents::All),
            other => Err(format!("{other:?}: expected summary or all")),
        }
    }
}

/// The status unit's pass summary once the LVMCluster is Ready at `generation`: a new
/// generation is a new summary, so its pass outcome (and the success Event) is journaled once.
pub fn ready_summary(generation: i64) -> String {
    format!("status Ready, generation {generation}")
}

/// A step outcome carrying an event → that Event; a failed pass → incomplete (DeletionPending
/// keeps its own reason); the status reaching Ready → the reconcile's success; with
/// [`NormalEvents::All`] every unit's successful pass too; anything else → no Event. An intent
/// that cannot be read is an error (the publisher retries), never "no Event".
/// [`event_for`] as the Event publisher's mapper.
pub fn mapper(normal: NormalEvents) -> lvms_actors::EventMapper {
    std::sync::Arc::new(move |j: &Journal, r: &Record| {
        Ok(event_for(j, r, normal)?.into_iter().collect())
    })
}

pub fn event_for(
    journal: &Journal,
    rec: &Record,
    normal: NormalEvents,
) -> lvms_journal::Result<Option<EventSpec>> {
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
    if intent.action != PASS_ACTION || o.object.uid.is_empty() {
        return Ok(None);
    }
    if o.unit == crate::operator::table::UnitId::Status.name() {
        // Its passes are status, not news, except the first that finds this generation's
        // reconcile done: Ready again later (after a node dipped) is not a new reconcile.
        let Some(d) = o.result.done() else {
            return Ok(None);
        };
        if d.summary != Some(ready_summary(o.object.generation)) {
            return Ok(None);
        }
        let spec = EventSpec {
            regarding: o.object.clone(),
            type_: EventType::Normal,
            reason: REASON_SUCCESS.to_string(),
            note: format!(
                "every resource reconciled; LVMCluster Ready (generation {})",
                o.object.generation
            ),
            action: "Reconcile".into(),
        };
        return Ok(match journal.last_published(&spec.key())? {
            Some(Record {
                body: Body::Published(p),
                ..
            }) if p.source_seq != rec.seq => None,
            _ => Some(spec),
        });
    }
    if normal == NormalEvents::Summary && matches!(o.result, OutcomeResult::Ok(_)) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use lvms_journal::{Done, Intent, ObjectRef, Trace};

    fn cluster(generation: i64) -> ObjectRef {
        ObjectRef {
            kind: "LVMCluster".into(),
            namespace: "lvms".into(),
            name: "my-lvmcluster".into(),
            uid: "uid-c".into(),
            generation,
        }
    }

    /// A whole pass of `unit` on the LVMCluster at `generation`; returns its outcome record.
    fn pass(j: &Journal, unit: &str, generation: i64, result: OutcomeResult) -> Record {
        let seq = j
            .append_intent(
                Intent {
                    unit: unit.into(),
                    object: cluster(generation),
                    action: PASS_ACTION.into(),
                    args: vec![],
                    desired_digest: String::new(),
                    idempotency_key: format!("{unit}/{generation}"),
                    lease_epoch: 0,
                    regarding: vec![],
                },
                Trace::default(),
            )
            .unwrap();
        let out = j
            .append_outcome(seq, result, std::time::Duration::ZERO, Trace::default())
            .unwrap();
        j.get(out).unwrap().unwrap()
    }

    fn ok(summary: String) -> OutcomeResult {
        OutcomeResult::Ok(Done {
            summary: Some(summary),
            ..Done::default()
        })
    }

    #[test]
    fn one_success_per_reconcile_unless_all_are_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path()).unwrap();
        let unit_ok = pass(
            &j,
            "topolvm-storageclass",
            2,
            ok("1 StorageClass in sync".into()),
        );
        let ready = pass(
            &j,
            crate::operator::table::UnitId::Status.name(),
            2,
            ok(ready_summary(2)),
        );
        let progressing = pass(
            &j,
            crate::operator::table::UnitId::Status.name(),
            3,
            ok("status Progressing".into()),
        );
        let failed = pass(
            &j,
            "vg-manager",
            3,
            OutcomeResult::Err {
                reason: "VGManagerNotReady".into(),
                message: "not ready".into(),
                retryable: true,
            },
        );
        let for_ = |r: &Record, n| event_for(&j, r, n).unwrap();

        assert_eq!(for_(&unit_ok, NormalEvents::Summary), None);
        let all = for_(&unit_ok, NormalEvents::All).expect("with all");
        assert_eq!(all.reason, REASON_SUCCESS);
        for n in [NormalEvents::Summary, NormalEvents::All] {
            let e = for_(&ready, n).expect("the reconcile's success");
            assert_eq!(
                (e.type_, e.reason.as_str()),
                (EventType::Normal, REASON_SUCCESS)
            );
            assert!(e.note.contains("generation 2"), "{}", e.note);
            assert_eq!(for_(&progressing, n), None, "status is not news");
            let w = for_(&failed, n).expect("warnings always");
            assert_eq!(
                (w.type_, w.reason.as_str()),
                (EventType::Warning, REASON_INCOMPLETE)
            );
        }
        // Ready again in the same generation (after a node dipped) is not a new reconcile:
        // once the first went out, the later one makes no Event.
        let first = for_(&ready, NormalEvents::Summary).unwrap();
        j.append_published(
            lvms_journal::Published {
                unit: crate::operator::table::UnitId::Status.name().into(),
                object: Some(first.regarding.clone()),
                kind: lvms_journal::PublishKind::Event,
                dedupe_key: first.key(),
                source_seq: ready.seq,
                count: 1,
                summary: first.note.clone(),
            },
            Trace::default(),
        )
        .unwrap();
        let again = pass(
            &j,
            crate::operator::table::UnitId::Status.name(),
            2,
            ok(ready_summary(2)),
        );
        assert_eq!(for_(&again, NormalEvents::Summary), None);
        assert!(
            for_(&ready, NormalEvents::Summary).is_some(),
            "the first one stays mapped"
        );
        assert_eq!("all".parse::<NormalEvents>(), Ok(NormalEvents::All));
        assert!("verbose".parse::<NormalEvents>().is_err());
    }
}
