//! `LVMVolumeGroup` (lvm.topolvm.io/v1alpha1): one per device class, written by the operator.

use k8s_openapi::api::core::v1::NodeSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::device_class::{DeviceDiscoveryPolicySpec, DeviceSelector, RaidConfig, ThinPoolConfig};

/// Prefix of the per-node finalizer vg-manager puts on an LVMVolumeGroup.
pub const NODE_CLEANUP_FINALIZER_PREFIX: &str = "cleanup.vgmanager.node.topolvm.io/";

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "lvm.topolvm.io",
    version = "v1alpha1",
    kind = "LVMVolumeGroup",
    plural = "lvmvolumegroups",
    namespaced,
    status = "LVMVolumeGroupStatus",
    shortname = "lvmvg"
)]
#[serde(rename_all = "camelCase")]
pub struct LVMVolumeGroupSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_selector: Option<DeviceSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<NodeSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thin_pool_config: Option<ThinPoolConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raid_config: Option<RaidConfig>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub default: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_discovery_policy: Option<DeviceDiscoveryPolicySpec>,
}

/// LVMS keeps this empty; per-node state lives in LVMVolumeGroupNodeStatus.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LVMVolumeGroupStatus {}
