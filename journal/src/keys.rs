//! Key layout of the single keyspace. A one-byte prefix separates the log from its indexes;
//! integers are big-endian so byte order equals numeric order.

use crate::record::Seq;

/// `L` + seq: framed records.
pub const LOG: u8 = b'L';
/// `O` + intent seq: open intents (intent with no outcome yet).
pub const OPEN: u8 = b'O';
/// `P` + dedupe key: seq of the last Published for that key.
pub const PUBLISHED: u8 = b'P';
/// `S` + projection name: seq of that projection's latest Snapshot record.
pub const SNAPSHOT: u8 = b'S';
/// `K` + idempotency key: seq of the latest intent with that key.
pub const IDEMPOTENCY: u8 = b'K';

/// Metadata keys all start with `M`.
pub const META_FORMAT: &[u8] = b"Mformat";
/// Last assigned seq, written in the same batch as each record.
pub const META_HIGH_WATER: &[u8] = b"Mhigh_water";
/// Records with seq <= this may have been removed by compaction; gaps there are expected.
pub const META_COMPACTED: &[u8] = b"Mcompacted_through";
pub const META_EPOCH: &[u8] = b"Mlease_epoch";

pub fn seq_key(prefix: u8, seq: Seq) -> Vec<u8> {
    let mut k = Vec::with_capacity(9);
    k.push(prefix);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

pub fn str_key(prefix: u8, s: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + s.len());
    k.push(prefix);
    k.extend_from_slice(s.as_bytes());
    k
}

/// `[prefix, prefix+1)` covers every key of the keyspace.
pub fn span(prefix: u8) -> (Vec<u8>, Vec<u8>) {
    (vec![prefix], vec![prefix + 1])
}

/// Parse the seq out of a `prefix + u64` key.
pub fn parse_seq_key(key: &[u8]) -> Option<Seq> {
    let bytes: [u8; 8] = key.get(1..)?.try_into().ok()?;
    Some(Seq::from_be_bytes(bytes))
}

/// Decode an 8-byte big-endian value.
pub fn parse_u64(value: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(value.try_into().ok()?))
}
