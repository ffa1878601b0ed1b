//! One LVMVolumeGroupNodeStatus per valid node (LVMS unit `lvmvgnodestatus`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::{LVMCluster, LVMVolumeGroupNodeStatus, NODE_STATUS_FINALIZER};
use crate::operator::nodes::{NodeSelection, valid_nodes_for_any_class};
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

/// Everything [`node_statuses`] and the unit's readiness read, hashed (`None` if a part
/// cannot be encoded): the cluster's identity,
/// its tolerations and class node selectors, the namespace, each Node's name, labels and taints,
/// and how often the node statuses changed (`statuses_changed`, their metadata being what the
/// plan compares). Equal keys mean an equal plan: a pass whose last run wrote nothing can stop
/// here instead of building and comparing an object per node (an edit of a StorageClass option
/// at 1000 nodes spent ~20 ms doing that on the CPUs the edit itself needed).
pub fn inputs_key(
    cluster: &LVMCluster,
    namespace: &str,
    nodes: &[std::sync::Arc<k8s_openapi::api::core::v1::Node>],
    statuses_changed: u64,
) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (&cluster.metadata.uid, &cluster.metadata.name, namespace).hash(&mut h);
    let selectors: Vec<_> = cluster
        .spec
        .storage
        .device_classes
        .iter()
        .map(|c| (&c.name, &c.node_selector))
        .collect();
    // Tolerations and selectors are API types without Hash: their JSON stands for them (no
    // JSON, no key: the pass plans).
    serde_json::to_vec(&(&cluster.spec.tolerations, selectors))
        .ok()?
        .hash(&mut h);
    for node in nodes {
        (&node.metadata.name, &node.metadata.labels).hash(&mut h);
        for t in node.spec.iter().flat_map(|s| s.taints.iter().flatten()) {
            (&t.key, &t.value, &t.effect).hash(&mut h);
        }
        // Ends each node's taints, so two nodes' taints cannot trade places unnoticed.
        0xffu8.hash(&mut h);
    }
    statuses_changed.hash(&mut h);
    Some(h.finish())
}

/// What [`node_statuses`] and the unit's readiness make of their inputs, hashed: the cluster's
/// identity (the ownerRef), the namespace, the names of the nodes selected, the selection's
/// errors, and how often the node statuses changed. An edit that moves the inputs key but not
/// the selection (a toleration or selector that selects the same nodes) has an equal plan to
/// the last settled pass: the unit stops after selecting, without building and comparing an
/// object per node (~56 ms of CPU at 1000 nodes, on the cores the edit's own writes needed).
pub fn selection_key(
    cluster: &LVMCluster,
    namespace: &str,
    selection: &NodeSelection<'_>,
    statuses_changed: u64,
) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (&cluster.metadata.uid, &cluster.metadata.name, namespace).hash(&mut h);
    for node in &selection.nodes {
        node.metadata.name.hash(&mut h);
    }
    selection.errors.hash(&mut h);
    statuses_changed.hash(&mut h);
    h.finish()
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

    #[test]
    fn the_inputs_key_moves_with_what_the_plan_reads_and_only_that() {
        let nodes = || {
            vec![
                node("a", &[("zone", "a")], vec![]),
                node("b", &[("zone", "b")], vec![]),
            ]
        };
        let spec = |zone: &str| LVMClusterSpec {
            tolerations: vec![],
            storage: Storage {
                device_classes: vec![class(
                    "vg1",
                    Some(selector(vec![vec![req("zone", "In", &[zone])]])),
                )],
            },
        };
        let cluster = cluster_with(spec("a"));
        let key = inputs_key(&cluster, "ns", &nodes(), 7);
        assert_eq!(key, inputs_key(&cluster, "ns", &nodes(), 7));
        // An option the plan does not read (a StorageClass label) leaves it.
        let mut labelled = cluster.clone();
        labelled.spec.storage.device_classes[0].default = true;
        labelled.metadata.generation = Some(9);
        assert_eq!(key, inputs_key(&labelled, "ns", &nodes(), 7));
        // Everything it reads moves it.
        assert_ne!(key, inputs_key(&cluster_with(spec("b")), "ns", &nodes(), 7));
        assert_ne!(key, inputs_key(&cluster, "other", &nodes(), 7));
        assert_ne!(key, inputs_key(&cluster, "ns", &nodes(), 8));
        assert_ne!(key, inputs_key(&cluster, "ns", &nodes()[..1], 7));
        let mut relabelled = nodes();
        relabelled[1] = node("b", &[("zone", "a")], vec![]);
        assert_ne!(key, inputs_key(&cluster, "ns", &relabelled, 7));
        let mut tainted = nodes();
        tainted[0] = node("a", &[("zone", "a")], vec![taint("x", "", "NoSchedule")]);
        assert_ne!(key, inputs_key(&cluster, "ns", &tainted, 7));
        let mut tolerating = cluster.clone();
        tolerating.spec.tolerations = vec![k8s_openapi::api::core::v1::Toleration {
            key: Some("x".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        }];
        assert_ne!(key, inputs_key(&tolerating, "ns", &nodes(), 7));
    }

    #[test]
    fn the_selection_key_moves_with_the_plan_not_with_inputs_that_select_the_same_nodes() {
        let nodes = || {
            vec![
                node("a", &[("zone", "a")], vec![]),
                node("b", &[("zone", "b")], vec![]),
            ]
        };
        let spec = |zones: &[&str]| LVMClusterSpec {
            tolerations: vec![],
            storage: Storage {
                device_classes: vec![class(
                    "vg1",
                    Some(selector(vec![vec![req("zone", "In", zones)]])),
                )],
            },
        };
        let key =
            |c: &LVMCluster,
             ns: &str,
             nodes: &[std::sync::Arc<k8s_openapi::api::core::v1::Node>],
             n| { selection_key(c, ns, &valid_nodes_for_any_class(c, nodes), n) };
        let cluster = cluster_with(spec(&["a"]));
        let k = key(&cluster, "ns", &nodes(), 7);
        // A toleration of a taint no node has, or a selector that picks the same node: the
        // inputs key moves, the selection does not (the edit of the versus benchmark).
        let mut tolerating = cluster.clone();
        tolerating.spec.tolerations = vec![k8s_openapi::api::core::v1::Toleration {
            key: Some("bench-edit".into()),
            operator: Some("Exists".into()),
            ..Default::default()
        }];
        assert_ne!(
            inputs_key(&cluster, "ns", &nodes(), 7),
            inputs_key(&tolerating, "ns", &nodes(), 7)
        );
        assert_eq!(k, key(&tolerating, "ns", &nodes(), 7));
        assert_eq!(k, key(&cluster_with(spec(&["a", "c"])), "ns", &nodes(), 7));
        // What the plan makes of its inputs moves it: another node selected, another
        // namespace, another owner, the node statuses changed, a selection error.
        assert_ne!(k, key(&cluster_with(spec(&["a", "b"])), "ns", &nodes(), 7));
        assert_ne!(k, key(&cluster, "other", &nodes(), 7));
        let mut other = cluster.clone();
        other.metadata.uid = Some("another-uid".into());
        assert_ne!(k, key(&other, "ns", &nodes(), 7));
        assert_ne!(k, key(&cluster, "ns", &nodes(), 8));
        let mut not_ready = nodes();
        not_ready.push(node(
            "c",
            &[("zone", "a")],
            vec![taint("node.kubernetes.io/not-ready", "", "NoSchedule")],
        ));
        assert_ne!(k, key(&cluster, "ns", &not_ready, 7));
    }
}
