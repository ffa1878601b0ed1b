//! Fault injection (`--features failpoints`). Each named point is hit with "return" (append
//! fails with an error) and "panic"; the journal is reopened and must be consistent: no
//! half-written record visible as valid, open-intent index matching the records, seqs never
//! reused. One test function, because the `fail` registry is process-global.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]
#![cfg(feature = "failpoints")]

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use common::*;
use lvms_journal::*;

const POINTS: [&str; 3] = [
    "journal::append::before_write",
    "journal::index::before_update",
    "journal::append::before_flush",
];

#[test]
fn every_fail_point_leaves_a_consistent_journal() {
    let scenario = fail::FailScenario::setup();
    for point in POINTS {
        for action in ["return", "panic"] {
            let dir = tempfile::tempdir().unwrap();
            let j = Journal::open(dir.path()).unwrap();
            let open_before = j.append_intent(intent("vg", "a", "k0"), trace(1)).unwrap();
            let closed = j.append_intent(intent("vg", "b", "k1"), trace(2)).unwrap();
            let before = j.next_seq().unwrap();

            fail::cfg(point, action).unwrap();
            let intent_res = catch_unwind(AssertUnwindSafe(|| {
                j.append_intent(intent("vg", "c", "k2"), trace(3))
            }));
            fail::remove(point);
            match (&intent_res, action) {
                (Ok(Err(JournalError::FailPoint(p))), "return") => assert_eq!(*p, point),
                (Err(_), "panic") => {}
                other => panic!("{point}/{action}: unexpected {other:?}"),
            }
            // An outcome hitting the same point must not half-close the intent.
            if action == "return" {
                fail::cfg(point, action).unwrap();
                let r = j.append_outcome(closed, ok(), Duration::ZERO, trace(2));
                fail::remove(point);
                assert!(
                    matches!(r, Err(JournalError::FailPoint(_))),
                    "{point}: {r:?}"
                );
            } else if point == "journal::append::before_flush" {
                // The wait for the disk happens after the writer lock is released (group
                // commit): a panic there poisons nothing and other appends go on.
                assert!(j.next_seq().is_ok(), "{point}: the writer stays usable");
            } else {
                assert!(
                    matches!(j.next_seq(), Err(JournalError::Poisoned)),
                    "panic poisons the writer"
                );
            }
            drop(j);

            let j = Journal::open(dir.path()).unwrap();
            let report = j.verify().unwrap();
            assert!(report.is_clean(), "{point}/{action}: {report:?}");
            assert_open_index_consistent(&j);
            let failed_seq = before;
            let written = j.get(failed_seq).unwrap();
            if point == "journal::append::before_flush" {
                // Applied before the fault: the record is whole and indexed, just not acknowledged.
                let rec = written.expect("applied record survives a clean reopen");
                assert!(matches!(rec.body, Body::Intent(_)));
                assert!(j.is_open(failed_seq).unwrap());
            } else {
                assert!(
                    written.is_none(),
                    "{point}/{action}: failed append is visible: {written:?}"
                );
            }
            assert!(j.is_open(open_before).unwrap());
            // Appends resume with a fresh seq.
            let next = j.append_intent(intent("vg", "d", "k3"), trace(4)).unwrap();
            assert!(
                next > failed_seq || (next == failed_seq && written_absent(point)),
                "{point}: seq {next}"
            );
            j.append_outcome(closed, ok(), Duration::ZERO, trace(2))
                .map(|_| ())
                .or_else(|e| match e {
                    // before_flush "return" already closed it (applied, not acknowledged).
                    JournalError::IntentNotOpen { .. } if point.ends_with("before_flush") => Ok(()),
                    e => Err(e),
                })
                .unwrap();
            assert_open_index_consistent(&j);
            assert!(j.verify().unwrap().is_clean());
        }
    }
    scenario.teardown();
}

fn written_absent(point: &str) -> bool {
    point != "journal::append::before_flush"
}
