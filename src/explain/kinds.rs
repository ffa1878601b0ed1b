//! The kinds `lvms explain` knows, how a user may name them, and where the API serves them.

use std::str::FromStr;

/// A kind `lvms explain` and `lvms must-gather` read.
#[derive(Debug, PartialEq, Eq)]
pub struct KindInfo {
    pub kind: &'static str,
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
    /// Lowercase names a user may type (the kind, its plural, kubectl's short names).
    pub aliases: &'static [&'static str],
}

impl KindInfo {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    fn named(&self, s: &str) -> bool {
        let s = s.to_ascii_lowercase();
        s == self.kind.to_ascii_lowercase()
            || s == self.plural
            || self.aliases.contains(&s.as_str())
    }
}

pub const fn kind(
    kind: &'static str,
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    namespaced: bool,
    aliases: &'static [&'static str],
) -> KindInfo {
    KindInfo {
        kind,
        group,
        version,
        plural,
        namespaced,
        aliases,
    }
}

pub const LVM_CLUSTER: &KindInfo = &kind(
    "LVMCluster",
    "lvm.topolvm.io",
    "v1alpha1",
    "lvmclusters",
    true,
    &["lvms"],
);
pub const LVM_VOLUME_GROUP: &KindInfo = &kind(
    "LVMVolumeGroup",
    "lvm.topolvm.io",
    "v1alpha1",
    "lvmvolumegroups",
    true,
    &["lvmvg"],
);
pub const NODE_STATUS: &KindInfo = &kind(
    "LVMVolumeGroupNodeStatus",
    "lvm.topolvm.io",
    "v1alpha1",
    "lvmvolumegroupnodestatuses",
    true,
    &["lvmvgns", "nodestatus"],
);
pub const STORAGE_CLASS: &KindInfo = &kind(
    "StorageClass",
    "storage.k8s.io",
    "v1",
    "storageclasses",
    false,
    &["sc"],
);
pub const PVC: &KindInfo = &kind(
    "PersistentVolumeClaim",
    "",
    "v1",
    "persistentvolumeclaims",
    true,
    &["pvc"],
);
pub const PV: &KindInfo = &kind(
    "PersistentVolume",
    "",
    "v1",
    "persistentvolumes",
    false,
    &["pv"],
);
pub const LOGICAL_VOLUME: &KindInfo = &kind(
    "LogicalVolume",
    "topolvm.io",
    "v1",
    "logicalvolumes",
    false,
    &["lv"],
);
pub const VOLUME_SNAPSHOT: &KindInfo = &kind(
    "VolumeSnapshot",
    "snapshot.storage.k8s.io",
    "v1",
    "volumesnapshots",
    true,
    &["vs"],
);
pub const VOLUME_GROUP_SNAPSHOT: &KindInfo = &kind(
    "VolumeGroupSnapshot",
    "groupsnapshot.storage.k8s.io",
    "v1",
    "volumegroupsnapshots",
    true,
    &["vgs"],
);

/// Every kind `lvms explain` takes.
pub const KINDS: [&KindInfo; 9] = [
    LVM_CLUSTER,
    LVM_VOLUME_GROUP,
    NODE_STATUS,
    STORAGE_CLASS,
    PVC,
    PV,
    LOGICAL_VOLUME,
    VOLUME_SNAPSHOT,
    VOLUME_GROUP_SNAPSHOT,
];

/// The object to explain: `KIND/NAMESPACE/NAME`, or `KIND/NAME` for a cluster-scoped kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    pub kind: &'static KindInfo,
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.kind.kind, self.name)
        } else {
            write!(f, "{}/{}/{}", self.kind.kind, self.namespace, self.name)
        }
    }
}

impl FromStr for Subject {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let known = || {
            KINDS
                .iter()
                .map(|k| k.kind.to_ascii_lowercase())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let parts: Vec<&str> = s.split('/').collect();
        let Some(k) = parts.first() else {
            return Err(format!("{s:?}: expected KIND/NAMESPACE/NAME or KIND/NAME"));
        };
        let Some(info) = KINDS.iter().copied().find(|i| i.named(k)) else {
            return Err(format!(
                "{s:?}: unknown kind {k:?}; lvms explain knows {}",
                known()
            ));
        };
        let (namespace, name) = match (info.namespaced, parts.as_slice()) {
            (true, [_, ns, n]) => (*ns, *n),
            (false, [_, n]) => ("", *n),
            (true, _) => {
                return Err(format!(
                    "{s:?}: {} is namespaced; name it as {}/NAMESPACE/NAME",
                    info.kind,
                    k.to_ascii_lowercase()
                ));
            }
            (false, _) => {
                return Err(format!(
                    "{s:?}: {} is cluster-scoped; name it as {}/NAME",
                    info.kind,
                    k.to_ascii_lowercase()
                ));
            }
        };
        if namespace.is_empty() && info.namespaced || name.is_empty() {
            return Err(format!("{s:?}: namespace and name must not be empty"));
        }
        Ok(Subject {
            kind: info,
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_named_as_kubectl_users_name_them() {
        let s: Subject = "lvmcluster/openshift-lvm-storage/my-lvmcluster"
            .parse()
            .unwrap();
        assert_eq!(
            (s.kind, s.namespace.as_str()),
            (LVM_CLUSTER, "openshift-lvm-storage")
        );
        assert_eq!("pvc/db/data".parse::<Subject>().unwrap().kind, PVC);
        assert_eq!(
            "PersistentVolume/pvc-1".parse::<Subject>().unwrap().kind,
            PV
        );
        assert_eq!("sc/lvms-vg1".parse::<Subject>().unwrap().name, "lvms-vg1");
        assert_eq!(
            "nodestatus/ns/node-a".parse::<Subject>().unwrap().kind,
            NODE_STATUS
        );
    }

    #[test]
    fn a_wrong_shape_says_which_shape_the_kind_takes() {
        let e = "lvmcluster/my-lvmcluster".parse::<Subject>().unwrap_err();
        assert!(
            e.contains("namespaced") && e.contains("lvmcluster/NAMESPACE/NAME"),
            "{e}"
        );
        let e = "storageclass/ns/x".parse::<Subject>().unwrap_err();
        assert!(e.contains("cluster-scoped"), "{e}");
        let e = "pod/ns/x".parse::<Subject>().unwrap_err();
        assert!(
            e.contains("unknown kind") && e.contains("lvmcluster"),
            "{e}"
        );
        assert!("pvc//x".parse::<Subject>().is_err());
    }
}
