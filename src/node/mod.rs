//! The pure half of vg-manager: what lvms decides on a node from lsblk, lvm2 reports and the
//! LVMVolumeGroup spec, without running anything. The executor runs the commands built here
//! (adding the nsenter prefix and lvm's `--config`) and feeds their output back in.

pub mod actions;
pub mod allowlist;
pub mod commands;
pub mod discovery;
pub mod events;
pub mod filter;
pub mod gate;
pub mod gauges;
pub mod group_plan;
pub mod lsblk;
pub mod lvmd_config;
pub mod replay;
pub mod report;
pub mod resolve;
pub mod teardown;
pub mod thin;
pub mod validate;
pub mod vg_status;
pub mod volume_actions;
pub mod volume_capacity;
pub mod volume_commands;
pub mod volume_plan;
pub mod volume_replay;
pub mod volume_space;
pub mod volume_view;
pub mod wipe;

/// A captured lvm2/util-linux output from tests/fixtures/lvm2 (unit tests only).
#[cfg(test)]
pub(crate) fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/lvm2/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}
