//! Index maintenance. Every index entry is staged into the same atomic batch as the record
//! it describes, so after a crash an index never disagrees with the log.

use crate::keys;
use crate::record::{Body, Record};
use crate::store::Batch;

pub(crate) fn stage(record: &Record, batch: &mut Batch) {
    let seq = record.seq.to_be_bytes().to_vec();
    match &record.body {
        Body::Intent(i) => {
            batch.insert(keys::seq_key(keys::OPEN, record.seq), Vec::new());
            batch.insert(keys::str_key(keys::IDEMPOTENCY, &i.idempotency_key), seq);
        }
        Body::Outcome(o) => batch.remove(keys::seq_key(keys::OPEN, o.intent_seq)),
        Body::Published(p) => batch.insert(keys::str_key(keys::PUBLISHED, &p.dedupe_key), seq),
        Body::Snapshot(s) => batch.insert(keys::str_key(keys::SNAPSHOT, &s.projection), seq),
    }
    if let Some(key) = object_key(record) {
        batch.insert(key, Vec::new());
    }
}

/// The object index entry of a record, if it is about an object.
pub(crate) fn object_key(record: &Record) -> Option<Vec<u8>> {
    record.object().map(|o| {
        let hash = keys::object_hash(&o.kind, &o.namespace, &o.name);
        keys::object_key(hash, record.seq)
    })
}
