//! The CSI driver on the host tier: `lvms operator` serving Identity + Controller on its
//! socket, `lvms vg-manager` realising LogicalVolumes on real lvm2 and loop devices
//! (activation off: thick volumes; thin ones run on the real-kernel tier), a real
//! kube-apiserver.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod audit;
mod boundary;
mod common;
mod crash;
mod dead_node;
mod group;
mod helpers;
mod liveness;
mod orphan_soak;
mod provisioning;
mod pvc;
mod registration;
mod sanity;
mod soak;
mod stats;
