//! The CSI Node service (in `lvms vg-manager`) and its decisions: what a publish request asks
//! for and the steps that get the node there ([`publish`]), the mount table ([`mountinfo`]),
//! volume stats and condition ([`stats`]), and the journaled actions it takes ([`actions`];
//! their effects and replay live in the vg-manager shell).

pub mod actions;
pub mod mountinfo;
pub mod publish;
pub mod service;
pub mod stats;
