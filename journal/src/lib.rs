//! The lvms reconcile journal: an append-only, crash-safe record of what each reconcile unit
//! observed, intended, did and published.
//!
//! * [`Journal`] appends framed, checksummed records (see [`codec`]) to sled behind the
//!   [`store::Store`] trait. [`Journal::append_intent`] is write-ahead: it returns after a flush.
//! * Indexes (open intents, last Published per dedupe key, latest snapshot per projection,
//!   intent per idempotency key, records per object) are written in the same atomic batch as their record.
//! * [`Projection`]s fold records into state; [`Journal::rebuild`] = latest snapshot + tail.
//!   [`Journal::checkpoint`] keeps a reader's position the same way (a snapshot with no state).
//! * [`Journal::compact`] applies [`Retention`]; [`Journal::verify`] reports corrupt records,
//!   seq gaps and index disagreements; [`render`] formats query results for the CLI.

mod checkpoint;
mod claim;
pub mod codec;
mod error;
mod index;
mod journal;
mod keys;
mod legacy;
mod object_index;
mod projection;
mod record;
pub mod render;
mod retention;
mod stats;
pub mod store;
#[cfg(test)]
mod test_support;
mod time;
mod verify;

pub use claim::Claim;
pub use error::{CorruptRecord, JournalError, Result, StoreError};
pub use journal::{
    AppendObserver, COPY_PATIENCE, COPY_QUIET, Clock, FlushPolicy, Journal, JournalConfig,
    dir_bytes,
};
pub use projection::{Projection, Rebuilt};
pub use record::*;
pub use render::{Entry, Filter, ObjectFilter};
pub use retention::{CompactReport, Retention};
pub use stats::Stats;
pub use time::rfc3339_utc;
pub use verify::{Gap, VerifyReport};
