//! Projections fold records into state. A snapshot stores the state at some seq so a rebuild
//! only folds the tail; property tests check snapshot + tail == fold of everything.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::codec;
use crate::error::{JournalError, Result};
use crate::journal::Journal;
use crate::keys;
use crate::record::{Body, Record, Seq, Snapshot, Trace};

pub trait Projection: Default + Serialize + DeserializeOwned {
    /// Stable name; snapshots are indexed by it.
    const NAME: &'static str;
    /// Fold one record. Snapshot records are never passed in.
    fn apply(&mut self, record: &Record);
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rebuilt<P> {
    pub state: P,
    /// Seq of the snapshot record used, if any.
    pub from_snapshot: Option<Seq>,
    /// Highest seq folded in (directly or via the snapshot); 0 for an empty journal.
    pub upto_seq: Seq,
}

impl Journal {
    /// Latest snapshot of `P` + every later record. A corrupt record in the tail or a bad
    /// snapshot is an error: silently skipping would produce wrong state.
    pub fn rebuild<P: Projection>(&self) -> Result<Rebuilt<P>> {
        let (mut state, from_snapshot, upto) = match self.latest_snapshot(P::NAME)? {
            Some((seq, s)) => {
                let state = codec::decode_value::<P>(&s.state).map_err(|reason| {
                    JournalError::Projection {
                        name: P::NAME,
                        reason: format!("snapshot at seq {seq}: {reason}"),
                    }
                })?;
                (state, Some(seq), s.upto_seq)
            }
            None => (P::default(), None, 0),
        };
        let mut last = upto;
        for rec in self.iter_range(upto.saturating_add(1)..) {
            let rec = rec?;
            last = rec.seq;
            if !matches!(rec.body, Body::Snapshot(_)) {
                state.apply(&rec);
            }
        }
        Ok(Rebuilt {
            state,
            from_snapshot,
            upto_seq: last,
        })
    }

    /// Rebuild `P` and store it as a Snapshot record covering everything appended so far.
    /// Holds the writer lock so no record slips in between the fold and the snapshot.
    pub fn snapshot<P: Projection>(&self, trace: Trace) -> Result<Seq> {
        self.exclusive(|w| self.snapshot_exclusive::<P>(w, trace))
    }

    /// Snapshot `P` once `every` or more records were appended after its latest snapshot, so
    /// a [`rebuild`](Journal::rebuild) folds about `every` records at most, whatever the
    /// journal's size (without one, every restart folds the whole log). When not due this is
    /// one index read; the fold it takes when due is the tail since the last snapshot.
    /// Returns the new snapshot's seq, if one was taken.
    pub fn snapshot_if_due<P: Projection>(&self, every: u64, trace: Trace) -> Result<Option<Seq>> {
        let every = every.max(1);
        let due = |high: Seq| -> Result<bool> {
            let last = self.snapshot_seq(P::NAME)?.unwrap_or(0);
            Ok(high.saturating_sub(last) >= every)
        };
        if !due(self.applied_seq())? {
            return Ok(None);
        }
        // Checked again under the lock: another caller may have just taken it.
        self.exclusive(|w| {
            if !due(w.next_seq.saturating_sub(1))? {
                return Ok(None);
            }
            self.snapshot_exclusive::<P>(w, trace).map(Some)
        })
    }

    /// Seq of `name`'s latest Snapshot record, from the index (no record is read).
    pub fn snapshot_seq(&self, name: &str) -> Result<Option<Seq>> {
        let key = keys::str_key(keys::SNAPSHOT, name);
        self.index_seq(&key)
    }

    fn snapshot_exclusive<P: Projection>(
        &self,
        w: &mut crate::journal::Writer,
        trace: Trace,
    ) -> Result<Seq> {
        let rebuilt = self.rebuild::<P>()?;
        let upto = w.next_seq.saturating_sub(1);
        let state = codec::encode_value("projection state", &rebuilt.state)?;
        self.append_snapshot(w, P::NAME, upto, state, trace)
    }

    /// `name`'s latest Snapshot record, from the index (`None`: there is none). The index
    /// naming a record of another kind is an error, never "no snapshot".
    pub(crate) fn latest_snapshot(&self, name: &'static str) -> Result<Option<(Seq, Snapshot)>> {
        match self.indexed(keys::str_key(keys::SNAPSHOT, name))? {
            None => Ok(None),
            Some(Record {
                seq,
                body: Body::Snapshot(s),
                ..
            }) => Ok(Some((seq, s))),
            Some(other) => Err(JournalError::Projection {
                name,
                reason: format!(
                    "snapshot index points at a {} record (seq {})",
                    other.body.kind_name(),
                    other.seq
                ),
            }),
        }
    }

    /// Appends a Snapshot record of `name` covering everything up to `upto` (writer lock held
    /// through [`Journal::exclusive`]). Durable: compaction trusts it once it exists.
    pub(crate) fn append_snapshot(
        &self,
        w: &mut crate::journal::Writer,
        name: &'static str,
        upto: Seq,
        state: Vec<u8>,
        trace: Trace,
    ) -> Result<Seq> {
        let body = Body::Snapshot(Snapshot {
            projection: name.to_string(),
            upto_seq: upto,
            state,
        });
        self.append_exclusive(w, body, trace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::ObjectRef;
    use crate::test_support::{Count, closed_pair};

    #[test]
    fn a_snapshot_is_taken_only_once_the_tail_reaches_the_threshold() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path()).unwrap();
        let o = ObjectRef::default();
        let if_due = || j.snapshot_if_due::<Count>(6, Trace::default()).unwrap();
        assert_eq!(if_due(), None);
        for k in 0..2 {
            closed_pair(&j, &o, &format!("a{k}"));
        }
        // 4 records: not due at 6.
        assert_eq!(if_due(), None);
        assert_eq!(j.snapshot_seq(Count::NAME).unwrap(), None);
        closed_pair(&j, &o, "a2");
        // 6 records: due; the snapshot is seq 7 and covers all six.
        assert_eq!(if_due(), Some(7));
        assert_eq!(j.snapshot_seq(Count::NAME).unwrap(), Some(7));
        // Right after it nothing is due, however often asked.
        assert_eq!(if_due(), None);
        for k in 0..3 {
            closed_pair(&j, &o, &format!("b{k}"));
        }
        // Seqs 8..=13 after the snapshot at 7: due again.
        assert_eq!(if_due(), Some(14));
        closed_pair(&j, &o, "c");
        let rebuilt = j.rebuild::<Count>().unwrap();
        assert_eq!(rebuilt.from_snapshot, Some(14));
        assert_eq!(rebuilt.upto_seq, 16);
        // 14 records that are not snapshots: the snapshot + tail fold counts each once.
        assert_eq!(rebuilt.state.0, 14);
    }
}
