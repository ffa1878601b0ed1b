//! vg-manager end to end: `lvms operator` + one `lvms vg-manager` per simulated node on real
//! lvm2 and loop devices (activation off: no device-mapper here), on a real kube-apiserver.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod crash_safety;
mod e2e;
mod postmortem;
mod upgrade;
