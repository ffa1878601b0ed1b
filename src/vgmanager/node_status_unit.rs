//! The node-status projector: `LVMVolumeGroupNodeStatus/<node>.spec.nodeStatus` = this node's
//! VGStatus entries, applied (field manager `vg-manager`) only when they change.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use lvms_actors::{Pass, Steps, Unit, UnitError};
use lvms_journal::{Intent, ObjectRef, PublishKind, Published};
use serde_json::json;

use super::node_report::NodeReport;
use crate::api::{LVMVolumeGroupNodeStatus, VGStatus};
use crate::kube::apply::unit_error;

pub const UNIT: &str = "node-status";
pub const FIELD_MANAGER: &str = "vg-manager";

pub struct NodeStatusUnit {
    pub client: Client,
    pub namespace: String,
    pub node: String,
    pub report: NodeReport,
    last: Mutex<Option<Vec<VGStatus>>>,
}

impl NodeStatusUnit {
    pub fn new(client: Client, namespace: String, node: String, report: NodeReport) -> Self {
        NodeStatusUnit {
            client,
            namespace,
            node,
            report,
            last: Mutex::new(None),
        }
    }
}

impl Unit for NodeStatusUnit {
    fn name(&self) -> &str {
        UNIT
    }

    async fn reconcile(&self, steps: &Steps) -> Result<Pass, UnitError> {
        let entries = self.report.snapshot();
        if self.last.lock().ok().and_then(|l| l.clone()).as_ref() == Some(&entries) {
            return Ok(Pass {
                summary: format!("{} volume group(s) reported", entries.len()),
                requeue_after: None,
            });
        }
        let api: Api<LVMVolumeGroupNodeStatus> =
            Api::namespaced(self.client.clone(), &self.namespace);
        let body = json!({
            "apiVersion": "lvm.topolvm.io/v1alpha1", "kind": "LVMVolumeGroupNodeStatus",
            "metadata": {"name": self.node, "namespace": self.namespace},
            "spec": {"nodeStatus": entries},
        });
        let written = api
            .patch(
                &self.node,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await
            .map_err(|e| unit_error(&format!("LVMVolumeGroupNodeStatus {}", self.node), e))?;
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
                    object: Some(ObjectRef {
                        kind: "LVMVolumeGroupNodeStatus".into(),
                        namespace: self.namespace.clone(),
                        name: self.node.clone(),
                        uid: written.metadata.uid.clone().unwrap_or_default(),
                        generation: 0,
                    }),
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
            *l = Some(entries.clone());
        }
        Ok(Pass {
            summary: format!("{} volume group(s) reported", entries.len()),
            requeue_after: None,
        })
    }

    async fn replay(&self, _i: &Intent, _s: &Steps) -> Result<BTreeMap<String, String>, UnitError> {
        Ok(BTreeMap::from([(
            "replay".into(),
            "status is rewritten".into(),
        )]))
    }
}

/// Keep the shared pointer type simple for the wiring.
pub type SharedNodeStatusUnit = Arc<NodeStatusUnit>;
