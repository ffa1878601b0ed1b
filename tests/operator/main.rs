//! `lvms operator` end to end on a real kube-apiserver: the operator runs as a child process
//! (so crash tests can SIGKILL it), one scenario at a time (its cluster-scoped objects, such
//! as CSIDriver topolvm.io, are singletons on the API server).
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod crash;
mod deletion;
mod leadership;
mod lifecycle;
mod metrics;
mod snapshots;
mod supervision;
