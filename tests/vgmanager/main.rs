//! vg-manager end to end: `lvms operator` + one `lvms vg-manager` per simulated node on real
//! lvm2 and loop devices (activation off: no device-mapper here), on a real kube-apiserver.

#[path = "../acceptance/support.rs"]
#[allow(dead_code)]
mod support;

#[path = "../operator/common.rs"]
#[allow(dead_code)]
mod common;

mod crash_safety;
mod disks;
mod e2e;
