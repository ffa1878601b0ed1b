//! `lvms explain` and `lvms must-gather`, the decisions: what an object's story is, given what
//! was read about it (the object, its Events, the journals that touched it). Kube-free and
//! pure: `crate::cli::explain` and `crate::cli::must_gather` do the reading and the writing.

pub mod bundle;
pub mod facts;
pub mod holdback;
pub mod kinds;
pub mod related;
pub mod render;
pub mod steps;
pub mod story;

pub use facts::{EventFact, Facts, JournalFacts};
pub use kinds::{KINDS, KindInfo, Subject};
pub use story::{Explanation, explain};
