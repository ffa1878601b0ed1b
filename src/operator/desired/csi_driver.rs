//! The `topolvm.io` CSIDriver (LVMS unit `topolvm-csi-driver`).

use k8s_openapi::api::storage::v1::{CSIDriver, CSIDriverSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::LVMCluster;
use crate::operator::owner::owner_labels;

/// Name of the CSI driver (and the StorageClass provisioner).
pub const CSI_DRIVER_NAME: &str = "topolvm.io";

/// The CSIDriver LVMS registers. No attach step (saves an RPC round trip), pod info on mount,
/// capacity tracking for scheduling, persistent volumes only. LVMS leaves fsGroupPolicy to the
/// API server's default, so it is not set here either.
pub fn csi_driver(cluster: &LVMCluster) -> CSIDriver {
    CSIDriver {
        metadata: ObjectMeta {
            name: Some(CSI_DRIVER_NAME.to_owned()),
            labels: Some(owner_labels(cluster)),
            ..Default::default()
        },
        spec: CSIDriverSpec {
            attach_required: Some(false),
            pod_info_on_mount: Some(true),
            storage_capacity: Some(true),
            volume_lifecycle_modes: Some(vec!["Persistent".to_owned()]),
            ..Default::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::owner::owned_by;
    use crate::operator::owner::tests::cluster_with;

    #[test]
    fn csi_driver_matches_lvms() {
        let cluster = cluster_with(Default::default());
        let d = csi_driver(&cluster);
        assert_eq!(d.metadata.name.as_deref(), Some("topolvm.io"));
        assert!(d.metadata.namespace.is_none());
        assert!(owned_by(d.metadata.labels.as_ref(), &cluster));
        assert_eq!(d.spec.attach_required, Some(false));
        assert_eq!(d.spec.pod_info_on_mount, Some(true));
        assert_eq!(d.spec.storage_capacity, Some(true));
        assert_eq!(
            d.spec.volume_lifecycle_modes,
            Some(vec!["Persistent".to_owned()])
        );
        assert!(d.spec.fs_group_policy.is_none());
        assert!(d.metadata.owner_references.is_none());
    }
}
