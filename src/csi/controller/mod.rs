//! The CSI Controller and GroupController services (in `lvms operator`) and their decisions:
//! sizes, placement, capacity, group membership. An RPC never touches a disk: it writes a
//! LogicalVolume (a journaled step, [`writes`]) and waits for the node to report it
//! ([`volumes`]); [`replay`] resolves a write a crash interrupted.

pub mod actions;
pub mod capacity;
pub mod group;
pub mod group_service;
pub mod locks;
pub mod placement;
pub mod replay;
pub mod service;
pub mod sizing;
pub mod volumes;
pub mod writes;
