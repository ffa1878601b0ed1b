//! `lvms must-gather`'s decisions: which objects of each kind belong in the bundle (those of
//! the `topolvm.io` driver and the lvms namespaces) and what is taken out of them before they
//! are written (managed fields, last-applied copies, literal environment values). Secrets are
//! never read at all.

use std::collections::BTreeSet;

use serde_json::Value;

use super::kinds::{self, KindInfo, kind};

/// The CSI driver's name, as LVMS and TopoLVM register it.
pub const DRIVER: &str = "topolvm.io";

pub const VOLUME_SNAPSHOT_CLASS: &KindInfo = &kind(
    "VolumeSnapshotClass",
    "snapshot.storage.k8s.io",
    "v1",
    "volumesnapshotclasses",
    false,
    &[],
);
pub const VOLUME_SNAPSHOT_CONTENT: &KindInfo = &kind(
    "VolumeSnapshotContent",
    "snapshot.storage.k8s.io",
    "v1",
    "volumesnapshotcontents",
    false,
    &[],
);
pub const VOLUME_GROUP_SNAPSHOT_CLASS: &KindInfo = &kind(
    "VolumeGroupSnapshotClass",
    "groupsnapshot.storage.k8s.io",
    "v1",
    "volumegroupsnapshotclasses",
    false,
    &[],
);
pub const VOLUME_GROUP_SNAPSHOT_CONTENT: &KindInfo = &kind(
    "VolumeGroupSnapshotContent",
    "groupsnapshot.storage.k8s.io",
    "v1",
    "volumegroupsnapshotcontents",
    false,
    &[],
);
pub const CSI_DRIVER: &KindInfo = &kind(
    "CSIDriver",
    "storage.k8s.io",
    "v1",
    "csidrivers",
    false,
    &[],
);
pub const CSI_NODE: &KindInfo = &kind("CSINode", "storage.k8s.io", "v1", "csinodes", false, &[]);
pub const NODE: &KindInfo = &kind("Node", "", "v1", "nodes", false, &[]);
pub const DAEMON_SET: &KindInfo = &kind("DaemonSet", "apps", "v1", "daemonsets", true, &[]);
pub const DEPLOYMENT: &KindInfo = &kind("Deployment", "apps", "v1", "deployments", true, &[]);
pub const POD: &KindInfo = &kind("Pod", "", "v1", "pods", true, &[]);
pub const EVENT: &KindInfo = &kind("Event", "", "v1", "events", true, &[]);

/// Where a kind is listed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace (or cluster-scoped), then filtered.
    All,
    /// Only the lvms namespaces (those of the LVMClusters, and the operator's).
    LvmsNamespaces,
    /// The lvms namespaces and the namespaces of the driver's claims.
    ClaimNamespaces,
}

/// The kinds gathered, in the order they are read: a kind's filter may use what an earlier
/// kind added to [`Seen`] (claims follow their classes and volumes).
pub const GATHERED: [(&KindInfo, Scope); 20] = [
    (kinds::LVM_CLUSTER, Scope::All),
    (kinds::LVM_VOLUME_GROUP, Scope::All),
    (kinds::NODE_STATUS, Scope::All),
    (kinds::STORAGE_CLASS, Scope::All),
    (VOLUME_SNAPSHOT_CLASS, Scope::All),
    (VOLUME_GROUP_SNAPSHOT_CLASS, Scope::All),
    (CSI_DRIVER, Scope::All),
    (CSI_NODE, Scope::All),
    (NODE, Scope::All),
    (kinds::PV, Scope::All),
    (kinds::PVC, Scope::All),
    (kinds::LOGICAL_VOLUME, Scope::All),
    (kinds::VOLUME_SNAPSHOT, Scope::All),
    (VOLUME_SNAPSHOT_CONTENT, Scope::All),
    (kinds::VOLUME_GROUP_SNAPSHOT, Scope::All),
    (VOLUME_GROUP_SNAPSHOT_CONTENT, Scope::All),
    (DAEMON_SET, Scope::LvmsNamespaces),
    (DEPLOYMENT, Scope::LvmsNamespaces),
    (POD, Scope::LvmsNamespaces),
    (EVENT, Scope::ClaimNamespaces),
];

/// What earlier kinds let through, for later kinds' filters.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    pub namespaces: BTreeSet<String>,
    pub storage_classes: BTreeSet<String>,
    pub snapshot_classes: BTreeSet<String>,
    pub volumes: BTreeSet<String>,
    pub claim_namespaces: BTreeSet<String>,
}

fn s<'a>(o: &'a Value, pointer: &str) -> &'a str {
    o.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Whether `o` (of kind `k`) belongs in the bundle; records what later filters need.
pub fn keep(k: &KindInfo, o: &Value, seen: &mut Seen) -> bool {
    let name = s(o, "/metadata/name").to_string();
    match k.kind {
        "LVMCluster" => {
            seen.namespaces
                .insert(s(o, "/metadata/namespace").to_string());
            true
        }
        "StorageClass" => {
            let ours = s(o, "/provisioner") == DRIVER;
            if ours {
                seen.storage_classes.insert(name);
            }
            ours
        }
        "VolumeSnapshotClass" | "VolumeGroupSnapshotClass" => {
            let ours = s(o, "/driver") == DRIVER;
            if ours {
                seen.snapshot_classes.insert(name);
            }
            ours
        }
        "CSIDriver" => name == DRIVER,
        "PersistentVolume" => {
            let ours = s(o, "/spec/csi/driver") == DRIVER;
            if ours {
                seen.volumes.insert(name);
            }
            ours
        }
        "PersistentVolumeClaim" => {
            let ours = seen
                .storage_classes
                .contains(s(o, "/spec/storageClassName"))
                || seen.volumes.contains(s(o, "/spec/volumeName"));
            if ours {
                seen.claim_namespaces
                    .insert(s(o, "/metadata/namespace").to_string());
            }
            ours
        }
        "VolumeSnapshot" => seen
            .snapshot_classes
            .contains(s(o, "/spec/volumeSnapshotClassName")),
        "VolumeGroupSnapshot" => seen
            .snapshot_classes
            .contains(s(o, "/spec/volumeGroupSnapshotClassName")),
        "VolumeSnapshotContent" | "VolumeGroupSnapshotContent" => s(o, "/spec/driver") == DRIVER,
        _ => true,
    }
}

/// Environment values written literally in a pod template may be credentials: they are
/// replaced; references (`valueFrom`) stay, they name where a value lives, not the value.
fn redact_env(spec: &mut Value) {
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in cs {
            for e in c
                .get_mut("env")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(v) = e.get_mut("value") {
                    *v = Value::String("<redacted>".into());
                }
            }
        }
    }
}

/// `o` as it goes into the bundle.
pub fn sanitize(mut o: Value) -> Value {
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
        if let Some(a) = m.get_mut("annotations").and_then(Value::as_object_mut) {
            a.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
    }
    if let Some(spec) = o.get_mut("spec") {
        redact_env(spec);
        if let Some(t) = spec.pointer_mut("/template/spec") {
            redact_env(t);
        }
    }
    o
}

/// A journal's label as a file name (`node/node-b` → `node-node-b`).
pub fn file_label(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn claims_follow_the_drivers_classes_and_volumes() {
        let mut seen = Seen::default();
        assert!(keep(
            kinds::STORAGE_CLASS,
            &json!({"metadata": {"name": "lvms-vg1"}, "provisioner": "topolvm.io"}),
            &mut seen
        ));
        assert!(!keep(
            kinds::STORAGE_CLASS,
            &json!({"metadata": {"name": "gp2"}, "provisioner": "ebs.csi.aws.com"}),
            &mut seen
        ));
        assert!(keep(
            kinds::PV,
            &json!({"metadata": {"name": "pvc-1"}, "spec": {"csi": {"driver": "topolvm.io"}}}),
            &mut seen
        ));
        let claim = |sc: &str, pv: &str| json!({"metadata": {"name": "c", "namespace": "app"}, "spec": {"storageClassName": sc, "volumeName": pv}});
        assert!(keep(kinds::PVC, &claim("lvms-vg1", ""), &mut seen));
        assert!(keep(kinds::PVC, &claim("renamed", "pvc-1"), &mut seen));
        assert!(!keep(kinds::PVC, &claim("gp2", "pvc-2"), &mut seen));
        assert!(seen.claim_namespaces.contains("app"));
    }

    #[test]
    fn literal_environment_values_and_managed_fields_are_left_out() {
        let pod = json!({
            "metadata": {"name": "p", "managedFields": [{"manager": "x"}],
                         "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{secret}", "keep": "1"}},
            "spec": {"containers": [{"name": "c", "env": [
                {"name": "TOKEN", "value": "hunter2"},
                {"name": "FROM", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]}
        });
        let out = sanitize(pod).to_string();
        assert!(
            !out.contains("hunter2") && !out.contains("{secret}") && !out.contains("managedFields"),
            "{out}"
        );
        assert!(
            out.contains("secretKeyRef") && out.contains("\"keep\""),
            "{out}"
        );
        let ds = json!({"spec": {"template": {"spec": {"containers": [{"env": [{"name": "A", "value": "pw"}]}]}}}});
        assert!(!sanitize(ds).to_string().contains("pw"));
    }
}
