//! The journal's own costs, each next to the physical limit measured in the same run:
//!
//! * durable intent appends (write-ahead: acknowledged after a flush) from 1, 4 and 16
//!   concurrent appenders: p50/p99 latency and throughput, beside raw `write` + `fdatasync`
//!   of a record of the same size on the same filesystem (one file per writer);
//! * a journal of 1M records (intent/outcome pairs over 1000 objects): bulk build rate,
//!   reopen and full decode rate (what replay and projection rebuilds read), open-intent
//!   lookup, a unit's and the Event publisher's start with and without a checkpoint,
//!   `lvms journal inspect --object` (also on the journal as its writer left it, before any
//!   reopen) and `lvms journal verify` wall time (the CLI, which
//!   reads a private copy), and bytes on disk per record.
//!
//!   cargo bench --bench journal
//!
//! Knobs (env): `LVMS_BENCH_APPENDERS=1,4,16`, `LVMS_BENCH_APPENDS=400` (per appender),
//! `LVMS_BENCH_RECORDS=1000000`, `LVMS_BIN`. Work files in `$TMPDIR/lvms-bench-journal/<pid>/`
//! (removed at the end); the table goes to stdout and `<target>/bench-journal.md`.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lvms::operator::units::events::{NormalEvents, event_for};
use lvms_actors::{
    CHECKPOINT_EVERY, EventMapper, EventPublisher, EventSink, EventSpec, PublisherArgs, SinkError,
    UnitHealth,
};
use lvms_journal::{
    Done, Intent, Journal, JournalConfig, ObjectRef, OutcomeResult, Record, Trace, codec,
};
use lvms_testkit::bench::{Result, env_list, lvms_bin, main_with, publish};
use ractor::Actor;

fn main() {
    main_with("journal", bench);
}

fn object(n: usize) -> ObjectRef {
    ObjectRef {
        kind: "StorageClass".into(),
        namespace: String::new(),
        name: format!("lvms-vg{n}"),
        uid: format!("7c1e0d52-9a41-4b7e-8f3a-{n:012}"),
        generation: 3,
    }
}

/// An intent shaped like the operator's (`apply` of an object, a digest, two regarded objects).
fn intent(unit: usize, n: usize) -> Intent {
    let cluster = ObjectRef {
        kind: "LVMCluster".into(),
        namespace: "openshift-storage".into(),
        name: "my-lvmcluster".into(),
        uid: "2b9f3c4e-1d5a-4f6b-9c8d-7e6f5a4b3c2d".into(),
        generation: 3,
    };
    let o = object(n);
    Intent {
        unit: format!("unit-{unit}"),
        idempotency_key: format!("unit-{unit}/apply/{o}/9a0b7c6d5e4f3a21/{n}"),
        object: o,
        action: "apply".into(),
        args: Vec::new(),
        desired_digest: "9a0b7c6d5e4f3a21".into(),
        lease_epoch: 1,
        regarding: vec![cluster.clone(), cluster],
    }
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

struct Run {
    p50: Duration,
    p99: Duration,
    per_s: f64,
}

/// `threads` workers each doing `n` timed operations made by `op(worker, i)`.
fn concurrent(threads: usize, n: usize, op: impl Fn(usize, usize) + Send + Sync) -> Run {
    let op = &op;
    let started = Instant::now();
    let mut lat: Vec<Duration> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    (0..n)
                        .map(|i| {
                            let t0 = Instant::now();
                            op(t, i);
                            t0.elapsed()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let wall = started.elapsed();
    lat.sort();
    Run {
        p50: pct(&lat, 0.5),
        p99: pct(&lat, 0.99),
        per_s: (threads * n) as f64 / wall.as_secs_f64(),
    }
}

/// Raw `write` + `fdatasync` of `size` bytes, one file per writer.
fn raw_fsync(dir: &Path, threads: usize, n: usize, size: usize) -> Run {
    let files: Vec<std::sync::Mutex<std::fs::File>> = (0..threads)
        .map(|t| {
            std::sync::Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dir.join(format!("raw-{t}")))
                    .unwrap(),
            )
        })
        .collect();
    let record = vec![0x5au8; size];
    concurrent(threads, n, |t, _| {
        let mut f = files[t].lock().unwrap();
        f.write_all(&record).unwrap();
        f.sync_data().unwrap();
    })
}

fn durable_appends(dir: &Path, threads: usize, n: usize) -> Run {
    let j = Arc::new(Journal::open(dir).unwrap());
    concurrent(threads, n, |t, i| {
        j.append_intent(intent(t, i), Trace::default()).unwrap();
    })
}

/// Intent/outcome pairs `range` (intents in one durable batch, outcomes after), shaped like
/// the operator's: 10 units, 1000 objects.
fn append_pairs(j: &Journal, range: std::ops::Range<usize>) -> Result<()> {
    let seqs = j.append_intents(
        range.map(|i| intent(i % 10, i % 1000)).collect(),
        Trace::default(),
    )?;
    for s in seqs {
        j.append_outcome(
            s,
            OutcomeResult::Ok(Done::resource_version(Some("812".into()))),
            Duration::from_millis(3),
            Trace::default(),
        )?;
    }
    Ok(())
}

/// An Event sink that drops everything (the publisher's own cost is measured).
struct Discard;

impl EventSink for Discard {
    async fn write(&self, _: &str, _: &EventSpec, _: u64) -> std::result::Result<(), SinkError> {
        Ok(())
    }
}

/// Starts an Event publisher with the operator's mapper on `j` and waits until its first scan
/// is done: how long that took and how many outcomes it looked at.
async fn publisher_start(j: &Arc<Journal>) -> Result<(Duration, u64)> {
    use std::sync::atomic::{AtomicU64, Ordering};
    let mapped = Arc::new(AtomicU64::new(0));
    let counted = mapped.clone();
    let event_for: EventMapper = Arc::new(move |j: &Journal, r: &Record| {
        counted.fetch_add(1, Ordering::Relaxed);
        Ok(event_for(j, r, NormalEvents::Summary)?
            .into_iter()
            .collect())
    });
    let t0 = Instant::now();
    let (p, running) = Actor::spawn(
        None,
        EventPublisher::<Discard>::default(),
        PublisherArgs {
            sink: Arc::new(Discard),
            journal: j.clone(),
            event_for,
            checkpoint_every: CHECKPOINT_EVERY,
        },
    )
    .await?;
    // Its first message (queued at start) is the scan; draining returns once it is done.
    p.drain_and_wait(Some(Duration::from_secs(600))).await?;
    running.await?;
    Ok((t0.elapsed(), mapped.load(Ordering::Relaxed)))
}

fn timed_cli(args: &[&str]) -> Result<(Duration, String)> {
    let t0 = Instant::now();
    let out = std::process::Command::new(lvms_bin()).args(args).output()?;
    let took = t0.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!(
            "lvms {args:?}: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok((took, stdout))
}

async fn bench() -> Result<()> {
    let appenders = env_list("LVMS_BENCH_APPENDERS", &[1, 4, 16]);
    let n = env_list("LVMS_BENCH_APPENDS", &[400])[0];
    let records = env_list("LVMS_BENCH_RECORDS", &[1_000_000])[0];
    let work = std::env::temp_dir()
        .join("lvms-bench-journal")
        .join(std::process::id().to_string());
    std::fs::create_dir_all(&work)?;
    let record_size = codec::encode_record(&lvms_journal::Record {
        seq: 1,
        at_ms: 1,
        trace: Trace::default(),
        body: lvms_journal::Body::Intent(intent(0, 0)),
    })?
    .len();

    let mut md = String::new();
    writeln!(
        md,
        "Durable intent appends ({record_size}-byte records; {n} per appender), beside raw write + fdatasync of the same size on the same filesystem, same run:\n"
    )?;
    writeln!(
        md,
        "| appenders | journal p50 ms | journal p99 ms | journal appends/s | raw p50 ms | raw p99 ms | raw fsyncs/s | journal / raw (p50) | rate vs 1 appender |"
    )?;
    writeln!(md, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|")?;
    let mut single = None;
    for &t in &appenders {
        let dir = work.join(format!("append-{t}"));
        std::fs::create_dir_all(&dir)?;
        let raw = raw_fsync(&dir, t, n, record_size);
        let j = durable_appends(&dir.join("journal"), t, n);
        let base = *single.get_or_insert(j.per_s);
        writeln!(
            md,
            "| {t} | {} | {} | {:.0} | {} | {} | {:.0} | {:.2} | {:.1}× |",
            ms(j.p50),
            ms(j.p99),
            j.per_s,
            ms(raw.p50),
            ms(raw.p99),
            raw.per_s,
            j.p50.as_secs_f64() / raw.p50.as_secs_f64().max(1e-9),
            j.per_s / base
        )?;
        println!(
            "appenders {t}: journal {:.0}/s, raw {:.0}/s",
            j.per_s, raw.per_s
        );
    }

    // A big journal: intent/outcome pairs over 1000 objects in 10 units.
    let big = work.join("big");
    let pairs = records / 2;
    let t0 = Instant::now();
    {
        // The operator's settings: outcomes flushed every 32 appends, intents always.
        let j = Journal::open_with(&big, JournalConfig::default())?;
        let mut k = 0;
        while k < pairs {
            append_pairs(&j, k..(k + 1000).min(pairs))?;
            k += 1000;
        }
        j.flush()?;
    }
    let build = t0.elapsed();
    let total = (pairs * 2) as f64;
    // A post-mortem of a journal as a long-running writer leaves it: sled writes its page-table
    // snapshot only when it opens a database, so opening the copy recovers the whole log.
    let big_s = big.display().to_string();
    let inspect_args = [
        "journal",
        "inspect",
        "--object",
        "StorageClass/lvms-vg17",
        "-o",
        "jsonl",
        &big_s,
    ];
    let (inspect_as_left, _) = timed_cli(&inspect_args)?;

    let t0 = Instant::now();
    let j = Journal::open(&big)?;
    let opened = t0.elapsed();
    let t0 = Instant::now();
    let open_intents = j.open_intents()?.len();
    let lookup = t0.elapsed();
    let t0 = Instant::now();
    let decoded = j.iter().filter(|r| r.is_ok()).count();
    let decode = t0.elapsed();
    let on_disk = j.size_on_disk()?;
    // What every unit actor does at start (and the status unit once): rebuild UnitHealth.
    // Without a snapshot that is a fold of the whole journal; passes now snapshot it every
    // CHECKPOINT_EVERY records, so a start folds the snapshot + at most that tail.
    let t0 = Instant::now();
    let full = j.rebuild::<UnitHealth>()?;
    let rebuild_full = t0.elapsed();
    let t0 = Instant::now();
    let snap = j
        .snapshot_if_due::<UnitHealth>(CHECKPOINT_EVERY, Trace::default())?
        .ok_or("a journal of this size is due a snapshot")?;
    let snapshot_took = t0.elapsed();
    let tail_pairs = (CHECKPOINT_EVERY / 2) as usize - 1;
    append_pairs(&j, 0..tail_pairs)?;
    j.flush()?;
    drop(j);
    let t0 = Instant::now();
    let j = Journal::open(&big)?;
    let reopened_after = t0.elapsed();
    let t0 = Instant::now();
    let tail = j.rebuild::<UnitHealth>()?;
    let rebuild_tail = t0.elapsed();
    if tail.from_snapshot != Some(snap) || tail.state != full.state {
        return Err(format!(
            "rebuild from the snapshot at {snap} gave {:?}, not the full fold's state",
            tail.from_snapshot
        )
        .into());
    }
    let tail_records = tail.upto_seq - snap;
    // The Event publisher's start: with no checkpoint (before this stop) it looks at every
    // outcome; it then checkpoints, and a start after another tail looks at that tail only.
    let j = Arc::new(j);
    let (publisher_full, mapped_full) = publisher_start(&j).await?;
    append_pairs(&j, 0..tail_pairs)?;
    j.flush()?;
    let (publisher_tail, mapped_tail) = publisher_start(&j).await?;
    if mapped_full < pairs as u64 || mapped_tail > CHECKPOINT_EVERY {
        return Err(format!(
            "publisher starts looked at {mapped_full} and {mapped_tail} outcomes ({pairs} pairs, checkpoint every {CHECKPOINT_EVERY})"
        )
        .into());
    }
    drop(j);
    let (inspect, out) = timed_cli(&inspect_args)?;
    let matched = out.lines().count();
    let (verify, _) = timed_cli(&["journal", "verify", &big_s])?;

    writeln!(
        md,
        "\nA journal of {decoded} records ({pairs} intent/outcome pairs, 1000 objects):\n"
    )?;
    writeln!(md, "| figure | value |")?;
    writeln!(md, "|---|---:|")?;
    writeln!(
        md,
        "| bulk build (intents in batches of 1000, outcomes flushed every 32) | {:.2} s ({:.0} records/s) |",
        build.as_secs_f64(),
        total / build.as_secs_f64()
    )?;
    writeln!(md, "| reopen | {} ms |", ms(opened))?;
    writeln!(
        md,
        "| read + decode every record (replay / rebuild) | {:.2} s ({:.0} records/s) |",
        decode.as_secs_f64(),
        decoded as f64 / decode.as_secs_f64()
    )?;
    writeln!(
        md,
        "| open intents (index) | {} ms ({open_intents} open) |",
        ms(lookup)
    )?;
    writeln!(
        md,
        "| rebuild UnitHealth with no snapshot (each unit's start before stop 31) | {:.2} s |",
        rebuild_full.as_secs_f64()
    )?;
    writeln!(
        md,
        "| take a UnitHealth snapshot (first: folds everything) | {:.2} s |",
        snapshot_took.as_secs_f64()
    )?;
    writeln!(
        md,
        "| reopen, then rebuild UnitHealth from its snapshot + {tail_records}-record tail (each unit's start now) | {} ms + {} ms |",
        ms(reopened_after),
        ms(rebuild_tail)
    )?;
    writeln!(
        md,
        "| Event publisher's start with no checkpoint (before stop 32): {mapped_full} outcomes looked at | {:.2} s |",
        publisher_full.as_secs_f64()
    )?;
    writeln!(
        md,
        "| Event publisher's start from its checkpoint (now): {mapped_tail} outcomes looked at | {} ms |",
        ms(publisher_tail)
    )?;
    writeln!(
        md,
        "| `lvms journal inspect --object` (CLI, private copy, {matched} matches), after the reopens above | {:.2} s |",
        inspect.as_secs_f64()
    )?;
    writeln!(
        md,
        "| the same on the journal as its writer left it (a live operator's: not reopened since it was written) | {:.2} s |",
        inspect_as_left.as_secs_f64()
    )?;
    writeln!(
        md,
        "| `lvms journal verify` (CLI, private copy) | {:.2} s |",
        verify.as_secs_f64()
    )?;
    writeln!(
        md,
        "| bytes on disk per record (sled size_on_disk / directory) | {:.0} / {:.0} |",
        on_disk as f64 / total,
        lvms_journal::dir_bytes(&big) as f64 / total
    )?;

    publish("journal", &md)?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}
