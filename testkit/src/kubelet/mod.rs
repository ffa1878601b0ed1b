//! The one stand-in for kubelet, for tests and demos on nodes that run none: what kubelet and
//! the node lifecycle controller do with Nodes and CSINode registrations ([`node`]), kubelet's
//! plugin watcher registering a node plugin ([`plugin_watcher`]), and kubelet's calls for a
//! claim's volume (publish, unpublish, expand, stats: [`volumes`], `lvms-dev kubelet`). It
//! proves only itself: the real node tier runs kubelet.

pub mod node;
pub mod plugin_watcher;
pub mod volumes;

pub use node::{create_node, register_csi_node, register_with_topology};
