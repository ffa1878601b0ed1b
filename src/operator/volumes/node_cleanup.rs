//! TopoLVM's Node finalizer (`topolvm.io/node`, added by vg-manager with the capacity
//! annotations), as a pure decision: once a node is written off ([`super::dead_node`]) its
//! volumes cannot come back, so the claims scheduled onto it (on `topolvm.io` StorageClasses)
//! are deleted, its LogicalVolumes are released (finalizer stripped: no vg-manager will run
//! `lvremove`) and deleted, and then, for a deleted Node, the finalizer comes off.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;

use super::SELECTED_NODE_ANNOTATION;
use super::dead_node::Trigger;
use crate::api::topolvm::{DRIVER_NAME, NODE_FINALIZER};
use crate::api::{LOGICAL_VOLUME_FINALIZER, LogicalVolume};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CleanupStep {
    DeleteClaim { namespace: String, name: String },
    ReleaseLogicalVolume { name: String },
    RemoveFinalizer,
}

fn has(finalizers: &Option<Vec<String>>, f: &str) -> bool {
    finalizers.iter().flatten().any(|x| x == f)
}

/// Whether TopoLVM's finalizer holds this Node's deletion.
pub fn finalizing(node: &Node) -> bool {
    node.metadata.deletion_timestamp.is_some() && has(&node.metadata.finalizers, NODE_FINALIZER)
}

/// The StorageClasses whose provisioner is TopoLVM's driver.
pub fn driver_classes(classes: &[Arc<StorageClass>]) -> BTreeSet<String> {
    classes
        .iter()
        .filter(|c| c.provisioner == DRIVER_NAME)
        .filter_map(|c| c.metadata.name.clone())
        .collect()
}

/// The steps, in TopoLVM's order, that write off a node's volumes (the caller has decided it
/// is gone: [`super::dead_node::verdict`]). Claims and LogicalVolumes already on their way out
/// need nothing more; the finalizer comes off only a deleted Node (an out-of-service one
/// stays, and may come back).
pub fn cleanup(
    node: &Node,
    trigger: Trigger,
    claims: &[Arc<PersistentVolumeClaim>],
    classes: &BTreeSet<String>,
    volumes: &[Arc<LogicalVolume>],
) -> Vec<CleanupStep> {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let mut steps: Vec<CleanupStep> = claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter(|c| {
            c.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(SELECTED_NODE_ANNOTATION))
                .is_some_and(|n| n == name)
        })
        .filter(|c| {
            c.spec
                .as_ref()
                .and_then(|s| s.storage_class_name.as_ref())
                .is_some_and(|sc| classes.contains(sc))
        })
        .map(|c| CleanupStep::DeleteClaim {
            namespace: c.metadata.namespace.clone().unwrap_or_default(),
            name: c.metadata.name.clone().unwrap_or_default(),
        })
        .collect();
    steps.extend(
        volumes
            .iter()
            .filter(|v| v.spec.node_name == name)
            .filter(|v| {
                v.metadata.deletion_timestamp.is_none()
                    || has(&v.metadata.finalizers, LOGICAL_VOLUME_FINALIZER)
            })
            .map(|v| CleanupStep::ReleaseLogicalVolume {
                name: v.metadata.name.clone().unwrap_or_default(),
            }),
    );
    if trigger == Trigger::Deleted && finalizing(node) {
        steps.push(CleanupStep::RemoveFinalizer);
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(deleting: bool, finalizers: &[&str]) -> Node {
        let mut v = json!({"metadata": {"name": "w1", "finalizers": finalizers}});
        if deleting {
            v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        serde_json::from_value(v).unwrap()
    }

    fn claim(name: &str, class: &str, selected: &str) -> Arc<PersistentVolumeClaim> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns",
                    "annotations": {SELECTED_NODE_ANNOTATION: selected}},
                "spec": {"storageClassName": class},
            }))
            .unwrap(),
        )
    }

    fn volume(name: &str, node: &str, deleting: bool, fin: bool) -> Arc<LogicalVolume> {
        let mut v = json!({
            "apiVersion": "topolvm.io/v1", "kind": "LogicalVolume",
            "metadata": {"name": name},
            "spec": {"name": name, "nodeName": node, "size": "1Gi", "deviceClass": "vg1"},
        });
        if fin {
            v["metadata"]["finalizers"] = json!([LOGICAL_VOLUME_FINALIZER]);
        }
        if deleting {
            v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        Arc::new(serde_json::from_value(v).unwrap())
    }

    #[test]
    fn a_deleted_node_loses_its_claims_and_volumes_then_the_finalizer() {
        let classes = BTreeSet::from(["lvms-vg1".to_string()]);
        let claims = [
            claim("a", "lvms-vg1", "w1"),
            claim("other-node", "lvms-vg1", "w2"),
            claim("other-class", "standard", "w1"),
        ];
        let volumes = [
            volume("lv-a", "w1", false, true),
            volume("lv-gone", "w1", true, false),
            volume("lv-stuck", "w1", true, true),
            volume("lv-w2", "w2", false, true),
        ];
        let steps = cleanup(
            &node(true, &[NODE_FINALIZER, "other"]),
            Trigger::Deleted,
            &claims,
            &classes,
            &volumes,
        );
        assert_eq!(
            steps,
            [
                CleanupStep::DeleteClaim {
                    namespace: "ns".into(),
                    name: "a".into()
                },
                CleanupStep::ReleaseLogicalVolume {
                    name: "lv-a".into()
                },
                CleanupStep::ReleaseLogicalVolume {
                    name: "lv-stuck".into()
                },
                CleanupStep::RemoveFinalizer,
            ]
        );
    }

    #[test]
    fn an_out_of_service_node_keeps_its_finalizer() {
        let classes = BTreeSet::from(["lvms-vg1".to_string()]);
        let claims = [claim("a", "lvms-vg1", "w1")];
        let volumes = [volume("lv-a", "w1", false, true)];
        let steps = cleanup(
            &node(false, &[NODE_FINALIZER]),
            Trigger::OutOfService,
            &claims,
            &classes,
            &volumes,
        );
        assert_eq!(
            steps,
            [
                CleanupStep::DeleteClaim {
                    namespace: "ns".into(),
                    name: "a".into()
                },
                CleanupStep::ReleaseLogicalVolume {
                    name: "lv-a".into()
                },
            ]
        );
    }
}
