//! `verify()`: a full check of the log and its indexes. Nothing is skipped silently: every
//! corrupt record, unexplained seq gap and index disagreement is listed.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::error::{CorruptRecord, JournalError, Result};
use crate::journal::Journal;
use crate::keys;
use crate::record::{Body, Seq};

/// Missing seqs `first..=last` above the compaction horizon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Gap {
    pub first: Seq,
    pub last: Seq,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    pub records: u64,
    pub corrupt: Vec<CorruptRecord>,
    pub gaps: Vec<Gap>,
    pub index_problems: Vec<String>,
    pub compacted_through: Seq,
    pub last_seq: Seq,
}

impl VerifyReport {
    pub fn is_clean(&self) -> bool {
        self.corrupt.is_empty() && self.gaps.is_empty() && self.index_problems.is_empty()
    }
}

impl Serialize for CorruptRecord {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("CorruptRecord", 2)?;
        st.serialize_field("seq", &self.seq)?;
        st.serialize_field("reason", &self.reason)?;
        st.end()
    }
}

fn seq_index(j: &Journal, prefix: u8, report: &mut VerifyReport) -> Result<BTreeSet<Seq>> {
    let (lo, hi) = keys::span(prefix);
    let mut out = BTreeSet::new();
    for kv in j.store().range(&lo, &hi) {
        let (k, _) = kv?;
        match keys::parse_seq_key(&k) {
            Some(s) => {
                out.insert(s);
            }
            None => report
                .index_problems
                .push(format!("malformed index key {k:?}")),
        }
    }
    Ok(out)
}

fn named_index(
    j: &Journal,
    prefix: u8,
    report: &mut VerifyReport,
) -> Result<BTreeMap<String, Seq>> {
    let (lo, hi) = keys::span(prefix);
    let mut out = BTreeMap::new();
    for kv in j.store().range(&lo, &hi) {
        let (k, v) = kv?;
        let name = String::from_utf8_lossy(&k[1..]).into_owned();
        match keys::parse_u64(&v) {
            Some(s) => {
                out.insert(name, s);
            }
            None => report
                .index_problems
                .push(format!("index entry {k:?} has a malformed value")),
        }
    }
    Ok(out)
}

impl Journal {
    pub fn verify(&self) -> Result<VerifyReport> {
        let mut report = VerifyReport {
            compacted_through: self.compacted_through()?,
            ..VerifyReport::default()
        };
        let mut expected = report.compacted_through + 1;
        let mut intents = BTreeSet::new();
        let mut closed = BTreeSet::new();
        let mut last_pub: BTreeMap<String, Seq> = BTreeMap::new();
        let mut last_snap: BTreeMap<String, Seq> = BTreeMap::new();
        let mut last_idem: BTreeMap<String, Seq> = BTreeMap::new();
        let index_from = self.object_index_from();
        let mut by_object = crate::object_index::FromLog::default();
        for item in self.iter() {
            let seq = match &item {
                Ok(r) => r.seq,
                Err(JournalError::Corrupt(c)) => c.seq,
                Err(_) => return item.map(|_| report),
            };
            report.records += 1;
            if seq > expected {
                report.gaps.push(Gap {
                    first: expected,
                    last: seq - 1,
                });
            }
            expected = expected.max(seq + 1);
            report.last_seq = seq;
            if let Ok(rec) = &item
                && rec.seq >= index_from
                && let Some(o) = rec.object()
            {
                by_object.add(o, rec.seq);
            }
            match item {
                Err(JournalError::Corrupt(c)) => report.corrupt.push(c),
                Err(_) => {} // unreachable: other errors returned above
                Ok(rec) => match rec.body {
                    Body::Intent(i) => {
                        intents.insert(rec.seq);
                        last_idem.insert(i.idempotency_key, rec.seq);
                    }
                    Body::Outcome(o) => {
                        if !closed.insert(o.intent_seq) {
                            report.index_problems.push(format!(
                                "intent {} has more than one outcome (seq {})",
                                o.intent_seq, rec.seq
                            ));
                        }
                    }
                    Body::Published(p) => {
                        last_pub.insert(p.dedupe_key, rec.seq);
                    }
                    Body::Snapshot(s) => {
                        if s.upto_seq >= rec.seq {
                            report.index_problems.push(format!(
                                "snapshot {} claims upto {} >= its own seq",
                                rec.seq, s.upto_seq
                            ));
                        }
                        last_snap.insert(s.projection, rec.seq);
                    }
                },
            }
        }
        let hw = self.next_seq()?.saturating_sub(1);
        if hw >= expected {
            report.gaps.push(Gap {
                first: expected,
                last: hw,
            });
        }

        let corrupt: BTreeSet<Seq> = report.corrupt.iter().map(|c| c.seq).collect();
        let open = seq_index(self, keys::OPEN, &mut report)?;
        for s in &open {
            if closed.contains(s) {
                report
                    .index_problems
                    .push(format!("intent {s} is indexed open but has an outcome"));
            } else if !intents.contains(s) && !corrupt.contains(s) {
                report.index_problems.push(format!(
                    "open-intent index names {s}, which is not an intent in the log"
                ));
            }
        }
        for s in intents
            .iter()
            .filter(|s| !closed.contains(s) && !open.contains(s))
        {
            report.index_problems.push(format!(
                "intent {s} has no outcome but is missing from the open index"
            ));
        }
        for s in closed
            .iter()
            .filter(|s| !intents.contains(s) && !corrupt.contains(s))
        {
            // Compaction deletes an intent together with its outcome, so this is never expected.
            report.index_problems.push(format!(
                "an outcome refers to intent {s}, which is not in the log"
            ));
        }
        let problems = self.object_index_problems(by_object, &corrupt)?;
        report.index_problems.extend(problems);
        let named = [
            ("published", keys::PUBLISHED, &last_pub),
            ("snapshot", keys::SNAPSHOT, &last_snap),
            ("idempotency", keys::IDEMPOTENCY, &last_idem),
        ];
        for (what, prefix, from_log) in named {
            let idx = named_index(self, prefix, &mut report)?;
            for (name, seq) in from_log {
                if idx.get(name) != Some(seq) {
                    report.index_problems.push(format!(
                        "{what} index for {name:?} is {:?}, the log's latest is {seq}",
                        idx.get(name)
                    ));
                }
            }
            for (name, seq) in &idx {
                // Compaction never deletes an indexed record, so a dangling entry is a problem.
                if !(from_log.contains_key(name) || corrupt.contains(seq)) {
                    report.index_problems.push(format!(
                        "{what} index for {name:?} points at {seq}, which is not in the log"
                    ));
                }
            }
        }
        Ok(report)
    }
}
