//! Acceptance tests against a real kube-apiserver + etcd + kube-controller-manager.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod adopt;
mod crds;
mod gc;
mod harness;
mod validation;
