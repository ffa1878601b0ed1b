//! LVMS-compatible API types (`lvm.topolvm.io/v1alpha1`, `topolvm.io/v1`), their CRDs and rules.

pub mod crd;
mod device_class;
mod logical_volume;
mod lvmcluster;
mod node_status;
pub mod quantity;
pub mod rules;
pub mod topolvm;
mod volume_group;

pub use device_class::*;
pub use logical_volume::*;
pub use lvmcluster::*;
pub use node_status::*;
pub use volume_group::*;
