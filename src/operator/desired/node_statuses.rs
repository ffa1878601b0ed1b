//! One LVMVolumeGroupNodeStatus per valid node (LVMS unit `lvmvgnodestatus`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::{LVMCluster, LVMVolumeGroupNodeStatus, NODE_STATUS_FINALIZER};
use crate::operator::nodes::valid_nodes_for_any_class;
use crate::operator::owner::controller_owner_ref;
use crate::operator::world::World;

/// The desired node statuses: named after each node valid for any class (LVMS `ValidNodes`),
/// with the delete-protection finalizer and a controller ownerRef. The spec stays empty:
/// vg-manager on that node owns `spec.nodeStatus`.
pub fn node_statuses(cluster: &LVMCluster, world: &World) -> Vec<LVMVolumeGroupNodeStatus> {
    valid_nodes_for_any_class(cluster, &world.nodes)
        .nodes
        .into_iter()
        .map(|node| LVMVolumeGroupNodeStatus {
            metadata: ObjectMeta {
                name: node.metadata.name.clone(),
                namespace: Some(world.settings.namespace.clone()),
                owner_references: Some(vec![controller_owner_ref(cluster)]),
                finalizers: Some(vec![NODE_STATUS_FINALIZER.to_owned()]),
                ..Default::default()
            },
            spec: Default::default(),
            status: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{LVMClusterSpec, Storage};
    use crate::operator::nodes::tests::{class, node, req, selector, taint};
    use crate::operator::owner::tests::cluster_with;
    use crate::operator::world::OperatorSettings;

    #[test]
    fn one_status_per_valid_node() {
        let world = World {
            settings: OperatorSettings {
                namespace: "lvms-ns".into(),
                ..Default::default()
            },
            nodes: vec![
                node("a", &[("zone", "a")], vec![]),
                node("b", &[("zone", "b")], vec![]),
                node("c", &[("zone", "a")], vec![taint("x", "", "NoSchedule")]),
            ],
            ..Default::default()
        };
        let cluster = cluster_with(LVMClusterSpec {
            tolerations: vec![],
            storage: Storage {
                device_classes: vec![class(
                    "vg1",
                    Some(selector(vec![vec![req("zone", "In", &["a"])]])),
                )],
            },
        });
        let statuses = node_statuses(&cluster, &world);
        assert_eq!(statuses.len(), 1);
        let s = &statuses[0];
        assert_eq!(s.metadata.name.as_deref(), Some("a"));
        assert_eq!(s.metadata.namespace.as_deref(), Some("lvms-ns"));
        assert_eq!(
            s.metadata.finalizers,
            Some(vec!["delete-protection.lvm.openshift.io".to_owned()])
        );
        assert_eq!(
            s.metadata.owner_references.as_ref().unwrap()[0].controller,
            Some(true)
        );
        assert!(s.spec.lvm_vg_status.is_empty());
    }

    #[test]
    fn class_without_selector_selects_every_tolerating_node() {
        let world = World {
            nodes: vec![node("a", &[("zone", "a")], vec![]), node("b", &[], vec![])],
            ..Default::default()
        };
        let cluster = cluster_with(LVMClusterSpec {
            tolerations: vec![],
            storage: Storage {
                device_classes: vec![
                    class("vg1", Some(selector(vec![vec![req("zone", "In", &["a"])]]))),
                    class("vg2", None),
                ],
            },
        });
        assert_eq!(node_statuses(&cluster, &world).len(), 2);
    }
}
