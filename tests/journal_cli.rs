//! `lvms journal inspect|verify|stats` on a real journal with a deliberately corrupted record.

use std::collections::BTreeMap;
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
            OutcomeResult::Ok {
                resource_version: Some("42".into()),
                detail: BTreeMap::new(),
            },
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

/// A journal written by the previous release (format 1) is readable by `inspect` and
/// `verify` (the fixture is in journal/tests/fixtures; the CLI works on a copy).
#[test]
fn inspect_and_verify_read_a_journal_of_the_previous_format() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("journal/tests/fixtures/journal-v1")
        .display()
        .to_string();
    let (ok, out, err) = lvms(&["journal", "verify", &fixture]);
    assert!(ok, "verify failed: {out}\n{err}");
    let (ok, out, err) = lvms(&["journal", "inspect", "-o", "jsonl", &fixture]);
    assert!(ok, "inspect failed: {err}");
    assert_eq!(out.lines().count(), 10, "{out}");
    assert!(out.contains("vgcreate vg1 /dev/loop7"), "{out}");
    let (ok, out, _) = lvms(&["journal", "inspect", "--open", &fixture]);
    assert!(ok);
    assert!(out.contains("vgextend"), "the open intent is listed: {out}");
}
