//! VolumeSnapshotClass `lvms-<class>` per thin device class (LVMS unit
//! `topolvm-volumeSnapshotClass`). Only thin pools can snapshot, and only when the
//! `snapshot.storage.k8s.io` API is served; k8s-openapi has no type for it, hence DynamicObject.

use kube::api::{ApiResource, DynamicObject};
use serde_json::json;

use crate::api::LVMCluster;
use crate::operator::desired::csi_driver::CSI_DRIVER_NAME;
use crate::operator::owner::owner_labels;
use crate::operator::world::World;

pub fn volume_snapshot_class_resource() -> ApiResource {
    ApiResource {
        group: "snapshot.storage.k8s.io".to_owned(),
        version: "v1".to_owned(),
        api_version: "snapshot.storage.k8s.io/v1".to_owned(),
        kind: "VolumeSnapshotClass".to_owned(),
        plural: "volumesnapshotclasses".to_owned(),
    }
}

/// The desired VolumeSnapshotClasses: driver topolvm.io, deletionPolicy Delete, owner labels.
/// Empty unless snapshots are served.
pub fn snapshot_classes(cluster: &LVMCluster, world: &World) -> Vec<DynamicObject> {
    if !world.capabilities.snapshots {
        return Vec::new();
    }
    per_thin_class(cluster, &volume_snapshot_class_resource())
}

/// One class object of `resource` per thin device class, named `lvms-<class>`: driver
/// topolvm.io, deletionPolicy Delete, owner labels (the VolumeSnapshotClass and the
/// VolumeGroupSnapshotClass have these fields alike).
pub(super) fn per_thin_class(cluster: &LVMCluster, resource: &ApiResource) -> Vec<DynamicObject> {
    cluster
        .spec
        .storage
        .device_classes
        .iter()
        .filter(|c| c.is_thin())
        .map(|class| {
            let mut obj = DynamicObject::new(&class.storage_class_name(), resource).data(json!({
                "driver": CSI_DRIVER_NAME,
                "deletionPolicy": "Delete",
            }));
            obj.metadata.labels = Some(owner_labels(cluster));
            obj
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::api::{LVMClusterSpec, Storage, ThinPoolConfig};
    use crate::operator::nodes::tests::class;
    use crate::operator::owner::owned_by;
    use crate::operator::owner::tests::cluster_with;
    use crate::operator::world::Capabilities;

    pub(crate) fn cluster() -> LVMCluster {
        let mut thin = class("thin", None);
        thin.thin_pool_config = Some(ThinPoolConfig {
            name: "pool".into(),
            size_percent: 90,
            overprovision_ratio: 10,
            ..Default::default()
        });
        cluster_with(LVMClusterSpec {
            tolerations: vec![],
            storage: Storage {
                device_classes: vec![thin, class("thick", None)],
            },
        })
    }

    fn world(snapshots: bool) -> World {
        World {
            capabilities: Capabilities {
                snapshots,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn only_thin_classes_get_a_snapshot_class() {
        let c = cluster();
        let vscs = snapshot_classes(&c, &world(true));
        assert_eq!(vscs.len(), 1, "thick class must not get a VSC");
        let vsc = &vscs[0];
        assert_eq!(vsc.metadata.name.as_deref(), Some("lvms-thin"));
        let types = vsc.types.as_ref().unwrap();
        assert_eq!(types.api_version, "snapshot.storage.k8s.io/v1");
        assert_eq!(types.kind, "VolumeSnapshotClass");
        assert_eq!(vsc.data["driver"], "topolvm.io");
        assert_eq!(vsc.data["deletionPolicy"], "Delete");
        assert!(owned_by(vsc.metadata.labels.as_ref(), &c));
        // Serialized, the fields sit at the top level as the API expects.
        let v = serde_json::to_value(vsc).unwrap();
        assert_eq!(v["driver"], "topolvm.io");
        assert_eq!(v["kind"], "VolumeSnapshotClass");
    }

    #[test]
    fn nothing_without_snapshot_api() {
        assert!(snapshot_classes(&cluster(), &world(false)).is_empty());
    }
}
