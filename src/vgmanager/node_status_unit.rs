//! The node-status projector: `LVMVolumeGroupNodeStatus/<node>.spec.nodeStatus` = this node's
//! VGStatus entries, written only when they change.
//!
//! The operator creates and deletes the node status; vg-manager only ever updates the one it
//! sees. Its write is a merge patch (which fails on absence instead of creating, as a
//! server-side apply would) pinned to the object's UID, so a vg-manager restarted during
//! teardown cannot bring a deleted node status back, nor write into a newer one it has not
//! seen yet.

use std::sync::{Arc, Mutex};

use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::Store;
use lvms_actors::{Done, Pass, Replayed, Steps, Unit, UnitError};
use lvms_journal::{Intent, PublishKind, Published};
use serde_json::json;

use super::node_report::NodeReport;
use crate::api::{LVMVolumeGroupNodeStatus, VGStatus};
use crate::kube::apply::unit_error;
use crate::objects::object_ref;

pub const UNIT: &str = "node-status";
pub const FIELD_MANAGER: &str = "vg-manager";

pub struct NodeStatusUnit {
    pub client: Client,
    pub namespace: String,
    pub node: String,
    pub report: NodeReport,
    /// This node's status as the operator created it (a watch on that one name).
    node_statuses: Store<LVMVolumeGroupNodeStatus>,
    /// (uid, entries) last written: a recreated node status (new uid) is written again.
    last: Mutex<Option<(String, Vec<VGStatus>)>>,
}

/// What to do with the node status, decided from the cache alone.
#[derive(Debug, PartialEq, Eq)]
pub enum Write {
    /// The operator has not created it (or has deleted it): nothing to write into.
    Absent,
    /// It already shows these entries (we wrote them to this very object).
    UpToDate,
    /// Merge these entries into the object with this uid.
    Patch { uid: String },
}

pub fn decide(
    current: Option<&LVMVolumeGroupNodeStatus>,
    last: Option<&(String, Vec<VGStatus>)>,
    entries: &[VGStatus],
) -> Write {
    let Some(ns) = current else {
        return Write::Absent;
    };
    let Some(uid) = ns.metadata.uid.clone() else {
        return Write::Absent;
    };
    if ns.metadata.deletion_timestamp.is_some() {
        // Being torn down by the operator: leave it be.
        return Write::Absent;
    }
    match last {
        Some((u, e)) if *u == uid && e.as_slice() == entries => Write::UpToDate,
        _ => Write::Patch { uid },
    }
}

impl NodeStatusUnit {
    pub fn new(
        client: Client,
        namespace: String,
        node: String,
        report: NodeReport,
        node_statuses: Store<LVMVolumeGroupNodeStatus>,
    ) -> Self {
        NodeStatusUnit {
            client,
            namespace,
            node,
            report,
            node_statuses,
            last: Mutex::new(None),
        }
    }

    fn current(&self) -> Option<Arc<LVMVolumeGroupNodeStatus>> {
        self.node_statuses
            .state()
            .into_iter()
            .find(|n| n.metadata.name.as_deref() == Some(self.node.as_str()))
    }
}

impl Unit for NodeStatusUnit {
    fn name(&self) -> &str {
        UNIT
    }

    async fn reconcile(&self, steps: &Steps) -> Result<Pass, UnitError> {
        let entries = self.report.snapshot();
        let reported = Pass {
            summary: format!("{} volume group(s) reported", entries.len()),
            requeue_after: None,
        };
        let current = self.current();
        // Only a write-skipping memo: unknown (poisoned) means write again, never skip.
        let last = self.last.lock().ok().and_then(|l| l.clone());
        // This life's first write waits until every volume group run here has reported: until
        // then the report is what it has not seen yet, and writing it would wipe what the
        // node status says (a restart, or a swap from LVMS, showed no volume groups).
        if last.is_none()
            && let Err(waiting) = self.report.complete()
        {
            return Ok(Pass {
                summary: format!("waiting for {waiting} to report before the first write"),
                requeue_after: None,
            });
        }
        let uid = match decide(current.as_deref(), last.as_ref(), &entries) {
            Write::UpToDate => return Ok(reported),
            // The watch on this node's status wakes us when the operator creates it.
            Write::Absent => {
                return Ok(Pass {
                    summary: "no node status to report into yet (the operator creates it)".into(),
                    requeue_after: None,
                });
            }
            Write::Patch { uid } => uid,
        };
        let api: Api<LVMVolumeGroupNodeStatus> =
            Api::namespaced(self.client.clone(), &self.namespace);
        // The uid makes the patch fail on any other object of this name (and a merge patch
        // never creates): the operator's deletion stays a deletion.
        let body = json!({
            "metadata": {"uid": uid},
            "spec": {"nodeStatus": entries},
        });
        let written = match api
            .patch(
                &self.node,
                &PatchParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..Default::default()
                },
                &Patch::Merge(&body),
            )
            .await
        {
            Ok(w) => w,
            Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409 | 422) => {
                // Deleted, or replaced by a newer object we have not seen yet: the watch
                // brings the change and wakes us.
                tracing::info!(node = %self.node, code = s.code, message = %s.message, "node status gone or replaced; not written");
                return Ok(Pass {
                    summary: format!("node status {} gone or replaced; not written", self.node),
                    requeue_after: None,
                });
            }
            Err(e) => {
                return Err(unit_error(
                    &format!("LVMVolumeGroupNodeStatus {}", self.node),
                    e,
                ));
            }
        };
        let summary = entries
            .iter()
            .map(|e| format!("{}={:?}", e.name, e.status))
            .collect::<Vec<_>>()
            .join(" ");
        steps
            .journal()
            .append_published(
                Published {
                    unit: UNIT.into(),
                    object: Some(object_ref(&written)),
                    kind: PublishKind::Status,
                    dedupe_key: format!("node-status/{}", self.node),
                    source_seq: steps
                        .journal()
                        .next_seq()
                        .map_err(UnitError::journal)?
                        .saturating_sub(1),
                    count: 1,
                    summary,
                },
                steps.trace(),
            )
            .map_err(UnitError::journal)?;
        if let Ok(mut l) = self.last.lock() {
            *l = Some((uid, entries));
        }
        Ok(reported)
    }

    async fn replay(&self, _i: &Intent, _s: &Steps) -> Result<Done, UnitError> {
        // The status is rewritten by every pass that finds it stale.
        Ok(Done::replayed(Replayed::Rechecked))
    }
}

/// Keep the shared pointer type simple for the wiring.
pub type SharedNodeStatusUnit = Arc<NodeStatusUnit>;

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn status(uid: &str, deleting: bool) -> LVMVolumeGroupNodeStatus {
        LVMVolumeGroupNodeStatus {
            metadata: ObjectMeta {
                name: Some("node-a".into()),
                uid: Some(uid.into()),
                deletion_timestamp: deleting
                    .then_some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
                ..Default::default()
            },
            spec: Default::default(),
            status: None,
        }
    }

    fn entry(name: &str) -> VGStatus {
        VGStatus {
            name: name.into(),
            ..Default::default()
        }
    }

    #[test]
    fn never_writes_what_the_operator_has_not_created_or_is_deleting() {
        assert_eq!(decide(None, None, &[entry("vg1")]), Write::Absent);
        assert_eq!(decide(None, None, &[]), Write::Absent);
        assert_eq!(
            decide(Some(&status("u1", true)), None, &[entry("vg1")]),
            Write::Absent
        );
    }

    #[test]
    fn writes_once_per_object_and_entries() {
        let e = vec![entry("vg1")];
        let ns = status("u1", false);
        assert_eq!(
            decide(Some(&ns), None, &e),
            Write::Patch { uid: "u1".into() }
        );
        let last = ("u1".to_string(), e.clone());
        assert_eq!(decide(Some(&ns), Some(&last), &e), Write::UpToDate);
        assert_eq!(
            decide(Some(&ns), Some(&last), &[]),
            Write::Patch { uid: "u1".into() }
        );
        // Recreated by the operator (new uid): written again, same entries or not.
        assert_eq!(
            decide(Some(&status("u2", false)), Some(&last), &e),
            Write::Patch { uid: "u2".into() }
        );
    }
}
