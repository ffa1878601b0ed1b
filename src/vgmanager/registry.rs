//! One actor per LVMVolumeGroup that concerns this node: started when the LVMVolumeGroup
//! appears (its node selector matches this node, or it still carries this node's cleanup
//! finalizer), stopped for good once it is gone.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock};

use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::Store;
use lvms_actors::{
    ChildSpec, Done, Pass, Replayed, Steps, SupervisorMsg, Trigger, Unit, UnitError,
};
use lvms_journal::Intent;
use ractor::ActorRef;

use crate::api::{LVMVolumeGroup, NODE_CLEANUP_FINALIZER_PREFIX};
use crate::objects::selector::selector_matches;

pub const UNIT: &str = "volume-group-registry";

/// Does this LVMVolumeGroup concern `node`? (pure)
pub fn concerns(vg: &LVMVolumeGroup, node_name: &str, node: Option<&Node>) -> bool {
    let ours = format!("{NODE_CLEANUP_FINALIZER_PREFIX}{node_name}");
    if vg.metadata.finalizers.iter().flatten().any(|f| *f == ours) {
        return true;
    }
    match (&vg.spec.node_selector, node) {
        (None, _) => true,
        // A malformed selector (a spec error, not a failed read) matches nothing, as in the
        // operator; a cleanup already begun is kept by the finalizer check above.
        (Some(sel), Some(n)) => selector_matches(n, sel).unwrap_or(false),
        (Some(_), None) => false,
    }
}

pub type SpecFor = Arc<dyn Fn(&str, Trigger) -> ChildSpec + Send + Sync>;

pub struct Registry {
    pub node_name: String,
    pub volume_groups: Store<LVMVolumeGroup>,
    pub nodes: Store<Node>,
    pub supervisor: Arc<OnceLock<ActorRef<SupervisorMsg>>>,
    pub spec_for: SpecFor,
    /// VG name → its actor's trigger (the WatchHub bumps them all on LVMVolumeGroup events).
    pub triggers: Arc<Mutex<BTreeMap<String, Trigger>>>,
    /// Told which volume groups run here, so the node status waits for each to report.
    pub report: super::node_report::NodeReport,
}

impl Unit for Registry {
    fn name(&self) -> &str {
        UNIT
    }

    async fn reconcile(&self, steps: &Steps) -> Result<Pass, UnitError> {
        let Some(sup) = self.supervisor.get() else {
            return Err(UnitError::retryable("Starting", "supervisor not up yet"));
        };
        let node = self
            .nodes
            .state()
            .into_iter()
            .find(|n| n.metadata.name.as_deref() == Some(self.node_name.as_str()));
        let mut wanted: BTreeSet<String> = self
            .volume_groups
            .state()
            .iter()
            .filter(|vg| concerns(vg, &self.node_name, node.as_deref()))
            .filter_map(|vg| vg.metadata.name.clone())
            .collect();
        // A volume group's actor also runs while its unit has intents left open by a kill,
        // even if the LVMVolumeGroup is gone meanwhile: it replays and closes them.
        let open = steps.journal().open_intents().map_err(UnitError::journal)?;
        wanted.extend(with_open_intents(&open));
        let mut triggers = self.triggers.lock().map_err(|_| {
            UnitError::retryable(lvms_actors::Reason::Internal, "trigger map poisoned")
        })?;
        // Sends below fail only when the supervisor has stopped, which ends vg-manager.
        for name in &wanted {
            if !triggers.contains_key(name) {
                let t = Trigger::new();
                triggers.insert(name.clone(), t.clone());
                let _ = sup.send_message(SupervisorMsg::Start((self.spec_for)(name, t)));
            }
        }
        self.report.expect(&wanted);
        let gone: Vec<String> = triggers
            .keys()
            .filter(|n| !wanted.contains(*n))
            .cloned()
            .collect();
        for name in gone {
            triggers.remove(&name);
            let _ = sup.send_message(SupervisorMsg::Stop(super::volume_group::unit_name(&name)));
        }
        Ok(Pass {
            summary: format!("{} volume group(s) on this node", wanted.len()),
            requeue_after: None,
        })
    }

    async fn replay(&self, _i: &Intent, _s: &Steps) -> Result<Done, UnitError> {
        // The registry journals no steps of its own.
        Ok(Done::replayed(Replayed::Rechecked))
    }
}

/// Volume groups (`vg/<name>` units) with an open intent among `open`.
pub fn with_open_intents(open: &[lvms_journal::Record]) -> BTreeSet<String> {
    open.iter()
        .filter_map(|r| {
            r.unit()?
                .strip_prefix(super::volume_group::UNIT_PREFIX)
                .map(String::from)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vg(selector: Option<serde_json::Value>, finalizers: &[&str]) -> LVMVolumeGroup {
        serde_json::from_value(json!({
            "apiVersion": "lvm.topolvm.io/v1alpha1", "kind": "LVMVolumeGroup",
            "metadata": {"name": "vg1", "finalizers": finalizers},
            "spec": {"nodeSelector": selector},
        }))
        .unwrap()
    }

    fn node(name: &str, zone: &str) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"zone": zone}}}))
            .unwrap()
    }

    #[test]
    fn units_with_open_intents_keep_their_actor() {
        use lvms_journal::{Body, ObjectRef, Record};
        let intent = |unit: &str| Record {
            seq: 1,
            at_ms: 0,
            trace: Default::default(),
            body: Body::Intent(Intent {
                unit: unit.into(),
                object: ObjectRef::default(),
                action: "remove-finalizer".into(),
                args: Vec::new(),
                desired_digest: String::new(),
                idempotency_key: String::new(),
                lease_epoch: 0,
                regarding: vec![],
            }),
        };
        let got = with_open_intents(&[intent("vg/vg1"), intent("node-status"), intent("vg/vg2")]);
        assert_eq!(got.into_iter().collect::<Vec<_>>(), vec!["vg1", "vg2"]);
    }

    #[test]
    fn selector_and_finalizer_decide() {
        let sel = json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]});
        assert!(concerns(&vg(None, &[]), "n1", None));
        assert!(concerns(
            &vg(Some(sel.clone()), &[]),
            "n1",
            Some(&node("n1", "a"))
        ));
        assert!(!concerns(
            &vg(Some(sel.clone()), &[]),
            "n1",
            Some(&node("n1", "b"))
        ));
        // No longer selected but still holding our finalizer: we must clean up.
        let fin = "cleanup.vgmanager.node.topolvm.io/n1";
        assert!(concerns(
            &vg(Some(sel), &[fin]),
            "n1",
            Some(&node("n1", "b"))
        ));
    }
}
