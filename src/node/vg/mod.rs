//! A volume group's decisions on a node: which devices (discovery, filters, the allowlist),
//! how to build and check it (wipe, thin pools, validation), how to tear it down, how to
//! resolve an interrupted step, and what its status says.

pub mod actions;
pub mod allowlist;
pub mod discovery;
pub mod events;
pub mod filter;
pub mod gauges;
pub mod replay;
pub mod resolve;
pub mod status;
pub mod teardown;
pub mod thin;
pub mod validate;
pub mod wipe;
