//! Behaviour of appends, indexes, queries, corruption handling, inspection and rendering.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod common;

use std::time::Duration;

use common::*;
use lvms_journal::render::{render_json, render_jsonl, render_table};
use lvms_journal::*;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn seqs_are_monotonic_and_continue_after_reopen() {
    let dir = tmp();
    let j = Journal::open(dir.path()).unwrap();
    let a = j.append_published(status("vg", "c"), trace(1)).unwrap();
    let b = j.append_intent(intent("vg", "c", "k1"), trace(1)).unwrap();
    assert_eq!((a, b), (1, 2));
    drop(j);
    let j = Journal::open(dir.path()).unwrap();
    assert_eq!(
        j.append_published(published("vg", "p", "s"), trace(1))
            .unwrap(),
        3
    );
    let seqs: Vec<u64> = j.iter().map(|r| r.unwrap().seq).collect();
    assert_eq!(seqs, vec![1, 2, 3]);
    assert!(j.verify().unwrap().is_clean());
}

#[test]
fn open_intents_outcomes_and_indexes() {
    let dir = tmp();
    let j = Journal::open_with(dir.path(), config(FlushPolicy::Manual)).unwrap();
    let i1 = j.append_intent(intent("vg", "a", "k1"), trace(1)).unwrap();
    let i2 = j.append_intent(intent("vg", "b", "k2"), trace(2)).unwrap();
    let i3 = j
        .append_intent(intent("node", "b", "k3"), trace(3))
        .unwrap();
    j.append_outcome(i1, ok(), Duration::from_millis(7), trace(1))
        .unwrap();
    assert!(matches!(
        j.append_outcome(i1, ok(), Duration::ZERO, trace(1)),
        Err(JournalError::IntentNotOpen { seq }) if seq == i1
    ));
    assert!(matches!(
        j.append_outcome(999, ok(), Duration::ZERO, trace(1)),
        Err(JournalError::IntentNotOpen { .. })
    ));
    assert_eq!(j.open_intent_seqs().unwrap(), vec![i2, i3]);
    let vg: Vec<u64> = j
        .open_intents_for("vg")
        .unwrap()
        .iter()
        .map(|r| r.seq)
        .collect();
    assert_eq!(vg, vec![i2]);
    assert_eq!(j.intent_by_key("k3").unwrap().unwrap().seq, i3);

    j.append_published(published("vg", "ev", "first"), trace(1))
        .unwrap();
    let p2 = j
        .append_published(published("vg", "ev", "second"), trace(1))
        .unwrap();
    assert_eq!(j.last_published("ev").unwrap().unwrap().seq, p2);
    assert!(j.last_published("nope").unwrap().is_none());

    // by unit / object / trace
    assert_eq!(j.by_unit("node").unwrap().len(), 1);
    assert_eq!(j.by_trace(trace(2).trace_id).unwrap().len(), 1);
    let obj: ObjectFilter = "lvmcluster/openshift-storage/b".parse().unwrap();
    assert_eq!(j.by_object(obj).unwrap().len(), 2);
    let open_only = j
        .query(&Filter {
            open_only: true,
            ..Filter::default()
        })
        .unwrap();
    assert_eq!(
        open_only.iter().map(Entry::seq).collect::<Vec<_>>(),
        vec![i2, i3]
    );
    let limited = j
        .query(&Filter {
            limit: Some(2),
            ..Filter::default()
        })
        .unwrap();
    assert_eq!(
        limited.iter().map(Entry::seq).collect::<Vec<_>>(),
        vec![p2 - 1, p2]
    );
    j.flush().unwrap();
    let report = j.verify().unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_open_index_consistent(&j);
}

#[test]
fn since_filter_and_range_by_seq() {
    let dir = tmp();
    let (clock, now) = manual_clock(1_000);
    let cfg = JournalConfig {
        clock,
        ..JournalConfig::default()
    };
    let j = Journal::open_with(dir.path(), cfg).unwrap();
    for t in [1_000u64, 2_000, 3_000] {
        now.store(t, std::sync::atomic::Ordering::SeqCst);
        j.append_published(status("vg", "c"), trace(1)).unwrap();
    }
    assert_eq!(j.since(2_000).unwrap().len(), 2);
    let mid: Vec<u64> = j.iter_range(2..=2).map(|r| r.unwrap().seq).collect();
    assert_eq!(mid, vec![2]);
}

#[test]
fn stale_lease_epoch_is_refused() {
    let dir = tmp();
    let j = Journal::open(dir.path()).unwrap();
    let mut i = intent("vg", "c", "k");
    i.lease_epoch = 5;
    j.append_intent(i.clone(), trace(1)).unwrap();
    drop(j);
    let j = Journal::open(dir.path()).unwrap();
    i.lease_epoch = 4;
    assert!(matches!(
        j.append_intent(i, trace(1)),
        Err(JournalError::StaleEpoch {
            epoch: 4,
            current: 5
        })
    ));
}

#[test]
fn corrupt_record_is_reported_and_the_rest_stays_readable() {
    let dir = tmp();
    let j = Journal::open(dir.path()).unwrap();
    for n in 0..10 {
        j.append_published(status("vg", &format!("c{n}")), trace(n))
            .unwrap();
    }
    assert!(j.testing_corrupt_record(5).unwrap());
    // a torn frame too: header promises more bytes than stored
    let good = lvms_journal::codec::encode_record(&j.get(7).unwrap().unwrap()).unwrap();
    j.testing_put_raw(7, good[..good.len() / 2].to_vec())
        .unwrap();

    let items: Vec<_> = j.iter().collect();
    assert_eq!(items.len(), 10, "iteration continues past corrupt records");
    let bad: Vec<u64> = items
        .iter()
        .filter_map(|r| match r {
            Err(JournalError::Corrupt(c)) => Some(c.seq),
            _ => None,
        })
        .collect();
    assert_eq!(bad, vec![5, 7]);
    assert!(matches!(
        j.get(5),
        Err(JournalError::Corrupt(CorruptRecord { seq: 5, .. }))
    ));

    let report = j.verify().unwrap();
    assert_eq!(
        report.corrupt.iter().map(|c| c.seq).collect::<Vec<_>>(),
        vec![5, 7]
    );
    assert!(report.gaps.is_empty());
    assert!(
        report.corrupt[0].reason.contains("crc32c"),
        "{:?}",
        report.corrupt[0]
    );
    assert!(
        report.corrupt[1].reason.contains("length"),
        "{:?}",
        report.corrupt[1]
    );

    let entries = j.query(&Filter::default()).unwrap();
    let table = render_table(&entries);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 11, "{table}");
    assert!(
        lines[5].starts_with("5 ") && lines[5].contains("CORRUPT") && lines[5].contains("crc32c"),
        "{table}"
    );
    assert!(
        lines[4].contains("LVMCluster/openshift-storage/c3"),
        "{table}"
    );
    let jsonl = render_jsonl(&entries);
    let row5: serde_json::Value = serde_json::from_str(jsonl.lines().nth(4).unwrap()).unwrap();
    assert_eq!(row5["kind"], "corrupt");
    assert_eq!(row5["seq"], 5);
    assert_eq!(j.stats().unwrap().by_kind["corrupt"], 2);
}

/// This test failed once in ~80 runs and has not failed since; the suspicion is that sled
/// releasing its directory lock from a background thread shortly after drop. Retrying the
/// open for up to a second keeps the test about gaps, not about that.
fn retry<T, E: std::fmt::Debug>(mut open: impl FnMut() -> Result<T, E>) -> T {
    for _ in 0..20 {
        if let Ok(v) = open() {
            return v;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    open().unwrap()
}

#[test]
fn missing_records_are_reported_as_gaps() {
    let dir = tmp();
    let j = Journal::open(dir.path()).unwrap();
    for n in 0..6 {
        j.append_published(status("vg", "c"), trace(n)).unwrap();
    }
    drop(j);
    // Delete seq 3 behind the journal's back through sled directly.
    {
        let db = retry(|| sled::open(dir.path()));
        let mut key = vec![b'L'];
        key.extend_from_slice(&3u64.to_be_bytes());
        assert!(db.remove(key).unwrap().is_some());
        db.flush().unwrap();
    }
    let j = retry(|| Journal::open(dir.path()));
    let report = j.verify().unwrap();
    assert_eq!(report.gaps, vec![Gap { first: 3, last: 3 }]);
    assert!(!report.is_clean());
}

#[test]
fn newer_format_version_is_refused_naming_both_versions() {
    let dir = tmp();
    let j = Journal::open(dir.path()).unwrap();
    j.append_published(status("vg", "c"), trace(1)).unwrap();
    j.testing_set_format_version(lvms_journal::codec::FORMAT_VERSION + 1)
        .unwrap();
    drop(j);
    // sled's flusher thread can hold the file lock a moment after the drop.
    let mut tries = 0;
    let err = loop {
        match Journal::open(dir.path()) {
            Err(e) if e.to_string().contains("could not acquire lock") && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => break e,
            Ok(_) => panic!("a journal of a newer format was opened"),
        }
    };
    assert!(
        matches!(
            err,
            JournalError::NewerFormat {
                found: 5,
                supported: 4
            }
        ),
        "{err}"
    );
    let msg = err.to_string();
    assert!(msg.contains('5') && msg.contains('4'), "{msg}");
}

#[test]
fn open_copy_reads_a_locked_journal_without_touching_it() {
    let dir = tmp();
    let live = Journal::open(dir.path()).unwrap();
    let i = live
        .append_intent(intent("vg", "c", "k"), trace(9))
        .unwrap();
    // The live journal holds sled's lock; a direct open would fail.
    assert!(Journal::open(dir.path()).is_err());
    let copy = Journal::open_copy(dir.path()).unwrap();
    assert_eq!(copy.open_intent_seqs().unwrap(), vec![i]);
    copy.append_published(status("vg", "c"), trace(1)).unwrap();
    let copy_path = copy.path().to_path_buf();
    drop(copy);
    assert!(!copy_path.exists(), "copy is removed on drop");
    assert_eq!(live.iter().count(), 1, "original unchanged");
}

/// Appends intent/outcome pairs until `stop`, pausing `pause` every `burst` pairs (a reconcile
/// pass's rhythm) or never when `pause` is zero; returns how many pairs it wrote.
fn busy_owner(
    live: std::sync::Arc<Journal>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    burst: u64,
    pause: Duration,
) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut n = 0u64;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let i = live
                .append_intent(intent("vg", "c", &format!("k{n}")), trace(n))
                .unwrap();
            live.append_outcome(i, ok(), Duration::ZERO, trace(n))
                .unwrap();
            n += 1;
            if !pause.is_zero() && n.is_multiple_of(burst) {
                std::thread::sleep(pause);
            }
        }
        n
    })
}

/// Copies taken while the owner appends and flushes (as `lvms journal inspect` on a live node
/// does, and as the CSI soak's settle check did when sled refused a copy as "Corruption") stand
/// for one instant: each opens, reads gapless and whole, and never has fewer records than an
/// earlier one (a torn copy recovers an older prefix, or makes sled panic).
#[test]
fn copies_taken_while_the_owner_writes_stand_for_one_instant() {
    let dir = tmp();
    let live = std::sync::Arc::new(Journal::open(dir.path()).unwrap());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = busy_owner(live.clone(), stop.clone(), 200, Duration::from_millis(120));
    let mut last = 0;
    for _ in 0..25 {
        let copy = Journal::open_copy(dir.path()).unwrap();
        let seqs: Vec<u64> = copy.iter().map(|r| r.unwrap().seq).collect();
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "gapless");
        assert!(
            seqs.len() >= last,
            "a later copy has {} records, an earlier one {last}",
            seqs.len()
        );
        assert!(copy.verify().unwrap().is_clean());
        last = seqs.len();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = writer.join().unwrap();
    assert!(written > 0 && last > 0, "{written} written, {last} seen");
}

/// An owner that never pauses gets a clear error naming the journal, never a torn copy. (A
/// loaded machine can still give it a still moment, a stalled fsync or a descheduled writer:
/// then the copy must be whole.)
#[test]
fn a_journal_written_without_pause_is_not_copied_torn() {
    let dir = tmp();
    let live = std::sync::Arc::new(Journal::open(dir.path()).unwrap());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = busy_owner(live.clone(), stop.clone(), 1, Duration::ZERO);
    let got = Journal::open_copy_within(dir.path(), Duration::from_secs(1));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    match got {
        Err(err) => {
            assert!(matches!(err, JournalError::CopyMoving { .. }), "{err}");
            assert!(
                err.to_string().contains(&dir.path().display().to_string()),
                "{err}"
            );
        }
        Ok(copy) => {
            let seqs: Vec<u64> = copy.iter().map(|r| r.unwrap().seq).collect();
            assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "gapless");
            assert!(copy.verify().unwrap().is_clean());
        }
    }
    // With no patience at all there is no copy, and the error says why.
    let err = Journal::open_copy_within(dir.path(), Duration::ZERO)
        .map(|_| ())
        .expect_err("no time to wait for a still moment");
    assert!(err.to_string().contains("without a pause"), "{err}");
    // Once the owner rests (its last appends flushed), the copy is whole.
    live.flush().unwrap();
    let copy = Journal::open_copy(dir.path()).unwrap();
    assert_eq!(copy.iter().count(), live.iter().count());
}

#[test]
fn json_follows_the_documented_schema() {
    let dir = tmp();
    let (j, _) = open_with_manual_clock(dir.path(), 1_700_000_000_123);
    let i = j.append_intent(intent("vg", "c", "k"), trace(1)).unwrap();
    j.append_outcome(
        i,
        OutcomeResult::Err {
            reason: "Conflict".into(),
            message: "rv changed".into(),
            retryable: true,
        },
        Duration::from_millis(12),
        trace(1),
    )
    .unwrap();
    let entries = j.query(&Filter::default()).unwrap();
    let v: serde_json::Value = serde_json::from_str(&render_json(&entries)).unwrap();
    let first = &v[0];
    assert_eq!(first["v"], 1);
    assert_eq!(first["kind"], "intent");
    assert_eq!(first["time"], "2023-11-14T22:13:20.123Z");
    assert_eq!(first["trace_id"], "00000000000000000000000000000001");
    assert_eq!(first["span_id"], "000000000000abcc");
    assert_eq!(first["open"], false);
    assert_eq!(first["object"]["namespace"], "openshift-storage");
    assert_eq!(first["body"]["idempotency_key"], "k");
    let second = &v[1];
    assert_eq!(second["body"]["ok"], false);
    assert_eq!(second["body"]["retryable"], true);
    assert_eq!(second["body"]["duration_ms"], 12);
    let table = render_table(&entries);
    assert!(
        table.contains("12ms") && table.contains("err(retryable) Conflict: rv changed"),
        "{table}"
    );
    assert!(table.contains("2023-11-14T22:13:20.123Z"));
}

#[test]
fn stats_count_kinds_units_and_open_intents() {
    let dir = tmp();
    let j = Journal::open(dir.path()).unwrap();
    j.append_published(status("vg", "c"), trace(1)).unwrap();
    let i = j.append_intent(intent("vg", "c", "k"), trace(1)).unwrap();
    j.append_intent(intent("node", "c", "k2"), trace(1))
        .unwrap();
    j.append_outcome(i, ok(), Duration::ZERO, trace(1)).unwrap();
    let st = j.stats().unwrap();
    assert_eq!(st.records, 4);
    assert_eq!(st.by_kind["intent"], 2);
    assert_eq!(st.by_unit["vg"], 3);
    assert_eq!(st.open_intents, 1);
    assert!(st.oldest_ms.is_some() && st.size_on_disk > 0);
}

#[test]
fn object_filter_parsing() {
    let f: ObjectFilter = "LVMVolumeGroup/ns/vg1".parse().unwrap();
    assert_eq!(
        (f.kind.as_str(), f.namespace.as_str(), f.name.as_str()),
        ("LVMVolumeGroup", "ns", "vg1")
    );
    let c: ObjectFilter = "Node/worker-0".parse().unwrap();
    assert_eq!(c.namespace, "");
    assert!("a/b/c/d".parse::<ObjectFilter>().is_err());
    assert!("justkind".parse::<ObjectFilter>().is_err());
    assert!("00".parse::<TraceId>().is_err());
}

#[test]
fn the_append_observer_sees_each_append_and_whether_it_flushed() {
    let dir = tmp();
    let j = Journal::open_with(dir.path(), config(FlushPolicy::Every(2))).unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = seen.clone();
    assert!(
        j.set_append_observer(std::sync::Arc::new(move |took, flushed| {
            sink.lock().unwrap().push((took, flushed));
        }))
    );
    assert!(
        !j.set_append_observer(std::sync::Arc::new(|_, _| {})),
        "the first observer stays"
    );
    j.append_published(status("vg", "a"), trace(1)).unwrap(); // 1 unflushed: no flush
    j.append_published(status("vg", "b"), trace(1)).unwrap(); // 2nd: group flush
    j.append_intent(intent("vg", "c", "k"), trace(1)).unwrap(); // write-ahead: always
    let flushed: Vec<bool> = seen.lock().unwrap().iter().map(|(_, f)| *f).collect();
    assert_eq!(flushed, vec![false, true, true]);
    assert!(j.size_on_disk().unwrap() > 0);
}

#[test]
fn a_journal_held_by_a_live_handle_is_refused_after_a_short_wait() {
    let dir = tmp();
    let j = Journal::open(dir.path()).unwrap();
    j.append_published(status("vg", "c"), trace(1)).unwrap();
    let started = std::time::Instant::now();
    let err = match Journal::open(dir.path()) {
        Err(e) => e,
        Ok(_) => panic!("two live handles on one journal"),
    };
    assert!(err.to_string().contains("lock"), "{err}");
    assert!(started.elapsed() >= Duration::from_millis(1500));
    // Once the holder is gone, the next open waits out sled's flusher and succeeds.
    drop(j);
    let j = Journal::open(dir.path()).unwrap();
    assert_eq!(j.iter().count(), 1);
}

/// Group commit: concurrent durable appends (which share flushes: `cargo bench --bench
/// journal` shows the rate) are all acknowledged as flushed with distinct seqs and survive a
/// reopen whole; a batch gets consecutive seqs.
#[test]
fn concurrent_durable_appends_lose_nothing_and_batches_are_consecutive() {
    let dir = tmp();
    let j = std::sync::Arc::new(Journal::open(dir.path()).unwrap());
    let flushes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let f = flushes.clone();
    j.set_append_observer(std::sync::Arc::new(move |_, flushed| {
        if flushed {
            f.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let j = j.clone();
            std::thread::spawn(move || {
                (0..50)
                    .map(|n| {
                        j.append_intent(intent("vg", "c", &format!("k{t}-{n}")), trace(n))
                            .unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut seqs: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    seqs.sort();
    seqs.dedup();
    assert_eq!(seqs.len(), 400, "every append got its own seq");
    assert_eq!(flushes.load(std::sync::atomic::Ordering::SeqCst), 400);
    // A batch: consecutive seqs, one flush.
    let batch = j
        .append_intents(
            (0..5)
                .map(|n| intent("vg", "d", &format!("b{n}")))
                .collect(),
            trace(9),
        )
        .unwrap();
    assert_eq!(batch, (401..=405).collect::<Vec<_>>());
    drop(j);
    let j = Journal::open(dir.path()).unwrap();
    assert!(j.verify().unwrap().is_clean());
    assert_eq!(j.open_intent_seqs().unwrap().len(), 405);
}

/// Issue 41: one live writer per unit. A later claim of a unit supersedes the earlier one:
/// the superseded holder can neither intend nor close, the current one can, other units and
/// unclaimed appends are not affected, and `since` bounds what the new holder may replay.
#[test]
fn a_superseded_claim_can_no_longer_append_for_its_unit() {
    let dir = tmp();
    let j = Journal::open(dir.path()).unwrap();
    assert_eq!(j.opened_at(), 1);
    let old = j.claim("vg/a").unwrap();
    let in_flight = j
        .append_intents_claimed(Some(&old), vec![(intent("vg/a", "c", "k1"), trace(1))])
        .unwrap()[0];
    let new = j.claim("vg/a").unwrap();
    assert!(new.instance() > old.instance());
    assert_eq!(
        new.since(),
        in_flight + 1,
        "the old instance's intent is below it"
    );

    let refused = j
        .append_intents_claimed(Some(&old), vec![(intent("vg/a", "c", "k2"), trace(1))])
        .unwrap_err();
    assert!(
        matches!(&refused, JournalError::Superseded { unit, instance, current }
            if unit == "vg/a" && *instance == old.instance() && *current == new.instance()),
        "{refused:?}"
    );
    assert!(
        refused.to_string().contains("one live writer per unit"),
        "{refused}"
    );
    assert!(matches!(
        j.append_outcome_claimed(Some(&old), in_flight, ok(), Duration::ZERO, trace(1)),
        Err(JournalError::Superseded { .. })
    ));
    assert_eq!(
        j.open_intent_seqs().unwrap(),
        vec![in_flight],
        "the refused outcome left the intent open for the current instance"
    );
    j.append_outcome_claimed(Some(&new), in_flight, ok(), Duration::ZERO, trace(1))
        .unwrap();
    j.append_intents_claimed(Some(&new), vec![(intent("vg/a", "c", "k3"), trace(1))])
        .unwrap();
    // A claim speaks for its own unit only; other units and unclaimed appends go on.
    assert!(matches!(
        j.append_intents_claimed(Some(&new), vec![(intent("vg/b", "c", "k4"), trace(1))]),
        Err(JournalError::ClaimMismatch { .. })
    ));
    let left = j
        .append_intent(intent("vg/a", "c", "k5"), trace(1))
        .unwrap();
    let b = j.claim("vg/b").unwrap();
    j.append_intents_claimed(Some(&b), vec![(intent("vg/b", "c", "k6"), trace(1))])
        .unwrap();
    drop(j);
    // Claims are per process: a reopened journal starts with none and knows where it began;
    // an intent of the earlier process (read from the store, not from memory) is checked too.
    let j = Journal::open(dir.path()).unwrap();
    assert_eq!(j.opened_at(), 6);
    let (old, new) = (j.claim("vg/a").unwrap(), j.claim("vg/a").unwrap());
    assert_eq!((old.since(), new.since()), (6, 6));
    assert!(matches!(
        j.append_outcome_claimed(Some(&old), left, ok(), Duration::ZERO, trace(1)),
        Err(JournalError::Superseded { .. })
    ));
    j.append_outcome_claimed(Some(&new), left, ok(), Duration::ZERO, trace(1))
        .unwrap();
}

/// One corrupt open intent must not hide the others: every unit's replay reads this list, and a
/// list that failed as a whole kept every unit from ever running again (issue 38: a teardown
/// blocked forever by one bad record).
#[test]
fn a_corrupt_open_intent_is_set_aside_and_the_others_still_replay() {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::open(dir.path()).unwrap();
    let bad = j.append_intent(intent("a", "x", "k1"), trace(1)).unwrap();
    let good = j.append_intent(intent("b", "y", "k2"), trace(2)).unwrap();
    assert!(j.testing_corrupt_record(bad).unwrap());
    let open: Vec<u64> = j.open_intents().unwrap().iter().map(|r| r.seq).collect();
    assert_eq!(open, [good]);
    assert_eq!(j.open_intents_for("b").unwrap().len(), 1);
    let unreadable = j.unreadable_open_intents().unwrap();
    assert_eq!(unreadable.len(), 1);
    assert_eq!(unreadable[0].seq, bad);
    // Still what verify reports, and still open (nothing decided it).
    assert!(j.is_open(bad).unwrap());
    assert!(!j.verify().unwrap().is_clean());
}

/// A kill while sled writes its own page-table snapshot leaves a torn `snap.*.generating`,
/// which sled 0.34.7 then reads as the newest snapshot and refuses as corrupt on every open
/// (the journal crash loop met it at its 98th kill). The journal opens anyway, every record
/// there, the torn file kept aside for a post-mortem.
#[test]
fn a_snapshot_torn_by_a_kill_does_not_keep_the_journal_shut() {
    let dir = tmp();
    let j = Journal::open(dir.path()).unwrap();
    for n in 0..50 {
        j.append_intent(intent("vg", "c", &format!("k{n}")), trace(n))
            .unwrap();
    }
    j.flush().unwrap();
    drop(j);
    // Reopened once more, so sled has written a complete snapshot to lay the torn one over.
    drop(Journal::open(dir.path()).unwrap());
    let mut snaps: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("snap.") && !n.ends_with(".generating"))
        .collect();
    snaps.sort();
    let newest = snaps.pop().expect("sled wrote a snapshot");
    let whole = std::fs::read(dir.path().join(&newest)).unwrap();
    let torn = format!("{newest}.generating");
    std::fs::write(dir.path().join(&torn), &whole[..whole.len() / 2]).unwrap();

    let j =
        Journal::open(dir.path()).unwrap_or_else(|e| panic!("reopen over a torn snapshot: {e}"));
    let keys: Vec<u64> = j.iter().map(|r| r.unwrap().seq).collect();
    assert_eq!(keys, (1..=50).collect::<Vec<u64>>());
    assert!(j.verify().unwrap().is_clean());
    assert!(
        dir.path().join(format!("torn-{torn}")).exists(),
        "kept aside"
    );
    assert!(!dir.path().join(&torn).exists());
}
