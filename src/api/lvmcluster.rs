//! `LVMCluster` (lvm.topolvm.io/v1alpha1): the one object a user creates.

use k8s_openapi::api::core::v1::Toleration;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::device_class::DeviceClass;
use super::node_status::VGStatus;

pub const GROUP: &str = "lvm.topolvm.io";
/// Finalizer the operator puts on the LVMCluster (same string as LVMS).
pub const LVMCLUSTER_FINALIZER: &str = "lvmcluster.topolvm.io";
/// Condition types.
pub const CONDITION_RESOURCES_AVAILABLE: &str = "ResourcesAvailable";
pub const CONDITION_VOLUME_GROUPS_READY: &str = "VolumeGroupsReady";

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "lvm.topolvm.io",
    version = "v1alpha1",
    kind = "LVMCluster",
    plural = "lvmclusters",
    namespaced,
    status = "LVMClusterStatus",
    shortname = "lvmc",
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.state"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct LVMClusterSpec {
    /// Tolerations for the vg-manager DaemonSet; also decide which nodes are valid.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    #[serde(default)]
    pub storage: Storage,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Storage {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_classes: Vec<DeviceClass>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum LVMStateType {
    Progressing,
    Ready,
    Failed,
    Degraded,
    #[default]
    Unknown,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LVMClusterStatus {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ready: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<LVMStateType>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_class_statuses: Vec<DeviceClassStatus>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClassStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_status: Vec<NodeStatus>,
}

/// One node's view of a device class: the node name plus that node's VGStatus, inlined.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node: String,
    #[serde(flatten)]
    pub vg_status: VGStatus,
}
