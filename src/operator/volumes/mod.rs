//! The operator's helpers for the volumes users own, as LVMS and TopoLVM run them next to the
//! CSI controller: LVMS's PV helper (`ClaimReferenceRemoved`, the hostname label), its PVC
//! helper (`NotEnoughCapacity`), TopoLVM's Node finalizer (a deleted Node's claims and
//! LogicalVolumes cleaned up) and its PVC reconciler (legacy finalizers, the resize nudge). Pure decisions here; the units in `operator::units` journal
//! and apply them.

pub mod actions;
pub mod claims;
pub mod dead_node;
pub mod node_cleanup;
pub mod persistent_volumes;
pub mod resize;

/// LVMS's StorageClass prefix: `lvms-<device class>`.
pub const STORAGE_CLASS_PREFIX: &str = "lvms-";

pub use crate::api::topolvm::SELECTED_NODE_ANNOTATION;

/// The label LVMS copies the volume's node into, for tools that select PVs by host.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
