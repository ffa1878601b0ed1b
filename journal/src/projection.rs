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
        let (mut state, from_snapshot, upto) =
            match self.indexed(keys::str_key(keys::SNAPSHOT, P::NAME))? {
                Some(Record {
                    seq,
                    body: Body::Snapshot(s),
                    ..
                }) => {
                    let state = codec::decode_value::<P>(&s.state).map_err(|reason| {
                        JournalError::Projection {
                            name: P::NAME,
                            reason: format!("snapshot at seq {seq}: {reason}"),
                        }
                    })?;
                    (state, Some(seq), s.upto_seq)
                }
                Some(other) => {
                    return Err(JournalError::Projection {
                        name: P::NAME,
                        reason: format!(
                            "snapshot index points at a {} record (seq {})",
                            other.body.kind_name(),
                            other.seq
                        ),
                    });
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
        self.exclusive(|w| {
            let rebuilt = self.rebuild::<P>()?;
            let upto_seq = w.next_seq.saturating_sub(1);
            let body = Body::Snapshot(Snapshot {
                projection: P::NAME.to_string(),
                upto_seq,
                state: codec::encode_value("projection state", &rebuilt.state)?,
            });
            // Durable: compaction trusts it once it exists.
            self.append_exclusive(w, body, trace)
        })
    }
}
