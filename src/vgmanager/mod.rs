//! `lvms vg-manager`: the per-node half. Supervised actors (one per LVMVolumeGroup on this
//! node, a registry that starts and stops them, a node-status projector, the EventPublisher)
//! over the journal; host commands and files through [`host::HostOps`].

pub mod audit_unit;
pub mod context;
pub mod csi_node_unit;
pub mod events;
#[cfg(test)]
mod fake_host;
pub mod group_snapshot;
pub mod host;
pub mod lock;
pub mod node_api;
pub mod node_report;
pub mod node_status_unit;
pub mod node_volumes;
pub mod registry;
pub mod run;
mod stats_lvs;
pub mod table;
mod thin_repair;
pub mod volume_group;
pub mod volume_lookup;
pub mod volumes;
