//! Pure functions: what each reconcile unit wants to exist, given the LVMCluster and the World.

pub mod csi_driver;
pub mod daemonset;
pub mod group_snapshot_classes;
pub mod node_statuses;
pub mod scc;
pub mod snapshot_classes;
pub mod storage_classes;
pub mod volume_groups;
