//! The cluster-level half of lvms: reconcile units (pure `desired`/`plan`), the status fold,
//! and the wiring of those units into supervised actors.

pub mod actions;
pub mod context;
pub mod csi;
pub mod desired;
pub mod leader;
pub mod node_removal;
pub mod nodes;
pub mod owner;
pub mod plan;
pub mod run;
pub mod singleton;
pub mod status;
pub mod table;
pub mod units;
pub mod volumes;
pub mod world;
