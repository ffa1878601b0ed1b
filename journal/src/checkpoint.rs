//! Checkpoints: how far a reader of the log has got (every record up to `upto` handled),
//! kept as a Snapshot record with no state. A restart resumes there instead of at seq 1, and
//! compaction, whose horizon is the least `upto` over the latest snapshot of every name,
//! keeps everything the reader has not handled yet.

use crate::error::Result;
use crate::journal::Journal;
use crate::record::{Seq, Trace};

impl Journal {
    /// Records that every record up to `upto` (at most the last appended) is handled by the
    /// reader `name`. Durable when it returns, and so is everything appended before it (the
    /// reader's own records about what it handled, say).
    pub fn checkpoint(&self, name: &'static str, upto: Seq, trace: Trace) -> Result<Seq> {
        self.exclusive(|w| {
            let upto = upto.min(w.next_seq.saturating_sub(1));
            self.append_snapshot(w, name, upto, Vec::new(), trace)
        })
    }

    /// Where `name`'s latest checkpoint is (`None`: it never took one). One index read and
    /// one record read; a record that is not a snapshot there is an error, not "none".
    pub fn checkpointed(&self, name: &'static str) -> Result<Option<Seq>> {
        Ok(self.latest_snapshot(name)?.map(|(_, s)| s.upto_seq))
    }
}

#[cfg(test)]
mod tests {
    use crate::record::{ObjectRef, Trace};
    use crate::retention::Retention;
    use crate::test_support::closed_pair;
    use crate::{Journal, Projection, test_support::Count};

    #[test]
    fn a_checkpoint_survives_a_reopen_and_bounds_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path()).unwrap();
        assert_eq!(j.checkpointed("reader").unwrap(), None);
        let o = ObjectRef::default();
        for k in 0..4 {
            closed_pair(&j, &o, &format!("a{k}"));
        }
        // Seqs 1..=8; the reader handled the first two pairs. Asking beyond the end is capped.
        assert_eq!(j.checkpoint("reader", 4, Trace::default()).unwrap(), 9);
        assert_eq!(j.checkpointed("reader").unwrap(), Some(4));
        assert_eq!(j.checkpoint("far", 1000, Trace::default()).unwrap(), 10);
        assert_eq!(j.checkpointed("far").unwrap(), Some(9));
        // A projection snapshot past everything: the reader's checkpoint is the horizon.
        j.snapshot::<Count>(Trace::default()).unwrap();
        drop(j);
        let j = Journal::open(dir.path()).unwrap();
        assert_eq!(j.checkpointed("reader").unwrap(), Some(4));
        let report = j
            .compact(Retention {
                max_age: None,
                max_records: Some(0),
            })
            .unwrap();
        assert_eq!(report.horizon, 4);
        // Only the two pairs the reader handled went; what it has not read is all there.
        assert_eq!(report.deleted, 4);
        let left: Vec<_> = j.iter().map(|r| r.unwrap().seq).collect();
        assert_eq!(left, [5, 6, 7, 8, 9, 10, 11]);
    }

    #[test]
    fn a_projection_snapshot_reads_as_a_checkpoint_at_its_upto() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path()).unwrap();
        j.snapshot::<Count>(Trace::default()).unwrap();
        // A projection's snapshot is a checkpoint too (its upto).
        assert_eq!(j.checkpointed(Count::NAME).unwrap(), Some(0));
    }
}
