//! Which vg-manager journal records become Events: steps carrying `event.*` detail, failed
//! passes of a volume group (their reason is LVMS's Event reason), and a pass that made a
//! volume group ready.

use lvms_actors::{EventSpec, EventType, PASS_ACTION};
use lvms_journal::{Body, Journal, ObjectRef, OutcomeResult, Record};

use crate::api::{LVMVolumeGroup, LVMVolumeGroupNodeStatus};
use crate::node::vg::events::{
    EVENT_ACTION, EventReason, MSG_VOLUME_GROUP_READY, cluster_event_message,
    volume_group_event_message,
};
use crate::objects::object_ref;

const NODE_STATUS_KIND: &str = "LVMVolumeGroupNodeStatus";

/// Where this node's Events go besides the volume group.
#[derive(Clone)]
pub struct EventTargets {
    pub node: String,
    pub namespace: String,
}

impl EventTargets {
    /// Every Event of `rec`: one per regarded object, with LVMS's wording for each. The
    /// objects are the ones the outcome recorded when it happened (`regarding`, with their
    /// UIDs), never looked up again: after a restart an old outcome's Events still go to the
    /// objects of its time, under the same keys, so what was published is not sent again.
    /// Outcomes of format 1 regard nothing else: their Events go to the volume group only.
    pub fn events_for(
        &self,
        journal: &Journal,
        rec: &Record,
    ) -> lvms_journal::Result<Vec<EventSpec>> {
        let Some(base) = event_for(journal, rec)? else {
            return Ok(Vec::new());
        };
        let Body::Outcome(o) = &rec.body else {
            return Ok(Vec::new());
        };
        let node_status = o
            .regarding
            .iter()
            .find(|r| r.kind == NODE_STATUS_KIND)
            .cloned();
        let owners = o
            .regarding
            .iter()
            .filter(|r| r.kind != NODE_STATUS_KIND)
            .cloned()
            .collect();
        Ok(fan_out(
            &base,
            &self.namespace,
            &self.node,
            node_status,
            owners,
        ))
    }
}

/// The objects a pass of `vg` regards besides `vg` itself, with their current UIDs: this
/// node's status (when the operator has created it) and the volume group's owners.
pub fn regarded(
    vg: &LVMVolumeGroup,
    node_status: Option<&LVMVolumeGroupNodeStatus>,
) -> Vec<ObjectRef> {
    node_status
        .map(object_ref)
        .into_iter()
        .chain(owner_refs(vg))
        .collect()
}

fn owner_refs(vg: &LVMVolumeGroup) -> Vec<ObjectRef> {
    let ns = vg.metadata.namespace.clone().unwrap_or_default();
    vg.metadata
        .owner_references
        .iter()
        .flatten()
        .map(|o| ObjectRef {
            kind: o.kind.clone(),
            namespace: ns.clone(),
            name: o.name.clone(),
            uid: o.uid.clone(),
            generation: 0,
        })
        .collect()
}

/// LVMS `WarningEvent`/`NormalEvent`: the node status gets the message as is, each owner
/// (the LVMCluster) gets it prefixed with the node and volume group, the volume group with
/// the node. The node in every note also keeps two nodes' Events on one object apart.
pub fn fan_out(
    base: &EventSpec,
    namespace: &str,
    node: &str,
    node_status: Option<ObjectRef>,
    owners: Vec<ObjectRef>,
) -> Vec<EventSpec> {
    let warning = base.type_ == EventType::Warning;
    let mut out = Vec::with_capacity(2 + owners.len());
    if let Some(ns) = node_status {
        out.push(EventSpec {
            regarding: ns,
            ..base.clone()
        });
    }
    for owner in owners {
        out.push(EventSpec {
            regarding: owner,
            note: cluster_event_message(warning, namespace, node, &base.regarding.name, &base.note),
            ..base.clone()
        });
    }
    out.push(EventSpec {
        note: volume_group_event_message(warning, namespace, node, &base.note),
        ..base.clone()
    });
    out
}

/// The Event of `rec` regarding its volume group, as the volume-group actor saw it. A record it
/// needs that cannot be read is an error (the publisher retries): an Event never goes to the
/// wrong object, nor is it dropped, because of it.
pub fn event_for(journal: &Journal, rec: &Record) -> lvms_journal::Result<Option<EventSpec>> {
    let Body::Outcome(o) = &rec.body else {
        return Ok(None);
    };
    let spec = |type_, reason: &str, note: String| EventSpec {
        regarding: o.object.clone(),
        type_,
        reason: reason.to_string(),
        note,
        action: EVENT_ACTION.into(),
    };
    if let Some(e) = o.result.done().and_then(|d| d.event.as_ref()) {
        // Host steps regard the host; their Events go to the volume group of the pass.
        let mut s = spec(e.into(), &e.reason, e.note.clone());
        if o.object.kind == super::context::HOST_KIND
            && let Some(subject) = pass_subject(journal, o.intent_seq)?
        {
            s.regarding = subject;
        }
        return Ok(Some(s));
    }
    let Some(Record {
        body: Body::Intent(i),
        ..
    }) = journal.get(o.intent_seq)?
    else {
        return Ok(None);
    };
    if i.action != PASS_ACTION || !o.unit.starts_with("vg/") || o.object.uid.is_empty() {
        return Ok(None);
    }
    Ok(match &o.result {
        // A quiet success (a teardown) told its news through its steps' Events.
        OutcomeResult::Ok(d) if d.quiet => None,
        OutcomeResult::Ok(_) => Some(spec(
            EventType::Normal,
            EventReason::VolumeGroupReady.as_str(),
            MSG_VOLUME_GROUP_READY.into(),
        )),
        OutcomeResult::Err {
            reason, message, ..
        } => Some(spec(EventType::Warning, reason, message.clone())),
    })
}

/// The open pass intent of the same unit just before `seq` (host steps run inside one).
/// Records that are not there (compacted) are passed over; unreadable ones are an error.
fn pass_subject(
    journal: &Journal,
    seq: u64,
) -> lvms_journal::Result<Option<lvms_journal::ObjectRef>> {
    let unit = match journal.get(seq)? {
        Some(Record {
            body: Body::Intent(i),
            ..
        }) => i.unit,
        _ => return Ok(None),
    };
    for s in (seq.saturating_sub(64)..seq).rev() {
        if let Some(Record {
            body: Body::Intent(i),
            ..
        }) = journal.get(s)?
            && i.unit == unit
            && i.action == PASS_ACTION
        {
            return Ok(Some(i.object));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(kind: &str, name: &str, uid: &str) -> ObjectRef {
        ObjectRef {
            kind: kind.into(),
            namespace: "lvms".into(),
            name: name.into(),
            uid: uid.into(),
            generation: 0,
        }
    }

    fn base(type_: EventType) -> EventSpec {
        EventSpec {
            regarding: obj("LVMVolumeGroup", "vg1", "u-vg"),
            type_,
            reason: "VGCreateOrExtendFailed".into(),
            note: "vgcreate failed".into(),
            action: EVENT_ACTION.into(),
        }
    }

    #[test]
    fn a_warning_goes_to_node_status_cluster_and_volume_group_with_lvms_wording() {
        let out = fan_out(
            &base(EventType::Warning),
            "lvms",
            "node-a",
            Some(obj("LVMVolumeGroupNodeStatus", "node-a", "u-ns")),
            vec![obj("LVMCluster", "my-lvmcluster", "u-c")],
        );
        let got: Vec<(&str, &str)> = out
            .iter()
            .map(|e| (e.regarding.uid.as_str(), e.note.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("u-ns", "vgcreate failed"),
                (
                    "u-c",
                    "error on node lvms/node-a in volume group lvms/vg1: vgcreate failed"
                ),
                ("u-vg", "error on node lvms/node-a: vgcreate failed"),
            ]
        );
        let keys: std::collections::BTreeSet<String> = out.iter().map(EventSpec::key).collect();
        assert_eq!(keys.len(), 3, "one Event object each");
    }

    #[test]
    fn a_normal_event_says_update_and_missing_targets_are_left_out() {
        let out = fan_out(&base(EventType::Normal), "lvms", "node-b", None, vec![]);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].note, "update on node lvms/node-b: vgcreate failed");
        assert_eq!(out[0].regarding.uid, "u-vg");
    }

    /// Issue 12.1: an outcome's Events go to the objects recorded with it, whatever has the
    /// same names now; an outcome that recorded none (format 1) reaches the volume group only.
    #[test]
    fn events_go_to_the_objects_recorded_with_the_outcome() {
        use lvms_journal::{Intent, Trace};
        let dir = std::env::temp_dir().join(format!("lvms-events-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let journal = Journal::open(&dir).expect("journal");
        let vg = obj("LVMVolumeGroup", "vg1", "u-vg-1");
        let pass = |regarding: Vec<ObjectRef>| {
            let seq = journal
                .append_intent(
                    Intent {
                        unit: "vg/vg1".into(),
                        object: vg.clone(),
                        action: PASS_ACTION.into(),
                        args: Vec::new(),
                        desired_digest: String::new(),
                        idempotency_key: "k".into(),
                        lease_epoch: 0,
                        regarding,
                    },
                    Trace::default(),
                )
                .expect("intent");
            let out = journal
                .append_outcome(
                    seq,
                    OutcomeResult::Ok(Default::default()),
                    std::time::Duration::ZERO,
                    Trace::default(),
                )
                .expect("outcome");
            journal.get(out).expect("read").expect("present")
        };
        let targets = EventTargets {
            node: "node-a".into(),
            namespace: "lvms".into(),
        };
        let rec = pass(vec![
            obj("LVMVolumeGroupNodeStatus", "node-a", "u-ns-1"),
            obj("LVMCluster", "my-lvmcluster", "u-c-1"),
        ]);
        let uids: Vec<String> = targets
            .events_for(&journal, &rec)
            .unwrap()
            .into_iter()
            .map(|e| e.regarding.uid)
            .collect();
        assert_eq!(uids, vec!["u-ns-1", "u-c-1", "u-vg-1"]);
        // Recomputed later (a restart) it is the same Events under the same keys.
        let again: Vec<String> = targets
            .events_for(&journal, &rec)
            .unwrap()
            .iter()
            .map(EventSpec::key)
            .collect();
        let first: Vec<String> = targets
            .events_for(&journal, &rec)
            .unwrap()
            .iter()
            .map(EventSpec::key)
            .collect();
        assert_eq!(again, first);
        let old = pass(Vec::new());
        let uids: Vec<String> = targets
            .events_for(&journal, &old)
            .unwrap()
            .into_iter()
            .map(|e| e.regarding.uid)
            .collect();
        assert_eq!(uids, vec!["u-vg-1"], "nothing re-aimed at today's objects");
        drop(journal);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An intent that cannot be read is an error for the publisher to retry: never "no Event",
    /// nor a host step's Event aimed at the host instead of the volume group.
    #[test]
    fn an_unreadable_intent_is_an_error_not_no_event() {
        use lvms_journal::{Intent, Trace};
        let dir = std::env::temp_dir().join(format!("lvms-events-corrupt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let journal = Journal::open(&dir).expect("journal");
        let intent = |object: ObjectRef, action: &str| {
            journal
                .append_intent(
                    Intent {
                        unit: "vg/vg1".into(),
                        object,
                        action: action.into(),
                        args: Vec::new(),
                        desired_digest: String::new(),
                        idempotency_key: format!("k-{action}"),
                        lease_epoch: 0,
                        regarding: Vec::new(),
                    },
                    Trace::default(),
                )
                .expect("intent")
        };
        let outcome = |seq, detail| {
            let out = journal
                .append_outcome(
                    seq,
                    OutcomeResult::Ok(detail),
                    std::time::Duration::ZERO,
                    Trace::default(),
                )
                .expect("outcome");
            journal.get(out).expect("read").expect("present")
        };
        let pass = intent(obj("LVMVolumeGroup", "vg1", "u-vg"), PASS_ACTION);
        let step = intent(obj("Host", "node-a/vg1", ""), "pvremove");
        let step_rec = outcome(
            step,
            lvms_actors::Done::event(lvms_actors::EventNote::normal(
                "DeviceRemoved",
                "removed /dev/sdc",
            )),
        );
        let pass_rec = outcome(pass, Default::default());
        // Readable: the step's Event regards the volume group of its pass.
        let e = event_for(&journal, &step_rec).unwrap().unwrap();
        assert_eq!(e.regarding.uid, "u-vg");
        assert!(event_for(&journal, &pass_rec).unwrap().is_some());

        assert!(journal.testing_corrupt_record(pass).unwrap());
        assert!(event_for(&journal, &pass_rec).is_err());
        assert!(event_for(&journal, &step_rec).is_err());
        let targets = EventTargets {
            node: "node-a".into(),
            namespace: "lvms".into(),
        };
        assert!(targets.events_for(&journal, &pass_rec).is_err());
        drop(journal);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn two_nodes_never_share_an_event_object() {
        let a = fan_out(&base(EventType::Normal), "lvms", "node-a", None, vec![]);
        let b = fan_out(&base(EventType::Normal), "lvms", "node-b", None, vec![]);
        assert_ne!(a[0].key(), b[0].key());
    }
}
