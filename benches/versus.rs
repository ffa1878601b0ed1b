//! lvms's operator side by side with LVMS's own (openshift/lvm-operator v4.20.0, Go, built
//! from its module by `deploy/dev/build-lvms-go.sh`) on the same machine and API server build:
//! the figures issue 14 compares (create → objects, create → every node status, an edit →
//! its StorageClass, RSS, CPU, teardown).
//!
//!   deploy/dev/build-lvms-go.sh && cargo bench --bench versus
//!
//! Runs alternate LVMS, lvms, LVMS, lvms… per configuration, each on a fresh control plane
//! (etcd + kube-apiserver, no kube-controller-manager) with the same Nodes (~7 KB each as
//! served, a CSINode listing topolvm.io each). The driver acts for every absent peer (kubelets,
//! vg-managers) exactly as `benches/operator.rs` does, with the same code
//! (`lvms_testkit::bench::phases`). Per run:
//!
//! 1. create the Nodes and CSINodes, start the operator, wait for its `/readyz`;
//! 2. create the LVMCluster (thin classes) and poll (20 ms) until the finalizer, CSIDriver,
//!    DaemonSet, LVMVolumeGroups, StorageClasses, every node status and ResourcesAvailable=True;
//! 3. a quiet window (`LVMS_VERSUS_STEADY_SECS`, default 10): the operator's CPU and the API
//!    requests it caused (the API server's own request counter), then its RSS;
//! 4. `LVMS_VERSUS_EDITS` (default 5) `spec.tolerations` edits, 1 s apart, each timed from its
//!    PATCH until the vg-manager DaemonSet's pod template carries it (polled every 2 ms), and
//!    the PATCH's own round trip beside it (the floor both operators share);
//! 5. every node's vg-manager reports its classes Ready; time until the LVMCluster is Ready;
//! 6. delete the LVMCluster (acting as kubelets once the DaemonSet is gone) until it is gone.
//!
//! CPU of the operator, kube-apiserver and etcd is read per phase from `/proc/<pid>/stat`.
//! Knobs (env): `LVMS_VERSUS_NODES=100,1000`, `LVMS_VERSUS_CLASSES=1`,
//! `LVMS_VERSUS_REPEAT=3`, `LVMS_VERSUS_EDITS=5`, `LVMS_VERSUS_STEADY_SECS=10`,
//! `LVMS_VERSUS_PEERS=LVMS,lvms` (one alone for profiling), `LVMS_VERSUS_OPERATOR_LOG=info`
//! (lvms's RUST_LOG), `LVMS_GO_BIN`,
//! `LVMS_BIN`, `LVMS_TEST_BINS`. Logs stay in `$TMPDIR/lvms-bench-versus/<pid>/`; the tables go
//! to stdout and `<target>/bench-versus.md`. LVMS binds fixed ports (9099, 9443) and
//! `/run/topolvm/csi-topolvm.sock`: run one at a time, as root.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use lvms_testkit::bench::phases::{
    self, Measured, TIMEOUT, create_nodes, median, mib, proc_status_kib,
};
use lvms_testkit::bench::{Result, control_plane, env_list, lvms_bin, main_with, publish};
use lvms_testkit::dev::operator::{OperatorOptions, OperatorProcess, cpu_ticks_of};
use lvms_testkit::lvms_go::{self, LvmsGo};
use lvms_testkit::process::tail;

const NAMESPACE: &str = "openshift-lvm-storage";
const POLL: Duration = Duration::from_millis(20);
/// Linux USER_HZ: `/proc/<pid>/stat` counts hundredths of a CPU second.
const CLK_TCK: f64 = 100.0;
/// How long a teardown may take. LVMS 4.20 retries a failed deletion step with controller-
/// runtime's per-item exponential backoff and watches no CSINode, so once its node-status
/// finalizer updates have conflicted a few dozen times its next look at the kubelets' CSINodes
/// can be minutes away: the run records "not within" rather than waiting for it.
const TEARDOWN_LIMIT: Duration = Duration::from_secs(60);

fn main() {
    main_with("versus", bench);
}

/// The operator under test.
enum Peer {
    Lvms(OperatorProcess),
    Go(LvmsGo),
}

impl Peer {
    fn name(&self) -> &'static str {
        match self {
            Peer::Lvms(_) => "lvms",
            Peer::Go(_) => "LVMS",
        }
    }
    fn pid(&self) -> u32 {
        match self {
            Peer::Lvms(p) => p.pid(),
            Peer::Go(p) => p.pid(),
        }
    }
    fn rss_kib(&self) -> u64 {
        proc_status_kib(self.pid(), "VmRSS:").unwrap_or(0)
    }
    fn log_tail(&self) -> String {
        match self {
            Peer::Lvms(p) => format!("lvms log {}:\n{}", p.log.display(), tail(&p.log_text(), 30)),
            Peer::Go(p) => p.log_tail(),
        }
    }
}

impl Measured for Peer {
    fn running(&self) -> bool {
        proc_status_kib(self.pid(), "VmRSS:").is_some()
    }
}

/// One run of one operator.
struct Run {
    peer: &'static str,
    nodes: usize,
    classes: usize,
    ready: Duration,
    milestones: Vec<(&'static str, Duration)>,
    rss_converged_kib: u64,
    steady_cpu_ms: f64,
    edits: phases::EditTimes,
    reports_ready: Duration,
    rss_reported_kib: u64,
    /// None: not gone within [`TEARDOWN_LIMIT`].
    teardown: Option<Duration>,
    /// CPU ms per phase and process (operator, kube-apiserver, etcd).
    cpu: Vec<(&'static str, BTreeMap<String, f64>)>,
}

impl Run {
    fn milestone(&self, name: &str) -> Duration {
        self.milestones
            .iter()
            .find(|(n, _)| *n == name)
            .map(|m| m.1)
            .unwrap_or_default()
    }
    /// Every object of the LVMCluster but the node statuses (the first row).
    fn objects(&self) -> Duration {
        self.milestones
            .iter()
            .filter(|(n, _)| *n != "NodeStatuses" && *n != "ResourcesAvailable")
            .map(|m| m.1)
            .max()
            .unwrap_or_default()
    }
}

async fn bench() -> Result<()> {
    let nodes = env_list("LVMS_VERSUS_NODES", &[100, 1000]);
    let classes = env_list("LVMS_VERSUS_CLASSES", &[1]);
    let repeat = env_list("LVMS_VERSUS_REPEAT", &[3])[0].max(1);
    let edits = env_list("LVMS_VERSUS_EDITS", &[5])[0].max(1);
    let steady = Duration::from_secs(env_list("LVMS_VERSUS_STEADY_SECS", &[10])[0] as u64);
    let peers: Vec<String> = std::env::var("LVMS_VERSUS_PEERS")
        .unwrap_or_else(|_| "LVMS,lvms".into())
        .split(',')
        .map(|p| p.trim().to_string())
        .collect();
    // Both missing binaries fail here, before any run: a half-run comparison says nothing.
    let go_bin = lvms_go::bin()?;
    let bin = lvms_bin();
    let bins = lvms_testkit::dev::control_plane::bin_dir();
    let base = std::env::temp_dir().join("lvms-bench-versus");
    lvms_testkit::env::sweep_stale(&base);
    let work = base.join(std::process::id().to_string());
    println!(
        "lvms: {}\nLVMS {}: {}",
        bin.display(),
        lvms_go::VERSION,
        go_bin.display()
    );
    println!(
        "control-plane binaries: {}\nwork dir: {}",
        bins.display(),
        work.display()
    );

    let mut runs = Vec::new();
    for &n in &nodes {
        for &c in &classes {
            for r in 0..repeat {
                for go in [true, false] {
                    if !peers.iter().any(|p| p == if go { "LVMS" } else { "lvms" }) {
                        continue;
                    }
                    let name = if go { "LVMS" } else { "lvms" };
                    let dir = work.join(format!("{c}c-{n}n-{r}-{name}"));
                    println!("\n== {name}: {c} class(es) × {n} nodes, run {} ==", r + 1);
                    let run = one_run(
                        &dir,
                        &bins,
                        go.then_some(&go_bin),
                        &bin,
                        c,
                        n,
                        edits,
                        steady,
                    )
                    .await?;
                    print_run(&run);
                    runs.push(run);
                }
            }
        }
    }
    let report = render(&runs);
    publish("versus", &report)?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn one_run(
    dir: &Path,
    bins: &Path,
    go_bin: Option<&std::path::PathBuf>,
    bin: &Path,
    classes: usize,
    nodes: usize,
    edits: usize,
    steady: Duration,
) -> Result<Run> {
    let (cp, client) = control_plane(&dir.join("cp"), bins, NAMESPACE).await?;
    phases::warm_up(&client, NAMESPACE, classes).await?;
    create_nodes(&client, nodes).await?;

    let peer = match go_bin {
        Some(go) => Peer::Go(LvmsGo::start(&client, go, &cp.kubeconfig, NAMESPACE, dir).await?),
        None => Peer::Lvms(OperatorProcess::start(&OperatorOptions {
            bin: bin.to_path_buf(),
            kubeconfig: cp.kubeconfig.clone(),
            namespace: NAMESPACE.into(),
            journal_dir: dir.join("journal"),
            log: dir.join("operator.log"),
            env: vec![(
                "RUST_LOG".into(),
                std::env::var("LVMS_VERSUS_OPERATOR_LOG").unwrap_or_else(|_| "info".into()),
            )],
            args: vec!["--log-format".into(), "json".into()],
        })?),
    };
    let t = Instant::now();
    match &peer {
        Peer::Go(p) => p.wait_ready(POLL, TIMEOUT).await?,
        Peer::Lvms(p) => lvms_testkit::bench::wait_ready(p, POLL, TIMEOUT).await?,
    }
    let ready = t.elapsed();

    let processes: Vec<(String, u32)> = std::iter::once((peer.name().to_string(), peer.pid()))
        .chain(
            cp.pids()
                .into_iter()
                .filter(|(n, _)| n != "kube-controller-manager"),
        )
        .collect();
    let ticks = || -> BTreeMap<String, u64> {
        processes
            .iter()
            .map(|(n, pid)| (n.clone(), cpu_ticks_of(*pid).unwrap_or(0)))
            .collect()
    };
    let mut cpu: Vec<(&'static str, BTreeMap<String, f64>)> = Vec::new();
    let mut last = ticks();
    // CPU ms of each process since the previous call.
    let mut since_last = || -> BTreeMap<String, f64> {
        let now = ticks();
        let ms = now
            .iter()
            .map(|(n, t)| {
                let before = last.get(n).copied().unwrap_or(0);
                (
                    n.clone(),
                    t.saturating_sub(before) as f64 * 1000.0 / CLK_TCK,
                )
            })
            .collect();
        last = now;
        ms
    };

    let t0 = Instant::now();
    phases::create_cluster(&client, NAMESPACE, classes).await?;
    let milestones = phases::converge(&client, NAMESPACE, &peer, classes, nodes, t0)
        .await
        .map_err(|e| format!("{}: {e}; {}", peer.name(), peer.log_tail()))?;
    cpu.push(("create → ResourcesAvailable", since_last()));

    tokio::time::sleep(steady).await;
    cpu.push(("quiet window", since_last()));
    let rss_converged_kib = peer.rss_kib();
    let steady_cpu_ms = cpu
        .last()
        .and_then(|c| c.1.get(peer.name()).copied())
        .unwrap_or(0.0);

    let edit_times =
        phases::edit_latency(&client, NAMESPACE, phases::Edit::Tolerations, "e", edits).await?;
    cpu.push(("edits", since_last()));

    let (_, reported) = phases::report_ready(&client, NAMESPACE, classes, nodes).await?;
    let reports_ready = reported.ok_or_else(|| {
        format!(
            "{}: LVMCluster not Ready after every VG reported; {}",
            peer.name(),
            peer.log_tail()
        )
    })?;
    cpu.push(("reports → Ready", since_last()));
    let rss_reported_kib = peer.rss_kib();

    let teardown = phases::teardown_within(&client, NAMESPACE, nodes, TEARDOWN_LIMIT)
        .await?
        .map(|t| t.total);
    if teardown.is_none() {
        println!(
            "{}: LVMCluster not gone after {TEARDOWN_LIMIT:?}; {}",
            peer.name(),
            peer.log_tail()
        );
    }
    cpu.push(("teardown", since_last()));
    if !peer.running() {
        return Err(format!("{} exited; {}", peer.name(), peer.log_tail()).into());
    }
    let name = peer.name();
    drop(peer);
    drop(cp);
    drop(client);
    Ok(Run {
        peer: name,
        nodes,
        classes,
        ready,
        milestones,
        rss_converged_kib,
        steady_cpu_ms,
        edits: edit_times,
        reports_ready,
        rss_reported_kib,
        teardown,
        cpu,
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn print_run(r: &Run) {
    let m: Vec<String> = r
        .milestones
        .iter()
        .map(|(n, d)| format!("{n} {:.0}", ms(*d)))
        .collect();
    println!(
        "{}: /readyz {:.0} ms; milestones (ms after create): {}",
        r.peer,
        ms(r.ready),
        m.join(", ")
    );
    let e: Vec<String> = (r.edits.reached.iter().zip(&r.edits.patch))
        .map(|(d, p)| format!("{:.1} (PATCH {:.1})", ms(*d), ms(*p)))
        .collect();
    println!(
        "{}: edits → object ms: {}; reports → Ready {:.0} ms; teardown {}; RSS converged {:.1} MiB, reported {:.1} MiB; CPU ms in quiet window {:.0}",
        r.peer,
        e.join(", "),
        ms(r.reports_ready),
        r.teardown.map_or_else(
            || format!("> {TEARDOWN_LIMIT:?}"),
            |d| format!("{:.0} ms", ms(d))
        ),
        mib(r.rss_converged_kib),
        mib(r.rss_reported_kib),
        r.steady_cpu_ms
    );
    for (phase, cpu) in &r.cpu {
        let c: Vec<String> = cpu.iter().map(|(n, v)| format!("{n} {v:.0}")).collect();
        println!("{}: CPU ms, {phase}: {}", r.peer, c.join(", "));
    }
}

/// One figure: how to read it off a run.
type Figure = (&'static str, fn(&Run) -> Vec<f64>);

fn figures() -> Vec<Figure> {
    vec![
        ("operator /readyz after start, ms", |r| vec![ms(r.ready)]),
        (
            "create → finalizer, CSIDriver, DaemonSet, LVMVolumeGroups, StorageClasses, ms",
            |r| vec![ms(r.objects())],
        ),
        ("create → every node status written, ms", |r| {
            vec![ms(r.milestone("NodeStatuses"))]
        }),
        ("create → ResourcesAvailable, ms", |r| {
            vec![ms(r.milestone("ResourcesAvailable"))]
        }),
        (
            "edit (spec.tolerations) → vg-manager DaemonSet updated, ms (all edits)",
            |r| r.edits.reached.iter().map(|d| ms(*d)).collect(),
        ),
        ("… of which the edit's own PATCH round trip, ms", |r| {
            r.edits.patch.iter().map(|d| ms(*d)).collect()
        }),
        (
            "every vg-manager reports Ready → LVMCluster Ready, ms",
            |r| vec![ms(r.reports_ready)],
        ),
        (
            "delete → LVMCluster gone (kubelets simulated), ms; runs gone within 60 s only",
            |r| r.teardown.map(ms).into_iter().collect(),
        ),
        ("operator RSS after convergence, MiB", |r| {
            vec![mib(r.rss_converged_kib)]
        }),
        ("operator RSS after every report, MiB", |r| {
            vec![mib(r.rss_reported_kib)]
        }),
        ("operator CPU in the quiet window, ms", |r| {
            vec![r.steady_cpu_ms]
        }),
    ]
}

fn render(runs: &[Run]) -> String {
    let mut s = String::new();
    let mut configs: Vec<(usize, usize)> = runs.iter().map(|r| (r.classes, r.nodes)).collect();
    configs.dedup();
    for (c, n) in configs {
        let of = |peer: &str| -> Vec<&Run> {
            runs.iter()
                .filter(|r| r.peer == peer && r.classes == c && r.nodes == n)
                .collect()
        };
        let (go, ours) = (of("LVMS"), of("lvms"));
        let _ = writeln!(
            s,
            "\n### {c} thin class{} × {n} nodes, {} interleaved runs each (medians; range)\n",
            if c == 1 { "" } else { "es" },
            go.len().min(ours.len())
        );
        let _ = writeln!(
            s,
            "| figure | LVMS {} | lvms | lvms / LVMS |",
            lvms_go::VERSION
        );
        let _ = writeln!(s, "|---|---:|---:|---:|");
        for (name, read) in figures() {
            let all = |rs: &[&Run]| -> Vec<f64> { rs.iter().flat_map(|r| read(r)).collect() };
            let (a, b) = (all(&go), all(&ours));
            let (ma, mb) = (median(a.clone()), median(b.clone()));
            let ratio = if ma > 0.0 && !b.is_empty() {
                format!("{:.2}", mb / ma)
            } else {
                "–".into()
            };
            let _ = writeln!(
                s,
                "| {name} | {} | {} | {ratio} |",
                cell(ma, &a),
                cell(mb, &b)
            );
        }
        let slow = |rs: &[&Run]| rs.iter().filter(|r| r.teardown.is_none()).count();
        let _ = writeln!(
            s,
            "\nTeardowns not done within {TEARDOWN_LIMIT:?}: LVMS {} of {}, lvms {} of {}.",
            slow(&go),
            go.len(),
            slow(&ours),
            ours.len()
        );
        let _ = writeln!(
            s,
            "\nCPU ms per phase (medians), operator / kube-apiserver / etcd:\n"
        );
        let _ = writeln!(s, "| phase | LVMS | lvms |");
        let _ = writeln!(s, "|---|---:|---:|");
        let phases: Vec<&str> = go
            .first()
            .map(|r| r.cpu.iter().map(|p| p.0).collect())
            .unwrap_or_default();
        for p in phases {
            let cpu = |rs: &[&Run], peer: &str| -> String {
                [peer, "kube-apiserver", "etcd"]
                    .iter()
                    .map(|proc_| {
                        let v: Vec<f64> = rs
                            .iter()
                            .filter_map(|r| r.cpu.iter().find(|x| x.0 == p))
                            .map(|x| x.1.get(*proc_).copied().unwrap_or(0.0))
                            .collect();
                        format!("{:.0}", median(v))
                    })
                    .collect::<Vec<_>>()
                    .join(" / ")
            };
            let _ = writeln!(s, "| {p} | {} | {} |", cpu(&go, "LVMS"), cpu(&ours, "lvms"));
        }
    }
    s
}

/// "median (min–max)".
fn cell(median: f64, all: &[f64]) -> String {
    if all.is_empty() {
        return "–".into();
    }
    let min = all.iter().copied().fold(f64::INFINITY, f64::min);
    let max = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let p = if median < 100.0 { 1 } else { 0 };
    if all.len() < 2 {
        format!("{median:.p$}")
    } else {
        format!("{median:.p$} ({min:.p$}–{max:.p$})")
    }
}
