//! TopoLVM's names (driver, topology key, parameters, annotations, finalizers): LVMS put
//! them into users' clusters (PVs, StorageClasses, Nodes, LogicalVolumes), so they are facts
//! lvms keeps, not choices.

/// The CSI driver name.
pub const DRIVER_NAME: &str = "topolvm.io";
/// The topology segment key each node reports (NodeGetInfo) and each PV's node affinity uses.
pub const TOPOLOGY_NODE_KEY: &str = "topology.topolvm.io/node";
/// The scheduler's choice for a WaitForFirstConsumer claim (TopoLVM's `AnnSelectedNode`).
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";
/// StorageClass parameter: the device class (empty or absent: the node's default class).
pub const DEVICE_CLASS_PARAM: &str = "topolvm.io/device-class";
/// StorageClass parameter: an lvcreate option class of the node's lvmd.yaml.
pub const LVCREATE_OPTION_CLASS_PARAM: &str = "topolvm.io/lvcreate-option-class";
/// Node annotation prefix: free bytes per device class (`capacity.topolvm.io/<class>`).
pub const CAPACITY_ANNOTATION_PREFIX: &str = "capacity.topolvm.io/";
/// The annotation suffix of the node's default device class.
pub const DEFAULT_CLASS_ANNOTATION: &str = "00default";
/// Finalizer TopoLVM's node agent puts on its Node: a deleted Node's volumes are cleaned up.
pub const NODE_FINALIZER: &str = "topolvm.io/node";
/// lvms's record, on a Node, of the volumes it wrote off there (docs/dead-nodes.md).
pub const WRITTEN_OFF_ANNOTATION: &str = "lvms.topolvm.io/written-off";
/// The label TopoLVM's node agent puts on the LogicalVolumes it manages.
pub const CREATED_BY_LABEL: (&str, &str) = ("app.kubernetes.io/created-by", "topolvm-controller");
/// Annotation set on a LogicalVolume when its size is raised by ControllerExpandVolume.
pub const RESIZE_REQUESTED_AT: &str = "topolvm.io/resize-requested-at";
/// Annotation that tells the node agent to leave a LogicalVolume alone (being deleted by
/// another path).
pub const PENDING_DELETION: &str = "topolvm.io/pendingdeletion";
/// csi-provisioner's `--extra-create-metadata` parameters: which PVC a volume is for.
pub const PVC_NAME_PARAM: &str = "csi.storage.k8s.io/pvc/name";
pub const PVC_NAMESPACE_PARAM: &str = "csi.storage.k8s.io/pvc/namespace";
/// The volume's PVC, recorded on the LogicalVolume by lvms (TopoLVM leaves it out): the
/// journal and Events can then name the claim a volume belongs to.
pub const PVC_ANNOTATION: &str = "lvms.topolvm.io/pvc";
/// A member of a volume group snapshot (lvms's, for CSI's GroupController): the group's name
/// (also its group snapshot id) on every member snapshot's LogicalVolume.
pub const GROUP_SNAPSHOT_ANNOTATION: &str = "lvms.topolvm.io/group-snapshot";
/// Every member LogicalVolume's name, comma-separated: the node takes the group only once it
/// sees them all.
pub const GROUP_MEMBERS_ANNOTATION: &str = "lvms.topolvm.io/group-members";
/// LVMS's controller socket (`/run/topolvm/csi-topolvm.sock`).
pub const DEFAULT_CONTROLLER_SOCKET: &str = "/run/topolvm/csi-topolvm.sock";
/// The LV tag lvms puts on every volume it creates: `lvs @lvms-volume` lists them.
pub const LV_TAG: &str = "lvms-volume";

/// The annotation carrying a device class's capacity (empty class: the default one).
pub fn capacity_annotation(device_class: &str) -> String {
    class_key(CAPACITY_ANNOTATION_PREFIX, device_class)
}

/// lvms's Node annotation prefix, beside the capacity ones: the real use of a class's thin pool
/// where the class's capacity follows it (`capacityFollowsUsage`), so that the controller's
/// refusal of a claim can name it (`pool-usage.lvms.topolvm.io/<class>`).
pub const POOL_USAGE_ANNOTATION_PREFIX: &str = "pool-usage.lvms.topolvm.io/";

/// The pool-usage annotation of `device_class` (empty: the default class), keyed as capacity's.
pub fn pool_usage_annotation(device_class: &str) -> String {
    class_key(POOL_USAGE_ANNOTATION_PREFIX, device_class)
}

/// Whether vg-manager publishes annotation `key` on its Node (capacity or pool usage).
pub fn is_node_capacity_key(key: &str) -> bool {
    key.starts_with(CAPACITY_ANNOTATION_PREFIX) || key.starts_with(POOL_USAGE_ANNOTATION_PREFIX)
}

/// The capacity and pool-usage annotations among a Node's `annotations`.
pub fn node_capacity_annotations(
    annotations: Option<&std::collections::BTreeMap<String, String>>,
) -> std::collections::BTreeMap<String, String> {
    annotations
        .into_iter()
        .flatten()
        .filter(|(k, _)| is_node_capacity_key(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn class_key(prefix: &str, device_class: &str) -> String {
    let class = if device_class.is_empty() {
        DEFAULT_CLASS_ANNOTATION
    } else {
        device_class
    };
    format!("{prefix}{class}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_default_class_has_its_own_annotation() {
        assert_eq!(
            super::capacity_annotation(""),
            "capacity.topolvm.io/00default"
        );
        assert_eq!(super::capacity_annotation("ssd"), "capacity.topolvm.io/ssd");
    }
}
