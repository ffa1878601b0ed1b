//! Ownership of the objects the operator writes.
//!
//! Namespaced objects get a controller ownerRef to the LVMCluster. Cluster-scoped objects
//! (StorageClass, CSIDriver, VolumeSnapshotClass, VolumeGroupSnapshotClass, SCC) cannot point at
//! a namespaced owner, so LVMS marks them with `owned-by.topolvm.io/*` labels instead; the keys
//! and values here are the same, so objects created by LVMS are recognised as ours and vice
//! versa (LVMS makes no VolumeGroupSnapshotClass; lvms labels its own the same way).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;

use crate::api::LVMCluster;

pub const OWNED_BY_NAME: &str = "owned-by.topolvm.io/name";
pub const OWNED_BY_NAMESPACE: &str = "owned-by.topolvm.io/namespace";
pub const OWNED_BY_UID: &str = "owned-by.topolvm.io/uid";
pub const OWNED_BY_GROUP: &str = "owned-by.topolvm.io/group";
pub const OWNED_BY_VERSION: &str = "owned-by.topolvm.io/version";
pub const OWNED_BY_KIND: &str = "owned-by.topolvm.io/kind";

/// The six owner labels for `cluster` (missing name/namespace/uid become empty values, as in
/// LVMS, which reads them through getters that return "").
pub fn owner_labels(cluster: &LVMCluster) -> BTreeMap<String, String> {
    let meta = &cluster.metadata;
    let value = |v: &Option<String>| v.clone().unwrap_or_default();
    BTreeMap::from([
        (OWNED_BY_NAME.to_owned(), value(&meta.name)),
        (OWNED_BY_NAMESPACE.to_owned(), value(&meta.namespace)),
        (OWNED_BY_UID.to_owned(), value(&meta.uid)),
        (
            OWNED_BY_GROUP.to_owned(),
            LVMCluster::group(&()).into_owned(),
        ),
        (
            OWNED_BY_VERSION.to_owned(),
            LVMCluster::version(&()).into_owned(),
        ),
        (OWNED_BY_KIND.to_owned(), LVMCluster::kind(&()).into_owned()),
    ])
}

/// Overlays the owner labels on `labels`; applied last so user labels cannot spoof ownership.
pub fn set_owner_labels(labels: &mut BTreeMap<String, String>, cluster: &LVMCluster) {
    labels.extend(owner_labels(cluster));
}

/// True iff `labels` carry all six owner labels of `cluster` with matching values.
pub fn owned_by(labels: Option<&BTreeMap<String, String>>, cluster: &LVMCluster) -> bool {
    let Some(labels) = labels else {
        return false;
    };
    owner_labels(cluster)
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
}

/// Controller ownerRef to `cluster` (controller and blockOwnerDeletion set, as
/// controller-runtime's SetControllerReference does). The cluster is expected to come from the
/// API server; a missing uid yields an empty one, which the server then rejects loudly.
pub fn controller_owner_ref(cluster: &LVMCluster) -> OwnerReference {
    OwnerReference {
        api_version: LVMCluster::api_version(&()).into_owned(),
        kind: LVMCluster::kind(&()).into_owned(),
        name: cluster.metadata.name.clone().unwrap_or_default(),
        uid: cluster.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// True iff `refs` contain a controller ref to `cluster` (by uid, as `metav1.IsControlledBy`).
pub fn controlled_by(refs: Option<&[OwnerReference]>, cluster: &LVMCluster) -> bool {
    let Some(uid) = cluster.metadata.uid.as_deref() else {
        return false;
    };
    refs.unwrap_or_default()
        .iter()
        .any(|r| r.controller == Some(true) && r.uid == uid)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::api::LVMClusterSpec;

    /// An LVMCluster as the API server would return it (name, namespace, uid, generation).
    pub(crate) fn cluster_with(spec: LVMClusterSpec) -> LVMCluster {
        let mut c = LVMCluster::new("my-lvmcluster", spec);
        c.metadata.namespace = Some("openshift-lvm-storage".into());
        c.metadata.uid = Some("0000-uid".into());
        c.metadata.generation = Some(3);
        c
    }

    #[test]
    fn owner_labels_use_lvms_keys_and_values() {
        let labels = owner_labels(&cluster_with(Default::default()));
        let expect = [
            ("owned-by.topolvm.io/name", "my-lvmcluster"),
            ("owned-by.topolvm.io/namespace", "openshift-lvm-storage"),
            ("owned-by.topolvm.io/uid", "0000-uid"),
            ("owned-by.topolvm.io/group", "lvm.topolvm.io"),
            ("owned-by.topolvm.io/version", "v1alpha1"),
            ("owned-by.topolvm.io/kind", "LVMCluster"),
        ];
        assert_eq!(labels.len(), expect.len());
        for (k, v) in expect {
            assert_eq!(labels.get(k).map(String::as_str), Some(v), "{k}");
        }
    }

    #[test]
    fn owner_labels_override_user_labels() {
        let cluster = cluster_with(Default::default());
        let mut labels = BTreeMap::from([
            (OWNED_BY_UID.to_owned(), "spoofed".to_owned()),
            ("team".to_owned(), "storage".to_owned()),
        ]);
        set_owner_labels(&mut labels, &cluster);
        assert_eq!(labels[OWNED_BY_UID], "0000-uid");
        assert_eq!(labels["team"], "storage");
        assert!(owned_by(Some(&labels), &cluster));
    }

    #[test]
    fn owned_by_requires_every_label() {
        let cluster = cluster_with(Default::default());
        assert!(!owned_by(None, &cluster));
        for key in [
            OWNED_BY_NAME,
            OWNED_BY_NAMESPACE,
            OWNED_BY_UID,
            OWNED_BY_GROUP,
            OWNED_BY_VERSION,
            OWNED_BY_KIND,
        ] {
            let mut labels = owner_labels(&cluster);
            labels.insert(key.to_owned(), "other".to_owned());
            assert!(!owned_by(Some(&labels), &cluster), "{key} mismatch");
            labels.remove(key);
            assert!(!owned_by(Some(&labels), &cluster), "{key} missing");
        }
    }

    #[test]
    fn controller_ref_blocks_owner_deletion() {
        let cluster = cluster_with(Default::default());
        let r = controller_owner_ref(&cluster);
        assert_eq!(r.api_version, "lvm.topolvm.io/v1alpha1");
        assert_eq!(r.kind, "LVMCluster");
        assert_eq!(r.name, "my-lvmcluster");
        assert_eq!(r.uid, "0000-uid");
        assert_eq!(r.controller, Some(true));
        assert_eq!(r.block_owner_deletion, Some(true));
        assert!(controlled_by(Some(std::slice::from_ref(&r)), &cluster));
        let not_controller = OwnerReference {
            controller: None,
            ..r
        };
        assert!(!controlled_by(Some(&[not_controller]), &cluster));
        assert!(!controlled_by(None, &cluster));
    }
}
