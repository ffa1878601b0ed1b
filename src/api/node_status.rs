//! `LVMVolumeGroupNodeStatus` (lvm.topolvm.io/v1alpha1): one per node, named after it; its data
//! lives in `spec.nodeStatus[]` (as in LVMS), one VGStatus per volume group.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::device_class::RaidType;

/// Finalizer the operator puts on each node status object.
pub const NODE_STATUS_FINALIZER: &str = "delete-protection.lvm.openshift.io";

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "lvm.topolvm.io",
    version = "v1alpha1",
    kind = "LVMVolumeGroupNodeStatus",
    plural = "lvmvolumegroupnodestatuses",
    namespaced,
    status = "LVMVolumeGroupNodeStatusStatus",
    shortname = "lvmvgns"
)]
pub struct LVMVolumeGroupNodeStatusSpec {
    #[serde(rename = "nodeStatus", default, skip_serializing_if = "Vec::is_empty")]
    pub lvm_vg_status: Vec<VGStatus>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LVMVolumeGroupNodeStatusStatus {}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum VGStatusType {
    #[default]
    Progressing,
    Ready,
    Failed,
    Degraded,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DeviceDiscoveryPolicyStatus {
    Preconfigured,
    RuntimeDynamic,
    #[default]
    RuntimeStatic,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VGStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<VGStatusType>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded: Vec<ExcludedDevice>,
    #[serde(default)]
    pub device_discovery_policy: DeviceDiscoveryPolicyStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raid_status: Option<RaidStatus>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ExcludedDevice {
    pub name: String,
    pub reasons: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RaidHealthStatus {
    Healthy,
    Degraded,
    Failed,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RaidStatus {
    pub status: RaidHealthStatus,
    #[serde(default)]
    pub member_count: i32,
    #[serde(default)]
    pub degraded_member_count: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_sync_percent: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lv_health: Vec<RaidLvHealth>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RaidLvHealth {
    pub name: String,
    pub raid_type: RaidType,
    pub sync_percent: i32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub health_status: String,
}
