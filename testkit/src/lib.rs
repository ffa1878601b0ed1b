//! The kit every integration test binary (tests/) and benchmark (benches/) of lvms shares:
//!
//! - [`env`]: one real control plane per test process, and a namespace per test;
//! - [`scenario`]: one scenario at a time, with its `lvms operator` / `lvms vg-manager`
//!   processes, journals and LVMCluster helpers;
//! - [`kubelet`]: the one stand-in for kubelet (and the node lifecycle controller) where no
//!   kubelet runs: Nodes and CSINode registrations, the plugin watcher's registration spoken as
//!   kubelet speaks it, and kubelet's volume calls (`lvms-dev kubelet`);
//! - [`dev`]: developer tooling for the tests, the demo and `lvms-dev`: a real control plane on
//!   loopback and its certificates, Jaeger, the CSI peers, the operator launcher, CRDs;
//! - [`cleanup`]: removing an earlier scenario's cluster-scoped leftovers;
//! - [`disks`]: loop-device disks and lvm2 queries (root, real lvm2);
//! - [`guest`]: the real-kernel tier, a QEMU guest with device-mapper running a script;
//! - [`realnode`]: a real Kubernetes node (kubelet, kube-proxy, containerd) in a QEMU guest,
//!   running lvms as Pods from its own images;
//! - [`fixtures`]: builders for the objects tests and benches create;
//! - [`snapshots`]: the VolumeSnapshot API and the upstream snapshot/provisioning controllers;
//! - [`wait`], [`events`], [`journal`]: polling, Event and journal assertions;
//! - [`process`]: the `lvms` binary and log tails; [`rng`]: seeded randomness for soaks;
//!   [`bench`]: the `cargo bench` entry and knobs.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

pub mod bench;
pub mod cleanup;
pub mod consistency;
pub mod dev;
pub mod disks;
pub mod env;
pub mod events;
pub mod fixtures;
pub mod guest;
pub mod journal;
pub mod kubelet;
pub mod lvms_go;
pub mod metrics;
pub mod process;
pub mod realnode;
pub mod rng;
pub mod scenario;
pub mod snapshots;
pub mod wait;

pub use env::{TestNs, client, env};
pub use scenario::Scenario;
pub use wait::eventually;
