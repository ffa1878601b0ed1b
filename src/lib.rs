//! lvms: an LVM storage operator for Kubernetes, drop-in compatible with LVMS.

pub mod api;
pub mod cli;
pub mod csi;
pub mod explain;
pub mod kube;
pub mod node;
pub mod objects;
pub mod operator;
pub mod runtime;
pub mod telemetry;
pub mod vgmanager;
