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
/// `X` + lowercased kind, namespace, name (each NUL-terminated) + seq: every record about that
/// object (empty value), so `inspect --object` reads its records instead of the whole log.
pub const OBJECT: u8 = b'X';

/// Metadata keys all start with `M`.
pub const META_FORMAT: &[u8] = b"Mformat";
/// Last assigned seq, written in the same batch as each record.
pub const META_HIGH_WATER: &[u8] = b"Mhigh_water";
/// Records with seq <= this may have been removed by compaction; gaps there are expected.
pub const META_COMPACTED: &[u8] = b"Mcompacted_through";
pub const META_EPOCH: &[u8] = b"Mlease_epoch";
/// First seq the object index covers: records before it were written by a release that kept
/// no object index (format < 4) and are found by scanning.
pub const META_OBJECT_INDEX_FROM: &[u8] = b"Mobject_index_from";

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

/// Records per bucket of the object index: a bucket's keys are written while its seqs are
/// appended and never again, so sled rewrites only the newest bucket's pages.
pub const OBJECT_BUCKET_BITS: u32 = 16;

/// A stable 64-bit FNV-1a hash of an object's identity (lowercased kind, namespace, name).
/// It is stored on disk, so it never changes; a collision only adds candidates that the
/// query's own match drops.
pub fn object_hash(kind: &str, namespace: &str, name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: u8| {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    };
    kind.bytes().for_each(|b| eat(b.to_ascii_lowercase()));
    eat(0);
    namespace.bytes().for_each(&mut eat);
    eat(0);
    name.bytes().for_each(&mut eat);
    h
}

/// `X` + bucket (seq >> OBJECT_BUCKET_BITS, u64) + object hash: the keys of one object's
/// records within one bucket share this prefix.
pub fn object_prefix(bucket: u64, hash: u64) -> [u8; 17] {
    let mut k = [0u8; 17];
    k[0] = OBJECT;
    k[1..9].copy_from_slice(&bucket.to_be_bytes());
    k[9..17].copy_from_slice(&hash.to_be_bytes());
    k
}

/// The object index key of one record: prefix + seq.
pub fn object_key(hash: u64, seq: Seq) -> Vec<u8> {
    let mut k = object_prefix(seq >> OBJECT_BUCKET_BITS, hash).to_vec();
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

/// (hash, seq) of an object index key.
pub fn parse_object_key(key: &[u8]) -> Option<(u64, Seq)> {
    if key.len() != 25 || key[0] != OBJECT {
        return None;
    }
    Some((parse_u64(&key[9..17])?, parse_u64(&key[17..25])?))
}

/// `[prefix, prefix + 0xff × 9)`: every object index key under `prefix` (each is the prefix
/// and an 8-byte seq, so all sort below that bound).
pub fn object_span(prefix: &[u8; 17]) -> (Vec<u8>, Vec<u8>) {
    let mut hi = prefix.to_vec();
    hi.extend_from_slice(&[u8::MAX; 9]);
    (prefix.to_vec(), hi)
}
