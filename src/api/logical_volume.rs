//! `LogicalVolume` (topolvm.io/v1, cluster-scoped): TopoLVM's per-volume object. The CSI
//! controller writes it, the node's vg-manager realises it. `spec.nodeName` is a selectable
//! field (an addition to TopoLVM's CRD), so each vg-manager watches only its own node's.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const LOGICAL_VOLUME_FINALIZER: &str = "topolvm.io/logicalvolume";

#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "topolvm.io",
    version = "v1",
    kind = "LogicalVolume",
    plural = "logicalvolumes",
    status = "LogicalVolumeStatus",
    selectable = ".spec.nodeName"
)]
#[serde(rename_all = "camelCase")]
pub struct LogicalVolumeSpec {
    pub name: String,
    pub node_name: String,
    pub size: Quantity,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_class: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lvcreate_option_class: Option<String>,
    /// Source LogicalVolume name for snapshots and clones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// "ro" for a snapshot, "rw" for a restore or clone; only with `source`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_type: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LogicalVolumeStatus {
    /// The LV name on disk (TopoLVM uses the CR's uid).
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "volumeID")]
    pub volume_id: Option<String>,
    /// gRPC status code of the last failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_size: Option<Quantity>,
}
