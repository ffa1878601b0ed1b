//! One live writer per unit inside a process. A unit's actor claims its unit when it starts;
//! a later claim supersedes the earlier one, and an append made under a superseded claim is
//! refused ([`crate::JournalError::Superseded`]). The supervisor already starts a unit's next
//! instance only after the previous one has ended; this is the second line: a bug that ever
//! ran two instances of one unit side by side cannot have both act, and says so.
//!
//! Claims live in memory only (the lease epoch guards across processes): a new process starts
//! with no claim, and the journal's format is unchanged.

use std::sync::Arc;

use crate::record::Seq;

/// An instance's right to append for one unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub(crate) unit: Arc<str>,
    pub(crate) instance: u64,
    pub(crate) since: Seq,
}

impl Claim {
    pub fn unit(&self) -> &str {
        &self.unit
    }

    /// This process's instance number of the unit (1 for its first instance).
    pub fn instance(&self) -> u64 {
        self.instance
    }

    /// The first seq this instance could have written: every intent of the unit below it was
    /// appended by an earlier instance (or process), which is what replay may resolve.
    pub fn since(&self) -> Seq {
        self.since
    }
}
