//! Event reasons and fixed messages vg-manager emits (LVMS `vgmanager/controller.go`). Each is
//! sent to the node status, the LVMVolumeGroup and its owning LVMCluster.

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventReason {
    NoAvailableDevicesForVG,
    InconsistentLVs,
    VGCreateOrExtendFailed,
    ThinPoolCreateOrExtendFailed,
    DevicePathCheckFailed,
    RAIDHealthCheckFailed,
    DeviceRemovalFailed,
    ManualCleanupRequired,
    LVMDConfigMissing,
    LVMDConfigUpdated,
    LVMDConfigDeleted,
    VolumeGroupReady,
    DeviceRemoved,
}

impl EventReason {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::NoAvailableDevicesForVG => "NoAvailableDevicesForVG",
            Self::InconsistentLVs => "InconsistentLVs",
            Self::VGCreateOrExtendFailed => "VGCreateOrExtendFailed",
            Self::ThinPoolCreateOrExtendFailed => "ThinPoolCreateOrExtendFailed",
            Self::DevicePathCheckFailed => "DevicePathCheckFailed",
            Self::RAIDHealthCheckFailed => "RAIDHealthCheckFailed",
            Self::DeviceRemovalFailed => "DeviceRemovalFailed",
            Self::ManualCleanupRequired => "ManualCleanupRequired",
            Self::LVMDConfigMissing => "LVMDConfigMissing",
            Self::LVMDConfigUpdated => "LVMDConfigUpdated",
            Self::LVMDConfigDeleted => "LVMDConfigDeleted",
            Self::VolumeGroupReady => "VolumeGroupReady",
            Self::DeviceRemoved => "DeviceRemoved",
        }
    }

    /// Warnings are always sent; LVMS sends Normal events only at log verbosity >= 1.
    pub fn is_warning(&self) -> bool {
        !matches!(
            self,
            Self::LVMDConfigMissing
                | Self::LVMDConfigUpdated
                | Self::LVMDConfigDeleted
                | Self::VolumeGroupReady
                | Self::DeviceRemoved
        )
    }
}

/// Event `action` field LVMS uses for every vg-manager event.
pub const EVENT_ACTION: &str = "ReconcileVolumeGroup";

pub const MSG_VOLUME_GROUP_READY: &str =
    "all the available devices are attached to the volume group";
pub const MSG_LVMD_CONFIG_MISSING: &str =
    "lvmd config file doesn't exist, will attempt to create a fresh config";
pub const MSG_LVMD_CONFIG_UPDATED: &str = "updated lvmd config with new deviceClasses";
pub const MSG_LVMD_CONFIG_UPDATED_AFTER_REMOVAL: &str =
    "updated lvmd config after deviceClass was removed";
pub const MSG_LVMD_CONFIG_DELETED: &str = "removed lvmd config after last deviceClass was removed";

/// `DeviceRemoved` message; LVMS prints the Go slice, e.g. `[/dev/sdb /dev/sdc]`.
pub fn device_removed_message(pvs: &[String]) -> String {
    format!(
        "successfully removed [{}] device(s) from volume group",
        pvs.join(" ")
    )
}

/// LVMS's WarningEvent says "error", NormalEvent "update".
fn what(warning: bool) -> &'static str {
    if warning { "error" } else { "update" }
}

/// Message on the LVMVolumeGroup (`error on node <ns>/<node>: <err>` for warnings,
/// `update on node <ns>/<node>: <msg>` for normal events).
pub fn volume_group_event_message(
    warning: bool,
    namespace: &str,
    node: &str,
    message: &str,
) -> String {
    format!("{} on node {namespace}/{node}: {message}", what(warning))
}

/// Message on the owning LVMCluster (`... on node <ns>/<node> in volume group <ns>/<vg>: ...`).
pub fn cluster_event_message(
    warning: bool,
    namespace: &str,
    node: &str,
    vg: &str,
    message: &str,
) -> String {
    format!(
        "{} on node {namespace}/{node} in volume group {namespace}/{vg}: {message}",
        what(warning)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_and_types() {
        assert_eq!(
            EventReason::DevicePathCheckFailed.as_str(),
            "DevicePathCheckFailed"
        );
        assert!(EventReason::InconsistentLVs.is_warning());
        assert!(EventReason::ManualCleanupRequired.is_warning());
        assert!(!EventReason::VolumeGroupReady.is_warning());
        assert!(!EventReason::DeviceRemoved.is_warning());
    }

    #[test]
    fn messages_follow_lvms() {
        assert_eq!(
            device_removed_message(&["/dev/sdb".into(), "/dev/sdc".into()]),
            "successfully removed [/dev/sdb /dev/sdc] device(s) from volume group"
        );
        assert_eq!(
            volume_group_event_message(
                EventReason::NoAvailableDevicesForVG.is_warning(),
                "ns",
                "n1",
                "boom"
            ),
            "error on node ns/n1: boom"
        );
        assert_eq!(
            cluster_event_message(
                EventReason::VolumeGroupReady.is_warning(),
                "ns",
                "n1",
                "vg1",
                "ok"
            ),
            "update on node ns/n1 in volume group ns/vg1: ok"
        );
    }
}
