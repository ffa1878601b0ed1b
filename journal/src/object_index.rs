//! The object index (`X` keys): every record about an object, so `inspect --object` and
//! `lvms explain` read that object's records instead of scanning the log. Entries are staged in
//! the record's own batch (`index::stage`), removed with it by compaction, and checked by
//! `verify`.

use std::collections::{BTreeSet, HashMap};

use crate::error::{CorruptRecord, JournalError, Result};
use crate::journal::Journal;
use crate::keys;
use crate::record::{ObjectRef, Seq};

/// What `verify` gathers from the log for the object index: (hash, seq) of every record about
/// an object from the seq the index covers, and a readable name per hash for messages.
#[derive(Default)]
pub(crate) struct FromLog {
    entries: Vec<(u64, Seq)>,
    names: HashMap<u64, String>,
}

impl FromLog {
    pub(crate) fn add(&mut self, o: &ObjectRef, seq: Seq) {
        let hash = keys::object_hash(&o.kind, &o.namespace, &o.name);
        self.entries.push((hash, seq));
        self.names.entry(hash).or_insert_with(|| o.to_string());
    }
}

impl Journal {
    /// Seqs of the records whose object hashes like this one's, from the object index, in seq
    /// order (a caller matches each record; a hash collision only adds a candidate). Only
    /// records from [`Self::object_index_from`] on are indexed.
    pub fn object_seqs(&self, kind: &str, namespace: &str, name: &str) -> Result<Vec<Seq>> {
        let hash = keys::object_hash(kind, namespace, name);
        let last = self.next_seq()?.saturating_sub(1);
        let buckets = (self.object_index_from() >> keys::OBJECT_BUCKET_BITS)
            ..=(last >> keys::OBJECT_BUCKET_BITS);
        let mut out = Vec::new();
        for bucket in buckets {
            let prefix = keys::object_prefix(bucket, hash);
            let (lo, hi) = keys::object_span(&prefix);
            for kv in self.store().range(&lo, &hi) {
                let (k, _) = kv?;
                match keys::parse_object_key(&k) {
                    Some((_, seq)) => out.push(seq),
                    None => {
                        return Err(JournalError::Corrupt(CorruptRecord {
                            seq: 0,
                            reason: format!("malformed object index key {k:?}"),
                        }));
                    }
                }
            }
        }
        Ok(out)
    }

    /// What is wrong with the object index: it must list exactly the log's records about each
    /// object (from the seq it covers); an entry for a corrupt record is expected (it names
    /// what the record was about).
    pub(crate) fn object_index_problems(
        &self,
        mut from_log: FromLog,
        corrupt: &BTreeSet<Seq>,
    ) -> Result<Vec<String>> {
        let mut problems = Vec::new();
        let (lo, hi) = keys::span(keys::OBJECT);
        let mut indexed = Vec::new();
        for kv in self.store().range(&lo, &hi) {
            let (k, _) = kv?;
            match keys::parse_object_key(&k) {
                Some(entry) => indexed.push(entry),
                None => problems.push(format!("malformed object index key {k:?}")),
            }
        }
        indexed.sort_unstable();
        from_log.entries.sort_unstable();
        let only_in = |these: &[(u64, Seq)], those: &[(u64, Seq)]| -> Vec<(u64, Seq)> {
            these
                .iter()
                .filter(|e| those.binary_search(e).is_err())
                .copied()
                .collect()
        };
        for (hash, seq) in only_in(&indexed, &from_log.entries) {
            if !corrupt.contains(&seq) {
                problems.push(format!(
                    "object index lists {seq} under object hash {hash:016x}, which is not the object of such a record in the log"
                ));
            }
        }
        for (hash, seq) in only_in(&from_log.entries, &indexed) {
            let name = from_log.names.get(&hash).map_or("?", String::as_str);
            problems.push(format!(
                "record {seq} about {name} is missing from the object index"
            ));
        }
        Ok(problems)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::record::*;
    use crate::render::{Entry, Filter, ObjectFilter};
    use crate::store::Batch;
    use crate::test_support::{Count, closed_pair};
    use crate::{Journal, Retention, keys};

    fn obj(kind: &str, namespace: &str, name: &str) -> ObjectRef {
        ObjectRef {
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            generation: 1,
        }
    }

    fn publish(j: &Journal, o: Option<&ObjectRef>, key: &str) -> Seq {
        let p = Published {
            unit: "u".into(),
            object: o.cloned(),
            kind: PublishKind::Event,
            dedupe_key: key.into(),
            source_seq: 0,
            count: 1,
            summary: String::new(),
        };
        j.append_published(p, Trace::default()).unwrap()
    }

    fn seqs(entries: &[Entry]) -> Vec<Seq> {
        entries.iter().map(Entry::seq).collect()
    }

    /// What a full scan with the object filter finds: the behaviour the index must keep.
    fn scanned(j: &Journal, f: &ObjectFilter) -> Vec<Seq> {
        j.iter()
            .map(|r| r.unwrap())
            .filter(|r| r.object().is_some_and(|o| f.matches(o)))
            .map(|r| r.seq)
            .collect()
    }

    fn query(j: &Journal, f: &ObjectFilter) -> Vec<Seq> {
        let filter = Filter {
            object: Some(f.clone()),
            ..Filter::default()
        };
        seqs(&j.query(&filter).unwrap())
    }

    fn filter(s: &str) -> ObjectFilter {
        s.parse().unwrap()
    }

    #[test]
    fn an_object_query_reads_the_index_and_finds_what_a_scan_finds() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path()).unwrap();
        let sc = obj("StorageClass", "", "lvms-vg1");
        let vg = obj("LVMVolumeGroup", "openshift-storage", "vg1");
        // A name that is a prefix of another must not pick up the other's records.
        let vg10 = obj("LVMVolumeGroup", "openshift-storage", "vg10");
        closed_pair(&j, &sc, "a");
        closed_pair(&j, &vg, "b");
        closed_pair(&j, &vg10, "c");
        publish(&j, Some(&vg), "e1");
        publish(&j, None, "e2");
        j.snapshot::<Count>(Trace::default()).unwrap();
        closed_pair(&j, &sc, "d");
        assert_eq!(
            j.object_index_from(),
            1,
            "a new journal indexes from its first record"
        );

        for (f, n) in [
            ("StorageClass/lvms-vg1", 4),
            ("storageclass/lvms-vg1", 4),
            ("LVMVolumeGroup/openshift-storage/vg1", 3),
            ("LVMVolumeGroup/openshift-storage/vg10", 2),
            ("LVMVolumeGroup/vg1", 0),
            ("StorageClass/lvms-vg2", 0),
        ] {
            let f = filter(f);
            let via_index = j.object_seqs(&f.kind, &f.namespace, &f.name).unwrap();
            assert_eq!(via_index.len(), n, "{f}");
            assert_eq!(via_index, scanned(&j, &f), "{f}");
            assert_eq!(query(&j, &f), via_index, "{f}");
        }
        // The other filters still apply to what the index found.
        let f = Filter {
            object: Some(filter("StorageClass/lvms-vg1")),
            limit: Some(1),
            ..Filter::default()
        };
        assert_eq!(
            seqs(&j.query(&f).unwrap()),
            vec![11],
            "the newest: the last outcome"
        );
        assert!(j.verify().unwrap().is_clean());
    }

    #[test]
    fn records_written_before_the_index_existed_are_found_by_scanning() {
        let dir = tempfile::tempdir().unwrap();
        let sc = obj("StorageClass", "", "lvms-vg1");
        {
            let j = Journal::open(dir.path()).unwrap();
            closed_pair(&j, &sc, "a");
            closed_pair(&j, &obj("StorageClass", "", "other"), "b");
            // As a format 3 release left it: no object index and no coverage mark.
            let (lo, hi) = keys::span(keys::OBJECT);
            let mut b = Batch::default();
            for kv in j.store().range(&lo, &hi) {
                b.remove(kv.unwrap().0);
            }
            b.remove(keys::META_OBJECT_INDEX_FROM);
            j.store().apply(b).unwrap();
            j.flush().unwrap();
        }
        let j = Journal::open(dir.path()).unwrap();
        assert_eq!(
            j.object_index_from(),
            5,
            "covers what is appended from now on"
        );
        closed_pair(&j, &sc, "c");
        let f = filter("StorageClass/lvms-vg1");
        assert_eq!(
            j.object_seqs(&f.kind, &f.namespace, &f.name).unwrap(),
            [5, 6]
        );
        assert_eq!(query(&j, &f), [1, 2, 5, 6]);
        assert!(j.verify().unwrap().is_clean(), "{:?}", j.verify().unwrap());
    }

    #[test]
    fn compaction_removes_the_index_entries_of_what_it_deletes() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path()).unwrap();
        let sc = obj("StorageClass", "", "lvms-vg1");
        for k in 0..3 {
            closed_pair(&j, &sc, &format!("k{k}"));
        }
        publish(&j, Some(&sc), "e");
        j.snapshot::<Count>(Trace::default()).unwrap();
        let all = Retention {
            max_age: Some(Duration::ZERO),
            max_records: Some(0),
        };
        let report = j.compact(all).unwrap();
        assert_eq!(report.deleted, 6, "{report:?}");
        let f = filter("StorageClass/lvms-vg1");
        // The last Published per key is kept, and so is its index entry.
        assert_eq!(j.object_seqs(&f.kind, &f.namespace, &f.name).unwrap(), [7]);
        assert_eq!(query(&j, &f), [7]);
        assert!(j.verify().unwrap().is_clean(), "{:?}", j.verify().unwrap());
    }

    #[test]
    fn verify_reports_a_missing_or_a_stray_object_index_entry() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path()).unwrap();
        let sc = obj("StorageClass", "", "lvms-vg1");
        let i = closed_pair(&j, &sc, "a");
        let mut b = Batch::default();
        let vg1 = keys::object_hash("StorageClass", "", "lvms-vg1");
        let vg2 = keys::object_hash("StorageClass", "", "lvms-vg2");
        b.remove(keys::object_key(vg1, i));
        b.insert(keys::object_key(vg2, i), Vec::new());
        j.store().apply(b).unwrap();
        let mut problems = j.verify().unwrap().index_problems;
        problems.sort();
        assert_eq!(
            problems,
            [
                format!(
                    "object index lists {i} under object hash {vg2:016x}, which is not the object of such a record in the log"
                ),
                format!("record {i} about StorageClass/lvms-vg1 is missing from the object index"),
            ]
        );
        // A stray entry shows up in the query as a record that is not what it claims.
        let f = filter("StorageClass/lvms-vg2");
        assert_eq!(
            query(&j, &f),
            Vec::<Seq>::new(),
            "the record is not about vg2"
        );
    }

    #[test]
    fn an_index_entry_for_a_record_that_is_gone_is_reported_by_the_query() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path()).unwrap();
        let sc = obj("StorageClass", "", "lvms-vg1");
        let i = closed_pair(&j, &sc, "a");
        let mut b = Batch::default();
        b.remove(keys::seq_key(keys::LOG, i));
        j.store().apply(b).unwrap();
        let entries = j
            .query(&Filter {
                object: Some(filter("StorageClass/lvms-vg1")),
                ..Filter::default()
            })
            .unwrap();
        match entries.as_slice() {
            [Entry::Corrupt(c), Entry::Record { .. }] => {
                assert_eq!(c.seq, i);
                assert!(c.reason.contains("not in the log"), "{}", c.reason);
            }
            other => panic!("{other:?}"),
        }
    }
}
