//! LVMS's PVC helper (`internal/controllers/persistent-volume-claim`), as a pure decision: a
//! Pending claim on `lvms-<class>` that no node's `capacity.topolvm.io/<class>` annotation can
//! hold gets a Warning `NotEnoughCapacity` listing what each node has.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim};

use super::STORAGE_CLASS_PREFIX;
use crate::api::quantity::parse_quantity_bytes;
use crate::api::topolvm::capacity_annotation;

pub const REASON_NOT_ENOUGH_CAPACITY: &str = "NotEnoughCapacity";

/// LVMS looks again this often while a claim stays Pending.
pub const RECHECK: std::time::Duration = std::time::Duration::from_secs(15);

/// A Pending claim on an lvms StorageClass, not being deleted: (its device class, the request
/// as written, the request in bytes; 0 without one, as LVMS's `Storage()` reads it).
pub fn pending_lvms_claim(pvc: &PersistentVolumeClaim) -> Option<(String, String, u64)> {
    if pvc.metadata.deletion_timestamp.is_some()
        || pvc.status.as_ref()?.phase.as_deref() != Some("Pending")
    {
        return None;
    }
    let spec = pvc.spec.as_ref()?;
    let class = spec
        .storage_class_name
        .as_deref()?
        .strip_prefix(STORAGE_CLASS_PREFIX)?;
    if class.is_empty() {
        return None;
    }
    let request = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.clone())
        .unwrap_or_else(|| "0".into());
    let bytes = parse_quantity_bytes(&request).unwrap_or(0);
    Some((class.to_string(), request, bytes))
}

/// LVMS's `prettyByteSize`: binary units, one decimal.
pub fn pretty_bytes(b: u64) -> String {
    let mut f = b as f64;
    for unit in ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"] {
        if f < 1024.0 {
            return format!("{f:3.1}{unit}B");
        }
        f /= 1024.0;
    }
    format!("{f:.1}YiB")
}

/// The Warning's note when no node can hold the claim, else None. A capacity annotation that
/// does not parse is an error (an unread node is not a full one).
pub fn not_enough_capacity(
    pvc: &PersistentVolumeClaim,
    nodes: &[Arc<Node>],
) -> Result<Option<String>, String> {
    let Some((class, request, bytes)) = pending_lvms_claim(pvc) else {
        return Ok(None);
    };
    let key = capacity_annotation(&class);
    let mut seen = Vec::new();
    for node in nodes {
        let Some(value) = node.metadata.annotations.as_ref().and_then(|a| a.get(&key)) else {
            continue;
        };
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let capacity: u64 = value
            .parse()
            .map_err(|_| format!("Node {name}: annotation {key}={value:?} is not a byte count"))?;
        if bytes < capacity {
            return Ok(None);
        }
        seen.push(format!(
            "node {name} has {} free storage",
            pretty_bytes(capacity)
        ));
    }
    // Sorted, so the same situation is always the same note.
    seen.sort();
    Ok(Some(format!(
        "Requested storage ({request}) is greater than available capacity on any node ({}).",
        seen.join(",")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(class: &str, request: &str, phase: &str) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": "data", "namespace": "ns"},
            "spec": {"storageClassName": class, "resources": {"requests": {"storage": request}}},
            "status": {"phase": phase},
        }))
        .unwrap()
    }

    fn node(name: &str, annotations: &[(&str, &str)]) -> Arc<Node> {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        Arc::new(n)
    }

    #[test]
    fn warns_when_no_node_has_room_and_lists_what_each_has() {
        let nodes = [
            node("b", &[("capacity.topolvm.io/vg1", "1073741824")]),
            node("a", &[("capacity.topolvm.io/vg1", "536870912")]),
            // No annotation for this class: not counted, not listed.
            node("c", &[("capacity.topolvm.io/other", "99999999999")]),
        ];
        let note = not_enough_capacity(&claim("lvms-vg1", "2Gi", "Pending"), &nodes)
            .unwrap()
            .unwrap();
        assert_eq!(
            note,
            "Requested storage (2Gi) is greater than available capacity on any node (node a has 512.0MiB free storage,node b has 1.0GiB free storage)."
        );
    }

    #[test]
    fn one_node_with_room_is_enough_and_equal_is_not() {
        let nodes = [node("a", &[("capacity.topolvm.io/vg1", "1073741824")])];
        assert_eq!(
            not_enough_capacity(&claim("lvms-vg1", "512Mi", "Pending"), &nodes),
            Ok(None)
        );
        // LVMS: the request must be strictly less than the capacity.
        assert!(
            not_enough_capacity(&claim("lvms-vg1", "1Gi", "Pending"), &nodes)
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn only_pending_claims_of_lvms_classes_count() {
        let nodes = [node("a", &[("capacity.topolvm.io/vg1", "1")])];
        for c in [
            claim("lvms-vg1", "2Gi", "Bound"),
            claim("standard", "2Gi", "Pending"),
            claim("lvms-", "2Gi", "Pending"),
        ] {
            assert_eq!(not_enough_capacity(&c, &nodes), Ok(None));
        }
    }

    #[test]
    fn an_unreadable_annotation_is_an_error_not_a_full_node() {
        let nodes = [node("a", &[("capacity.topolvm.io/vg1", "lots")])];
        let err = not_enough_capacity(&claim("lvms-vg1", "2Gi", "Pending"), &nodes).unwrap_err();
        assert!(
            err.contains("Node a") && err.contains("capacity.topolvm.io/vg1"),
            "{err}"
        );
    }

    #[test]
    fn pretty_bytes_matches_lvms() {
        assert_eq!(pretty_bytes(0), "0.0B");
        assert_eq!(pretty_bytes(1536), "1.5KiB");
        assert_eq!(pretty_bytes(10 << 30), "10.0GiB");
    }
}
