//! Error types. Every variant says what was being done, so a CLI can print it as-is.

use std::path::PathBuf;

use crate::record::{ObjectRef, Seq};

/// A stored record whose frame, checksum, decode or sequence check failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("record {seq} is corrupt: {reason}")]
pub struct CorruptRecord {
    pub seq: Seq,
    pub reason: String,
}

/// Why stored bytes are not a value or a record ([`crate::codec`]): the frame, its checksum,
/// its format version or its payload. The text is what `verify` and a corrupt-record error
/// show.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("frame too short: {len} bytes, header needs {header}")]
    FrameTooShort { len: usize, header: usize },

    #[error("length field says {len} bytes but {stored} are stored (torn write?)")]
    TornFrame { len: usize, stored: usize },

    #[error("crc32c mismatch: stored {stored:08x}, computed {computed:08x}")]
    Checksum { stored: u32, computed: u32 },

    #[error("frame format version {version} is newer than supported version {supported}")]
    NewerVersion { version: u8, supported: u8 },

    #[error("unknown frame format version {version}")]
    UnknownVersion { version: u8 },

    #[error("decode: {0}")]
    Payload(#[source] bincode::error::DecodeError),

    #[error("decode: {0} trailing bytes after value")]
    TrailingBytes(usize),

    /// A kind an older format had and this release no longer reads (format 2's `observed`).
    #[error(
        "format-{format} `{kind}` record (unit {unit}, {object}): lvms never wrote this kind and this release no longer reads it"
    )]
    RetiredKind {
        format: u8,
        kind: &'static str,
        unit: String,
        object: Box<ObjectRef>,
    },
}

/// An error from the storage engine behind [`crate::store::Store`].
#[derive(Debug, thiserror::Error)]
#[error("{context}: {source}")]
pub struct StoreError {
    pub context: &'static str,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl StoreError {
    pub fn new(
        context: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            context,
            source: source.into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal store: {0}")]
    Store(#[from] StoreError),

    #[error(transparent)]
    Corrupt(#[from] CorruptRecord),

    #[error(
        "journal format version {found} is newer than the version this build supports ({supported}); \
         open it with a newer lvms"
    )]
    NewerFormat { found: u8, supported: u8 },

    #[error(
        "journal format version {found} is not supported (this build reads version {supported})"
    )]
    UnsupportedFormat { found: u8, supported: u8 },

    #[error("journal meta key {key:?} is malformed: {reason}")]
    Meta { key: &'static str, reason: String },

    #[error("cannot encode {what}: {reason}")]
    Encode { what: &'static str, reason: String },

    #[error("intent {seq} is not open (unknown, already closed, or compacted)")]
    IntentNotOpen { seq: Seq },

    #[error("stale lease epoch {epoch}: the journal has already seen epoch {current}")]
    StaleEpoch { epoch: u64, current: u64 },

    #[error(
        "unit {unit}: instance {instance} was superseded by instance {current}, so its append is \
         refused (one live writer per unit); the newer instance resolves what this one left open"
    )]
    Superseded {
        unit: String,
        instance: u64,
        current: u64,
    },

    #[error("a claim of unit {claimed} cannot append for unit {unit}")]
    ClaimMismatch { claimed: String, unit: String },

    #[error("projection {name}: {reason}")]
    Projection { name: &'static str, reason: String },

    #[error("journal writer was poisoned by a panic during an append; reopen the journal")]
    Poisoned,

    #[error(
        "a write to the journal's store failed ({reason}); its outcome is unknown, so every later append fails: reopen the journal"
    )]
    WriterFailed { reason: String },

    #[error("copying journal {from} to {to}: {source}")]
    Copy {
        from: PathBuf,
        to: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "journal {from} was written to without a pause for {waited:?}, so no copy of it stands for one instant; \
         retry when its owner is less busy, or stop the owner to read it"
    )]
    CopyMoving {
        from: PathBuf,
        waited: std::time::Duration,
    },

    #[error("fail point {0} triggered")]
    FailPoint(&'static str),
}

pub type Result<T, E = JournalError> = std::result::Result<T, E>;
