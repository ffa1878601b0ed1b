//! What a Node that no longer exists leaves on the LVMVolumeGroups, and what comes off (LVMS's
//! node-removal controller, `internal/controllers/node/removal`): its vg-manager's cleanup
//! finalizer, which no vg-manager will ever remove, and its wiped-devices annotation, so a node
//! re-created under the same name is wiped again as a new node is. Pure: the lifecycle unit
//! runs the edits as journaled steps on every pass, not only when the LVMCluster goes.

use std::collections::BTreeSet;

use lvms_journal::ObjectRef;

use crate::api::{LVMVolumeGroup, NODE_CLEANUP_FINALIZER_PREFIX};
use crate::node::vg::wipe::WIPED_ANNOTATION_PREFIX;

/// The edits one LVMVolumeGroup needs for nodes that are gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoneNodeEdit {
    /// The LVMVolumeGroup (the steps' object).
    pub target: ObjectRef,
    /// `cleanup.vgmanager.node.topolvm.io/<node>` of gone nodes.
    pub finalizers: Vec<String>,
    /// `wiped.devices.lvms.openshift.io/<node>` of gone nodes.
    pub annotations: Vec<String>,
}

/// The node a per-node key names, if it has `prefix`.
fn node_of<'a>(key: &'a str, prefix: &str) -> Option<&'a str> {
    key.strip_prefix(prefix).filter(|n| !n.is_empty())
}

/// Per volume group, what names a node not in `nodes` (the Nodes the cache holds, read after
/// its sync: a node missing there was seen deleted, not merely unread).
pub fn gone_node_edits<'a>(
    volume_groups: impl IntoIterator<Item = &'a LVMVolumeGroup>,
    nodes: &BTreeSet<String>,
) -> Vec<GoneNodeEdit> {
    let gone = |key: &str, prefix: &str| node_of(key, prefix).is_some_and(|n| !nodes.contains(n));
    volume_groups
        .into_iter()
        .filter_map(|vg| {
            let finalizers: Vec<String> = vg
                .metadata
                .finalizers
                .iter()
                .flatten()
                .filter(|f| gone(f, NODE_CLEANUP_FINALIZER_PREFIX))
                .cloned()
                .collect();
            let annotations: Vec<String> = vg
                .metadata
                .annotations
                .iter()
                .flatten()
                .map(|(k, _)| k)
                .filter(|k| gone(k, WIPED_ANNOTATION_PREFIX))
                .cloned()
                .collect();
            (!finalizers.is_empty() || !annotations.is_empty()).then(|| GoneNodeEdit {
                target: crate::objects::object_ref(vg),
                finalizers,
                annotations,
            })
        })
        .collect()
}

/// At teardown, once the vg-manager Pods are gone: the Nodes whose TopoLVM finalizer
/// `topolvm.io/node` (put there by their vg-manager) can come off, those no LogicalVolume names.
/// Without a vg-manager and with lvms uninstalled nothing would ever remove it, and deleting
/// such a Node would hang for good (LVMS leaves it; lvms does not).
pub fn node_finalizers_to_release<'a>(
    nodes: impl IntoIterator<Item = &'a k8s_openapi::api::core::v1::Node>,
    volume_nodes: &BTreeSet<String>,
) -> Vec<&'a k8s_openapi::api::core::v1::Node> {
    nodes
        .into_iter()
        .filter(|n| {
            n.metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == crate::api::topolvm::NODE_FINALIZER)
        })
        .filter(|n| {
            n.metadata
                .name
                .as_ref()
                .is_some_and(|name| !volume_nodes.contains(name))
        })
        .collect()
}

/// The nodes the edits are for: each is read from the API server before anything comes off,
/// as a watch cache can lag a node that has just joined (its vg-manager's finalizer may arrive
/// first).
pub fn nodes_named(edits: &[GoneNodeEdit]) -> BTreeSet<String> {
    edits
        .iter()
        .flat_map(|e| {
            let f = e
                .finalizers
                .iter()
                .filter_map(|k| node_of(k, NODE_CLEANUP_FINALIZER_PREFIX));
            let a = e
                .annotations
                .iter()
                .filter_map(|k| node_of(k, WIPED_ANNOTATION_PREFIX));
            f.chain(a).map(str::to_string).collect::<Vec<_>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::LVMVolumeGroupSpec;

    fn vg(name: &str, finalizers: &[&str], annotations: &[&str]) -> LVMVolumeGroup {
        let mut v = LVMVolumeGroup::new(name, LVMVolumeGroupSpec::default());
        v.metadata.namespace = Some("lvms".into());
        v.metadata.finalizers = Some(finalizers.iter().map(|s| s.to_string()).collect());
        v.metadata.annotations = Some(
            annotations
                .iter()
                .map(|k| (k.to_string(), "wiped at ...".to_string()))
                .collect(),
        );
        v
    }

    #[test]
    fn only_keys_of_nodes_that_are_gone_come_off() {
        let nodes: BTreeSet<String> = ["n1".to_string()].into();
        let vgs = [
            vg(
                "vg1",
                &[
                    "cleanup.vgmanager.node.topolvm.io/n1",
                    "cleanup.vgmanager.node.topolvm.io/n2",
                    "lvm.openshift.io/other",
                ],
                &[
                    "wiped.devices.lvms.openshift.io/n1",
                    "wiped.devices.lvms.openshift.io/n2",
                    "unrelated/n2",
                ],
            ),
            vg("vg2", &["cleanup.vgmanager.node.topolvm.io/n1"], &[]),
            // A prefix with no node names none.
            vg("vg3", &["cleanup.vgmanager.node.topolvm.io/"], &[]),
        ];
        let edits = gone_node_edits(&vgs, &nodes);
        assert_eq!(nodes_named(&edits), ["n2".to_string()].into());
        assert_eq!(
            edits,
            [GoneNodeEdit {
                target: crate::objects::object_ref(&vgs[0]),
                finalizers: vec!["cleanup.vgmanager.node.topolvm.io/n2".into()],
                annotations: vec!["wiped.devices.lvms.openshift.io/n2".into()],
            }]
        );
    }

    #[test]
    fn only_nodes_without_volumes_lose_topolvms_finalizer() {
        let node = |name: &str, finalizers: &[&str]| {
            let mut n = k8s_openapi::api::core::v1::Node::default();
            n.metadata.name = Some(name.into());
            n.metadata.finalizers = Some(finalizers.iter().map(|s| s.to_string()).collect());
            n
        };
        let nodes = [
            node("empty", &["topolvm.io/node"]),
            node("holds-a-volume", &["topolvm.io/node"]),
            node("never-had-it", &["other.io/keep"]),
        ];
        let with_volumes: BTreeSet<String> = ["holds-a-volume".to_string()].into();
        let names: Vec<_> = node_finalizers_to_release(&nodes, &with_volumes)
            .iter()
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        assert_eq!(names, ["empty"]);
    }

    #[test]
    fn a_wiped_annotation_alone_is_an_edit() {
        let vgs = [vg("vg1", &[], &["wiped.devices.lvms.openshift.io/gone"])];
        let edits = gone_node_edits(&vgs, &BTreeSet::new());
        assert_eq!(edits.len(), 1);
        assert!(edits[0].finalizers.is_empty());
        assert_eq!(
            edits[0].annotations,
            ["wiped.devices.lvms.openshift.io/gone"]
        );
    }
}
