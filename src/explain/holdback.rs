//! What holds a subject back: for each node and device class that is not Ready, or a claim
//! that is not Bound, the last failing step and its error, from the node's journal when it was
//! read, else from the operator's journal, else from the Warning Events vg-manager and the
//! CSI sidecars published.

use serde::Serialize;
use serde_json::Value;

use super::facts::{EventFact, Facts};
use super::kinds;
use super::steps::Step;

/// One thing holding the subject back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Holdback {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// The state that is not as wanted (`Failed`, `Degraded`, `Pending`, a failing step).
    pub status: String,
    /// What the object's own status says.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The last failing step behind it, with its error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<FailingStep>,
}

/// A failing step, from a journal or (when no journal says more) a Warning Event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailingStep {
    /// `node/<name>` or `operator` (a journal), or `event`.
    pub source: String,
    /// `<unit> <action> on <object>` for a journal step; the Event's reason otherwise.
    pub step: String,
    pub error: String,
    pub at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

impl FailingStep {
    fn of(s: &Step) -> Self {
        FailingStep {
            source: s.source.clone(),
            step: format!("{} {} on {}", s.unit, s.action, s.object),
            error: s.error().unwrap_or_default(),
            at: s.at.clone(),
            seq: Some(s.seq),
            trace_id: Some(s.trace_id.clone()),
        }
    }

    fn of_event(e: &EventFact) -> Self {
        FailingStep {
            source: "event".into(),
            step: e.reason.clone(),
            error: e.message.clone(),
            at: e.at.clone(),
            seq: None,
            trace_id: None,
        }
    }
}

fn array<'a>(v: Option<&'a Value>, key: &str) -> impl Iterator<Item = &'a Value> {
    v.and_then(|v| v.get(key))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// A node's entry for `class` (a VGStatus: status, reason) as a holdback, unless it is Ready.
fn unready(node: Option<&str>, class: &str, entry: &Value) -> Option<Holdback> {
    let status = entry
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("Unknown");
    (status != "Ready").then(|| Holdback {
        node: node.map(str::to_string),
        class: Some(class.to_string()),
        status: status.to_string(),
        reason: entry
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        step: None,
    })
}

/// Every node entry that is not Ready in an LVMCluster's status (of `class` only, if given).
fn unready_in_cluster(cluster: Option<&Value>, class: Option<&str>) -> Vec<Holdback> {
    let status = cluster.and_then(|c| c.get("status"));
    array(status, "deviceClassStatuses")
        .map(|dc| {
            (
                dc.get("name").and_then(Value::as_str).unwrap_or_default(),
                dc,
            )
        })
        .filter(|(name, _)| class.is_none_or(|c| c == *name))
        .flat_map(|(name, dc)| {
            array(Some(dc), "nodeStatus")
                .filter_map(move |n| unready(n.get("node").and_then(Value::as_str), name, n))
        })
        .collect()
}

/// A failing step names `class` when its object is the class's LVMVolumeGroup or VG.
fn about_class(s: &Step, class: &str) -> bool {
    s.object.rsplit('/').next() == Some(class)
        && (s.object.starts_with("LVMVolumeGroup/") || s.object.starts_with("Host/"))
}

/// The step or Event that best explains a node entry: the node's own journal first, then the
/// operator's record of that node status, then the newest Warning naming the node and class.
fn explain_entry(h: &mut Holdback, failing: &[Step], events: &[EventFact], ns: &str) {
    let (Some(node), Some(class)) = (h.node.as_deref(), h.class.as_deref()) else {
        return;
    };
    let from_node = failing
        .iter()
        .find(|s| s.node.as_deref() == Some(node) && about_class(s, class));
    let from_operator = || {
        let status = format!("LVMVolumeGroupNodeStatus/{ns}/{node}");
        failing
            .iter()
            .find(|s| s.node.is_none() && (about_class(s, class) || s.object == status))
    };
    if let Some(s) = from_node.or_else(from_operator) {
        h.step = Some(FailingStep::of(s));
        return;
    }
    let node_ref = format!("node {ns}/{node}");
    h.step = events
        .iter()
        .filter(|e| e.type_ == "Warning")
        .find(|e| {
            e.message.contains(&node_ref)
                && (e.message.contains(class) || e.object.ends_with(&format!("/{class}")))
        })
        .or_else(|| {
            // The node status's own Events do not repeat the node's name.
            events.iter().find(|e| {
                e.type_ == "Warning" && e.object == format!("LVMVolumeGroupNodeStatus/{ns}/{node}")
            })
        })
        .map(FailingStep::of_event);
}

/// What holds the subject back, most specific first. `events` newest first; `failing` are the
/// still-failing steps of every journal read, newest first.
pub fn holdbacks(f: &Facts, failing: &[Step], events: &[EventFact]) -> Vec<Holdback> {
    let s = &f.subject;
    let ns = s.namespace.as_str();
    let obj = f.object.as_ref();
    let mut out = match s.kind.kind {
        "LVMCluster" => unready_in_cluster(obj, None),
        "LVMVolumeGroup" => unready_in_cluster(f.owner.as_ref(), Some(&s.name)),
        "LVMVolumeGroupNodeStatus" => array(obj.and_then(|o| o.get("spec")), "nodeStatus")
            .filter_map(|e| {
                let class = e.get("name").and_then(Value::as_str).unwrap_or_default();
                unready(Some(&s.name), class, e)
            })
            .collect(),
        _ => Vec::new(),
    };
    for h in &mut out {
        explain_entry(h, failing, events, ns);
    }
    if s.kind == kinds::PVC {
        let phase = obj
            .and_then(|o| o.pointer("/status/phase"))
            .and_then(Value::as_str)
            .unwrap_or("Pending");
        if phase != "Bound" {
            let step = failing.first().map(FailingStep::of).or_else(|| {
                events
                    .iter()
                    .find(|e| e.type_ == "Warning")
                    .map(FailingStep::of_event)
            });
            out.push(Holdback {
                node: obj
                    .and_then(|o| {
                        o.pointer("/metadata/annotations/volume.kubernetes.io~1selected-node")
                    })
                    .and_then(Value::as_str)
                    .map(str::to_string),
                class: obj
                    .and_then(|o| o.pointer("/spec/storageClassName"))
                    .and_then(Value::as_str)
                    .map(str::to_string),
                status: phase.to_string(),
                reason: String::new(),
                step,
            });
        }
    }
    // Any other step still failing holds something back, even when the status does not say so
    // yet (or no longer can: the object is gone).
    for st in failing {
        let cited = out.iter().any(|h| {
            h.step
                .as_ref()
                .is_some_and(|f| f.seq == Some(st.seq) && f.source == st.source)
        });
        if !cited {
            out.push(Holdback {
                node: st.node.clone(),
                class: None,
                status: "step failing".into(),
                reason: String::new(),
                step: Some(FailingStep::of(st)),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::steps::StepResult;
    use serde_json::json;

    fn facts(subject: &str, object: Value) -> Facts {
        Facts {
            subject: subject.parse().unwrap(),
            object: Some(object),
            owner: None,
            events: vec![],
            journals: vec![],
            jaeger: None,
        }
    }

    fn cluster() -> Value {
        json!({"status": {"deviceClassStatuses": [
            {"name": "pa", "nodeStatus": [{"node": "node-a", "status": "Ready"}]},
            {"name": "pb", "nodeStatus": [{"node": "node-b", "status": "Failed", "reason": "disk gone"}]}
        ]}})
    }

    fn failing_step(source: &str, node: Option<&str>, object: &str, seq: u64) -> Step {
        Step {
            source: source.into(),
            node: node.map(str::to_string),
            seq,
            at: "t".into(),
            at_ms: seq,
            unit: "vg/pb".into(),
            object: object.into(),
            action: "pass".into(),
            result: StepResult::Err {
                reason: "DevicePathCheckFailed".into(),
                message: "gone".into(),
                retryable: true,
            },
            trace_id: "ab".repeat(16),
        }
    }

    fn warning(object: &str, message: &str) -> EventFact {
        EventFact {
            at: "t".into(),
            type_: "Warning".into(),
            reason: "DevicePathCheckFailed".into(),
            message: message.into(),
            count: 1,
            object: object.into(),
        }
    }

    #[test]
    fn the_unready_node_and_class_get_the_nodes_own_failing_step() {
        let f = facts("lvmcluster/ns/c", cluster());
        let failing = vec![
            failing_step("node/node-x", Some("node-x"), "LVMVolumeGroup/ns/pb", 9),
            failing_step("node/node-b", Some("node-b"), "LVMVolumeGroup/ns/pb", 7),
        ];
        let h = holdbacks(&f, &failing, &[]);
        assert_eq!(h[0].node.as_deref(), Some("node-b"));
        assert_eq!(h[0].class.as_deref(), Some("pb"));
        assert_eq!(h[0].reason, "disk gone");
        let step = h[0].step.as_ref().unwrap();
        assert_eq!((step.source.as_str(), step.seq), ("node/node-b", Some(7)));
        assert_eq!(step.error, "DevicePathCheckFailed: gone");
        // The other node's failing step is still listed, after, on its own.
        assert_eq!(h.len(), 2);
        assert_eq!(h[1].node.as_deref(), Some("node-x"));
        assert_eq!(h[1].status, "step failing");
    }

    #[test]
    fn without_the_nodes_journal_the_warning_naming_node_and_class_explains_it() {
        let f = facts("lvmcluster/ns/c", cluster());
        let events = vec![
            warning(
                "LVMCluster/ns/c",
                "error on node ns/node-a in volume group ns/pa: old",
            ),
            warning(
                "LVMCluster/ns/c",
                "error on node ns/node-b in volume group ns/pb: gone",
            ),
        ];
        let h = holdbacks(&f, &[], &events);
        assert_eq!(h.len(), 1, "node-a is Ready: {h:?}");
        let step = h[0].step.as_ref().unwrap();
        assert_eq!(step.source, "event");
        assert!(step.error.ends_with("pb: gone"), "{step:?}");
    }

    /// ResourcesAvailable=False comes from a unit's failing step: it is named with its unit.
    #[test]
    fn a_failing_operator_unit_is_named_when_no_node_is_to_blame() {
        let f = facts(
            "lvmcluster/ns/c",
            json!({"status": {"conditions": [
            {"type": "ResourcesAvailable", "status": "False"}]}}),
        );
        let mut step = failing_step("operator", None, "StorageClass/lvms-pa", 4);
        step.unit = "topolvm-storageclass".into();
        step.action = "apply".into();
        let h = holdbacks(&f, &[step], &[]);
        assert_eq!(h.len(), 1);
        assert_eq!(
            (h[0].node.as_ref(), h[0].status.as_str()),
            (None, "step failing")
        );
        assert_eq!(
            h[0].step.as_ref().unwrap().step,
            "topolvm-storageclass apply on StorageClass/lvms-pa"
        );
    }

    #[test]
    fn a_bound_claim_holds_nothing_back_and_a_pending_one_names_its_node_and_class() {
        let claim = |phase: &str| {
            json!({"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "node-a"}},
                   "spec": {"storageClassName": "lvms-vg1"}, "status": {"phase": phase}})
        };
        let bound = facts("pvc/ns/data", claim("Bound"));
        assert!(holdbacks(&bound, &[], &[]).is_empty());
        let pending = facts("pvc/ns/data", claim("Pending"));
        let events = vec![warning("PersistentVolumeClaim/ns/data", "not enough space")];
        let h = holdbacks(&pending, &[], &events);
        assert_eq!(h.len(), 1);
        assert_eq!(
            (
                h[0].node.as_deref(),
                h[0].class.as_deref(),
                h[0].status.as_str()
            ),
            (Some("node-a"), Some("lvms-vg1"), "Pending")
        );
        assert_eq!(h[0].step.as_ref().unwrap().error, "not enough space");
    }
}
