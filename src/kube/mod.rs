//! The adapter between kube-rs and the actors: caches fed by watches, server-side apply,
//! Events, and API discovery. Nothing here decides anything.

pub mod apply;
pub mod caches;
pub mod discovery;
pub mod events;
pub mod kinds;
pub mod list;

/// The field manager of every write the operator makes.
pub const FIELD_MANAGER: &str = "lvms-operator";
