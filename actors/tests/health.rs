//! UnitHealth: the projection of pass outcomes into per-unit ok/err.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod common;

use std::time::Duration;

use common::*;
use lvms_actors::{PASS_ACTION, UnitHealth};
use lvms_journal::{Body, Journal, Projection, PublishKind, Published, Seq, Trace};

/// One scripted journal entry; outcomes name the script index of their intent.
#[derive(Clone, Copy)]
enum Op {
    Pass(&'static str),
    Step(&'static str),
    Ok(usize, &'static str),
    Err(usize, &'static str),
    Status(&'static str),
    Published(&'static str),
}

const SCRIPT: &[Op] = &[
    Op::Pass("a"),                    // 0
    Op::Step("a"),                    // 1
    Op::Err(1, "StepFailed"),         // 2: a step outcome, ignored
    Op::Ok(0, "a in sync"),           // 3: a ok
    Op::Pass("b"),                    // 4
    Op::Status("b"),                  // 5
    Op::Step("b"),                    // 6
    Op::Ok(6, "step ok"),             // 7: ignored
    Op::Err(4, "VolumeGroupMissing"), // 8: b err
    Op::Step("c"),                    // 9: c only ever has steps
    Op::Err(9, "Forbidden"),          // 10: ignored, c stays unknown
    Op::Pass("a"),                    // 11
    Op::Published("a"),               // 12
    Op::Err(11, "DeviceBusy"),        // 13: a err
    Op::Pass("b"),                    // 14
    Op::Ok(14, "b in sync"),          // 15: b ok
    Op::Pass("c"),                    // 16: still open at the end
];

fn run(j: &Journal, ops: &[Op], seqs: &mut Vec<Seq>) {
    let t = Trace::default();
    let d = Duration::from_millis(3);
    for op in ops {
        let seq = match *op {
            Op::Pass(u) => j
                .append_intent(intent(u, subject(), PASS_ACTION, &format!("{u}/pass")), t)
                .unwrap(),
            Op::Step(u) => j
                .append_intent(
                    intent(u, object("ConfigMap", u), "apply", &format!("{u}/apply")),
                    t,
                )
                .unwrap(),
            Op::Ok(i, summary) => j.append_outcome(seqs[i], ok_result(summary), d, t).unwrap(),
            Op::Err(i, reason) => j
                .append_outcome(seqs[i], err_result(reason, "details"), d, t)
                .unwrap(),
            Op::Status(u) => j
                .append_published(
                    Published {
                        unit: u.into(),
                        object: Some(subject()),
                        kind: PublishKind::Status,
                        dedupe_key: format!("status/{u}"),
                        source_seq: 1,
                        count: 1,
                        summary: String::new(),
                    },
                    t,
                )
                .unwrap(),
            Op::Published(u) => j
                .append_published(
                    Published {
                        unit: u.into(),
                        object: None,
                        kind: PublishKind::Event,
                        dedupe_key: "k".into(),
                        source_seq: 1,
                        count: 1,
                        summary: String::new(),
                    },
                    t,
                )
                .unwrap(),
        };
        seqs.push(seq);
    }
}

/// The fold of every record (snapshots aside), from scratch.
fn full_fold(j: &Journal) -> UnitHealth {
    let mut h = UnitHealth::default();
    for r in records(j) {
        if !matches!(r.body, Body::Snapshot(_)) {
            h.apply(&r);
        }
    }
    h
}

#[test]
fn health_comes_from_pass_outcomes_only() {
    let dir = TestDir::new("health-fold");
    let j = Journal::open(dir.path()).unwrap();
    let mut seqs = Vec::new();
    run(&j, SCRIPT, &mut seqs);

    let h = full_fold(&j);
    assert_eq!(h.units.keys().collect::<Vec<_>>(), ["a", "b"], "{h:?}");
    let a = &h.units["a"];
    assert!(!a.ok);
    assert_eq!(a.message, "DeviceBusy: details");
    assert_eq!(a.seq, seqs[13]);
    let b = &h.units["b"];
    assert!(b.ok);
    assert_eq!(b.message, "b in sync");
    assert_eq!(b.seq, seqs[15]);

    // Intermediate states: after op 3 a is ok; after op 8 b is err; a step error never counts.
    let mut h = UnitHealth::default();
    for r in records(&j) {
        h.apply(&r);
        if r.seq == seqs[2] {
            assert!(h.units.is_empty(), "a step outcome made health: {h:?}");
        }
        if r.seq == seqs[3] {
            assert!(h.units["a"].ok);
            assert_eq!(h.units["a"].message, "a in sync");
        }
        if r.seq == seqs[8] {
            assert!(!h.units["b"].ok);
            assert_eq!(h.units["b"].message, "VolumeGroupMissing: details");
        }
        if r.seq == seqs[10] {
            assert!(!h.units.contains_key("c"));
        }
    }
    assert_eq!(j.rebuild::<UnitHealth>().unwrap().state, full_fold(&j));
}

#[test]
fn snapshot_plus_tail_equals_the_full_fold_at_every_cut() {
    let dir = TestDir::new("health-snapshot");
    for cut in 0..=SCRIPT.len() {
        let j = Journal::open(dir.path().join(format!("j{cut}"))).unwrap();
        let mut seqs = Vec::new();
        run(&j, &SCRIPT[..cut], &mut seqs);
        let snap = j.snapshot::<UnitHealth>(Trace::default()).unwrap();
        let at_snapshot = j.rebuild::<UnitHealth>().unwrap();
        // Outcomes after the cut may close intents from before it (`seqs` keeps script order).
        run(&j, &SCRIPT[cut..], &mut seqs);

        let rebuilt = j.rebuild::<UnitHealth>().unwrap();
        assert_eq!(rebuilt.from_snapshot, Some(snap), "cut {cut}");
        assert_eq!(rebuilt.state, full_fold(&j), "cut {cut}");
        assert_eq!(rebuilt.upto_seq, j.next_seq().unwrap() - 1);

        // catch_up from the snapshot's state gives the same.
        let mut caught = at_snapshot.state.clone();
        let last = caught.catch_up(&j, at_snapshot.upto_seq).unwrap();
        assert_eq!(caught, full_fold(&j), "catch_up at cut {cut}");
        assert_eq!(last, rebuilt.upto_seq);
        drop(j);
    }
}
