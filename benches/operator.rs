//! `lvms operator` on a real kube-apiserver: time from LVMCluster creation until every object
//! the operator owns exists and ResourcesAvailable=True, the operator's RSS after that, and its
//! CPU use in the steady state that follows.
//!
//!   cargo bench --bench operator
//!
//! Every configuration (device classes × Nodes) gets a fresh control plane (etcd +
//! kube-apiserver, no kube-controller-manager: no DaemonSet controller, scheduler or kubelet
//! runs, so nothing but the operator and this driver talks to the API server), a fresh
//! namespace and a fresh journal. Nodes carry a realistic status (conditions, capacity, images;
//! ~7 KB each as served) and each has a CSINode listing `topolvm.io`, as kubelet would
//! register it. Per configuration:
//!
//! 1. create the Nodes and CSINodes (timed on its own), start the operator, wait for `/readyz`;
//! 2. create the LVMCluster and poll (20 ms) until the CSIDriver, the vg-manager DaemonSet, one
//!    LVMVolumeGroup and StorageClass per class and one LVMVolumeGroupNodeStatus per node exist,
//!    the finalizer is on and ResourcesAvailable=True: the convergence time; then VmRSS;
//! 3. CPU over a quiet window (nothing changes);
//! 4. act as every vg-manager (a Ready VGStatus per class in each node status) until the
//!    LVMCluster is Ready;
//! 5. fail one node's first class, time `lvms explain` on the LVMCluster and `lvms must-gather`
//!    (the CLI as a user runs it), and report the class Ready again;
//! 6. delete the LVMCluster (acting as kubelet once vg-manager is gone) until it is gone.
//!
//! Between phases it reads the operator's `lvms_kube_api_requests_total` from its `/metrics`:
//! the API requests one create, three edits, the node reports and one delete cost. With
//! `LVMS_BENCH_REPEAT=3` it adds medians per configuration and checks issue 14's targets on them.
//!
//! Knobs (env): `LVMS_BENCH_NODES=10,100,1000`, `LVMS_BENCH_CLASSES=1,3`,
//! `LVMS_BENCH_STEADY_SECS=10`, `LVMS_BENCH_OPERATOR_LOG=info` (the operator's RUST_LOG),
//! `LVMS_BENCH_BARE_NODES=1` (Nodes with a name and one label only),
//! `LVMS_BENCH_TRACING=off|on|off,on` (export spans over OTLP/HTTP to a local Jaeger; both
//! modes add an overhead table), `LVMS_BENCH_SMAPS=<file>` (the operator's
//! `/proc/<pid>/smaps` right after teardown, for an RSS breakdown), `LVMS_BENCH_REPEAT=1`,
//! `LVMS_BIN` (the `lvms` binary), `LVMS_TEST_BINS` (etcd, kube-apiserver). Logs and
//! journals stay in `$TMPDIR/lvms-bench-operator/<pid>/`; the tables go to stdout and to
//! `<target>/bench-operator.md`.
//!
//! `cargo test --all-targets` also builds and runs this target; without `--bench` it returns
//! at once.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use lvms::api::{LVMCluster, LVMVolumeGroupNodeStatus};
use lvms_testkit::bench::phases::{
    self, CLUSTER, TIMEOUT, Teardown, create_nodes, median, mib, proc_status_kib, watch_until,
};
use lvms_testkit::bench::{
    Result, control_plane, env_list, lvms_bin, main_with, publish, wait_ready,
};
use lvms_testkit::dev::Lifetime;
use lvms_testkit::dev::operator::{OperatorOptions, OperatorProcess, cpu_ticks_of};
use lvms_testkit::fixtures::node_status;
use lvms_testkit::process::tail;
use serde_json::{Value, json};

const NAMESPACE: &str = "lvms-bench";
const POLL: Duration = Duration::from_millis(20);
/// Linux USER_HZ: `cpu_ticks()` counts hundredths of a CPU second.
const CLK_TCK: f64 = 100.0;

fn main() {
    main_with("operator", bench);
}

struct Row {
    classes: usize,
    nodes: usize,
    /// Spans exported over OTLP/HTTP (to a local Jaeger) during the run.
    traced: bool,
    node_bytes: usize,
    create_nodes: Duration,
    operator_ready: Duration,
    rss_ready_kib: u64,
    milestones: Vec<(&'static str, Duration)>,
    convergence: Duration,
    converge_cpu_ms: f64,
    applies: usize,
    failed_passes: usize,
    rss_kib: u64,
    hwm_kib: u64,
    steady_cpu_pct: f64,
    steady_log_lines: usize,
    /// additionalLabels edit → StorageClass relabelled: the first after the steady window,
    /// then two more, each after 1 s of quiet.
    edits: Vec<Duration>,
    vgs_ready: VgsReady,
    teardown: Option<Teardown>,
    /// VmRSS once the LVMCluster is gone (the operator keeps running).
    rss_after_teardown_kib: u64,
    /// The operator's API requests and unit passes per phase (from its /metrics), and the
    /// CPU time of each process in `cpu_order`.
    requests: Vec<(&'static str, Counters)>,
    cpu_order: Vec<String>,
    postmortem: Postmortem,
}

/// One of the operator's counters, read from its `/metrics`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Counter {
    /// API requests by verb and resource (`lvms_kube_api_requests_total`).
    Request { verb: String, resource: String },
    /// A unit's passes (`lvms_reconcile_duration_seconds_count`).
    Passes(String),
    /// Their time in µs (`lvms_reconcile_duration_seconds_sum`).
    PassMicros(String),
    /// A process's CPU time in clock ticks (`/proc/<pid>/stat`): the operator, the control
    /// plane's processes and this driver, so a phase shows where the machine's cores went.
    CpuTicks(String),
}

/// The operator's counters, by what they count.
type Counters = BTreeMap<Counter, u64>;

/// The operator's request and pass counters, read from its /metrics, and the CPU time of each
/// of `processes` (name, pid).
fn read_counters(
    op: &OperatorProcess,
    token: &str,
    processes: &[(String, u32)],
) -> Result<Counters> {
    let (code, body) = op.metrics_get(token)?;
    if code != 200 {
        return Err(format!("operator /metrics answered {code}").into());
    }
    let mut out = Counters::new();
    for line in body.lines() {
        let Some((name, rest)) = line.split_once('{') else {
            continue;
        };
        let (labels, value) = rest.split_once("} ").ok_or("malformed metric line")?;
        let label = |k: &str| {
            labels
                .split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{k}=\"")))
                .map(|v| v.trim_end_matches('"').to_string())
                .unwrap_or_default()
        };
        let (counter, value) = match name {
            "lvms_kube_api_requests_total" => (
                Counter::Request {
                    verb: label("verb"),
                    resource: label("resource"),
                },
                value.trim().parse()?,
            ),
            "lvms_reconcile_duration_seconds_count" => {
                (Counter::Passes(label("unit")), value.trim().parse()?)
            }
            "lvms_reconcile_duration_seconds_sum" => {
                let secs: f64 = value.trim().parse()?;
                (Counter::PassMicros(label("unit")), (secs * 1e6) as u64)
            }
            _ => continue,
        };
        out.insert(counter, value);
    }
    for (name, pid) in processes {
        let ticks = cpu_ticks_of(*pid).ok_or_else(|| format!("{name} (pid {pid}) is gone"))?;
        out.insert(Counter::CpuTicks(name.clone()), ticks);
    }
    Ok(out)
}

/// "operator 910, kube-apiserver 2750, …": CPU ms per process in a phase, in `order`.
fn cpu_text(r: &Counters, order: &[String]) -> String {
    order
        .iter()
        .map(|name| {
            let ticks = r
                .get(&Counter::CpuTicks(name.clone()))
                .copied()
                .unwrap_or(0);
            format!("{name} {:.0}", ticks as f64 * 1000.0 / CLK_TCK)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// "N passes, M ms: status 7 (12 ms), …": the operator's unit passes in a phase, busiest
/// first (from its `lvms_reconcile_duration_seconds`).
fn passes_text(r: &Counters) -> String {
    let time = |unit: &str| {
        r.get(&Counter::PassMicros(unit.to_string()))
            .copied()
            .unwrap_or(0)
    };
    let mut parts: Vec<(&str, u64, u64)> = r
        .iter()
        .filter_map(|(k, n)| match k {
            Counter::Passes(unit) => Some((unit.as_str(), *n, time(unit))),
            _ => None,
        })
        .collect();
    parts.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(b.0)));
    let total: u64 = parts.iter().map(|p| p.1).sum();
    let total_us: u64 = parts.iter().map(|p| p.2).sum();
    let by: Vec<String> = parts
        .iter()
        .map(|(unit, n, us)| format!("{unit} {n} ({:.1} ms)", *us as f64 / 1000.0))
        .collect();
    format!(
        "{total} passes, {:.1} ms: {}",
        total_us as f64 / 1000.0,
        by.join(", ")
    )
}

/// The processes whose CPU each phase reports: the operator, the control plane's (`peers`) and
/// this driver, as (name, pid).
fn measured(op: &OperatorProcess, peers: Vec<(String, u32)>) -> Vec<(String, u32)> {
    std::iter::once(("operator".to_string(), op.pid()))
        .chain(peers)
        .chain([("this driver".to_string(), std::process::id())])
        .collect()
}

/// `after - before`, zero entries dropped.
fn counters_between(before: &Counters, after: &Counters) -> Counters {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

/// "N: patch lvmvolumegroupnodestatuses 1000, …", largest first, watches and discovery
/// left out of the breakdown but not of N.
fn requests_text(r: &Counters) -> String {
    let mut parts: Vec<(&str, &str, u64)> = r
        .iter()
        .filter_map(|(k, n)| match k {
            Counter::Request { verb, resource } => Some((verb.as_str(), resource.as_str(), *n)),
            _ => None,
        })
        .collect();
    let total: u64 = parts.iter().map(|p| p.2).sum();
    parts.sort_by(|a, b| b.2.cmp(&a.2).then((a.0, a.1).cmp(&(b.0, b.1))));
    let by: Vec<String> = parts
        .iter()
        .map(|(verb, resource, n)| format!("{verb} {resource} {n}"))
        .collect();
    format!("{total}: {}", by.join(", "))
}

async fn bench() -> Result<()> {
    let nodes = env_list("LVMS_BENCH_NODES", &[10, 100, 1000]);
    let classes = env_list("LVMS_BENCH_CLASSES", &[1, 3]);
    let steady = Duration::from_secs(env_list("LVMS_BENCH_STEADY_SECS", &[10])[0] as u64);
    let bin = lvms_bin();
    let bins = lvms_testkit::dev::control_plane::bin_dir();
    // One directory per run (two runs must not share etcd data dirs); runs that are gone are
    // swept.
    let base = std::env::temp_dir().join("lvms-bench-operator");
    lvms_testkit::env::sweep_stale(&base);
    let work = base.join(std::process::id().to_string());
    println!("lvms: {}", bin.display());
    println!("control-plane binaries: {}", bins.display());
    println!("work dir (logs, journals): {}", work.display());

    // Traces: off (no exporter; spans still get ids), on (OTLP/HTTP to a local Jaeger), or both
    // to measure the overhead of exporting.
    let modes: Vec<bool> = std::env::var("LVMS_BENCH_TRACING")
        .unwrap_or_else(|_| "off".into())
        .split(',')
        .map(|m| m.trim() == "on")
        .collect();
    let repeat = env_list("LVMS_BENCH_REPEAT", &[1])[0].max(1);
    let jaeger = if modes.contains(&true) {
        let j = lvms_testkit::dev::jaeger::Jaeger::start(
            &work.join("jaeger"),
            Lifetime::DieWithParent,
        )?;
        println!("jaeger: OTLP {}", j.otlp_endpoint());
        Some(j)
    } else {
        None
    };

    let mut rows = Vec::new();
    for &n in &nodes {
        for &c in &classes {
            for r in 0..repeat {
                for &traced in &modes {
                    let tag = if traced { "traced" } else { "plain" };
                    let dir = work.join(format!("{c}c-{n}n-{tag}-{r}"));
                    let otlp = jaeger
                        .as_ref()
                        .filter(|_| traced)
                        .map(|j| j.otlp_endpoint());
                    let row = run_config(&bin, &bins, &dir, c, n, steady, otlp).await?;
                    print_row(&row);
                    rows.push(row);
                }
            }
        }
    }

    let mut report = render(&rows, steady);
    if modes.len() > 1 {
        report.push_str(&render_tracing_overhead(&rows));
    }
    publish("operator", &report)?;
    Ok(())
}

async fn run_config(
    bin: &Path,
    bins: &Path,
    dir: &Path,
    classes: usize,
    nodes: usize,
    steady: Duration,
    otlp: Option<String>,
) -> Result<Row> {
    println!(
        "\n== {classes} class(es) × {nodes} nodes{} ==",
        if otlp.is_some() {
            ", traces exported"
        } else {
            ""
        }
    );
    let (cp, client) = control_plane(&dir.join("cp"), bins, NAMESPACE).await?;
    println!("control plane ready in {:?}", cp.started_in);

    let warm = phases::warm_up(&client, NAMESPACE, classes).await?;
    println!("API server warm-up (first custom resource writes): {warm:?}");

    let t = Instant::now();
    create_nodes(&client, nodes).await?;
    let create_nodes = t.elapsed();
    let node_bytes =
        serde_json::to_vec(&Api::<Node>::all(client.clone()).get("node-0").await?)?.len();
    println!(
        "created {nodes} Nodes ({} bytes each as served) + CSINodes in {create_nodes:?}",
        node_bytes
    );

    let log = dir.join("operator.log");
    let op = OperatorProcess::start(&OperatorOptions {
        bin: bin.to_path_buf(),
        kubeconfig: cp.kubeconfig.clone(),
        namespace: NAMESPACE.into(),
        journal_dir: dir.join("journal"),
        log: log.clone(),
        env: [(
            "RUST_LOG".to_string(),
            std::env::var("LVMS_BENCH_OPERATOR_LOG").unwrap_or_else(|_| "info".into()),
        )]
        .into_iter()
        .chain(
            otlp.iter()
                .map(|e| ("OTEL_EXPORTER_OTLP_ENDPOINT".to_string(), e.clone())),
        )
        .collect(),
        args: vec!["--log-format".into(), "json".into()],
    })?;
    let t = Instant::now();
    wait_ready(&op, POLL, TIMEOUT).await?;
    let operator_ready = t.elapsed();
    let rss_ready_kib = op.rss_kib().ok_or("operator exited")?;
    println!(
        "operator /readyz 200 after {operator_ready:?}; RSS {:.1} MiB ({})",
        mib(rss_ready_kib),
        rss_split(op.pid())
    );

    let ticks0 = op.cpu_ticks().unwrap_or(0);
    let mut requests = Vec::new();
    let processes = measured(&op, cp.pids());
    let cpu_order: Vec<String> = processes.iter().map(|(n, _)| n.clone()).collect();
    // A scraper's token, as Prometheus holds one (its checks are the operator's requests too:
    // a TokenReview and a SubjectAccessReview a minute at most).
    let token = lvms_testkit::metrics::token(
        &client,
        NAMESPACE,
        "metrics-scraper",
        Some(lvms_testkit::metrics::READER_ROLE),
    )
    .await;
    let mut counted = read_counters(&op, &token, &processes)?;
    let mut phase = |name: &'static str, op: &OperatorProcess| -> Result<()> {
        let now = read_counters(op, &token, &processes)?;
        let r = counters_between(&counted, &now);
        println!("API requests, {name}: {}", requests_text(&r));
        println!("unit passes, {name}: {}", passes_text(&r));
        println!("CPU ms, {name}: {}", cpu_text(&r, &cpu_order));
        requests.push((name, r));
        counted = now;
        Ok(())
    };
    let t0 = Instant::now();
    phases::create_cluster(&client, NAMESPACE, classes).await?;
    println!("LVMCluster create call took {:?}", t0.elapsed());
    let milestones = phases::converge(&client, NAMESPACE, &op, classes, nodes, t0)
        .await
        .map_err(|e| format!("{e}; {}", log_tail(&op)))?;
    let convergence = milestones.iter().map(|m| m.1).max().unwrap_or_default();
    let converge_cpu_ms =
        op.cpu_ticks().unwrap_or(0).saturating_sub(ticks0) as f64 * 1000.0 / CLK_TCK;
    let rss_kib = op.rss_kib().ok_or("operator exited")?;
    let hwm_kib = proc_status_kib(op.pid(), "VmHWM:").unwrap_or(0);
    let logs = LogCounts::read(&log);
    println!("after convergence: {}", rss_split(op.pid()));
    println!(
        "converged in {convergence:?} ({} applies, {converge_cpu_ms:.0} ms CPU); RSS {:.1} MiB (peak {:.1})",
        logs.applies,
        mib(rss_kib),
        mib(hwm_kib)
    );

    // Steady state: a short settle (the last status write, the event publisher), then nothing
    // changes for `steady`.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let lines0 = LogCounts::read(&log).lines;
    let a = op.cpu_ticks().ok_or("operator exited")?;
    let t = Instant::now();
    tokio::time::sleep(steady).await;
    let b = op.cpu_ticks().ok_or("operator exited")?;
    let secs = t.elapsed().as_secs_f64();
    let steady_cpu_pct = (b - a) as f64 / CLK_TCK / secs * 100.0;
    let steady_log_lines = LogCounts::read(&log).lines.saturating_sub(lines0);
    phase("create (until steady)", &op)?;
    println!(
        "steady: {} ticks in {secs:.1} s = {steady_cpu_pct:.2}% CPU; {steady_log_lines} log lines",
        b - a
    );

    let edits = phases::edit_latency(&client, NAMESPACE, phases::Edit::StorageClassLabels, "e", 3)
        .await?
        .reached;
    println!(
        "edit (additionalLabels) → StorageClass updated: {} ms (first, after idle), then {} ms",
        ms(edits[0]),
        edits[1..]
            .iter()
            .map(|d| ms(*d))
            .collect::<Vec<_>>()
            .join(", ")
    );

    phase("3 edits", &op)?;

    let vgs_ready = vgs_ready(&client, &op, classes, nodes).await?;
    phase("node reports (until Ready)", &op)?;
    println!(
        "vg-manager reports: {nodes} node statuses written in {:?}; LVMCluster Ready after {:?}; operator CPU {:.0} ms; RSS {:.1} MiB ({})",
        vgs_ready.writes,
        vgs_ready.ready,
        vgs_ready.cpu_ms,
        mib(vgs_ready.rss_kib),
        rss_split(op.pid())
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!("RSS 2 s after Ready (idle): {}", rss_split(op.pid()));

    let postmortem = postmortem(&client, &cp.kubeconfig, bin, dir, classes, nodes).await?;
    println!(
        "post-mortem (one node Failed): lvms explain {:?}, lvms must-gather {:?} ({} KiB bundle)",
        postmortem.explain,
        postmortem.gather,
        postmortem.bundle_bytes / 1024
    );
    phase("one node fails and recovers; explain, must-gather", &op)?;

    let teardown = phases::teardown(&client, NAMESPACE, nodes).await?;
    match &teardown {
        Some(d) => println!(
            "LVMCluster deleted (teardown done) in {:?}, of which {:?} simulated kubelets unregistering",
            d.total, d.kubelets
        ),
        None => println!(
            "LVMCluster NOT gone after {TIMEOUT:?} (see {})",
            log.display()
        ),
    }
    phase("delete (until gone)", &op)?;
    let rss_after_teardown_kib = op.rss_kib().ok_or("operator exited")?;
    println!("after teardown: {}", rss_split(op.pid()));
    if let Ok(dump) = std::env::var("LVMS_BENCH_SMAPS") {
        std::fs::copy(format!("/proc/{}/smaps", op.pid()), &dump)?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!("RSS 2 s after teardown (idle): {}", rss_split(op.pid()));
    drop(op);
    let t = Instant::now();
    drop(cp);
    println!("control plane stopped in {:?}", t.elapsed());
    Ok(Row {
        classes,
        nodes,
        traced: otlp.is_some(),
        node_bytes,
        create_nodes,
        operator_ready,
        rss_ready_kib,
        milestones,
        convergence,
        converge_cpu_ms,
        applies: logs.applies,
        failed_passes: logs.failed_passes,
        rss_kib,
        hwm_kib,
        steady_cpu_pct,
        steady_log_lines,
        edits,
        vgs_ready,
        teardown,
        rss_after_teardown_kib,
        requests,
        cpu_order,
        postmortem,
    })
}

/// "operator log PATH:" and its last 30 lines, for a failure message.
fn log_tail(op: &OperatorProcess) -> String {
    format!(
        "operator log {}:\n{}",
        op.log.display(),
        tail(&op.log_text(), 30)
    )
}

/// What every vg-manager reporting its volume groups Ready costs the operator.
struct VgsReady {
    /// Writing every node's status (this driver, acting as the vg-managers).
    writes: Duration,
    /// From the first write until the LVMCluster is Ready.
    ready: Duration,
    /// Operator CPU over `ready`.
    cpu_ms: f64,
    rss_kib: u64,
}

/// Acts as vg-manager on every node: each writes a Ready VGStatus per class into its node
/// status. The operator folds them into the LVMCluster status (deviceClassStatuses lists every
/// node) until state = Ready.
async fn vgs_ready(
    client: &Client,
    op: &OperatorProcess,
    classes: usize,
    nodes: usize,
) -> Result<VgsReady> {
    let ticks0 = op.cpu_ticks().unwrap_or(0);
    let t = Instant::now();
    let (writes, ready) = phases::report_ready(client, NAMESPACE, classes, nodes).await?;
    let Some(ready) = ready else {
        return Err(format!(
            "LVMCluster not Ready {:?} after every VG reported Ready; {}",
            t.elapsed(),
            log_tail(op)
        )
        .into());
    };
    let cpu_ms = op.cpu_ticks().unwrap_or(0).saturating_sub(ticks0) as f64 * 1000.0 / CLK_TCK;
    Ok(VgsReady {
        writes,
        ready,
        cpu_ms,
        rss_kib: op.rss_kib().ok_or("operator exited")?,
    })
}

/// `lvms explain` and `lvms must-gather` on the Ready cluster once one node's first class
/// has failed (the CLI as a user runs it: a process with the kubeconfig and the operator's
/// live journal).
struct Postmortem {
    explain: Duration,
    gather: Duration,
    bundle_bytes: u64,
}

/// Writes `node`'s status with its first class in `state` (the others Ready) and waits until
/// the LVMCluster's status shows it (and, for Ready, is Ready again).
async fn report_first_class(
    client: &Client,
    node: &str,
    classes: usize,
    state: lvms::api::VGStatusType,
) -> Result<()> {
    let failed = state == lvms::api::VGStatusType::Failed;
    let entries: Vec<Value> = (1..=classes)
        .map(|k| {
            let this = k == 1 && failed;
            json!({"name": format!("vg{k}"), "status": if this { "Failed" } else { "Ready" },
                   "reason": if this { "bench: the disk vanished" } else { "" },
                   "devices": [format!("/dev/loop{}", 9 + k)],
                   "deviceDiscoveryPolicy": "Preconfigured"})
        })
        .collect();
    Api::<LVMVolumeGroupNodeStatus>::namespaced(client.clone(), NAMESPACE)
        .patch(
            node,
            &PatchParams::apply("vg-manager"),
            &Patch::Apply(&node_status(NAMESPACE, node, Value::from(entries))),
        )
        .await?;
    let clusters = Api::<LVMCluster>::namespaced(client.clone(), NAMESPACE);
    let shown = |c: Option<&LVMCluster>| {
        c.and_then(|c| c.status.as_ref()).is_some_and(|s| {
            (failed || s.state == Some(lvms::api::LVMStateType::Ready))
                && s.device_class_statuses.iter().any(|d| {
                    d.name == "vg1"
                        && d.node_status
                            .iter()
                            .any(|n| n.node == node && n.vg_status.status == Some(state))
                })
        })
    };
    if watch_until(clusters, shown).await? {
        Ok(())
    } else {
        Err(format!("{node}'s vg1 {state:?} never reached the LVMCluster status").into())
    }
}

async fn postmortem(
    client: &Client,
    kubeconfig: &Path,
    bin: &Path,
    dir: &Path,
    classes: usize,
    nodes: usize,
) -> Result<Postmortem> {
    let broken = format!("node-{}", nodes / 2);
    report_first_class(client, &broken, classes, lvms::api::VGStatusType::Failed).await?;
    let journal = dir.join("journal").join("operator");
    let run = |args: Vec<String>| -> Result<(Duration, String)> {
        let t = Instant::now();
        let out = std::process::Command::new(bin)
            .args(&args)
            .env("KUBECONFIG", kubeconfig)
            .output()?;
        let took = t.elapsed();
        if !out.status.success() {
            return Err(format!("lvms {args:?}: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        Ok((took, String::from_utf8_lossy(&out.stdout).into_owned()))
    };
    let (explain, out) = run(vec![
        "explain".into(),
        format!("lvmcluster/{NAMESPACE}/{CLUSTER}"),
        "--journal".into(),
        journal.display().to_string(),
        "-o".into(),
        "json".into(),
    ])?;
    let e: Value = serde_json::from_str(&out)?;
    let named = e["held_back"].as_array().is_some_and(|h| {
        h.iter()
            .any(|h| h["node"] == broken.as_str() && h["class"] == "vg1")
    });
    if !named {
        return Err(format!("lvms explain did not name {broken}/vg1: {e}").into());
    }
    let bundle = dir.join("must-gather");
    let (gather, _) = run(vec![
        "must-gather".into(),
        bundle.display().to_string(),
        "--namespace".into(),
        NAMESPACE.into(),
        "--journal".into(),
        journal.display().to_string(),
    ])?;
    let bundle_bytes = std::fs::metadata(dir.join("must-gather.tar.gz"))?.len();
    // The disk comes back: the teardown that follows starts from a Ready cluster, as in the
    // runs before this phase existed.
    report_first_class(client, &broken, classes, lvms::api::VGStatusType::Ready).await?;
    Ok(Postmortem {
        explain,
        gather,
        bundle_bytes,
    })
}

#[derive(Default)]
struct LogCounts {
    lines: usize,
    applies: usize,
    failed_passes: usize,
}

impl LogCounts {
    /// Counts in the operator's JSON log: server-side applies and failed unit passes.
    fn read(path: &Path) -> Self {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let mut c = LogCounts::default();
        for line in text.lines() {
            c.lines += 1;
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            match v["fields"]["message"].as_str() {
                Some("apply") => c.applies += 1,
                Some(m) if m.starts_with("pass failed") => c.failed_passes += 1,
                _ => {}
            }
        }
        c
    }
}

/// Anonymous (heap) vs file-backed (the mapped binary) resident memory.
fn rss_split(pid: u32) -> String {
    let f = |k| proc_status_kib(pid, k).map_or(0.0, mib);
    format!(
        "anon {:.1} MiB, file {:.1} MiB, {} threads",
        f("RssAnon:"),
        f("RssFile:"),
        proc_status_kib(pid, "Threads:").unwrap_or(0)
    )
}

fn ms(d: Duration) -> String {
    format!("{}", d.as_millis())
}

fn print_row(r: &Row) {
    let parts: Vec<String> = r
        .milestones
        .iter()
        .map(|(n, d)| format!("{n} {}", ms(*d)))
        .collect();
    println!("milestones (ms after create): {}", parts.join(", "));
}

fn config(r: &Row) -> String {
    format!(
        "{} class{} × {} nodes{}",
        r.classes,
        if r.classes == 1 { "" } else { "es" },
        r.nodes,
        if r.traced { ", traced" } else { "" }
    )
}

/// Export on vs off per configuration: medians of convergence time and of the operator's
/// CPU time to converge.
fn render_tracing_overhead(rows: &[Row]) -> String {
    let mut s = String::from(
        "\n| config | runs | convergence ms off → on | overhead | operator CPU ms off → on | overhead |\n|---|---:|---:|---:|---:|---:|\n",
    );
    let mut configs: Vec<(usize, usize)> = rows.iter().map(|r| (r.classes, r.nodes)).collect();
    configs.dedup();
    for (c, n) in configs {
        let pick = |traced: bool, f: fn(&Row) -> f64| {
            median(
                rows.iter()
                    .filter(|r| r.classes == c && r.nodes == n && r.traced == traced)
                    .map(f)
                    .collect(),
            )
        };
        let conv = |r: &Row| r.convergence.as_secs_f64() * 1000.0;
        let cpu = |r: &Row| r.converge_cpu_ms;
        let (c0, c1) = (pick(false, conv), pick(true, conv));
        let (p0, p1) = (pick(false, cpu), pick(true, cpu));
        let runs = rows
            .iter()
            .filter(|r| r.classes == c && r.nodes == n && r.traced)
            .count();
        let pct = |a: f64, b: f64| 100.0 * (b - a) / a.max(1e-9);
        let _ = writeln!(
            s,
            "| {c} class(es) × {n} nodes | {runs} | {c0:.0} → {c1:.0} | {:+.1} % | {p0:.0} → {p1:.0} | {:+.1} % |",
            pct(c0, c1),
            pct(p0, p1)
        );
    }
    s
}

/// One configuration's medians (ms, MiB).
struct Medians {
    classes: usize,
    nodes: usize,
    convergence: f64,
    node_statuses: f64,
    edit: f64,
    ready: f64,
    teardown: f64,
    max_rss: f64,
}

fn render(rows: &[Row], steady: Duration) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| config | convergence ms | RSS MiB after convergence (peak) | steady CPU % | edit → StorageClass ms (first after idle; next two) |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|");
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {:.1} ({:.1}) | {:.2} | {} ({}) |",
            config(r),
            ms(r.convergence),
            mib(r.rss_kib),
            mib(r.hwm_kib),
            r.steady_cpu_pct,
            r.edits.first().map(|d| ms(*d)).unwrap_or_default(),
            r.edits
                .iter()
                .skip(1)
                .map(|d| ms(*d))
                .collect::<Vec<_>>()
                .join(", "),
        );
    }

    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "| config | finalizer | CSIDriver | DaemonSet | LVMVolumeGroups | StorageClasses | NodeStatuses | ResourcesAvailable | applies | failed passes | operator CPU ms |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let m: Vec<String> = r.milestones.iter().map(|(_, d)| ms(*d)).collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.0} |",
            config(r),
            m.join(" | "),
            r.applies,
            r.failed_passes,
            r.converge_cpu_ms,
        );
    }

    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "| config | Node object B | create Nodes+CSINodes ms | /readyz ms | RSS at /readyz MiB | log lines while steady | VGs Ready: writes ms | → LVMCluster Ready ms | operator CPU ms | RSS MiB | teardown ms (kubelets ms) |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let v = &r.vgs_ready;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.1} | {} | {} | {} | {:.0} | {:.1} | {} |",
            config(r),
            r.node_bytes,
            ms(r.create_nodes),
            ms(r.operator_ready),
            mib(r.rss_ready_kib),
            r.steady_log_lines,
            ms(v.writes),
            ms(v.ready),
            v.cpu_ms,
            mib(v.rss_kib),
            r.teardown
                .as_ref()
                .map(|t| format!("{} ({})", ms(t.total), ms(t.kubelets)))
                .unwrap_or_else(|| "timeout".into()),
        );
    }

    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "Convergence: from the LVMCluster create call until every object exists and ResourcesAvailable=True; the second table gives, in ms, when a 20 ms poll first saw each. Steady CPU: {} s window starting 2 s after convergence, CLK_TCK = 100. VGs Ready: this driver writes a Ready VGStatus per class into every node status (as vg-manager would), then waits for LVMCluster state Ready with every node in deviceClassStatuses.",
        steady.as_secs()
    );
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "| config | RSS MiB: /readyz | converged | nodes reported | torn down | peak (VmHWM at convergence) |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|");
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            config(r),
            mib(r.rss_ready_kib),
            mib(r.rss_kib),
            mib(r.vgs_ready.rss_kib),
            mib(r.rss_after_teardown_kib),
            mib(r.hwm_kib),
        );
    }

    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "| config | lvms explain lvmcluster (one node Failed) ms | lvms must-gather ms | bundle KiB |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|");
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            config(r),
            ms(r.postmortem.explain),
            ms(r.postmortem.gather),
            r.postmortem.bundle_bytes / 1024
        );
    }

    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "| config | phase | operator API requests: total: by verb and resource | operator unit passes: count, time: by unit | CPU ms by process |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|");
    let mut shown = BTreeSet::new();
    for r in rows {
        // One run per configuration: the counts repeat from run to run.
        if !shown.insert(config(r)) {
            continue;
        }
        for (phase, req) in &r.requests {
            let _ = writeln!(
                s,
                "| {} | {phase} | {} | {} | {} |",
                config(r),
                requests_text(req),
                passes_text(req),
                cpu_text(req, &r.cpu_order)
            );
        }
    }

    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "Medians over {} run(s) per configuration:\n\n| config | convergence ms | create → every node status ms | edit → StorageClass ms | reports → Ready ms | teardown ms | max RSS over phases MiB |",
        rows.iter()
            .filter(|r| config(r) == config(&rows[0]))
            .count()
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|");
    let mut configs: Vec<String> = rows.iter().map(config).collect();
    configs.dedup();
    let mut medians = Vec::new();
    for c in &configs {
        let runs: Vec<&Row> = rows.iter().filter(|r| &config(r) == c).collect();
        let med = |f: &dyn Fn(&Row) -> f64| median(runs.iter().map(|r| f(r)).collect());
        let msf = |d: Duration| d.as_secs_f64() * 1000.0;
        let m = Medians {
            classes: runs[0].classes,
            nodes: runs[0].nodes,
            convergence: med(&|r| msf(r.convergence)),
            node_statuses: med(&|r| {
                r.milestones
                    .iter()
                    .find(|(n, _)| *n == "NodeStatuses")
                    .map_or(0.0, |(_, d)| msf(*d))
            }),
            edit: median(
                runs.iter()
                    .flat_map(|r| r.edits.iter().map(|d| msf(*d)))
                    .collect(),
            ),
            ready: med(&|r| msf(r.vgs_ready.ready)),
            teardown: med(&|r| r.teardown.as_ref().map_or(f64::INFINITY, |t| msf(t.total))),
            max_rss: med(&|r| {
                mib([
                    r.rss_ready_kib,
                    r.rss_kib,
                    r.vgs_ready.rss_kib,
                    r.rss_after_teardown_kib,
                ]
                .into_iter()
                .max()
                .unwrap_or(0))
            }),
        };
        let _ = writeln!(
            s,
            "| {c} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} |",
            m.convergence, m.node_statuses, m.edit, m.ready, m.teardown, m.max_rss
        );
        medians.push(m);
    }

    let verdict = |ok: bool| if ok { "MET" } else { "MISSED" };
    for m in medians.iter().filter(|m| m.nodes == 1000 && m.classes == 3) {
        let _ = writeln!(
            s,
            "\ntarget at 1000 nodes × 3 classes (medians): convergence < 1 s: {} ({:.0} ms); teardown < 3 s: {} ({:.0} ms); RSS < 40 MiB in every phase: {} ({:.1} MiB)",
            verdict(m.convergence < 1000.0),
            m.convergence,
            verdict(m.teardown < 3000.0),
            m.teardown,
            verdict(m.max_rss < 40.0),
            m.max_rss
        );
    }

    for m in medians.iter().filter(|m| m.nodes == 100 && m.classes == 3) {
        let _ = writeln!(
            s,
            "\ntarget convergence < 2 s at 3 classes × 100 nodes (median): {} ({:.0} ms)",
            verdict(m.convergence < 2000.0),
            m.convergence
        );
    }

    s
}
