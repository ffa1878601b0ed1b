//! Retention: delete old closed records while keeping everything needed for correctness.
//!
//! Never deleted: open intents; records with seq greater than the compaction horizon (the
//! minimum `upto_seq` over the latest snapshot of every projection, 0 if none exists, so
//! rebuilds always see snapshot + complete tail); the last Published per dedupe key; the
//! latest Snapshot per projection; corrupt records (kept as evidence for `verify`) and the
//! outcomes of corrupt intents. An intent is deleted together with its outcome, never alone,
//! so a kept intent is open exactly when no outcome for it exists. A snapshot index that
//! cannot be read, or any read error other than a corrupt record, refuses compaction.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::error::{CorruptRecord, JournalError, Result};
use crate::index;
use crate::journal::Journal;
use crate::keys;
use crate::record::{Body, Record, Seq};
use crate::store::Batch;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retention {
    /// Delete eligible records older than this.
    pub max_age: Option<Duration>,
    /// Delete the oldest eligible records until at most this many remain (if possible).
    pub max_records: Option<usize>,
}

impl Retention {
    /// What a running lvms keeps: at most 100,000 records (tens of MiB on disk) and nothing
    /// closed older than a week, beyond what correctness keeps anyway (open intents, the tail
    /// past every checkpoint, the last Published per key).
    pub const PRODUCTION: Retention = Retention {
        max_age: Some(Duration::from_secs(7 * 24 * 3600)),
        max_records: Some(100_000),
    };
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactReport {
    pub horizon: Seq,
    pub deleted: usize,
    pub remaining: usize,
}

const BATCH_OPS: usize = 512;

/// Records deleted together: seqs, their object index keys, idempotency key to unindex (with
/// its intent seq), age.
type Group = (Vec<Seq>, Vec<Vec<u8>>, Option<(String, Seq)>, u64);

impl Journal {
    /// Full scan of the log (compaction runs rarely; the scan keeps the rules simple).
    pub fn compact(&self, retention: Retention) -> Result<CompactReport> {
        // No appends while we decide, and everything staged is in the store.
        self.exclusive(|_| self.compact_exclusive(retention))
    }

    fn compact_exclusive(&self, retention: Retention) -> Result<CompactReport> {
        let store = self.store();

        let (lo, hi) = keys::span(keys::SNAPSHOT);
        let mut horizon: Option<Seq> = None;
        let mut latest_snapshots = Vec::new();
        for kv in store.range(&lo, &hi) {
            let (k, v) = kv?;
            // A snapshot index that cannot be read hides how far that projection's snapshot
            // reaches: skipping it could move the horizon past records its rebuild needs.
            let unreadable = |seq, why: String| CorruptRecord {
                seq,
                reason: format!("snapshot index entry {k:?}: {why}; compaction refused"),
            };
            let snap_seq = keys::parse_u64(&v)
                .ok_or_else(|| unreadable(0, format!("malformed value {v:?}")))?;
            latest_snapshots.push(snap_seq);
            match self.get(snap_seq)? {
                Some(Record {
                    body: Body::Snapshot(s),
                    ..
                }) => horizon = Some(horizon.map_or(s.upto_seq, |h| h.min(s.upto_seq))),
                Some(other) => {
                    let kind = other.body.kind_name();
                    return Err(unreadable(snap_seq, format!("points at a {kind} record")).into());
                }
                None => {
                    return Err(unreadable(snap_seq, "points at a missing record".into()).into());
                }
            }
        }
        let horizon = horizon.unwrap_or(0);

        let now = self.config().clock.now_ms();
        let cutoff = retention
            .max_age
            .map(|a| now.saturating_sub(a.as_millis().try_into().unwrap_or(u64::MAX)));
        // candidate groups in seq order: (seqs to delete, idempotency key to unindex, at_ms)
        let mut groups: Vec<Group> = Vec::new();
        let mut total = 0usize;
        let mut intents: BTreeMap<Seq, (String, Option<Vec<u8>>)> = BTreeMap::new();
        // Corrupt records are kept as evidence; so is the outcome of a corrupt intent (deleting
        // it alone would make the intent look open). Any other read error stops compaction.
        let mut corrupt: BTreeSet<Seq> = BTreeSet::new();
        for rec in self.iter() {
            total += 1;
            let rec = match rec {
                Ok(rec) => rec,
                Err(JournalError::Corrupt(c)) => {
                    corrupt.insert(c.seq);
                    continue;
                }
                Err(e) => return Err(e),
            };
            if rec.seq > horizon {
                continue;
            }
            let object_key = index::object_key(&rec);
            match &rec.body {
                Body::Intent(i) => {
                    intents.insert(rec.seq, (i.idempotency_key.clone(), object_key));
                }
                Body::Outcome(o) if corrupt.contains(&o.intent_seq) => {}
                Body::Outcome(o) => {
                    let mut seqs = vec![rec.seq];
                    let mut objects: Vec<Vec<u8>> = object_key.into_iter().collect();
                    let mut idem = None;
                    if let Some((key, intent_object)) = intents.remove(&o.intent_seq) {
                        seqs.push(o.intent_seq);
                        objects.extend(intent_object);
                        idem = Some((key, o.intent_seq));
                    }
                    groups.push((seqs, objects, idem, rec.at_ms));
                }
                Body::Published(p) => {
                    let latest = store.get(&keys::str_key(keys::PUBLISHED, &p.dedupe_key))?;
                    if latest.as_deref().and_then(keys::parse_u64) != Some(rec.seq) {
                        groups.push((
                            vec![rec.seq],
                            object_key.into_iter().collect(),
                            None,
                            rec.at_ms,
                        ));
                    }
                }
                Body::Snapshot(_) => {
                    if !latest_snapshots.contains(&rec.seq) {
                        groups.push((vec![rec.seq], Vec::new(), None, rec.at_ms));
                    }
                }
            }
        }

        let mut excess = retention.max_records.map_or(0, |m| total.saturating_sub(m));
        let mut batch = Batch::default();
        // Record the horizon before deleting, so a crash mid-compaction leaves explained gaps.
        let prev = self.compacted_through()?;
        batch.insert(
            keys::META_COMPACTED,
            horizon.max(prev).to_be_bytes().to_vec(),
        );
        store.apply(std::mem::take(&mut batch))?;

        let mut deleted = 0usize;
        for (seqs, objects, idem, at_ms) in groups {
            let too_old = cutoff.is_some_and(|c| at_ms < c);
            if !(too_old || excess > 0) {
                continue;
            }
            excess = excess.saturating_sub(seqs.len());
            deleted += seqs.len();
            for s in &seqs {
                batch.remove(keys::seq_key(keys::LOG, *s));
            }
            for key in objects {
                batch.remove(key);
            }
            if let Some((key, intent_seq)) = idem {
                let ikey = keys::str_key(keys::IDEMPOTENCY, &key);
                if store.get(&ikey)?.as_deref().and_then(keys::parse_u64) == Some(intent_seq) {
                    batch.remove(ikey);
                }
            }
            if batch.len() >= BATCH_OPS {
                store.apply(std::mem::take(&mut batch))?;
            }
        }
        if !batch.is_empty() {
            store.apply(batch)?;
        }
        store.flush()?;
        Ok(CompactReport {
            horizon,
            deleted,
            remaining: total - deleted,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::Projection;
    use crate::record::{ObjectRef, Trace};
    use crate::test_support::{Count, closed_pair};

    /// Intent + outcome `n` times; returns the intent seqs.
    fn closed_pairs(j: &Journal, n: u64) -> Vec<Seq> {
        (0..n)
            .map(|k| closed_pair(j, &ObjectRef::default(), &format!("k{k}")))
            .collect()
    }

    const ALL: Retention = Retention {
        max_age: Some(Duration::ZERO),
        max_records: Some(0),
    };

    #[test]
    fn an_unreadable_snapshot_index_refuses_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path()).unwrap();
        let intents = closed_pairs(&j, 3);
        j.snapshot::<Count>(Trace::default()).unwrap();
        let index = keys::str_key(keys::SNAPSHOT, Count::NAME);
        for bad in [vec![1, 2, 3], intents[0].to_be_bytes().to_vec()] {
            let mut b = Batch::default();
            b.insert(index.clone(), bad);
            j.store().apply(b).unwrap();
            let err = j.compact(ALL).unwrap_err();
            assert!(err.to_string().contains("compaction refused"), "{err}");
            assert!(j.get(intents[0]).unwrap().is_some(), "nothing deleted");
        }
    }

    #[test]
    fn the_outcome_of_a_corrupt_intent_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path()).unwrap();
        let intents = closed_pairs(&j, 3);
        j.snapshot::<Count>(Trace::default()).unwrap();
        assert!(j.testing_corrupt_record(intents[0]).unwrap());
        let rep = j.compact(ALL).unwrap();
        // The two readable pairs go; the corrupt intent and its outcome stay.
        assert_eq!(rep.deleted, 4, "{rep:?}");
        assert!(
            j.get(intents[0]).is_err(),
            "corrupt intent kept as evidence"
        );
        assert!(j.get(intents[0] + 1).unwrap().is_some(), "its outcome kept");
        assert!(j.get(intents[1]).unwrap().is_none());
    }
}
