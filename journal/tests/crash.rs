//! Kill -9 test. The binary re-executes itself as a child (env `LVMS_JOURNAL_CRASH_CHILD`)
//! that appends intents/outcomes in a loop and prints each acknowledged intent seq after
//! `append_intent` returned. The parent SIGKILLs it at pseudo-random moments, reopens the
//! journal and checks: every acknowledged intent is present and intact (unless compaction
//! legitimately removed it after it was closed), seqs are strictly increasing and never
//! reused, verify() is clean, the open-intent index matches the records, and the latest
//! snapshot + tail rebuild agrees with that index.
//!
//! `LVMS_JOURNAL_CRASH_KILLS` overrides the number of kills (default 200);
//! `LVMS_JOURNAL_CRASH_SEED` the PRNG seed.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use lvms_journal::*;

const CHILD_ENV: &str = "LVMS_JOURNAL_CRASH_CHILD";
const RUN_ENV: &str = "LVMS_JOURNAL_CRASH_RUN";

/// xorshift64*: deterministic, no rand crate.
struct Prng(u64);
impl Prng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        println!("crash_kill_loop: test");
        return;
    }
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        child(&dir);
        return;
    }
    parent();
}

fn child(dir: &str) {
    let run: u64 = std::env::var(RUN_ENV)
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    let j = Journal::open_with(dir, config(FlushPolicy::Every(4))).expect("child: open journal");
    // Replay: close what earlier (killed) runs left open, as a restarted unit would.
    for r in j.open_intents_for("crash").expect("child: open intents") {
        j.append_outcome(r.seq, ok(), Duration::ZERO, r.trace)
            .expect("child: replay outcome");
    }
    let mut out = std::io::stdout().lock();
    for n in 1u64.. {
        let key = format!("r{run}-{n}");
        let seq = j
            .append_intent(intent("crash", "c", &key), trace(n))
            .expect("child: append intent");
        writeln!(out, "I {seq} {key}")
            .and_then(|_| out.flush())
            .expect("child: stdout");
        if n % 3 != 0 {
            j.append_outcome(seq, ok(), Duration::from_millis(1), trace(n))
                .expect("child: outcome");
        }
        if n % 5 == 0 {
            j.append_published(status("crash", "c"), trace(n))
                .expect("child: status");
        }
        // As a unit's pass does: a snapshot whenever 64 records follow the latest one, so
        // kills land in snapshots too.
        j.snapshot_if_due::<Summary>(64, trace(n))
            .expect("child: snapshot");
        if n % 40 == 0 {
            j.compact(Retention {
                max_age: None,
                max_records: Some(300),
            })
            .expect("child: compact");
        }
    }
}

fn parent() {
    let kills: usize = std::env::var("LVMS_JOURNAL_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let seed: u64 = std::env::var("LVMS_JOURNAL_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_1234);
    let exe = std::env::current_exe().expect("current_exe");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = Prng(seed | 1);
    let mut acked: BTreeMap<u64, String> = BTreeMap::new();
    let mut productive_runs = 0;
    let started = Instant::now();
    for run in 0..kills {
        let mut child = Command::new(&exe)
            .env(CHILD_ENV, dir.path())
            .env(RUN_ENV, run.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("child stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // A quarter of the kills land at a blind moment (often during open/recovery/replay);
        // the rest wait until the child acknowledged something, then kill mid-loop.
        let mut early = Vec::new();
        if rng.next().is_multiple_of(4) {
            std::thread::sleep(Duration::from_millis(rng.next() % 100));
        } else {
            let first = rx.recv_timeout(Duration::from_secs(10));
            early.push(first.unwrap_or_else(|e| {
                panic!("run {run}: child acknowledged nothing within 10s: {e}")
            }));
            std::thread::sleep(Duration::from_millis(rng.next() % 25));
        }
        child.kill().expect("kill child");
        let status = child.wait().expect("wait child");
        assert_eq!(
            status.signal(),
            Some(9),
            "run {run}: child died on its own: {status}"
        );
        reader.join().expect("reader thread");
        let mut acks_this_run = 0;
        for line in early.into_iter().chain(rx.try_iter()) {
            let mut parts = line.split_whitespace();
            if parts.next() != Some("I") {
                continue;
            }
            let seq: u64 = parts.next().and_then(|s| s.parse().ok()).expect("ack seq");
            let key = parts.next().expect("ack key").to_string();
            if let Some(prev) = acked.insert(seq, key.clone()) {
                panic!("run {run}: seq {seq} acknowledged twice ({prev} and {key}): seq reused");
            }
            acks_this_run += 1;
        }
        if acks_this_run > 0 {
            productive_runs += 1;
        }
        check(dir.path(), run, &acked);
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "crash_kill_loop: {kills} kills, {} acknowledged intents, {productive_runs} productive runs, {secs:.1}s",
        acked.len()
    );
    assert!(
        productive_runs * 2 >= kills,
        "too few runs got to append anything: {productive_runs}/{kills}"
    );
}

fn check(dir: &std::path::Path, run: usize, acked: &BTreeMap<u64, String>) {
    let j = Journal::open(dir).unwrap_or_else(|e| {
        // The store's files, for the post-mortem (the directory goes with the test).
        let files: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| {
                        let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                        format!("{} ({len} bytes)", e.file_name().to_string_lossy())
                    })
                    .collect()
            })
            .unwrap_or_default();
        panic!("run {run}: reopen after kill: {e}\nfiles: {files:?}")
    });
    let compacted = j.compacted_through().expect("compacted_through");
    // One scan: collect intents, check order and integrity.
    let mut intents: BTreeMap<u64, String> = BTreeMap::new();
    let mut last = 0;
    for r in j.iter() {
        let r = r.unwrap_or_else(|e| panic!("run {run}: {e}"));
        assert!(
            r.seq > last,
            "run {run}: seqs not increasing: {last} then {}",
            r.seq
        );
        last = r.seq;
        if let Body::Intent(i) = r.body {
            intents.insert(r.seq, i.idempotency_key);
        }
    }
    for (seq, key) in acked {
        match intents.get(seq) {
            Some(stored) => {
                assert_eq!(stored, key, "run {run}: intent {seq} has the wrong content")
            }
            None if *seq <= compacted => {} // closed, then compacted
            None => panic!("run {run}: acknowledged intent {seq} ({key}) was lost"),
        }
    }
    let report = j.verify().expect("verify");
    assert!(report.is_clean(), "run {run}: verify: {report:?}");
    assert_open_index_consistent(&j);
    // The latest snapshot + what follows it (all a start reads; compaction removed the rest)
    // knows exactly the intents the index says are open.
    let rebuilt = j
        .rebuild::<Summary>()
        .unwrap_or_else(|e| panic!("run {run}: rebuild from the snapshot: {e}"));
    let open: Vec<u64> = rebuilt.state.open.keys().copied().collect();
    assert_eq!(
        open,
        j.open_intent_seqs().expect("open intents"),
        "run {run}: snapshot {:?} + tail disagrees with the open-intent index",
        rebuilt.from_snapshot
    );
}
