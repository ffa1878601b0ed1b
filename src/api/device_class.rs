//! `spec.storage.deviceClasses[]` of an LVMCluster and the pieces an LVMVolumeGroup copies.
//! Field and JSON names follow LVMS `lvm.topolvm.io/v1alpha1` exactly.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelector;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::quantity::parse_quantity_bytes;

/// Chunk size used under the Static policy when `chunkSize` is absent (LVMS `ChunkSizeDefault`).
pub const CHUNK_SIZE_DEFAULT: u64 = 128 * 1024;
/// Metadata size used under the Static policy when `metadataSize` is absent.
pub const METADATA_SIZE_DEFAULT: u64 = 1024 * 1024 * 1024;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DeviceFilesystemType {
    #[default]
    #[serde(rename = "xfs")]
    Xfs,
    #[serde(rename = "ext4")]
    Ext4,
}

impl DeviceFilesystemType {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Xfs => "xfs",
            Self::Ext4 => "ext4",
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ChunkSizeCalculationPolicy {
    Host,
    #[default]
    Static,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum MetadataSizePolicy {
    #[default]
    Host,
    Static,
}

// No default on purpose: a schema default would be applied to LVMClusters stored by LVMS
// without the field (where it means Dynamic) every time they are read (decision 0002).
/// Static: only the devices found first; Dynamic: new devices join too. Unset means Dynamic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DeviceDiscoveryPolicySpec {
    Static,
    Dynamic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RaidType {
    Raid1,
    Raid4,
    Raid5,
    Raid6,
    Raid10,
}

impl RaidType {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Raid1 => "raid1",
            Self::Raid4 => "raid4",
            Self::Raid5 => "raid5",
            Self::Raid6 => "raid6",
            Self::Raid10 => "raid10",
        }
    }

    /// Devices a volume group of this level needs at least (LVMS `MinDeviceCount`).
    pub fn min_device_count(&self, mirrors: u32, stripes: Option<u32>) -> u32 {
        match self {
            Self::Raid1 => mirrors + 1,
            Self::Raid4 | Self::Raid5 => stripes.unwrap_or(2) + 1,
            Self::Raid6 => stripes.unwrap_or(3) + 2,
            Self::Raid10 => 2 * (mirrors + 1),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThinPoolConfig {
    /// Name of the thin pool inside the volume group.
    pub name: String,
    /// Percentage of the volume group's space used for the thin pool.
    #[serde(default = "default_size_percent")]
    #[schemars(range(min = 10, max = 100))]
    pub size_percent: i32,
    /// Factor by which thin volumes may over-provision the pool (1 = no over-provisioning).
    #[schemars(range(min = 1, max = 100))]
    pub overprovision_ratio: i32,
    #[serde(default)]
    pub chunk_size_calculation_policy: ChunkSizeCalculationPolicy,
    /// Static chunk size, 64Ki..1Gi; only with the Static policy (default 128Ki).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_size: Option<Quantity>,
    /// Static metadata size, 2Mi..16Gi; only with the Static policy (default 1Gi). Only grows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_size: Option<Quantity>,
    #[serde(default)]
    pub metadata_size_calculation_policy: MetadataSizePolicy,
    /// lvms: also bound the published capacity by the pool's real data and metadata use, so
    /// a pool whose volumes are fuller than the overprovision ratio assumes publishes less
    /// (only ever less than TopoLVM's formula). Unset or false: TopoLVM's formula alone, as
    /// LVMS publishes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_follows_usage: Option<bool>,
    /// lvms: grow the pool from the volume group's free space when its data or metadata use
    /// reaches a threshold (lvm2's `thin_pool_autoextend_*`, done by vg-manager as a journaled
    /// step with an Event). Unset: the pool keeps its `sizePercent` share, as in LVMS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_extend: Option<ThinPoolAutoExtend>,
}

/// When and by how much a thin pool grows by itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThinPoolAutoExtend {
    /// Data or metadata use, in percent, from which the pool (or its metadata) is extended.
    #[serde(default = "default_autoextend_threshold")]
    #[schemars(range(min = 50, max = 95))]
    pub threshold_percent: i32,
    /// How much it grows each time, in percent of its current size (capped by the volume
    /// group's free space).
    #[serde(default = "default_autoextend_percent")]
    #[schemars(range(min = 1, max = 100))]
    pub extend_percent: i32,
}

impl Default for ThinPoolAutoExtend {
    fn default() -> Self {
        ThinPoolAutoExtend {
            threshold_percent: default_autoextend_threshold(),
            extend_percent: default_autoextend_percent(),
        }
    }
}

fn default_autoextend_threshold() -> i32 {
    80
}

fn default_autoextend_percent() -> i32 {
    20
}

fn default_size_percent() -> i32 {
    90
}

impl ThinPoolConfig {
    /// The chunk size to pass to lvcreate, or None when the host decides (Host policy).
    pub fn effective_chunk_size(&self) -> Result<Option<u64>, super::quantity::QuantityError> {
        match self.chunk_size_calculation_policy {
            ChunkSizeCalculationPolicy::Host => Ok(None),
            ChunkSizeCalculationPolicy::Static => match &self.chunk_size {
                Some(q) => parse_quantity_bytes(&q.0).map(Some),
                None => Ok(Some(CHUNK_SIZE_DEFAULT)),
            },
        }
    }

    /// The pool metadata size to request, or None when lvm2 decides (Host policy).
    pub fn effective_metadata_size(&self) -> Result<Option<u64>, super::quantity::QuantityError> {
        match self.metadata_size_calculation_policy {
            MetadataSizePolicy::Host => Ok(None),
            MetadataSizePolicy::Static => match &self.metadata_size {
                Some(q) => parse_quantity_bytes(&q.0).map(Some),
                None => Ok(Some(METADATA_SIZE_DEFAULT)),
            },
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RaidConfig {
    #[serde(rename = "type")]
    pub raid_type: RaidType,
    /// Mirror copies (raid1/raid10 only); 1 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub mirrors: Option<i32>,
    /// Data stripes (raid4/5/6/10 only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2))]
    pub stripes: Option<i32>,
    /// Stripe chunk size, a power of two (raid4/5/6/10 only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stripe_size: Option<Quantity>,
}

impl RaidConfig {
    pub fn effective_mirrors(&self) -> u32 {
        // Negative mirrors are refused by the CRD (minimum 1): the default stands in.
        self.mirrors
            .and_then(|m| u32::try_from(m).ok())
            .unwrap_or(1)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceSelector {
    /// Device paths that must resolve on every selected node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Device paths of which at least one should resolve on every selected node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub optional_paths: Vec<String>,
    /// Wipe signatures on the selected devices once per node before use. Destroys data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_wipe_devices_and_destroy_all_data: Option<bool>,
}

impl DeviceSelector {
    pub fn has_paths(&self) -> bool {
        !self.paths.is_empty() || !self.optional_paths.is_empty()
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ReclaimPolicy {
    #[default]
    Delete,
    Retain,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum VolumeBindingMode {
    #[default]
    WaitForFirstConsumer,
    Immediate,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageClassOptions {
    #[serde(
        default = "default_reclaim_policy",
        skip_serializing_if = "Option::is_none"
    )]
    pub reclaim_policy: Option<ReclaimPolicy>,
    #[serde(
        default = "default_binding_mode",
        skip_serializing_if = "Option::is_none"
    )]
    pub volume_binding_mode: Option<VolumeBindingMode>,
    /// Extra StorageClass parameters; LVMS-owned keys are rejected. Immutable.
    #[serde(default)]
    #[schemars(length(max = 16))]
    pub additional_parameters: BTreeMap<String, String>,
    /// Extra StorageClass labels; the only mutable option.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(length(max = 16))]
    pub additional_labels: BTreeMap<String, String>,
}

fn default_reclaim_policy() -> Option<ReclaimPolicy> {
    Some(ReclaimPolicy::Delete)
}

fn default_binding_mode() -> Option<VolumeBindingMode> {
    Some(VolumeBindingMode::WaitForFirstConsumer)
}

impl Default for StorageClassOptions {
    fn default() -> Self {
        Self {
            reclaim_policy: default_reclaim_policy(),
            volume_binding_mode: default_binding_mode(),
            additional_parameters: BTreeMap::new(),
            additional_labels: BTreeMap::new(),
        }
    }
}

fn default_storage_class_options() -> Option<StorageClassOptions> {
    Some(StorageClassOptions::default())
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClass {
    /// Name of the class; also the volume group name and the lvmd device-class name.
    #[schemars(
        length(min = 1, max = 245),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_selector: Option<DeviceSelector>,
    /// Nodes that get this volume group; absent = every node whose taints are tolerated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<NodeSelector>,
    /// Thin pool settings; absent = thick provisioning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thin_pool_config: Option<ThinPoolConfig>,
    /// Native LVM RAID; excludes thinPoolConfig. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raid_config: Option<RaidConfig>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub default: bool,
    /// Filesystem for volumeMode Filesystem PVCs. Immutable.
    #[serde(default)]
    pub fstype: DeviceFilesystemType,
    /// Static: devices found at install time; Dynamic: keep adding new devices. Ignored with
    /// paths. Unset means Dynamic, as LVMS's vg-manager reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_discovery_policy: Option<DeviceDiscoveryPolicySpec>,
    #[serde(
        default = "default_storage_class_options",
        skip_serializing_if = "Option::is_none"
    )]
    pub storage_class_options: Option<StorageClassOptions>,
}

impl DeviceClass {
    pub fn has_explicit_paths(&self) -> bool {
        self.device_selector
            .as_ref()
            .is_some_and(DeviceSelector::has_paths)
    }

    pub fn is_thin(&self) -> bool {
        self.thin_pool_config.is_some()
    }

    /// The StorageClass / VolumeSnapshotClass name LVMS uses for this class.
    pub fn storage_class_name(&self) -> String {
        format!("lvms-{}", self.name)
    }
}
