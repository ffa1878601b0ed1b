//! Property tests: snapshot + tail == fold of everything (also across compaction), and
//! compaction never removes an open intent.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use lvms_journal::*;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Observe(u8),
    Intent(u8),
    /// Close the n-th currently open intent (mod count).
    Close(usize, bool),
    Publish(u8, u8),
    Snapshot,
    Compact(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u8..3).prop_map(Op::Observe),
        4 => (0u8..3).prop_map(Op::Intent),
        4 => (any::<usize>(), any::<bool>()).prop_map(|(n, ok)| Op::Close(n, ok)),
        2 => (0u8..3, 0u8..4).prop_map(|(u, k)| Op::Publish(u, k)),
        1 => Just(Op::Snapshot),
        1 => (0usize..20).prop_map(Op::Compact),
    ]
}

/// Runs ops; returns the journal and the model fold of every appended (non-snapshot) record.
fn run(ops: &[Op], dir: &std::path::Path) -> (Journal, Summary, BTreeMap<u64, String>) {
    let j = Journal::open_with(dir, config(FlushPolicy::Manual)).unwrap();
    let mut model = Summary::default();
    let mut open: BTreeMap<u64, String> = BTreeMap::new();
    for (n, op) in ops.iter().enumerate() {
        let unit = |u: &u8| format!("unit{u}");
        let seq = match op {
            Op::Observe(u) => Some(
                j.append_published(status(&unit(u), "c"), trace(n as u64))
                    .unwrap(),
            ),
            Op::Intent(u) => {
                let key = format!("key{n}");
                let s = j
                    .append_intent(intent(&unit(u), "c", &key), trace(n as u64))
                    .unwrap();
                open.insert(s, key);
                Some(s)
            }
            Op::Close(k, good) => {
                if open.is_empty() {
                    None
                } else {
                    let target = *open.keys().nth(k % open.len()).unwrap();
                    open.remove(&target);
                    let res = if *good {
                        ok()
                    } else {
                        OutcomeResult::Err {
                            reason: "r".into(),
                            message: "m".into(),
                            retryable: true,
                        }
                    };
                    Some(
                        j.append_outcome(target, res, Duration::from_millis(3), trace(n as u64))
                            .unwrap(),
                    )
                }
            }
            Op::Publish(u, k) => Some(
                j.append_published(
                    published(&unit(u), &format!("ev{k}"), &format!("s{n}")),
                    trace(n as u64),
                )
                .unwrap(),
            ),
            Op::Snapshot => {
                j.snapshot::<Summary>(trace(n as u64)).unwrap();
                None
            }
            Op::Compact(max) => {
                j.compact(Retention {
                    max_age: None,
                    max_records: Some(*max),
                })
                .unwrap();
                None
            }
        };
        if let Some(seq) = seq {
            model.apply(&j.get(seq).unwrap().unwrap());
        }
    }
    (j, model, open)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn snapshot_plus_tail_equals_fold_of_everything(ops in proptest::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let (j, model, _) = run(&ops, dir.path());
        let rebuilt = j.rebuild::<Summary>().unwrap();
        prop_assert_eq!(&rebuilt.state, &model);
        // and again after a reopen
        drop(j);
        let j = Journal::open(dir.path()).unwrap();
        prop_assert_eq!(j.rebuild::<Summary>().unwrap().state, model);
        let report = j.verify().unwrap();
        prop_assert!(report.is_clean(), "{:?}", report);
    }

    #[test]
    fn compaction_never_removes_an_open_intent(ops in proptest::collection::vec(op(), 1..60), max in 0usize..10) {
        let dir = tempfile::tempdir().unwrap();
        let (j, _, open) = run(&ops, dir.path());
        j.snapshot::<Summary>(trace(0)).unwrap();
        j.compact(Retention { max_age: Some(Duration::ZERO), max_records: Some(max) }).unwrap();
        let still: BTreeMap<u64, String> = j
            .open_intents()
            .unwrap()
            .into_iter()
            .map(|r| match r.body {
                Body::Intent(i) => (r.seq, i.idempotency_key),
                other => panic!("open index points at {other:?}"),
            })
            .collect();
        prop_assert_eq!(&still, &open);
        assert_open_index_consistent(&j);
        let report = j.verify().unwrap();
        prop_assert!(report.is_clean(), "{:?}", report);
    }
}
