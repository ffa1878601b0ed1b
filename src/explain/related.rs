//! Which journal objects (and Events) tell a subject's story. The journals name objects as
//! the units wrote them: the operator's by the Kubernetes objects it writes, a vg-manager's by
//! its LVMVolumeGroup, node status and `Host/<node>/<vg>` steps, the CSI driver's by the
//! LogicalVolume (named after the PV, `pvc-<claim uid>`, or `snapshot-<snapshot uid>`) and the
//! VolumeGroupSnapshot (`groupsnapshot-<uid>` on the node).

use lvms_journal::ObjectFilter;
use serde_json::Value;

use super::kinds::Subject;

fn key(kind: &str, namespace: &str, name: &str) -> ObjectFilter {
    ObjectFilter {
        kind: kind.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

fn str_at<'a>(v: Option<&'a Value>, pointer: &str) -> Option<&'a str> {
    v?.pointer(pointer)?.as_str().filter(|s| !s.is_empty())
}

/// The device class names an LVMCluster (or its status) names.
pub fn classes(cluster: Option<&Value>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |arr: Option<&Value>| {
        for c in arr.and_then(Value::as_array).into_iter().flatten() {
            if let Some(n) = c.get("name").and_then(Value::as_str)
                && !out.iter().any(|o| o == n)
            {
                out.push(n.to_string());
            }
        }
    };
    add(cluster.and_then(|c| c.pointer("/spec/storage/deviceClasses")));
    add(cluster.and_then(|c| c.pointer("/status/deviceClassStatuses")));
    out
}

/// The operator journal's objects for the subject.
pub fn operator_keys(s: &Subject, object: Option<&Value>) -> Vec<ObjectFilter> {
    let (ns, name) = (s.namespace.as_str(), s.name.as_str());
    let mut out = vec![key(s.kind.kind, ns, name)];
    let uid = str_at(object, "/metadata/uid");
    match s.kind.kind {
        "LVMCluster" => {
            for c in classes(object) {
                out.push(key("LVMVolumeGroup", ns, &c));
                out.push(key("StorageClass", "", &format!("lvms-{c}")));
                out.push(key("VolumeSnapshotClass", "", &format!("lvms-{c}")));
                out.push(key("VolumeGroupSnapshotClass", "", &format!("lvms-{c}")));
            }
            out.push(key("CSIDriver", "", "topolvm.io"));
            out.push(key("DaemonSet", ns, "vg-manager"));
        }
        "PersistentVolumeClaim" => {
            let pv = str_at(object, "/spec/volumeName")
                .map(str::to_string)
                .or_else(|| uid.map(|u| format!("pvc-{u}")));
            if let Some(pv) = pv {
                out.push(key("LogicalVolume", "", &pv));
                out.push(key("PersistentVolume", "", &pv));
            }
        }
        "PersistentVolume" => out.push(key("LogicalVolume", "", name)),
        "VolumeSnapshot" => {
            if let Some(u) = uid {
                out.push(key("LogicalVolume", "", &format!("snapshot-{u}")));
            }
        }
        "VolumeGroupSnapshot" => {
            if let Some(u) = uid {
                out.push(key(
                    "VolumeGroupSnapshot",
                    "",
                    &format!("groupsnapshot-{u}"),
                ));
            }
        }
        _ => {}
    }
    out
}

/// A vg-manager journal's objects for the subject, on `node`.
pub fn node_keys(s: &Subject, object: Option<&Value>, node: &str) -> Vec<ObjectFilter> {
    let ns = s.namespace.as_str();
    let mut out = operator_keys(s, object);
    let vg = |out: &mut Vec<ObjectFilter>, class: &str| {
        out.push(key("LVMVolumeGroup", ns, class));
        out.push(key("Host", node, class));
    };
    match s.kind.kind {
        "LVMCluster" => {
            for c in classes(object) {
                vg(&mut out, &c);
            }
            out.push(key("LVMVolumeGroupNodeStatus", ns, node));
            out.push(key("Host", node, "lvmd.yaml"));
        }
        "LVMVolumeGroup" => vg(&mut out, &s.name),
        "LVMVolumeGroupNodeStatus" => {
            let entries = object.and_then(|o| o.pointer("/spec/nodeStatus"));
            for e in entries.and_then(Value::as_array).into_iter().flatten() {
                if let Some(c) = e.get("name").and_then(Value::as_str) {
                    vg(&mut out, c);
                }
            }
            out.push(key("Host", node, "lvmd.yaml"));
        }
        // The node service names a volume by its volume id (the LV's name on the node).
        "PersistentVolume" => {
            if let Some(id) = str_at(object, "/spec/csi/volumeHandle") {
                out.push(key("CSIVolume", "", id));
            }
        }
        _ => {}
    }
    out.sort_by(|a, b| (&a.kind, &a.namespace, &a.name).cmp(&(&b.kind, &b.namespace, &b.name)));
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cluster_stands_for_its_classes_objects() {
        let s: Subject = "lvmcluster/ns/c".parse().unwrap();
        let obj = json!({"spec": {"storage": {"deviceClasses": [{"name": "vg1"}]}},
                         "status": {"deviceClassStatuses": [{"name": "vg1"}, {"name": "old"}]}});
        let keys: Vec<String> = operator_keys(&s, Some(&obj))
            .iter()
            .map(ToString::to_string)
            .collect();
        for want in [
            "LVMCluster/ns/c",
            "LVMVolumeGroup/ns/vg1",
            "StorageClass/lvms-vg1",
            "LVMVolumeGroup/ns/old",
            "CSIDriver/topolvm.io",
        ] {
            assert!(keys.iter().any(|k| k == want), "{want} in {keys:?}");
        }
        let node: Vec<String> = node_keys(&s, Some(&obj), "node-b")
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(node.iter().any(|k| k == "Host/node-b/vg1"), "{node:?}");
        assert!(
            node.iter()
                .any(|k| k == "LVMVolumeGroupNodeStatus/ns/node-b"),
            "{node:?}"
        );
    }

    #[test]
    fn a_pending_claim_is_found_under_the_volume_csi_provisioner_asks_for() {
        let s: Subject = "pvc/db/data".parse().unwrap();
        let obj = json!({"metadata": {"uid": "1234"}});
        let keys: Vec<String> = operator_keys(&s, Some(&obj))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(
            keys.contains(&"LogicalVolume/pvc-1234".to_string()),
            "{keys:?}"
        );
        let bound = json!({"metadata": {"uid": "1234"}, "spec": {"volumeName": "pvc-9"}});
        let keys: Vec<String> = operator_keys(&s, Some(&bound))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(
            keys.contains(&"LogicalVolume/pvc-9".to_string()),
            "{keys:?}"
        );
    }
}
