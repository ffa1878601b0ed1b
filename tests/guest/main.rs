//! The real-kernel tier: what needs device-mapper (thin pools, activation, mounts) runs in a
//! QEMU guest booting Debian's cloud kernel (`deploy/dev/build-guest.sh`, `testkit::guest`),
//! while the control plane and the operator run on the host; the guest reaches the test's
//! kube-apiserver through one loopback forward and nothing else.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod harness;
mod node;
mod raid;
mod thick;
mod thin;
mod wipe;
