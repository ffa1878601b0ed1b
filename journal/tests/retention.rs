//! Retention keeps the journal bounded under steady load, by count and by age.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use lvms_journal::*;

/// One reconcile: observe, intent, outcome, publish (4 records), on 4 units / 8 event keys.
fn cycle(j: &Journal, n: u64) {
    let unit = format!("unit{}", n % 4);
    j.append_published(status(&unit, "c"), trace(n)).unwrap();
    let i = j
        .append_intent(intent(&unit, "c", &format!("k{n}")), trace(n))
        .unwrap();
    j.append_outcome(i, ok(), Duration::from_millis(1), trace(n))
        .unwrap();
    j.append_published(
        published(&unit, &format!("ev{}", n % 8), &format!("s{n}")),
        trace(n),
    )
    .unwrap();
}

#[test]
fn journal_stays_bounded_under_steady_load() {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::open_with(dir.path(), config(FlushPolicy::Every(64))).unwrap();
    // One intent that never completes must survive every compaction.
    let stuck = j
        .append_intent(intent("stuck", "c", "forever"), trace(0))
        .unwrap();
    let retention = Retention {
        max_age: None,
        max_records: Some(400),
    };
    let mut max_records = 0;
    let mut size_at_quarter = 0;
    let cycles = 2_000u64;
    for n in 0..cycles {
        cycle(&j, n);
        if n % 50 == 49 {
            j.snapshot::<Summary>(trace(n)).unwrap();
            let rep = j.compact(retention).unwrap();
            max_records = max_records.max(rep.remaining);
        }
        if n == cycles / 4 {
            size_at_quarter = j.size_on_disk().unwrap();
        }
    }
    let st = j.stats().unwrap();
    // 400 kept + at most one compaction interval (50 cycles x 4 + 1 snapshot) in between.
    assert!(max_records <= 400 + 2, "after compaction: {max_records}");
    assert!(st.records <= 400 + 201, "records: {}", st.records);
    let size = j.size_on_disk().unwrap();
    eprintln!(
        "size at 1/4: {size_at_quarter}, at end: {size}, records {}",
        st.records
    );
    assert!(
        size <= size_at_quarter * 3 + (4 << 20),
        "size grew: {size_at_quarter} -> {size}"
    );
    assert!(j.is_open(stuck).unwrap());
    assert_eq!(j.rebuild::<Summary>().unwrap().state.open.len(), 1);
    let report = j.verify().unwrap();
    assert!(report.is_clean(), "{report:?}");
}

#[test]
fn age_based_retention_only_touches_old_closed_records_below_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let (j, now) = open_with_manual_clock(dir.path(), 1_000_000);
    for n in 0..10 {
        cycle(&j, n);
    }
    // No snapshot yet: nothing may go.
    let rep = j.compact(Retention {
        max_age: Some(Duration::ZERO),
        max_records: None,
    });
    assert_eq!(rep.unwrap().deleted, 0);
    j.snapshot::<Summary>(trace(0)).unwrap();
    now.fetch_add(60_000, Ordering::SeqCst);
    for n in 10..15 {
        cycle(&j, n);
    }
    let rep = j
        .compact(Retention {
            max_age: Some(Duration::from_secs(30)),
            max_records: None,
        })
        .unwrap();
    // Old: 10 status writes (all superseded) + 10 intent/outcome pairs + 10 published. Of the published, the
    // latest of ev0 (n=8), ev1 (n=9) and ev7 (n=7) are still latest and kept; ev2..ev6 were
    // superseded by the fresh cycles. 10 + 20 + 7 = 37.
    assert_eq!(rep.deleted, 37, "{rep:?}");
    assert!(j.get(1).unwrap().is_none());
    assert_eq!(
        j.last_published("ev0").unwrap().unwrap().unit(),
        Some("unit0")
    );
    assert_eq!(
        j.rebuild::<Summary>().unwrap().state.counts["unit1/intent"],
        4
    );
    assert!(j.verify().unwrap().is_clean());
}
