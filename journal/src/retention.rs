//! Retention: delete old closed records while keeping everything needed for correctness.
//!
//! Never deleted: open intents; records with seq greater than the compaction horizon (the
//! minimum `upto_seq` over the latest snapshot of every projection, 0 if none exists, so
//! rebuilds always see snapshot + complete tail); the last Published per dedupe key; the
//! latest Snapshot per projection; corrupt records (kept as evidence for `verify`).
//! An intent is deleted together with its outcome, never alone, so a kept intent is
//! open exactly when no outcome for it exists.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::error::Result;
use crate::journal::Journal;
use crate::keys;
use crate::record::{Body, Seq};
use crate::store::Batch;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retention {
    /// Delete eligible records older than this.
    pub max_age: Option<Duration>,
    /// Delete the oldest eligible records until at most this many remain (if possible).
    pub max_records: Option<usize>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactReport {
    pub horizon: Seq,
    pub deleted: usize,
    pub remaining: usize,
}

const BATCH_OPS: usize = 512;

/// Records deleted together: seqs, idempotency key to unindex (with its intent seq), age.
type Group = (Vec<Seq>, Option<(String, Seq)>, u64);

impl Journal {
    /// Full scan of the log (compaction runs rarely; the scan keeps the rules simple).
    pub fn compact(&self, retention: Retention) -> Result<CompactReport> {
        let _w = self.lock()?; // no appends while we decide
        let store = self.store();

        let (lo, hi) = keys::span(keys::SNAPSHOT);
        let mut horizon: Option<Seq> = None;
        let mut latest_snapshots = Vec::new();
        for kv in store.range(&lo, &hi) {
            let (_, v) = kv?;
            let Some(snap_seq) = keys::parse_u64(&v) else {
                continue;
            };
            latest_snapshots.push(snap_seq);
            if let Some(rec) = self.get(snap_seq)?
                && let Body::Snapshot(s) = rec.body
            {
                horizon = Some(horizon.map_or(s.upto_seq, |h| h.min(s.upto_seq)));
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
        let mut intents: BTreeMap<Seq, String> = BTreeMap::new();
        for rec in self.iter() {
            total += 1;
            let Ok(rec) = rec else { continue }; // corrupt: kept
            if rec.seq > horizon {
                continue;
            }
            match &rec.body {
                Body::Intent(i) => {
                    intents.insert(rec.seq, i.idempotency_key.clone());
                }
                Body::Outcome(o) => {
                    let mut seqs = vec![rec.seq];
                    let mut idem = None;
                    if let Some(key) = intents.remove(&o.intent_seq) {
                        seqs.push(o.intent_seq);
                        idem = Some((key, o.intent_seq));
                    }
                    groups.push((seqs, idem, rec.at_ms));
                }
                Body::Observed(_) => groups.push((vec![rec.seq], None, rec.at_ms)),
                Body::Published(p) => {
                    let latest = store.get(&keys::str_key(keys::PUBLISHED, &p.dedupe_key))?;
                    if latest.as_deref().and_then(keys::parse_u64) != Some(rec.seq) {
                        groups.push((vec![rec.seq], None, rec.at_ms));
                    }
                }
                Body::Snapshot(_) => {
                    if !latest_snapshots.contains(&rec.seq) {
                        groups.push((vec![rec.seq], None, rec.at_ms));
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
        for (seqs, idem, at_ms) in groups {
            let too_old = cutoff.is_some_and(|c| at_ms < c);
            if !(too_old || excess > 0) {
                continue;
            }
            excess = excess.saturating_sub(seqs.len());
            deleted += seqs.len();
            for s in &seqs {
                batch.remove(keys::seq_key(keys::LOG, *s));
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
