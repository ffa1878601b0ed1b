//! One LVMCluster create is one trace in Jaeger, across the operator's units and vg-manager,
//! and the journal records of that reconcile carry its trace id. Real Jaeger v2 (built from
//! its Go module), real kube-apiserver, real lvm2 on a loop device.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use lvms::api::LVMStateType;
use lvms_testkit::dev::jaeger::Jaeger;

use lvms_journal::{Body, Journal};
use lvms_testkit::Scenario;
use lvms_testkit::dev::process::Lifetime;
use lvms_testkit::disks::{Disk, require_prerequisites};
use lvms_testkit::fixtures::{lvm_cluster, thick_class};
use lvms_testkit::kubelet::{create_node, register_csi_node};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(60);

/// The operator units an LVMCluster create wakes (LVMS's unit names; no SCC and no snapshot
/// API on this server).
const UNITS: [&str; 7] = [
    "lvmcluster",
    "topolvm-csi-driver",
    "vg-manager",
    "lvmvg-manager",
    "lvmvgnodestatus",
    "topolvm-storageclass",
    "topolvm-csi-node-registrations",
];

struct Span {
    trace: String,
    operation: String,
    service: String,
}

/// Every span of `service`'s traces in Jaeger, with the service of each span.
fn spans(jaeger: &Jaeger, service: &str) -> Vec<Span> {
    let v = jaeger
        .query(&format!(
            "/api/traces?service={service}&limit=1000&lookback=1h"
        ))
        .expect("querying Jaeger");
    let mut out = Vec::new();
    for t in v["data"].as_array().into_iter().flatten() {
        let procs = &t["processes"];
        for s in t["spans"].as_array().into_iter().flatten() {
            let pid = s["processID"].as_str().unwrap_or_default();
            out.push(Span {
                trace: s["traceID"].as_str().unwrap_or_default().to_string(),
                operation: s["operationName"].as_str().unwrap_or_default().to_string(),
                service: procs[pid]["serviceName"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            });
        }
    }
    out
}

fn records_of(journal_dir: &std::path::Path, trace: &str) -> Vec<(String, String)> {
    let j = Journal::open_copy(journal_dir).expect("journal copy");
    j.iter()
        .filter_map(Result::ok)
        .filter(|r| r.trace.trace_id.to_string() == trace)
        .filter_map(|r| match r.body {
            Body::Intent(i) => Some((i.unit, i.action)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_lvmcluster_create_is_one_trace_across_units_and_vg_manager() {
    require_prerequisites();
    let s = Scenario::new("trace").await;
    let jaeger = Jaeger::start(&s.dir.join("jaeger"), Lifetime::DieWithParent)
        .unwrap_or_else(|e| panic!("{e}"));
    let endpoint = jaeger.otlp_endpoint();
    let vg = format!("t{}", std::process::id());
    let d1 = Disk::new(&s.dir.join("disks"), "t1", 128);
    create_node(&s.client, "node-a", false).await;
    register_csi_node(&s.client, "node-a", true).await;

    let otel = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_TRACES_SAMPLER", "always_on"),
    ];
    let mut op = s.operator(&otel, &[]);
    let mut vm = s.vg_manager("node-a", &otel);
    s.create_cluster(lvm_cluster(
        "my-lvmcluster",
        json!([thick_class(&vg, &d1.link)]),
    ))
    .await;
    s.wait_state("my-lvmcluster", LVMStateType::Ready, T).await;
    // A graceful stop flushes the span batches.
    assert!(
        op.terminate(Duration::from_secs(15))
            .is_some_and(|st| st.success())
    );
    assert!(
        vm.terminate(Duration::from_secs(15))
            .is_some_and(|st| st.success())
    );

    // The trace that starts at the create (generation 1 of the LVMCluster).
    let root = "LVMCluster my-lvmcluster generation 1";
    let started = Instant::now();
    // Jaeger stores batches asynchronously: wait until the trace holds vg-manager's spans too.
    let (trace, all) = loop {
        let all = spans(&jaeger, "lvms-operator");
        if let Some(t) = all.iter().find(|s| s.operation == root)
            && (all
                .iter()
                .any(|s| s.trace == t.trace && s.service == "lvms-vg-manager")
                || started.elapsed() > Duration::from_secs(10))
        {
            break (t.trace.clone(), all);
        }
        assert!(
            started.elapsed() < T,
            "no `{root}` span in Jaeger; operations seen: {:?}",
            all.iter().map(|s| &s.operation).collect::<BTreeSet<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let in_trace: Vec<&Span> = all.iter().filter(|s| s.trace == trace).collect();
    let ops: BTreeSet<&str> = in_trace.iter().map(|s| s.operation.as_str()).collect();
    for unit in UNITS {
        assert!(
            ops.contains(format!("reconcile {unit}").as_str()),
            "no pass of {unit} in the create's trace; operations: {ops:?}"
        );
    }
    assert!(
        in_trace
            .iter()
            .any(|s| s.operation.starts_with("apply ") || s.operation == "step"),
        "no step spans: {ops:?}"
    );
    assert!(
        in_trace
            .iter()
            .any(|s| s.operation.starts_with("journal.append")),
        "no journal spans: {ops:?}"
    );
    assert!(
        in_trace.iter().any(|s| s.operation.contains("HTTP")
            || s.operation.starts_with("patch")
            || s.operation.starts_with("get")),
        "no Kubernetes API call spans: {ops:?}"
    );

    // vg-manager continued it: its spans carry the same trace id.
    let by_service: BTreeMap<&str, usize> = in_trace.iter().fold(BTreeMap::new(), |mut m, s| {
        *m.entry(s.service.as_str()).or_default() += 1;
        m
    });
    assert!(
        by_service.get("lvms-vg-manager").is_some_and(|n| *n > 0),
        "no vg-manager spans in the trace; services: {by_service:?}; vg-manager's own spans: {:?}",
        spans(&jaeger, "lvms-vg-manager")
            .iter()
            .map(|s| format!("{} {}", &s.trace[..8.min(s.trace.len())], s.operation))
            .collect::<BTreeSet<_>>()
    );
    let vg_ops: BTreeSet<&str> = in_trace
        .iter()
        .filter(|s| s.service == "lvms-vg-manager")
        .map(|s| s.operation.as_str())
        .collect();
    assert!(
        vg_ops.contains(format!("reconcile vg/{vg}").as_str()),
        "{vg_ops:?}"
    );
    assert!(
        vg_ops.contains("host vgcreate"),
        "vgcreate should be a span of the trace: {vg_ops:?}"
    );

    // The journal records of that reconcile carry the trace id, in both processes.
    let op_records = records_of(&s.operator_journal(), &trace);
    assert!(
        op_records
            .iter()
            .any(|(u, a)| u == "lvmvg-manager" && a == "apply"),
        "operator journal has no apply of the LVMVolumeGroup under {trace}: {op_records:?}"
    );
    let vm_records = records_of(&s.vg_manager_journal("node-a"), &trace);
    assert!(
        vm_records.iter().any(|(_, a)| a == "vgcreate"),
        "vg-manager journal has no vgcreate under {trace}: {vm_records:?}"
    );

    // And `lvms journal inspect --trace` finds them.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lvms"))
        .args(["journal", "inspect", "--trace", &trace, "-o", "json"])
        .arg(s.operator_journal())
        .output()
        .expect("lvms journal inspect");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let rows = rows.as_array().expect("array");
    assert!(!rows.is_empty());
    assert!(
        rows.iter().all(|r| r["trace_id"] == trace.as_str()),
        "inspect --trace returned other traces"
    );
    assert!(
        rows.iter()
            .all(|r| r["span_id"].as_str().is_some_and(|s| s.len() == 16))
    );
}
