//! `lvms journal inspect|verify|stats` on a real journal with a deliberately corrupted record.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::process::Command;
use std::time::Duration;

use lvms_journal::{Intent, Journal, ObjectRef, OutcomeResult, SpanId, Trace, TraceId};

fn lvms(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lvms"))
        .args(args)
        .output()
        .expect("running lvms");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn intent(unit: &str, name: &str) -> Intent {
    Intent {
        unit: unit.into(),
        object: ObjectRef {
            kind: "StorageClass".into(),
            namespace: String::new(),
            name: name.into(),
            uid: "u1".into(),
            generation: 1,
        },
        action: "apply".into(),
        args: Vec::new(),
        desired_digest: "d1".into(),
        idempotency_key: format!("{unit}/{name}/d1"),
        lease_epoch: 1,
        regarding: Vec::new(),
    }
}

#[test]
fn inspect_verify_and_stats_report_a_corrupt_record_and_keep_the_rest() {
    let dir = std::env::temp_dir().join(format!("lvms-journal-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let trace = Trace {
        trace_id: TraceId([0xab; 16]),
        span_id: SpanId([0xcd; 8]),
    };
    let (done, open, bad);
    {
        let j = Journal::open(&dir).expect("open journal");
        done = j
            .append_intent(intent("storage-classes", "lvms-vg1"), trace)
            .unwrap();
        j.append_outcome(
            done,
            OutcomeResult::Ok(lvms_journal::Done::resource_version(Some("42".into()))),
            Duration::from_millis(3),
            trace,
        )
        .unwrap();
        open = j
            .append_intent(intent("csi-driver", "topolvm.io"), trace)
            .unwrap();
        bad = j
            .append_intent(intent("storage-classes", "lvms-vg2"), trace)
            .unwrap();
        j.flush().unwrap();
        assert!(
            j.testing_corrupt_record(bad).unwrap(),
            "corrupting seq {bad}"
        );
    }
    let path = dir.to_str().unwrap();

    let (ok, table, err) = lvms(&["journal", "inspect", path]);
    assert!(ok, "{err}");
    assert!(
        table.contains("CORRUPT"),
        "corrupt record not shown:\n{table}"
    );
    assert!(
        table.contains("lvms-vg1") && table.contains("topolvm.io"),
        "readable records missing:\n{table}"
    );
    assert!(
        table.contains(&"ab".repeat(16)),
        "trace id not shown:\n{table}"
    );

    let (ok, jsonl, err) = lvms(&[
        "journal",
        "inspect",
        path,
        "--open",
        "--unit",
        "csi-driver",
        "-o",
        "jsonl",
    ]);
    assert!(ok, "{err}");
    let rows: Vec<serde_json::Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).expect("jsonl line"))
        .collect();
    let seqs: Vec<u64> = rows.iter().filter_map(|r| r["seq"].as_u64()).collect();
    assert!(
        seqs.contains(&open) && !seqs.contains(&done),
        "open filter: {jsonl}"
    );

    let (ok, report, _) = lvms(&["journal", "verify", path]);
    assert!(!ok, "verify must fail on a corrupt journal");
    assert!(
        report.contains(&format!("\"seq\": {bad}")),
        "bad seq not listed:\n{report}"
    );

    let (ok, stats, err) = lvms(&["journal", "stats", path]);
    assert!(ok, "{err}");
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(stats["by_kind"]["corrupt"], 1, "{stats}");

    let (ok, _, err) = lvms(&["journal", "inspect", path, "--since", "yesterday"]);
    assert!(!ok && err.contains("--since"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn fixture(name: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("journal/tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

/// A journal written by an older release (format 1) is readable by `inspect` and `verify`
/// (the fixtures are in journal/tests/fixtures; the CLI works on a copy). Its one `observed`
/// record, a kind no release wrote and format 3 dropped, is reported by seq.
#[test]
fn inspect_and_verify_read_a_format_1_journal() {
    let fixture = fixture("journal-v1");
    let (ok, out, err) = lvms(&["journal", "verify", &fixture]);
    assert!(!ok, "verify must name the unreadable record: {out}");
    assert!(
        format!("{out}{err}").contains("observed"),
        "verify output: {out}\n{err}"
    );
    let (ok, out, err) = lvms(&["journal", "inspect", "-o", "jsonl", &fixture]);
    assert!(ok, "inspect failed: {err}");
    assert_eq!(out.lines().count(), 10, "{out}");
    assert!(out.contains("vgcreate vg1 /dev/loop7"), "{out}");
    let (ok, out, _) = lvms(&["journal", "inspect", "--open", &fixture]);
    assert!(ok);
    assert!(out.contains("vgextend"), "the open intent is listed: {out}");
}

/// Format 2 (the previous release): both processes' journals verify clean, and `inspect`
/// shows the typed report lifted out of the old detail maps.
#[test]
fn inspect_and_verify_read_format_2_journals_of_both_processes() {
    for name in ["journal-v2/operator", "journal-v2/vg-manager"] {
        let fixture = fixture(name);
        let (ok, out, err) = lvms(&["journal", "verify", &fixture]);
        assert!(ok, "{name}: verify failed: {out}\n{err}");
        let (ok, out, _) = lvms(&["journal", "inspect", "--open", &fixture]);
        assert!(ok);
        assert!(out.contains("OPEN"), "{name}: the open intents: {out}");
    }
    let fixture = fixture("journal-v2/vg-manager");
    let (ok, out, err) = lvms(&["journal", "inspect", "-o", "jsonl", &fixture]);
    assert!(ok, "inspect failed: {err}");
    let removed = out
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json line"))
        .find(|v| v["body"]["event"]["reason"] == "DeviceRemoved")
        .unwrap_or_else(|| panic!("no DeviceRemoved outcome: {out}"));
    assert_eq!(removed["body"]["event"]["type"], "Normal");
    // The flat `detail` keeps the format-2 keys for JSON readers of schema 1.
    assert_eq!(removed["body"]["detail"]["event.reason"], "DeviceRemoved");
    assert_eq!(
        removed["body"]["detail"]["argv"],
        "/usr/sbin/pvremove /dev/loop8"
    );
    let (ok, table, _) = lvms(&["journal", "inspect", &fixture]);
    assert!(ok);
    assert!(table.contains("event=DeviceRemoved"), "{table}");
}
