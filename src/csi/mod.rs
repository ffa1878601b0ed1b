//! The TopoLVM-compatible CSI driver (`topolvm.io`). The controller service runs in
//! `lvms operator`, as in LVMS: an RPC never touches a disk, it writes a `LogicalVolume`
//! (TopoLVM's object) and waits for the node's vg-manager to report it. Decisions (sizes,
//! placement, capability checks, capacity) are pure functions here; the services are edges.

pub mod access;
pub mod authority;
pub mod client;
pub mod controller;
pub mod errors;
pub mod identity;
pub mod liveness;
pub use crate::api::topolvm as names;
pub mod node;
pub mod object_name;
pub mod registration;
pub mod server;
pub mod step_args;

/// The generated CSI v1 types and services (`proto/csi.proto`, the project's own copy of
/// the spec's wire definitions).
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod proto {
    tonic::include_proto!("csi.v1");
}
