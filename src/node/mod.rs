//! The pure half of vg-manager: what lvms decides on a node from lsblk, lvm2 reports and the
//! LVMVolumeGroup or LogicalVolume spec, without running anything. The executor runs the
//! commands built here (adding the nsenter prefix and lvm's `--config`) and feeds their output
//! back in.
//!
//! Here, what both halves read and write: lvm2's reports, lsblk's, lvm2 argv, lvmd.yaml.
//! [`vg`] decides volume groups (devices, thin pools, teardown); [`volume`] decides logical
//! volumes (plans, capacity, gates and group holds).

pub mod audit;
pub mod commands;
pub mod lsblk;
pub mod lvmd_config;
pub mod report;
pub mod vg;
pub mod volume;

/// A captured lvm2/util-linux output from tests/fixtures/lvm2 (unit tests only).
#[cfg(test)]
pub(crate) fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/lvm2/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}
