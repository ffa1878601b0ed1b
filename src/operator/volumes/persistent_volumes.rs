//! LVMS's PV helper (`internal/controllers/persistent-volume`), as a pure decision: a PV of an
//! lvms StorageClass whose claim reference was removed is no longer managed (a Warning says
//! so), and its node, from the CSI topology, is copied into the `kubernetes.io/hostname` label.

use k8s_openapi::api::core::v1::PersistentVolume;

use super::{HOSTNAME_LABEL, STORAGE_CLASS_PREFIX};
use crate::api::topolvm::TOPOLOGY_NODE_KEY;

pub const REASON_CLAIM_REFERENCE_REMOVED: &str = "ClaimReferenceRemoved";
/// LVMS's text, word for word (its users' alerts and tests match on it).
pub const MESSAGE_CLAIM_REFERENCE_REMOVED: &str = "Claim reference has been removed. This PV is no longer dynamically managed by LVM Storage and will need to be cleaned up manually.";

/// What the helper has to do about one PV.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PvFindings {
    /// The claim reference is gone: warn.
    pub claim_reference_removed: bool,
    /// The hostname label to set (the node the volume lives on), when it differs.
    pub hostname: Option<String>,
}

impl PvFindings {
    pub fn is_empty(&self) -> bool {
        !self.claim_reference_removed && self.hostname.is_none()
    }
}

/// The node in the PV's required node affinity (`topology.topolvm.io/node In [node]`).
fn topology_node(pv: &PersistentVolume) -> Option<&str> {
    let required = pv
        .spec
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required
        .as_ref()?;
    required
        .node_selector_terms
        .iter()
        .flat_map(|t| t.match_expressions.iter().flatten())
        .filter(|e| e.key == TOPOLOGY_NODE_KEY && e.operator == "In")
        .find_map(|e| e.values.as_ref()?.first().map(String::as_str))
}

/// None: not an lvms PV, or one being deleted (LVMS leaves those alone).
pub fn findings(pv: &PersistentVolume) -> Option<PvFindings> {
    let spec = pv.spec.as_ref()?;
    let class = spec.storage_class_name.as_deref().unwrap_or_default();
    if pv.metadata.deletion_timestamp.is_some() || !class.starts_with(STORAGE_CLASS_PREFIX) {
        return None;
    }
    let labelled = pv
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(HOSTNAME_LABEL))
        .map(String::as_str);
    let hostname = topology_node(pv)
        .filter(|node| labelled != Some(*node))
        .map(str::to_string);
    Some(PvFindings {
        claim_reference_removed: spec.claim_ref.is_none(),
        hostname,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pv(v: serde_json::Value) -> PersistentVolume {
        serde_json::from_value(v).unwrap()
    }

    fn bound(class: &str, node: &str) -> serde_json::Value {
        json!({
            "metadata": {"name": "pvc-1"},
            "spec": {
                "storageClassName": class,
                "claimRef": {"namespace": "ns", "name": "data"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "other", "operator": "In", "values": ["x"]},
                    {"key": TOPOLOGY_NODE_KEY, "operator": "In", "values": [node]},
                ]}]}},
            },
        })
    }

    #[test]
    fn copies_the_topology_node_into_the_hostname_label_once() {
        let f = findings(&pv(bound("lvms-vg1", "worker-0"))).unwrap();
        assert_eq!(f.hostname.as_deref(), Some("worker-0"));
        assert!(!f.claim_reference_removed);
        let mut labelled = bound("lvms-vg1", "worker-0");
        labelled["metadata"]["labels"] = json!({HOSTNAME_LABEL: "worker-0"});
        assert!(findings(&pv(labelled)).unwrap().is_empty());
        // A stale label is corrected.
        let mut stale = bound("lvms-vg1", "worker-1");
        stale["metadata"]["labels"] = json!({HOSTNAME_LABEL: "worker-0"});
        assert_eq!(
            findings(&pv(stale)).unwrap().hostname.as_deref(),
            Some("worker-1")
        );
    }

    #[test]
    fn a_missing_claim_reference_is_reported() {
        let mut v = bound("lvms-vg1", "worker-0");
        v["spec"]["claimRef"] = serde_json::Value::Null;
        assert!(findings(&pv(v)).unwrap().claim_reference_removed);
    }

    #[test]
    fn other_classes_and_deleted_pvs_are_left_alone() {
        let mut v = bound("standard", "worker-0");
        v["spec"]["claimRef"] = serde_json::Value::Null;
        assert_eq!(findings(&pv(v)), None);
        let mut deleting = bound("lvms-vg1", "worker-0");
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        assert_eq!(findings(&pv(deleting)), None);
        // No topology (a PV made by hand): nothing to label, and no index panic on empty values.
        let mut bare = bound("lvms-vg1", "worker-0");
        bare["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][1]["values"] =
            json!([]);
        assert_eq!(findings(&pv(bare)).unwrap().hostname, None);
    }
}
