//! TopoLVM's PVC reconciler, as two pure decisions: the legacy claim finalizers nothing else
//! removes any more, and the nudge that makes kubelet grow a filesystem now rather than at its
//! next Pod resync (a minute or more): a Pod using a claim whose `FileSystemResizePending`
//! became True gets the annotation `topolvm.io/last-resizefs-requested-at`, and kubelet's
//! volume manager looks at an updated Pod at once.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;

/// The claim finalizers older TopoLVM releases set (`topolvm.io/pvc`, and before the rename
/// `topolvm.cybozu.com/pvc`); TopoLVM removes them on sight, and so does lvms.
pub const LEGACY_PVC_FINALIZERS: [&str; 2] = ["topolvm.io/pvc", "topolvm.cybozu.com/pvc"];

/// The Pod annotation kubelet is nudged with (RFC 3339 with nanoseconds, as TopoLVM writes it).
pub const LAST_RESIZEFS_REQUESTED_AT: &str = "topolvm.io/last-resizefs-requested-at";

/// The legacy finalizers `pvc` still carries.
pub fn legacy_finalizers(pvc: &PersistentVolumeClaim) -> Vec<String> {
    pvc.metadata
        .finalizers
        .iter()
        .flatten()
        .filter(|f| LEGACY_PVC_FINALIZERS.contains(&f.as_str()))
        .cloned()
        .collect()
}

/// When the claim's `FileSystemResizePending` condition became True, if it is True now, the
/// claim is not being deleted, and its StorageClass is one of `driver_classes` (those whose
/// provisioner is `topolvm.io`).
pub fn resize_pending_since(
    pvc: &PersistentVolumeClaim,
    driver_classes: &BTreeSet<String>,
) -> Option<Timestamp> {
    if pvc.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let class = pvc.spec.as_ref()?.storage_class_name.as_ref()?;
    if !driver_classes.contains(class) {
        return None;
    }
    pvc.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "FileSystemResizePending" && c.status == "True")
        // A condition without a transition time is as old as can be: every Pod is nudged once.
        .map(|c| {
            c.last_transition_time
                .as_ref()
                .map_or(Timestamp::UNIX_EPOCH, |t| t.0)
        })
}

/// The Pods of `pods` (the claim's namespace) that mount `claim` and were not nudged since
/// `since`: no annotation, one that does not parse (someone wrote it wrong: write it again, as
/// TopoLVM does), or one not after `since`.
pub fn pods_to_nudge<'a>(claim: &str, since: Timestamp, pods: &'a [Pod]) -> Vec<&'a Pod> {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.spec
                .iter()
                .flat_map(|s| s.volumes.iter().flatten())
                .any(|v| {
                    v.persistent_volume_claim
                        .as_ref()
                        .is_some_and(|c| c.claim_name == claim)
                })
        })
        .filter(|p| {
            let last = p
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(LAST_RESIZEFS_REQUESTED_AT))
                .and_then(|v| v.parse::<Timestamp>().ok());
            last.is_none_or(|t| t <= since)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(class: &str, pending_since: Option<&str>) -> PersistentVolumeClaim {
        let conditions = pending_since.map(|t| {
            json!([{"type": "FileSystemResizePending", "status": "True", "lastTransitionTime": t}])
        });
        serde_json::from_value(json!({
            "metadata": {"name": "data", "namespace": "apps",
                         "finalizers": ["topolvm.io/pvc", "kubernetes.io/pvc-protection", "topolvm.cybozu.com/pvc"]},
            "spec": {"storageClassName": class},
            "status": {"phase": "Bound", "conditions": conditions.unwrap_or(json!([]))},
        }))
        .unwrap()
    }

    fn pod(name: &str, claim: &str, annotation: Option<&str>) -> Pod {
        let annotations = annotation.map_or(json!({}), |a| json!({LAST_RESIZEFS_REQUESTED_AT: a}));
        serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"containers": [], "volumes": [
                {"name": "v", "persistentVolumeClaim": {"claimName": claim}}]},
        }))
        .unwrap()
    }

    #[test]
    fn only_the_legacy_finalizers_are_removed() {
        assert_eq!(
            legacy_finalizers(&claim("lvms-vg1", None)),
            ["topolvm.io/pvc", "topolvm.cybozu.com/pvc"]
        );
    }

    #[test]
    fn a_pending_resize_on_a_driver_class_is_seen_with_its_time() {
        let ours: BTreeSet<String> = ["lvms-vg1".to_string()].into();
        let t = "2026-11-28T10:00:00Z";
        assert_eq!(
            resize_pending_since(&claim("lvms-vg1", Some(t)), &ours),
            Some(t.parse().unwrap())
        );
        assert_eq!(resize_pending_since(&claim("other", Some(t)), &ours), None);
        assert_eq!(resize_pending_since(&claim("lvms-vg1", None), &ours), None);
    }

    #[test]
    fn pods_not_nudged_since_the_condition_are_nudged_once() {
        let since: Timestamp = "2026-11-28T10:00:00Z".parse().unwrap();
        let pods = [
            pod("fresh", "data", None),
            pod("before", "data", Some("2026-11-28T09:59:59.999999999Z")),
            pod("after", "data", Some("2026-11-28T10:00:00.000000001Z")),
            pod("garbage", "data", Some("yesterday")),
            pod("other-claim", "logs", None),
        ];
        let names: Vec<_> = pods_to_nudge("data", since, &pods)
            .iter()
            .filter_map(|p| p.metadata.name.as_deref())
            .collect();
        assert_eq!(names, ["fresh", "before", "garbage"]);
    }
}
