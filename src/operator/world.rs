//! The operator's view of the cluster: a read-only snapshot of the reflector caches that the
//! pure `desired` functions and the status fold take as input.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};

use crate::api::LVMVolumeGroupNodeStatus;

pub use crate::kube::discovery::Capabilities;

/// Settings of this operator process that shape the objects it writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OperatorSettings {
    /// The operator namespace (`NAMESPACE`).
    pub namespace: String,
    /// Image for the vg-manager DaemonSet (the operator's own image by default).
    pub image: String,
    /// Command the DaemonSet runs, e.g. `["/usr/bin/lvms", "vg-manager"]`.
    pub vg_manager_command: Vec<String>,
    /// The vg-manager Pods' PriorityClass.
    pub vg_manager_priority_class: PriorityClassChoice,
    /// How long a deleted or out-of-service Node must have been not Ready before its volumes
    /// are written off (`--dead-node-grace`).
    pub dead_node_grace: std::time::Duration,
}

/// Which PriorityClass the vg-manager Pods name (`--vg-manager-priority-class`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PriorityClassChoice {
    /// LVMS's `openshift-user-critical` where it exists (OpenShift, told by its
    /// SecurityContextConstraints API), none elsewhere: a Pod naming a PriorityClass that does
    /// not exist is refused by the API server's admission, so no vg-manager would ever run.
    #[default]
    Auto,
    /// No PriorityClass.
    None,
    /// This one (it must exist).
    Named(String),
}

impl std::str::FromStr for PriorityClassChoice {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.trim() {
            "auto" => PriorityClassChoice::Auto,
            "" | "none" => PriorityClassChoice::None,
            name => PriorityClassChoice::Named(name.to_owned()),
        })
    }
}

/// Snapshot of the caches. Cheap to build: every object is an `Arc` shared with the store.
#[derive(Clone, Debug, Default)]
pub struct World {
    pub settings: OperatorSettings,
    pub capabilities: Capabilities,
    pub nodes: Vec<Arc<Node>>,
    pub node_statuses: Vec<Arc<LVMVolumeGroupNodeStatus>>,
    /// Every StorageClass in the cluster (the default-class rule looks at all of them).
    pub storage_classes: Vec<Arc<StorageClass>>,
    pub csi_nodes: Vec<Arc<CSINode>>,
}
