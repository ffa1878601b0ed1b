//! The operator's memory under claims it does not own: `LVMS_BENCH_PVCS` (10,000) Pending
//! PersistentVolumeClaims of another StorageClass, each with `LVMS_BENCH_ANNOTATION_KIB` (8)
//! KiB of annotations (any namespace may write such claims), created against a running
//! `lvms operator` on a real kube-apiserver. The operator watches every claim of the cluster
//! (its deletion gates and TopoLVM's claim helpers need them) but keeps only the fields it
//! reads: its RSS should stay flat however large the claims' annotations are.
//!
//!   cargo bench --bench pvc_memory
//!
//! Measured: the operator's RSS at `/readyz` 200, its peak while the claims arrive (sampled
//! every 100 ms), and after they all arrived and the watch went quiet (`LVMS_BENCH_SETTLE_SECS`,
//! 10 s); the bytes the API server holds for them (their JSON, as served) for scale. The table
//! goes to stdout and `<target>/bench-pvc-memory.md`. Without `--bench` it returns at once.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, ListParams, PostParams};
use lvms_testkit::bench::phases::{mib, proc_status_kib};
use lvms_testkit::bench::{
    Result, control_plane, env_list, lvms_bin, main_with, publish, wait_ready,
};
use lvms_testkit::dev::operator::{OperatorOptions, OperatorProcess};
use serde_json::json;

const NAMESPACE: &str = "lvms-bench";
const CLAIMS_NS: &str = "default";

fn main() {
    main_with("pvc_memory", bench);
}

fn claim(i: usize, annotation_bytes: usize) -> PersistentVolumeClaim {
    let filler = "x".repeat(annotation_bytes);
    serde_json::from_value(json!({
        "metadata": {"name": format!("claim-{i}"), "annotations": {"example.com/blob": filler}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "someone-elses",
                 "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("claim")
}

async fn bench() -> Result<()> {
    let claims = env_list("LVMS_BENCH_PVCS", &[10_000])[0];
    let kib = env_list("LVMS_BENCH_ANNOTATION_KIB", &[8])[0];
    let settle = Duration::from_secs(env_list("LVMS_BENCH_SETTLE_SECS", &[10])[0] as u64);
    let base = std::env::temp_dir().join("lvms-bench-pvc-memory");
    lvms_testkit::env::sweep_stale(&base);
    let dir = base.join(std::process::id().to_string());
    let bins = lvms_testkit::dev::control_plane::bin_dir();
    let (cp, client) = control_plane(&dir.join("cp"), &bins, NAMESPACE).await?;
    let op = OperatorProcess::start(&OperatorOptions {
        bin: lvms_bin(),
        kubeconfig: cp.kubeconfig.clone(),
        namespace: NAMESPACE.into(),
        journal_dir: dir.join("journal"),
        log: dir.join("operator.log"),
        env: vec![],
        args: vec!["--log-format".into(), "json".into()],
    })?;
    wait_ready(&op, Duration::from_millis(50), Duration::from_secs(60)).await?;
    // A moment for start-up allocations to settle before the baseline.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss = || proc_status_kib(op.pid(), "VmRSS:").ok_or("operator exited");
    let ready_kib = rss()?;
    println!("operator ready: RSS {:.1} MiB", mib(ready_kib));

    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), CLAIMS_NS);
    let t = Instant::now();
    let mut peak_kib = ready_kib;
    let mut creates = futures::stream::iter(0..claims)
        .map(|i| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &claim(i, kib << 10))
                    .await
            }
        })
        .buffer_unordered(16);
    let mut last_sample = Instant::now();
    while let Some(r) = creates.next().await {
        r?;
        if last_sample.elapsed() >= Duration::from_millis(100) {
            peak_kib = peak_kib.max(rss()?);
            last_sample = Instant::now();
        }
    }
    let created_in = t.elapsed();
    println!("{claims} claims with {kib} KiB of annotations created in {created_in:?}");
    let until = Instant::now() + settle;
    while Instant::now() < until {
        peak_kib = peak_kib.max(rss()?);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after_kib = rss()?;
    let served: usize = api.list(&ListParams::default().limit(1)).await.map(|l| {
        l.items
            .first()
            .map_or(0, |c| serde_json::to_vec(c).map_or(0, |v| v.len()))
    })?;
    let machine = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_default();
    let report = format!(
        "| claims | annotations each | one claim as served | operator RSS at ready | peak while they arrive | after {}s quiet | growth |\n\
         |---|---|---|---|---|---|---|\n\
         | {claims} | {kib} KiB | {:.1} KiB | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:+.1} MiB |\n\n\
         ({:.0} MiB of claims on the API server; created in {:.1} s with 16 in flight; {machine}, {} cores)\n",
        settle.as_secs(),
        served as f64 / 1024.0,
        mib(ready_kib),
        mib(peak_kib),
        mib(after_kib),
        mib(after_kib) - mib(ready_kib),
        (claims * served) as f64 / (1 << 20) as f64,
        created_in.as_secs_f64(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );
    publish("pvc-memory", &report)?;
    drop(op);
    drop(cp);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
