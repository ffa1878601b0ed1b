//! vg-manager end to end: `lvms operator` + one `lvms vg-manager` per simulated node on real
//! lvm2 and loop devices (activation off: no device-mapper here), on a real kube-apiserver.

mod crash_safety;
mod e2e;
