//! VolumeGroupSnapshotClass `lvms-<class>` per thin device class (unit
//! `topolvm-volumeGroupSnapshotClass`; LVMS has none). Group snapshots are thin snapshots of
//! every member, so only thin classes get one, and only when `groupsnapshot.storage.k8s.io/v1`
//! is served; k8s-openapi has no type for it, hence DynamicObject.

use kube::api::DynamicObject;

use crate::api::LVMCluster;
use crate::kube::kinds::Kind;
use crate::operator::desired::snapshot_classes::per_thin_class;
use crate::operator::world::World;

/// The desired VolumeGroupSnapshotClasses: driver topolvm.io, deletionPolicy Delete, owner
/// labels, as the VolumeSnapshotClasses. Empty unless group snapshots are served.
pub fn group_snapshot_classes(cluster: &LVMCluster, world: &World) -> Vec<DynamicObject> {
    if !world.capabilities.group_snapshots {
        return Vec::new();
    }
    per_thin_class(cluster, &Kind::GroupSnapshotClass.api_resource())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::desired::snapshot_classes::tests::cluster;
    use crate::operator::owner::owned_by;
    use crate::operator::world::Capabilities;

    fn world(group_snapshots: bool) -> World {
        World {
            capabilities: Capabilities {
                group_snapshots,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn only_thin_classes_get_a_group_snapshot_class() {
        let c = cluster();
        let classes = group_snapshot_classes(&c, &world(true));
        assert_eq!(classes.len(), 1, "thick class must not get a VGSC");
        let vgsc = &classes[0];
        assert_eq!(vgsc.metadata.name.as_deref(), Some("lvms-thin"));
        let types = vgsc.types.as_ref().unwrap();
        assert_eq!(types.api_version, "groupsnapshot.storage.k8s.io/v1");
        assert_eq!(types.kind, "VolumeGroupSnapshotClass");
        assert!(owned_by(vgsc.metadata.labels.as_ref(), &c));
        // Serialized, the fields sit at the top level as the CRD's schema has them.
        let v = serde_json::to_value(vgsc).unwrap();
        assert_eq!(v["driver"], "topolvm.io");
        assert_eq!(v["deletionPolicy"], "Delete");
        assert_eq!(v["kind"], "VolumeGroupSnapshotClass");
        assert!(v.get("parameters").is_none(), "no parameters: {v}");
    }

    #[test]
    fn nothing_without_the_group_snapshot_api() {
        assert!(group_snapshot_classes(&cluster(), &world(false)).is_empty());
        // The VolumeSnapshot API alone does not make group classes.
        let snapshots_only = World {
            capabilities: Capabilities {
                snapshots: true,
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(group_snapshot_classes(&cluster(), &snapshots_only).is_empty());
    }
}
