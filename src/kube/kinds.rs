//! The object kinds lvms writes or watches, with their API coordinates. One enum for both:
//! what a unit writes and what wakes it are the same kinds.

use kube::api::{ApiResource, GroupVersionKind};
use kube::core::Resource;

/// The API group and version of the VolumeGroupSnapshot API lvms writes.
pub const GROUP_SNAPSHOT_GROUP: &str = "groupsnapshot.storage.k8s.io";
pub const GROUP_SNAPSHOT_VERSION: &str = "v1";

/// A kind lvms writes or watches. The `namespaced` ones lvms owns live in the operator
/// namespace; claims live in their users' namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    LvmCluster,
    /// Watched only (node selectors, vg-manager's own node).
    Node,
    /// Watched only (kubelet registrations of the CSI driver).
    CsiNode,
    CsiDriver,
    DaemonSet,
    VolumeGroup,
    NodeStatus,
    StorageClass,
    SnapshotClass,
    /// `groupsnapshot.storage.k8s.io/v1` VolumeGroupSnapshotClass (thin classes).
    GroupSnapshotClass,
    Scc,
    /// TopoLVM's volume object (cluster-scoped): the CSI controller writes it, vg-manager
    /// realises it.
    LogicalVolume,
    /// Watched only (LVMS's PV helper: claim references, hostname labels).
    PersistentVolume,
    /// Watched only (LVMS's PVC helper: capacity warnings; TopoLVM's Node cleanup).
    PersistentVolumeClaim,
}

impl Kind {
    pub const ALL: [Kind; 14] = [
        Kind::LvmCluster,
        Kind::Node,
        Kind::CsiNode,
        Kind::CsiDriver,
        Kind::DaemonSet,
        Kind::VolumeGroup,
        Kind::NodeStatus,
        Kind::StorageClass,
        Kind::SnapshotClass,
        Kind::GroupSnapshotClass,
        Kind::Scc,
        Kind::LogicalVolume,
        Kind::PersistentVolume,
        Kind::PersistentVolumeClaim,
    ];

    pub fn api_resource(self) -> ApiResource {
        use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
        use k8s_openapi::api::{apps::v1::DaemonSet, storage::v1 as st};
        match self {
            Kind::LvmCluster => ApiResource::erase::<crate::api::LVMCluster>(&()),
            Kind::Node => ApiResource::erase::<Node>(&()),
            Kind::CsiNode => ApiResource::erase::<st::CSINode>(&()),
            Kind::CsiDriver => ApiResource::erase::<st::CSIDriver>(&()),
            Kind::DaemonSet => ApiResource::erase::<DaemonSet>(&()),
            Kind::VolumeGroup => ApiResource::erase::<crate::api::LVMVolumeGroup>(&()),
            Kind::NodeStatus => ApiResource::erase::<crate::api::LVMVolumeGroupNodeStatus>(&()),
            Kind::StorageClass => ApiResource::erase::<st::StorageClass>(&()),
            Kind::SnapshotClass => ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("snapshot.storage.k8s.io", "v1", "VolumeSnapshotClass"),
                "volumesnapshotclasses",
            ),
            // external-snapshotter v8.6 serves v1, v1beta2 (storage) and v1beta1; lvms writes
            // v1, and discovery requires that version (see `discovery::capabilities`).
            Kind::GroupSnapshotClass => ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk(
                    GROUP_SNAPSHOT_GROUP,
                    GROUP_SNAPSHOT_VERSION,
                    "VolumeGroupSnapshotClass",
                ),
                "volumegroupsnapshotclasses",
            ),
            Kind::LogicalVolume => ApiResource::erase::<crate::api::LogicalVolume>(&()),
            Kind::PersistentVolume => ApiResource::erase::<PersistentVolume>(&()),
            Kind::PersistentVolumeClaim => ApiResource::erase::<PersistentVolumeClaim>(&()),
            Kind::Scc => ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("security.openshift.io", "v1", "SecurityContextConstraints"),
                "securitycontextconstraints",
            ),
        }
    }

    pub fn namespaced(self) -> bool {
        matches!(
            self,
            Kind::LvmCluster
                | Kind::DaemonSet
                | Kind::VolumeGroup
                | Kind::NodeStatus
                | Kind::PersistentVolumeClaim
        )
    }

    pub fn kind(self) -> String {
        self.api_resource().kind
    }
}

/// `apiVersion` of a typed resource (for SSA bodies, which must carry it).
pub fn api_version<K: Resource<DynamicType = ()>>() -> String {
    K::api_version(&()).into_owned()
}
