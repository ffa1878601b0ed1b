//! deploy/prometheus/prometheus-rules.yaml: LVMS's alert names are all there, and every
//! expression only uses metrics this code exports (a renamed metric would silence an alert).
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use lvms::node::vg::gauges::{RaidGauges, ThinPoolGauges, VolumeGroupGauges};
use lvms::telemetry::metrics::exposition::parse;
use lvms::telemetry::metrics::{Metrics, Process};
use serde::Deserialize;

#[derive(Deserialize)]
struct PrometheusRule {
    #[serde(rename = "apiVersion")]
    api_version: String,
    kind: String,
    spec: Spec,
}

#[derive(Deserialize)]
struct Spec {
    groups: Vec<Group>,
}

#[derive(Deserialize)]
struct Group {
    rules: Vec<Rule>,
}

#[derive(Deserialize)]
struct Rule {
    alert: String,
    expr: String,
    labels: std::collections::BTreeMap<String, String>,
    annotations: std::collections::BTreeMap<String, String>,
}

fn rules() -> Vec<Rule> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/prometheus/prometheus-rules.yaml"
    );
    let text = std::fs::read_to_string(path).expect("prometheus-rules.yaml");
    let doc: PrometheusRule = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (doc.api_version.as_str(), doc.kind.as_str()),
        ("monitoring.coreos.com/v1", "PrometheusRule")
    );
    doc.spec.groups.into_iter().flat_map(|g| g.rules).collect()
}

/// Every sample name a fully exercised registry serves (both processes' metrics).
fn exported() -> BTreeSet<String> {
    let m = Metrics::new(Process::VgManager);
    let dir = std::env::temp_dir().join(format!("lvms-rules-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let journal = Arc::new(lvms_journal::Journal::open(&dir).expect("journal"));
    m.watch_journal(&journal);
    m.pass(&lvms_actors::PassReport {
        unit: "u",
        ok: false,
        reason: Some("Failed"),
        duration: Duration::from_millis(1),
        journaled: true,
        subject: None,
    });
    m.restart("u");
    m.journal_append(Duration::from_millis(1), true);
    m.set_volume_group(
        "vg1",
        "node-a",
        &VolumeGroupGauges {
            size_bytes: 10,
            available_bytes: 5,
            thin_pool: Some(ThinPoolGauges {
                size_bytes: 9,
                data_percent: Some(1.0),
                metadata_percent: Some(1.0),
                overprovisioned_available: 90,
            }),
        },
    );
    m.set_raid("vg1", "node-a", Some(&raid(0, 100)));
    let names = parse(&m.encode())
        .expect("strict parse")
        .samples
        .into_iter()
        .map(|s| s.name)
        .collect();
    drop((m, journal));
    let _ = std::fs::remove_dir_all(&dir);
    names
}

const KEYWORDS: &[&str] = &[
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "sum",
    "avg",
    "min",
    "max",
    "count",
    "topk",
    "bottomk",
    "quantile",
    "stddev",
    "stdvar",
    "group",
];

/// Metric names a PromQL expression selects: identifiers outside label matchers, range
/// brackets, strings and grouping lists, that are neither keywords nor function calls.
fn metric_names(expr: &str) -> Vec<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut skip_group = false;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '{' | '[' | '"' => {
                let close = match c {
                    '{' => '}',
                    '[' => ']',
                    _ => '"',
                };
                i += 1;
                while i < chars.len() && chars[i] != close {
                    i += 1;
                }
                i += 1;
            }
            '(' if skip_group => {
                while i < chars.len() && chars[i] != ')' {
                    i += 1;
                }
                skip_group = false;
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
                {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let next = chars[i..].iter().find(|c| !c.is_whitespace());
                if [
                    "by",
                    "without",
                    "on",
                    "ignoring",
                    "group_left",
                    "group_right",
                ]
                .contains(&word.as_str())
                {
                    skip_group = true;
                } else if !KEYWORDS.contains(&word.as_str()) && next != Some(&'(') {
                    out.push(word);
                }
            }
            c if c.is_ascii_digit() || c == '.' => {
                // A number, possibly with an exponent (1e3): not a name.
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    out
}

#[test]
fn the_expression_reader_sees_only_metric_names() {
    assert_eq!(
        metric_names(
            "sum by (unit, reason) (rate(a_total{x=\"y\"}[10m])) > 0.5e1 unless on (n) b_bytes"
        ),
        ["a_total", "b_bytes"]
    );
}

#[test]
fn lvms_alerts_are_defined_on_exported_metrics() {
    let rules = rules();
    let names: BTreeSet<&str> = rules.iter().map(|r| r.alert.as_str()).collect();
    for want in [
        "VolumeGroupUsageAtThresholdNearFull",
        "VolumeGroupUsageAtThresholdCritical",
        "ThinPoolDataUsageAtThresholdNearFull",
        "ThinPoolDataUsageAtThresholdCritical",
        "ThinPoolMetaDataUsageAtThresholdNearFull",
        "ThinPoolMetaDataUsageAtThresholdCritical",
        "LVMSRAIDDegraded",
        "LVMSRAIDFailed",
        "LVMSRAIDSyncSlow",
        "LVMSReconcileErrors",
    ] {
        assert!(names.contains(want), "alert {want} is missing");
    }
    let exported = exported();
    for r in &rules {
        let used = metric_names(&r.expr);
        assert!(!used.is_empty(), "{}: no metric in {:?}", r.alert, r.expr);
        for m in &used {
            assert!(
                exported.contains(m),
                "{}: {m} is not exported (exported: {exported:?})",
                r.alert
            );
        }
        let severity = r.labels.get("severity").map(String::as_str);
        assert!(
            matches!(severity, Some("warning" | "critical")),
            "{}: severity {severity:?}",
            r.alert
        );
        if r.alert.contains("Threshold") {
            assert_eq!(
                severity == Some("critical"),
                r.alert.ends_with("Critical"),
                "{}: severity follows the name",
                r.alert
            );
        }
        if r.expr.contains("topolvm_") || r.expr.contains("lvms_raid_") {
            for label in ["{{ $labels.device_class }}", "{{ $labels.node }}"] {
                assert!(
                    r.annotations.values().all(|a| a.contains(label)),
                    "{}: every annotation names {label}",
                    r.alert
                );
            }
        }
    }
}

fn raid(health: i64, sync_percent: i64) -> RaidGauges {
    RaidGauges {
        health,
        sync_in_progress: i64::from(sync_percent < 100),
        member_count: 2,
        degraded_count: i64::from(health > 0),
        sync_percent,
    }
}

/// A rule whose expression is comparisons of one metric with numbers joined by `and`
/// (`m > 75 and m <= 85`, `m == 1`): the label sets it fires for in `text` (the encoder's
/// output), or None for any other expression.
fn firing(expr: &str, text: &str) -> Option<BTreeSet<String>> {
    let e = parse(text).expect("strict parse");
    let mut out: Option<BTreeSet<String>> = None;
    for part in expr.trim().split(" and ") {
        let words: Vec<&str> = part.split_whitespace().collect();
        let [name, op, n] = words[..] else {
            return None;
        };
        let n: f64 = n.parse().ok()?;
        let test = |v: f64| match op {
            "==" => v == n,
            ">" => v > n,
            ">=" => v >= n,
            "<" => v < n,
            "<=" => v <= n,
            _ => false,
        };
        if !["==", ">", ">=", "<", "<="].contains(&op)
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return None;
        }
        let hits: BTreeSet<String> = e
            .samples
            .iter()
            .filter(|s| s.name == name && test(s.value))
            .map(|s| format!("{:?}", s.labels))
            .collect();
        out = Some(match out {
            None => hits,
            Some(prev) => prev.intersection(&hits).cloned().collect(),
        });
    }
    out
}

/// The RAID and thin-pool alerts evaluated on what vg-manager's registry encodes for each state
/// a class can be in: each fires exactly where LVMS's fires, for the class's labels.
#[test]
fn the_alerts_fire_on_the_states_they_name_in_real_metric_output() {
    let rules = rules();
    let state = |raid_state: Option<RaidGauges>, data: f64, metadata: f64| {
        let m = Metrics::new(Process::VgManager);
        m.set_volume_group(
            "vg1",
            "node-a",
            &VolumeGroupGauges {
                size_bytes: 100,
                available_bytes: 50,
                thin_pool: Some(ThinPoolGauges {
                    size_bytes: 90,
                    data_percent: Some(data),
                    metadata_percent: Some(metadata),
                    overprovisioned_available: 90,
                }),
            },
        );
        m.set_raid("vg1", "node-a", raid_state.as_ref());
        m.encode()
    };
    let fired = |text: &str| -> BTreeSet<String> {
        rules
            .iter()
            .filter_map(|r| {
                let hits = firing(&r.expr, text)?;
                assert!(
                    hits.iter().all(|l| l.contains("\"device_class\": \"vg1\"")
                        && l.contains("\"node\": \"node-a\"")),
                    "{}: {hits:?}",
                    r.alert
                );
                (!hits.is_empty()).then(|| r.alert.clone())
            })
            .collect()
    };
    let set = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    // Every RAID and thin-pool rule is of the form the evaluator reads: none is skipped.
    for r in rules
        .iter()
        .filter(|r| r.alert.starts_with("LVMSRAID") || r.alert.starts_with("ThinPool"))
    {
        assert!(
            firing(&r.expr, &state(None, 0.0, 0.0)).is_some(),
            "{}: {}",
            r.alert,
            r.expr
        );
    }
    assert_eq!(fired(&state(Some(raid(0, 100)), 10.0, 10.0)), set(&[]));
    assert_eq!(
        fired(&state(None, 10.0, 10.0)),
        set(&[]),
        "no RAID class: no RAID alert"
    );
    assert_eq!(
        fired(&state(Some(raid(1, 100)), 10.0, 10.0)),
        set(&["LVMSRAIDDegraded"])
    );
    assert_eq!(
        fired(&state(Some(raid(2, 100)), 10.0, 10.0)),
        set(&["LVMSRAIDFailed"])
    );
    assert_eq!(
        fired(&state(Some(raid(0, 42)), 10.0, 10.0)),
        set(&["LVMSRAIDSyncSlow"])
    );
    assert_eq!(
        fired(&state(None, 80.0, 90.0)),
        set(&[
            "ThinPoolDataUsageAtThresholdNearFull",
            "ThinPoolMetaDataUsageAtThresholdCritical"
        ])
    );
    assert_eq!(
        fired(&state(None, 85.5, 75.5)),
        set(&[
            "ThinPoolDataUsageAtThresholdCritical",
            "ThinPoolMetaDataUsageAtThresholdNearFull"
        ])
    );
}
