//! Claims on the real node, LVMS itself and lvms side by side: the node tier's node (tests/node:
//! kubelet, kube-proxy and containerd 2 in a QEMU guest, joined to a control plane on the host),
//! booted once, with LVMS (openshift/lvm-operator v4.20.0, built from its module by
//! `deploy/dev/build-lvms-go.sh`, installed from its own kustomize tree as tests/node/swap.rs
//! does) and lvms (`helm install` of its chart as tests/node/install.rs does) installed on it in
//! turn, each uninstalled completely before the next.
//!
//!   cargo bench --bench node_versus      # root (loop mounts, the node's disks), ~1.5–3 h
//!
//! The node runs under software emulation (TCG: this machine kind has `/dev/kvm` but its KVM
//! does not boot the node's kernel, docs/testing.md), 2 vCPUs and 4 GiB, on a host of 2 cores
//! that also runs etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the snapshot
//! controller and this benchmark: every figure is slow in absolute terms and only the two
//! columns side by side say something. lvms is the release build (`target/release/lvms`) in
//! the image the node tier builds; LVMS is its Go binary in the same Debian root.
//!
//! Per peer (`LVMS_NODE_VERSUS_PEERS=LVMS,lvms`, alternating, `LVMS_NODE_VERSUS_REPEAT=1`
//! rounds): install, then one LVMCluster with one thin class `vg1` on the node's first disk
//! (8 GiB here, sparse, where the node tier's is 2 GiB: mkfs.xfs zeroes a 64 MiB log on each
//! 300Mi volume, and 20 of them filled three quarters of a 1.8 GiB pool; xfs; `sizePercent` 90;
//! `overprovisionRatio` 100 (lvms's CRD refuses more, LVMS's takes any) and 64Mi of thin pool
//! metadata (Static: lvm2's own choice holds a few hundred thin volumes only), so that
//! thousands of thin volumes fit), until Ready; then the phases; then the uninstall
//! (Pods, snapshots and claims deleted until every PV is gone, the LVMCluster deleted while the
//! operator runs, the peer's objects deleted, its namespace and Pods gone, its CRDs deleted; a
//! node probe checks no VG, dm device, mount, PV label or signature is left on the disk). Claims
//! are 300Mi, the smallest xfs volume TopoLVM and LVMS make (LVMS's
//! `DefaultMinimumAllocationSizeXFS`). Both StorageClasses say WaitForFirstConsumer (the
//! report prints each as its operator made it): claims without a Pod carry the
//! `volume.kubernetes.io/selected-node` annotation the scheduler would set, as
//! `benches/csi.rs` does, for both peers alike.
//!
//! 1. one claim: create → Bound;
//! 2. 20 claims in a row, each created together with a Pod mounting it: claim create → Bound
//!    and Pod create → Running (its volume mounted), the next pair once the Pod runs;
//! 3. 20 VolumeSnapshots of those claims created back to back (create → readyToUse), then 20
//!    claims restored from them back to back (create → Bound);
//! 4. the 20 mounted claims grown 300Mi → 600Mi, patched back to back: patch → the claim's
//!    `status.capacity` at 600Mi (kubelet writes it once the filesystem is grown); after the
//!    phase, kubelet's volume stats show whether each filesystem grew;
//! 5. 100 claims created back to back: create → Bound per claim, first create → all Bound;
//! 6. the same with the vg-manager Pod deleted (grace 0) once 50 are Bound; then nothing lost or
//!    made twice: every claim Bound to a PV whose claimRef is that claim, one PV per claim, and
//!    the thin LVs in the VG = the class's PVs + the driver's VolumeSnapshotContents;
//! 7. the 100 claims of phase 5 deleted back to back: delete → PV gone, all gone (phase 6's are
//!    deleted after, untimed);
//! 8. (`LVMS_NODE_VERSUS_PRELOAD`, default 500; 0 skips) N more claims created back to back and
//!    left Bound (8a), then 100 at once again (8b): phase 5's figures on a node holding N more
//!    volumes, and their ratio to phase 5's.
//!
//! `LVMS_NODE_VERSUS_STORMS_ONLY=1` runs phases 5–8 only (2–4 share their claims, 7 deletes 5's);
//! `LVMS_NODE_VERSUS_PODS_ONLY=1` phases 1–2 only.
//!
//! Times come from watches (claims, Pods, snapshots, PVs) timestamping each change as it
//! arrives. A wait that outlives its limit (10 min + 20 s per object; 30 min for the
//! expansions) leaves the phase's figures over what was done and a NOT DONE note; a panic in a
//! phase ends the peer's phases, and its uninstall still runs. Per phase also:
//! - **CPU seconds, peak and end RSS** of each container of the operator Pod and the vg-manager
//!   Pod (and each Pod's sum), from kubelet's `/stats/summary`: through the API server's node
//!   proxy when it reaches kubelet, else kubelet's read-only port forwarded to the host (here the
//!   node's address is QEMU's user network, which the API server cannot reach). CPU is
//!   `usageCoreNanoSeconds` between a fresh sample at the phase's start and one at its end (each
//!   newer than the last, so the phase's CPU is all in; a container restarted in the phase, or
//!   a Pod deleted, counts up to its last sample, ≤ 10 s short). The lvm2 commands, mkfs and
//!   xfs_growfs a vg-manager runs (through nsenter) are its children, in its container's
//!   cgroup: they count as its CPU, for both peers; RSS (`rssBytes`) peaks over samples
//!   every 10 s (as often as cadvisor refreshes them; each costs the emulated node ~1 s). LVMS runs its CSI sidecars inside its
//!   operator container; lvms runs the upstream ones as containers of its operator Pod: compare
//!   the Pods' sums.
//! - **API requests per claim**: the API server's `apiserver_request_total`, summed over every
//!   label, its delta over the phase divided by the phase's claims (phase 3: snapshots +
//!   restores). It counts every client: the peer, kubelet, the controllers and scheduler, the
//!   snapshot controller, this benchmark (its creates, deletes, patches and watches) alike.
//! - **lvm2 metadata commits per claim**: the VG's `vg_seqno` delta (a node probe Pod between
//!   phases), which counts each lvm2 command that changed the VG (lvcreate, lvremove,
//!   lvextend, lvchange of tags…) by either peer; read-only commands (lvs, vgs) are not counted:
//!   LVMS exposes no count of its lvm2 calls (TopoLVM logs each at verbosity 1 or 4, above the
//!   level it runs at, and more logging would change what is measured), and lvms counts its
//!   own per pass in a debug-level log line only.
//! - the thin pool's data and metadata use after the phase (the probe's `lvs`), and the
//!   restarts of the peer's containers in the phase (kubelet's `restartCount`: a failed
//!   liveness probe).
//!
//! The tables go to stdout and `<target>/bench-node_versus.md` (rewritten after each peer, so a
//! run that fails later keeps what it measured). Logs stay in `/tmp/lvms-node-tier/<pid>`.
//! `cargo test --all-targets` also builds and runs this target; without `--bench` it returns at
//! once.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]
// The node tier's modules, of which this uses a part.
#![allow(dead_code)]

#[path = "../tests/node/ctx.rs"]
mod ctx;
#[path = "../tests/node/install.rs"]
mod install;
#[path = "../tests/node/kustomize.rs"]
mod kustomize;
#[path = "../tests/node/swap.rs"]
mod swap;
#[path = "../tests/node/teardown.rs"]
mod teardown;
#[path = "../tests/node/workloads.rs"]
mod workloads;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{FutureExt as _, StreamExt as _};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt as _, watcher as watch};
use kube::{Resource, ResourceExt as _};
use lvms_testkit::bench::phases::median;
use lvms_testkit::bench::{Result, env_list, main_with, publish};
use lvms_testkit::{lvms_go, snapshots};
use serde_json::{Value, json};

use ctx::{APPS, Ctx, DISK_A, LVMS_NS, NODE, SLOW};

/// The class's StorageClass and VolumeSnapshotClass (both operators name them `lvms-<class>`).
const SC: &str = "lvms-vg1";
/// The smallest xfs volume TopoLVM and LVMS make: smaller requests are raised to it.
const MIB: u64 = 300;
const GROWN_MIB: u64 = 600;
const STORM: usize = 100;
const DISK_A_MIB: u64 = 8192;
const IN_A_ROW: usize = 20;

fn main() {
    main_with("node_versus", bench);
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Peer {
    Lvms,
    Go,
}

impl Peer {
    fn name(self) -> &'static str {
        match self {
            Peer::Lvms => "lvms",
            Peer::Go => "LVMS",
        }
    }
    /// Object name prefix: lowercase, and distinct per peer and round so no watch mixes runs.
    fn tag(self, round: usize) -> String {
        match self {
            Peer::Lvms => format!("rs{round}"),
            Peer::Go => format!("go{round}"),
        }
    }
}

/// One phase's figures, in the order the report shows them.
#[derive(Default)]
struct Phase {
    name: String,
    figures: Vec<(String, f64)>,
    notes: Vec<String>,
}

impl Phase {
    fn new(name: &str) -> Phase {
        Phase {
            name: name.into(),
            ..Phase::default()
        }
    }
    fn add(&mut self, what: impl Into<String>, v: f64) {
        self.figures.push((what.into(), v));
    }
    fn figure(&self, what: &str) -> Option<f64> {
        self.figures.iter().find(|(n, _)| n == what).map(|f| f.1)
    }
    /// p50, p99 and max of the latencies from each of `starts` to when `map` saw it (seconds),
    /// and, under `all`, from the first start to the last seen. Only over those seen: when some
    /// were not (a wait that ran out), how many were, and no `all`.
    fn timed(
        &mut self,
        what: &str,
        all: Option<&str>,
        starts: &[(String, Instant)],
        map: &HashMap<String, Instant>,
    ) {
        let mut lat = latencies(starts, map);
        lat.sort_by(f64::total_cmp);
        if lat.len() < starts.len() {
            self.add(
                format!("{what}: done (of {})", starts.len()),
                lat.len() as f64,
            );
        }
        if lat.is_empty() {
            return;
        }
        self.add(format!("{what} p50 s"), percentile(&lat, 0.5));
        self.add(format!("{what} p99 s"), percentile(&lat, 0.99));
        self.add(format!("{what} max s"), lat[lat.len() - 1]);
        if let Some(all) = all
            && lat.len() == starts.len()
        {
            self.add(all, all_within(starts, map));
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// One peer's run: its phases, and what the install and uninstall said.
struct Run {
    peer: Peer,
    phases: Vec<Phase>,
    notes: Vec<String>,
    failed: Option<String>,
}

/// When each object was first seen in each state, from watches (the bench's clock).
#[derive(Default)]
struct Seen {
    bound: HashMap<String, Instant>,
    /// claim → each new `status.capacity` (bytes) and when it was seen.
    capacity: HashMap<String, Vec<(Instant, u64)>>,
    running: HashMap<String, Instant>,
    snapshot_ready: HashMap<String, Instant>,
    pv_gone: HashMap<String, Instant>,
    /// Pods of the operator namespace: first seen Ready.
    operator_ns_ready: HashMap<String, Instant>,
    /// "<pod>/<container>" of the operator namespace → kubelet's restart count.
    restarts: HashMap<String, i32>,
}

impl Seen {
    /// The restart counts of `role`'s containers, summed.
    fn restarts_of(&self, role_name: &str) -> i32 {
        self.restarts
            .iter()
            .filter(|(k, _)| role(k) == role_name)
            .map(|x| x.1)
            .sum()
    }
}

type Shared = Arc<Mutex<Seen>>;

/// Watches `api`, calling `on` for each object seen and `gone` for each deleted one (also one
/// that a relist no longer shows: its delete fell between two watches).
fn observe<K>(
    api: Api<K>,
    seen: Shared,
    on: fn(&mut Seen, &K),
    gone: fn(&mut Seen, &K),
) -> tokio::task::JoinHandle<()>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    tokio::spawn(async move {
        let mut stream = watch(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut known: HashMap<String, K> = HashMap::new();
        let mut relisted: Option<HashSet<String>> = None;
        while let Some(ev) = stream.next().await {
            let Ok(ev) = ev else { continue };
            let mut s = seen.lock().unwrap();
            match ev {
                Event::Apply(o) | Event::InitApply(o) => {
                    on(&mut s, &o);
                    let name = o.name_any();
                    if let Some(r) = relisted.as_mut() {
                        r.insert(name.clone());
                    }
                    known.insert(name, o);
                }
                Event::Delete(o) => {
                    gone(&mut s, &o);
                    known.remove(&o.name_any());
                }
                Event::Init => relisted = Some(HashSet::new()),
                Event::InitDone => {
                    if let Some(r) = relisted.take() {
                        known.retain(|n, o| {
                            let keep = r.contains(n);
                            if !keep {
                                gone(&mut s, o);
                            }
                            keep
                        });
                    }
                }
            }
        }
    })
}

fn bytes(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> u64 {
    lvms::api::quantity::parse_quantity_bytes(&q.0).unwrap_or(0)
}

fn nothing<K>(_: &mut Seen, _: &K) {}

fn on_claim(s: &mut Seen, c: &PersistentVolumeClaim) {
    let now = Instant::now();
    let name = c.name_any();
    let status = c.status.as_ref();
    if status.and_then(|s| s.phase.as_deref()) == Some("Bound") {
        s.bound.entry(name.clone()).or_insert(now);
    }
    if let Some(b) = status
        .and_then(|s| s.capacity.as_ref()?.get("storage"))
        .map(bytes)
    {
        let h = s.capacity.entry(name).or_default();
        if h.last().is_none_or(|l| l.1 != b) {
            h.push((now, b));
        }
    }
}

fn on_pod(s: &mut Seen, p: &Pod) {
    if p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") {
        s.running.entry(p.name_any()).or_insert_with(Instant::now);
    }
}

fn on_operator_ns_pod(s: &mut Seen, p: &Pod) {
    for c in p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
    {
        s.restarts
            .insert(format!("{}/{}", p.name_any(), c.name), c.restart_count);
    }
    let ready = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    if ready {
        s.operator_ns_ready
            .entry(p.name_any())
            .or_insert_with(Instant::now);
    }
}

fn on_snapshot(s: &mut Seen, o: &DynamicObject) {
    if o.data["status"]["readyToUse"] == true {
        s.snapshot_ready
            .entry(o.name_any())
            .or_insert_with(Instant::now);
    }
}

fn pv_gone(s: &mut Seen, pv: &PersistentVolume) {
    s.pv_gone.entry(pv.name_any()).or_insert_with(Instant::now);
}

/// Where kubelet's `/stats/summary` is read.
#[derive(Clone)]
enum StatsSource {
    /// The API server's node proxy (`/api/v1/nodes/<node>/proxy/stats/summary`).
    Proxy(kube::Client),
    /// kubelet's read-only port, forwarded to the host.
    ReadOnlyPort(u16),
}

impl StatsSource {
    /// `full`: with volumes; else CPU and memory only (`only_cpu_and_memory`: kubelet skips
    /// the filesystem and network figures, cheaper for the emulated node).
    async fn summary(&self, full: bool) -> std::result::Result<Value, String> {
        let path = if full {
            "/stats/summary"
        } else {
            "/stats/summary?only_cpu_and_memory=true"
        };
        let text = match self {
            StatsSource::Proxy(client) => {
                let req = http::Request::get(format!("/api/v1/nodes/{NODE}/proxy{path}"))
                    .body(Vec::new())
                    .expect("request");
                tokio::time::timeout(Duration::from_secs(20), client.request_text(req))
                    .await
                    .map_err(|_| "no answer in 20 s".to_string())?
                    .map_err(|e| e.to_string())?
            }
            StatsSource::ReadOnlyPort(port) => {
                let port = *port;
                tokio::task::spawn_blocking(move || {
                    lvms_testkit::realnode::kubelet_read_only_get(port, path)
                })
                .await
                .map_err(|e| e.to_string())??
            }
        };
        serde_json::from_str(&text).map_err(|e| format!("/stats/summary: {e}"))
    }

    fn describe(&self) -> &'static str {
        match self {
            StatsSource::Proxy(_) => "the API server's node proxy",
            StatsSource::ReadOnlyPort(_) => {
                "kubelet's read-only port (the API server's node proxy does not reach this node)"
            }
        }
    }
}

/// A container of the operator namespace: (Pod role, Pod name, container).
type Key = (String, String, String);

/// One `/stats/summary`, the operator namespace's containers only.
#[derive(Default, Clone)]
struct Sample {
    /// (cpu ns, rss bytes, the cpu figure's timestamp).
    containers: BTreeMap<Key, (u64, u64, Option<Timestamp>)>,
    /// claim (apps) → the filesystem's capacity bytes as kubelet sees it.
    volumes: BTreeMap<String, u64>,
}

/// The peer's Pods: its operator (a Deployment) and its vg-manager (a DaemonSet).
const ROLES: [&str; 2] = ["operator", "vg-manager"];

fn role(pod: &str) -> &'static str {
    if pod.starts_with("vg-manager") {
        "vg-manager"
    } else {
        "operator"
    }
}

fn parse_summary(v: &Value) -> Sample {
    let mut s = Sample::default();
    for pod in v["pods"].as_array().into_iter().flatten() {
        let (ns, name) = (
            pod["podRef"]["namespace"].as_str().unwrap_or_default(),
            pod["podRef"]["name"].as_str().unwrap_or_default(),
        );
        if ns == APPS {
            for vol in pod["volume"].as_array().into_iter().flatten() {
                if let (Some(claim), Some(cap)) = (
                    vol["pvcRef"]["name"].as_str(),
                    vol["capacityBytes"].as_u64(),
                ) {
                    s.volumes.insert(claim.to_string(), cap);
                }
            }
        }
        if ns != LVMS_NS {
            continue;
        }
        for c in pod["containers"].as_array().into_iter().flatten() {
            let key = (
                role(name).to_string(),
                name.to_string(),
                c["name"].as_str().unwrap_or_default().to_string(),
            );
            let cpu = c["cpu"]["usageCoreNanoSeconds"].as_u64().unwrap_or(0);
            let rss = c["memory"]["rssBytes"].as_u64().unwrap_or(0);
            let at = c["cpu"]["time"].as_str().and_then(|t| t.parse().ok());
            s.containers.insert(key, (cpu, rss, at));
        }
    }
    s
}

/// Per-window usage of the operator namespace's containers: the background task samples every
/// 3 s for the peaks; the window's ends take fresh samples.
#[derive(Default)]
struct Usage {
    /// CPU ns of each container at the window's start (0 for one started in it).
    base: BTreeMap<Key, u64>,
    /// The last CPU ns seen of each container (kept for one gone since: a deleted Pod).
    cpu: BTreeMap<Key, u64>,
    /// CPU ns of a container's earlier runs in the window: kubelet restarted it (a failed
    /// liveness probe) and its counter started again.
    restarted: BTreeMap<Key, u64>,
    last: Sample,
    peak: BTreeMap<Key, u64>,
    /// role → the peak of the role's Pods' summed RSS.
    peak_role: BTreeMap<String, u64>,
}

impl Usage {
    fn ingest(&mut self, s: &Sample) {
        let mut by_role: BTreeMap<String, u64> = BTreeMap::new();
        for (k, (cpu, rss, _)) in &s.containers {
            if let Some(prev) = self.cpu.get(k).copied()
                && *cpu < prev
            {
                let base = self.base.insert(k.clone(), 0).unwrap_or(0);
                *self.restarted.entry(k.clone()).or_default() += prev.saturating_sub(base);
            }
            self.cpu.insert(k.clone(), *cpu);
            let p = self.peak.entry(k.clone()).or_default();
            *p = (*p).max(*rss);
            *by_role.entry(k.0.clone()).or_default() += rss;
        }
        for (r, v) in by_role {
            let p = self.peak_role.entry(r).or_default();
            *p = (*p).max(v);
        }
        self.last = s.clone();
    }

    /// CPU ns of `k` in the window.
    fn cpu_used(&self, k: &Key) -> u64 {
        let now = self.cpu.get(k).copied().unwrap_or(0);
        let base = self.base.get(k).copied().unwrap_or(0);
        self.restarted.get(k).copied().unwrap_or(0) + now.saturating_sub(base)
    }
}

struct Sampler {
    source: StatsSource,
    usage: Arc<Mutex<Usage>>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    fn start(source: StatsSource) -> Sampler {
        let usage = Arc::new(Mutex::new(Usage::default()));
        let (u, src) = (usage.clone(), source.clone());
        let task = tokio::spawn(async move {
            loop {
                if let Ok(v) = src.summary(false).await {
                    let s = parse_summary(&v);
                    u.lock().unwrap().ingest(&s);
                }
                // cadvisor's figures change about every 10 s; each summary costs the emulated
                // node ~1 s of wall time.
                tokio::time::sleep(Duration::from_secs(10)).await;
            }
        });
        Sampler {
            source,
            usage,
            task,
        }
    }

    /// A sample in which every container that was there before has a newer CPU figure than
    /// now (kubelet's cadvisor refreshes about every 10 s): what it says covers up to now.
    /// Compared with kubelet's own earlier timestamps, so the guest's clock need not agree
    /// with the host's. At most 40 s.
    async fn fresh(&self) -> Sample {
        let first = self.summary(false).await;
        let started = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_secs(3)).await;
            let s = self.summary(false).await;
            let newer = first.containers.iter().all(|(k, (_, _, t0))| {
                s.containers
                    .get(k)
                    .is_none_or(|(_, _, t)| t0.is_none() || t > t0)
            });
            if newer || started.elapsed() > Duration::from_secs(40) {
                return s;
            }
        }
    }

    async fn summary(&self, full: bool) -> Sample {
        for _ in 0..5 {
            if let Ok(v) = self.source.summary(full).await {
                return parse_summary(&v);
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        panic!(
            "kubelet's /stats/summary: no answer from {}",
            self.source.describe()
        )
    }

    async fn begin(&self) {
        let s = self.fresh().await;
        let mut u = self.usage.lock().unwrap();
        *u = Usage::default();
        u.base = s.containers.iter().map(|(k, v)| (k.clone(), v.0)).collect();
        u.cpu = u.base.clone();
        u.ingest(&s);
    }

    /// The window's figures: per container (role/container, summed over the role's Pods, as a
    /// killed vg-manager Pod and its successor) and per Pod role.
    async fn end(&self, phase: &mut Phase) {
        let s = self.fresh().await;
        let mut u = self.usage.lock().unwrap();
        u.ingest(&s);
        let mut cpu: BTreeMap<(String, String), f64> = BTreeMap::new();
        let mut peak: BTreeMap<(String, String), u64> = BTreeMap::new();
        let mut end: BTreeMap<(String, String), u64> = BTreeMap::new();
        // Every container seen in the window, also one gone since (its last sample's CPU).
        for k in u.cpu.keys() {
            let rc = (k.0.clone(), k.2.clone());
            *cpu.entry(rc.clone()).or_default() += u.cpu_used(k) as f64 / 1e9;
            let p = peak.entry(rc.clone()).or_default();
            *p = (*p).max(u.peak.get(k).copied().unwrap_or(0));
            if let Some((_, rss, _)) = u.last.containers.get(k) {
                *end.entry(rc).or_default() += rss;
            }
        }
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        for role in ROLES {
            let of = |m: &BTreeMap<(String, String), f64>| -> f64 {
                m.iter().filter(|(k, _)| k.0 == role).map(|x| x.1).sum()
            };
            phase.add(format!("{role} Pod CPU s"), of(&cpu));
            phase.add(
                format!("{role} Pod RSS peak MiB"),
                mib(u.peak_role.get(role).copied().unwrap_or(0)),
            );
            let e: u64 = end.iter().filter(|(k, _)| k.0 == role).map(|x| x.1).sum();
            phase.add(format!("{role} Pod RSS end MiB"), mib(e));
        }
        for ((role, c), v) in &cpu {
            phase.add(format!("· {role}/{c} CPU s"), *v);
        }
        for ((role, c), v) in &peak {
            phase.add(format!("· {role}/{c} RSS peak MiB"), mib(*v));
        }
        for ((role, c), v) in &end {
            phase.add(format!("· {role}/{c} RSS end MiB"), mib(*v));
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The API server's `apiserver_request_total`, every series summed.
async fn api_requests(client: &kube::Client) -> f64 {
    let req = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("request");
    let text = client
        .request_text(req)
        .await
        .expect("kube-apiserver /metrics");
    text.lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// lvm2 on the node, between phases.
#[derive(Default, Clone, Copy)]
struct Lvm {
    seqno: u64,
    thin_lvs: usize,
    data_pct: f64,
    meta_pct: f64,
}

/// What the phases share: the node's stats, the watches, the probe count.
struct Meter {
    sampler: Sampler,
    seen: Shared,
    probes: u32,
    lvm: Lvm,
    t0: Instant,
    api0: f64,
    /// role → its containers' restarts at the window's start.
    restarts0: BTreeMap<&'static str, i32>,
}

impl Meter {
    async fn probe(&mut self, c: &mut Ctx) -> Lvm {
        self.probes += 1;
        let out = c
            .on_node(
                &format!("nv-probe-{}", self.probes),
                "echo \"seqno $(lvm vgs --noheadings -o vg_seqno vg1 2>/dev/null | tr -d ' ')\"
echo \"thin $(lvm lvs --noheadings -o lv_name --select 'vg_name=vg1 && segtype=thin' 2>/dev/null | wc -l)\"
echo \"pool $(lvm lvs --noheadings -o data_percent,metadata_percent --select 'vg_name=vg1 && segtype=thin-pool' 2>/dev/null)\"",
            )
            .await;
        let mut l = Lvm::default();
        for line in out.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            match w.as_slice() {
                ["seqno", n] => l.seqno = n.parse().unwrap_or(0),
                ["thin", n] => l.thin_lvs = n.parse().unwrap_or(0),
                ["pool", d, m] => {
                    l.data_pct = d.parse().unwrap_or(0.0);
                    l.meta_pct = m.parse().unwrap_or(0.0);
                }
                _ => {}
            }
        }
        l
    }

    async fn begin(&mut self, c: &Ctx, name: &str) {
        println!(
            "== {name} ({:.0}s into the bench)",
            START.get().map_or(0.0, |t| t.elapsed().as_secs_f64())
        );
        self.sampler.begin().await;
        self.api0 = api_requests(&c.client).await;
        let seen = self.seen.lock().unwrap();
        self.restarts0 = ROLES.map(|r| (r, seen.restarts_of(r))).into();
        drop(seen);
        self.t0 = Instant::now();
    }

    /// Ends the window (`claims` the divisor of the per-claim figures) and probes the node.
    async fn end(&mut self, c: &mut Ctx, phase: &mut Phase, claims: usize) {
        let wall = self.t0.elapsed().as_secs_f64();
        let api = api_requests(&c.client).await - self.api0;
        let mut usage = Phase::default();
        self.sampler.end(&mut usage).await;
        let lvm = self.probe(c).await;
        let per = claims.max(1) as f64;
        phase.add("phase wall s", wall);
        phase.add("API requests (all clients)", api);
        phase.add("API requests per claim (all clients)", api / per);
        phase.add(
            "lvm2 metadata commits (VG seqno) per claim",
            lvm.seqno.saturating_sub(self.lvm.seqno) as f64 / per,
        );
        phase.add("thin LVs after", lvm.thin_lvs as f64);
        phase.add("thin pool data % after", lvm.data_pct);
        phase.add("thin pool metadata % after", lvm.meta_pct);
        for r in ROLES {
            let now = self.seen.lock().unwrap().restarts_of(r);
            let before = self.restarts0.get(r).copied().unwrap_or(0);
            // A Pod deleted in the window takes its count with it: never below zero.
            phase.add(
                format!("{r} Pod container restarts (kubelet)"),
                f64::from((now - before).max(0)),
            );
        }
        phase.figures.extend(usage.figures);
        self.lvm = lvm;
        let line: Vec<String> = phase
            .figures
            .iter()
            .filter(|(n, _)| !n.starts_with('·'))
            .map(|(n, v)| format!("{n} {v:.2}"))
            .collect();
        println!("   {}: {}", phase.name, line.join("; "));
    }
}

static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

/// A 300Mi claim in the class; `node`: with the selected-node annotation (no Pod will ask).
fn claim(name: &str, node: bool) -> Value {
    let mut p = workloads::pvc(name, SC, MIB, false);
    if node {
        p["metadata"]["annotations"] = json!({"volume.kubernetes.io/selected-node": NODE});
    }
    p
}

fn claims_api(c: &Ctx) -> Api<PersistentVolumeClaim> {
    Api::namespaced(c.client.clone(), APPS)
}

async fn create(c: &Ctx, obj: Value) {
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let kind = obj["kind"].as_str().unwrap_or_default().to_string();
    let result = match kind.as_str() {
        "PersistentVolumeClaim" => claims_api(c)
            .create(
                &PostParams::default(),
                &serde_json::from_value(obj).unwrap(),
            )
            .await
            .map(drop),
        "Pod" => Api::<Pod>::namespaced(c.client.clone(), APPS)
            .create(
                &PostParams::default(),
                &serde_json::from_value(obj).unwrap(),
            )
            .await
            .map(drop),
        _ => snapshots::api(&c.client, "volumesnapshots", "VolumeSnapshot", Some(APPS))
            .create(
                &PostParams::default(),
                &serde_json::from_value(obj).unwrap(),
            )
            .await
            .map(drop),
    };
    result.unwrap_or_else(|e| panic!("creating {kind} {name}: {e}"));
}

/// Waits until `done` holds of what the watches saw, at most `limit`: a peer that does not
/// finish in time has its figures over what it did, and the phase says what was not done. A
/// node that stopped is a panic.
async fn wait_seen(
    c: &mut Ctx,
    seen: &Shared,
    phase: &mut Phase,
    what: &str,
    limit: Duration,
    done: impl Fn(&Seen) -> bool,
) -> bool {
    let t = Instant::now();
    loop {
        if done(&seen.lock().unwrap()) {
            return true;
        }
        assert!(
            c.node.running(),
            "{what}: the node stopped\n{}",
            c.node_story()
        );
        if t.elapsed() > limit {
            let note = format!("NOT DONE: {what}, not within {} s", limit.as_secs());
            println!("   {note}");
            phase.notes.push(note);
            return false;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Seconds from each start to when `map` saw the object.
fn latencies(starts: &[(String, Instant)], map: &HashMap<String, Instant>) -> Vec<f64> {
    starts
        .iter()
        .filter_map(|(n, t)| Some(map.get(n)?.saturating_duration_since(*t).as_secs_f64()))
        .collect()
}

/// From the first start to the last time `map` saw one of them.
fn all_within(starts: &[(String, Instant)], map: &HashMap<String, Instant>) -> f64 {
    let first = starts.iter().map(|s| s.1).min();
    let last = starts.iter().filter_map(|(n, _)| map.get(n)).max();
    match (first, last) {
        (Some(f), Some(l)) => l.saturating_duration_since(f).as_secs_f64(),
        _ => 0.0,
    }
}

/// Generous waits (they end as soon as all is done): under emulation LVMS binds 100 claims
/// made at once in ~15 min.
fn within(n: usize) -> Duration {
    SLOW + Duration::from_secs(20 * n as u64)
}

/// `n` claims created back to back (annotated), waited for until all are Bound; the phase's
/// latency figures.
async fn storm(c: &mut Ctx, m: &Meter, phase: &mut Phase, prefix: &str, n: usize) {
    let mut starts = Vec::new();
    for i in 0..n {
        let name = format!("{prefix}-{i:03}");
        starts.push((name.clone(), Instant::now()));
        create(c, claim(&name, true)).await;
    }
    phase.add(
        "creates issued in s",
        starts
            .last()
            .map_or(0.0, |s| s.1.duration_since(starts[0].1).as_secs_f64()),
    );
    let names: Vec<String> = starts.iter().map(|s| s.0.clone()).collect();
    wait_seen(
        c,
        &m.seen,
        phase,
        &format!("{n} claims {prefix}-* Bound"),
        within(n),
        |s| names.iter().all(|n| s.bound.contains_key(n)),
    )
    .await;
    let seen = m.seen.lock().unwrap();
    phase.timed(
        "create → Bound",
        Some("first create → all Bound s"),
        &starts,
        &seen.bound,
    );
}

/// The LVMCluster: one thin class on the first disk. Thin pool metadata is sized by hand: lvm2's
/// own choice for a pool of a few GiB (a few MiB) holds a few hundred thin volumes only.
fn lvmcluster() -> Value {
    json!({
        "apiVersion": "lvm.topolvm.io/v1alpha1", "kind": "LVMCluster",
        "metadata": {"name": install::CLUSTER, "namespace": LVMS_NS},
        "spec": {"storage": {"deviceClasses": [{
            "name": "vg1", "default": true, "fstype": "xfs",
            "deviceSelector": {"paths": [format!("/dev/disk/by-id/virtio-{DISK_A}")]},
            "thinPoolConfig": {
                "name": "thin-pool-1", "sizePercent": 90, "overprovisionRatio": 100,
                "metadataSizeCalculationPolicy": "Static", "metadataSize": "64Mi"
            }
        }]}}
    })
}

/// Installs `peer` and its LVMCluster until Ready; returns LVMS's objects (to delete them
/// again) or none (lvms: helm uninstalls).
async fn install_peer(c: &mut Ctx, peer: Peer, run: &mut Run) -> Vec<Value> {
    c.operator_namespace_gone("the last install's namespace gone")
        .await;
    let t = Instant::now();
    let objects = match peer {
        Peer::Go => {
            let objects = swap::lvms_go_objects(c);
            lvms_testkit::dev::deploy::apply_all(&c.client, &objects)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            objects
        }
        Peer::Lvms => {
            install::helm(c, "install", &[]);
            Vec::new()
        }
    };
    swap::operator_ready(c, peer.name()).await;
    let operator = t.elapsed().as_secs_f64();
    let t = Instant::now();
    c.apply_json(lvmcluster()).await;
    swap::cluster_ready(c, peer.name()).await;
    // Its vg-manager runs and kubelet registered the driver: a claim can be made.
    c.until("kubelet to register topolvm.io", SLOW, |cl| async move {
        let n = Api::<k8s_openapi::api::storage::v1::CSINode>::all(cl)
            .get(NODE)
            .await
            .ok()?;
        n.spec
            .drivers
            .iter()
            .any(|d| d.name == "topolvm.io")
            .then_some(())
    })
    .await;
    let sc = c
        .until("the class's StorageClass", SLOW, |cl| async move {
            Api::<StorageClass>::all(cl).get(SC).await.ok()
        })
        .await;
    let mut p = Phase::new("0. install");
    p.add("apply → operator Pod Ready s", operator);
    p.add(
        "LVMCluster → Ready, driver registered s",
        t.elapsed().as_secs_f64(),
    );
    run.phases.push(p);
    run.notes.push(format!(
        "StorageClass {SC} as {} made it: volumeBindingMode {}, allowVolumeExpansion {}, reclaimPolicy {}, parameters {}",
        peer.name(),
        sc.volume_binding_mode.unwrap_or_default(),
        sc.allow_volume_expansion.unwrap_or_default(),
        sc.reclaim_policy.unwrap_or_default(),
        serde_json::to_string(&sc.parameters.unwrap_or_default()).unwrap_or_default()
    ));
    objects
}

/// The phases on an installed peer.
async fn phases(c: &mut Ctx, m: &mut Meter, tag: &str, preload: usize, run: &mut Run) {
    m.lvm = m.probe(c).await;
    if !storms_only() {
        mounted_phases(c, m, tag, run).await;
    }
    if !pods_only() {
        storm_phases(c, m, tag, preload, run).await;
    }
}

/// `LVMS_NODE_VERSUS_STORMS_ONLY=1`: phases 5–8 only (a run of the storms on their own).
fn storms_only() -> bool {
    std::env::var("LVMS_NODE_VERSUS_STORMS_ONLY").is_ok_and(|v| v == "1")
}

/// `LVMS_NODE_VERSUS_PODS_ONLY=1`: phases 1–2 only (claims with Pods in a row: the Pod → Running
/// comparison, ~10 min a peer where all phases take 40–60).
fn pods_only() -> bool {
    std::env::var("LVMS_NODE_VERSUS_PODS_ONLY").is_ok_and(|v| v == "1")
}

/// Phases 1–4: one claim, 20 mounted in a row, their snapshots and restores, their growth.
async fn mounted_phases(c: &mut Ctx, m: &mut Meter, tag: &str, run: &mut Run) {
    // 1. One claim.
    let mut p = Phase::new("1. one claim");
    m.begin(c, &p.name).await;
    let name = format!("{tag}-one");
    let starts = vec![(name.clone(), Instant::now())];
    create(c, claim(&name, true)).await;
    wait_seen(c, &m.seen, &mut p, "the first claim Bound", SLOW, |s| {
        s.bound.contains_key(&name)
    })
    .await;
    if let Some(t) = latencies(&starts, &m.seen.lock().unwrap().bound).first() {
        p.add("create → Bound s", *t);
    }
    m.end(c, &mut p, 1).await;
    run.phases.push(p);

    // 2. 20 claims in a row, each with a Pod that mounts it.
    let mut p = Phase::new("2. 20 claims in a row, each with a Pod mounting it");
    m.begin(c, &p.name).await;
    let mut starts = Vec::new();
    for i in 0..IN_A_ROW {
        let name = format!("{tag}-m{i:02}");
        starts.push((name.clone(), Instant::now()));
        create(c, claim(&name, false)).await;
        create(
            c,
            workloads::pod(&name, &name, false, "while :; do sleep 3600; done"),
        )
        .await;
        wait_seen(
            c,
            &m.seen,
            &mut p,
            &format!("pod {name} Running"),
            SLOW,
            |s| s.running.contains_key(&name),
        )
        .await;
    }
    {
        let seen = m.seen.lock().unwrap();
        p.timed("claim create → Bound", None, &starts, &seen.bound);
        p.timed("Pod create → Running", None, &starts, &seen.running);
    }
    m.end(c, &mut p, IN_A_ROW).await;
    add_retries(c, &mut p, &format!("{tag}-m")).await;
    run.phases.push(p);
    if pods_only() {
        return;
    }
    let mounted: Vec<String> = starts.into_iter().map(|s| s.0).collect();

    // 3. Snapshots of the mounted claims, then claims restored from them.
    let mut p = Phase::new("3. 20 snapshots, then 20 restores");
    m.begin(c, &p.name).await;
    let mut snaps = Vec::new();
    for claim_name in &mounted {
        let name = format!("{claim_name}-snap");
        let mut s = snapshots::snapshot(&name, SC, claim_name);
        s["metadata"]["namespace"] = APPS.into();
        snaps.push((name, Instant::now()));
        create(c, s).await;
    }
    let names: Vec<String> = snaps.iter().map(|s| s.0.clone()).collect();
    wait_seen(
        c,
        &m.seen,
        &mut p,
        "20 snapshots readyToUse",
        within(20),
        |s| names.iter().all(|n| s.snapshot_ready.contains_key(n)),
    )
    .await;
    let mut restores = Vec::new();
    for (snap, _) in &snaps {
        let name = format!("{snap}-restored");
        let mut r = workloads::pvc_from_snapshot(&name, SC, MIB, snap);
        r["metadata"]["annotations"] = json!({"volume.kubernetes.io/selected-node": NODE});
        restores.push((name, Instant::now()));
        create(c, r).await;
    }
    let names: Vec<String> = restores.iter().map(|s| s.0.clone()).collect();
    wait_seen(
        c,
        &m.seen,
        &mut p,
        "20 restored claims Bound",
        within(20),
        |s| names.iter().all(|n| s.bound.contains_key(n)),
    )
    .await;
    {
        let seen = m.seen.lock().unwrap();
        p.timed(
            "snapshot create → readyToUse",
            Some("first snapshot → all readyToUse s"),
            &snaps,
            &seen.snapshot_ready,
        );
        p.timed(
            "restore create → Bound",
            Some("first restore → all Bound s"),
            &restores,
            &seen.bound,
        );
    }
    m.end(c, &mut p, 2 * IN_A_ROW).await;
    run.phases.push(p);

    // 4. The mounted claims grown.
    let mut p = Phase::new("4. 20 mounted claims grown 300Mi → 600Mi");
    m.begin(c, &p.name).await;
    let mut patches = Vec::new();
    for name in &mounted {
        patches.push((name.clone(), Instant::now()));
        claims_api(c)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"resources": {"requests": {
                    "storage": format!("{GROWN_MIB}Mi")}}}})),
            )
            .await
            .unwrap_or_else(|e| panic!("growing {name}: {e}"));
    }
    let grown = |s: &Seen| -> HashMap<String, Instant> {
        s.capacity
            .iter()
            .filter_map(|(n, h)| Some((n.clone(), h.iter().find(|x| x.1 >= GROWN_MIB << 20)?.0)))
            .collect()
    };
    // Long: under LVMS, kubelet's NodeExpandVolume calls hit their 2 min deadline and are retried
    // with backoff (the first run of this bench).
    let limit = Duration::from_secs(1800);
    wait_seen(c, &m.seen, &mut p, "20 claims at 600Mi", limit, |s| {
        let g = grown(s);
        mounted.iter().all(|n| g.contains_key(n))
    })
    .await;
    {
        let g = grown(&m.seen.lock().unwrap());
        p.timed(
            "patch → status.capacity 600Mi",
            Some("first patch → all at 600Mi s"),
            &patches,
            &g,
        );
    }
    m.end(c, &mut p, IN_A_ROW).await;
    // Outside the window: kubelet's volume stats (every 20 s here) show each filesystem's size.
    let t = Instant::now();
    let fs_grown = loop {
        let s = m.sampler.summary(true).await;
        let n = mounted
            .iter()
            .filter(|c| {
                s.volumes
                    .get(*c)
                    .is_some_and(|b| *b >= (GROWN_MIB - 60) << 20)
            })
            .count();
        if n == mounted.len() || t.elapsed() > Duration::from_secs(90) {
            break n;
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    };
    p.add("filesystems seen grown by kubelet (of 20)", fs_grown as f64);
    run.phases.push(p);
}

/// Phases 5–8: storms of 100, with a vg-manager kill, their deletion, and on a preloaded node.
async fn storm_phases(c: &mut Ctx, m: &mut Meter, tag: &str, preload: usize, run: &mut Run) {
    // 5. A storm of 100.
    let mut p = Phase::new("5. 100 claims at once");
    m.begin(c, &p.name).await;
    storm(c, m, &mut p, &format!("{tag}-a"), STORM).await;
    m.end(c, &mut p, STORM).await;
    add_retries(c, &mut p, &format!("{tag}-a-")).await;
    run.phases.push(p);

    // 6. The same with vg-manager's Pod deleted halfway.
    let mut p = Phase::new("6. 100 claims at once, vg-manager Pod deleted at 50 Bound");
    m.begin(c, &p.name).await;
    let prefix = format!("{tag}-b");
    let mut starts = Vec::new();
    for i in 0..STORM {
        let name = format!("{prefix}-{i:03}");
        starts.push((name.clone(), Instant::now()));
        create(c, claim(&name, true)).await;
    }
    let t_kill = loop {
        let n = {
            let s = m.seen.lock().unwrap();
            starts.iter().filter(|x| s.bound.contains_key(&x.0)).count()
        };
        if n >= STORM / 2 {
            break kill_vg_manager(c).await;
        }
        assert!(
            starts[0].1.elapsed() < within(STORM),
            "{n} of {STORM} Bound"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (killed, killed_at) = t_kill;
    let names: Vec<String> = starts.iter().map(|s| s.0.clone()).collect();
    wait_seen(
        c,
        &m.seen,
        &mut p,
        "100 claims Bound across the kill",
        within(STORM),
        |s| names.iter().all(|n| s.bound.contains_key(n)),
    )
    .await;
    wait_seen(
        c,
        &m.seen,
        &mut p,
        "a new vg-manager Pod Ready",
        SLOW,
        |s| {
            s.operator_ns_ready
                .iter()
                .any(|(n, t)| n.starts_with("vg-manager") && *n != killed && *t > killed_at)
        },
    )
    .await;
    {
        let seen = m.seen.lock().unwrap();
        p.timed(
            "create → Bound",
            Some("first create → all Bound s"),
            &starts,
            &seen.bound,
        );
        let back = seen
            .operator_ns_ready
            .iter()
            .filter(|(n, t)| n.starts_with("vg-manager") && **n != killed && **t > killed_at)
            .map(|(_, t)| t.duration_since(killed_at).as_secs_f64())
            .reduce(f64::min);
        if let Some(back) = back {
            p.add("delete → new vg-manager Pod Ready s", back);
        }
        let after_kill = starts
            .iter()
            .filter(|(n, _)| seen.bound.get(n).is_some_and(|t| *t > killed_at))
            .count();
        p.add("claims Bound after the delete", after_kill as f64);
    }
    m.end(c, &mut p, STORM).await;
    add_retries(c, &mut p, &format!("{prefix}-")).await;
    let verdict = nothing_lost(c, &prefix, m.lvm.thin_lvs).await;
    p.notes.push(verdict.clone());
    if !verdict.starts_with("ok") {
        run.failed = Some(format!("phase 6: {verdict}"));
    }
    run.phases.push(p);

    // 7. The first storm deleted.
    let mut p = Phase::new("7. 100 claims deleted at once");
    let pvs = volume_names(c, &format!("{tag}-a-")).await;
    m.begin(c, &p.name).await;
    let mut starts = Vec::new();
    for (claim_name, pv) in &pvs {
        starts.push((pv.clone(), Instant::now()));
        claims_api(c)
            .delete(claim_name, &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("deleting {claim_name}: {e}"));
    }
    let names: Vec<String> = starts.iter().map(|s| s.0.clone()).collect();
    wait_seen(c, &m.seen, &mut p, "100 PVs gone", within(STORM), |s| {
        names.iter().all(|n| s.pv_gone.contains_key(n))
    })
    .await;
    {
        let seen = m.seen.lock().unwrap();
        p.timed(
            "delete → PV gone",
            Some("first delete → all PVs gone s"),
            &starts,
            &seen.pv_gone,
        );
    }
    m.end(c, &mut p, STORM).await;
    // Untimed: phase 6's claims go too, so phase 8 adds its N to what phase 5 had.
    let rest = volume_names(c, &format!("{prefix}-")).await;
    for (claim_name, _) in &rest {
        let _ = claims_api(c)
            .delete(claim_name, &DeleteParams::default())
            .await;
    }
    wait_seen(
        c,
        &m.seen,
        &mut p,
        "phase 6's PVs gone",
        within(STORM),
        |s| rest.iter().all(|(_, pv)| s.pv_gone.contains_key(pv)),
    )
    .await;
    run.phases.push(p);
    m.lvm = m.probe(c).await;

    if preload == 0 {
        return;
    }
    // 8. The storm again on a node holding `preload` more volumes.
    let mut p = Phase::new("8a. preload: N claims at once, left Bound");
    m.begin(c, &p.name).await;
    storm(c, m, &mut p, &format!("{tag}-p"), preload).await;
    m.end(c, &mut p, preload).await;
    run.phases.push(p);
    let mut p = Phase::new("8b. 100 claims at once on the preloaded node");
    m.begin(c, &p.name).await;
    storm(c, m, &mut p, &format!("{tag}-c"), STORM).await;
    m.end(c, &mut p, STORM).await;
    let empty = run
        .phases
        .iter()
        .find(|x| x.name.starts_with("5."))
        .map(|x| {
            [
                "create → Bound p50 s",
                "create → Bound p99 s",
                "first create → all Bound s",
                "API requests per claim (all clients)",
            ]
            .map(|f| (f, x.figure(f).unwrap_or(0.0)))
        });
    for (f, before) in empty.into_iter().flatten() {
        let now = p.figure(f).unwrap_or(0.0);
        if before > 0.0 {
            p.add(format!("{f}: ÷ phase 5's"), now / before);
        }
    }
    run.phases.push(p);
}

/// Deletes the vg-manager Pod (grace 0); its name and when.
async fn kill_vg_manager(c: &Ctx) -> (String, Instant) {
    let pods = Api::<Pod>::namespaced(c.client.clone(), LVMS_NS)
        .list(&ListParams::default())
        .await
        .expect("the operator namespace's Pods");
    let pod = pods
        .items
        .into_iter()
        .find(|p| {
            p.metadata.deletion_timestamp.is_none()
                && p.owner_references()
                    .iter()
                    .any(|o| o.kind == "DaemonSet" && o.name == "vg-manager")
        })
        .expect("the vg-manager Pod");
    let name = pod.name_any();
    let at = Instant::now();
    Api::<Pod>::namespaced(c.client.clone(), LVMS_NS)
        .delete(
            &name,
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            },
        )
        .await
        .unwrap_or_else(|e| panic!("deleting {name}: {e}"));
    println!("   deleted vg-manager Pod {name}");
    (name, at)
}

/// csi-provisioner's retries of the claims named `prefix`*: how many ProvisioningFailed Events
/// it recorded (their counts summed), how many of those its own deadline cut (`--timeout`:
/// DeadlineExceeded), and how many claims had any. Each one is a retry after a backoff that
/// doubles per claim, which is where a claim's time can go while nothing on the node is slow.
async fn provisioning_retries(c: &Ctx, prefix: &str) -> (f64, f64, f64) {
    let events = Api::<k8s_openapi::api::core::v1::Event>::namespaced(c.client.clone(), APPS)
        .list(&ListParams::default())
        .await
        .expect("the claims' Events");
    let (mut failed, mut deadline) = (0_i64, 0_i64);
    let mut claims = HashSet::new();
    for e in &events.items {
        let about = &e.involved_object;
        if e.reason.as_deref() != Some("ProvisioningFailed")
            || about.kind.as_deref() != Some("PersistentVolumeClaim")
            || !about
                .name
                .as_deref()
                .unwrap_or_default()
                .starts_with(prefix)
        {
            continue;
        }
        let n = i64::from(e.count.unwrap_or(1).max(1));
        failed += n;
        if e.message
            .as_deref()
            .unwrap_or_default()
            .contains("DeadlineExceeded")
        {
            deadline += n;
        }
        claims.insert(about.name.clone());
    }
    (failed as f64, deadline as f64, claims.len() as f64)
}

/// Adds [`provisioning_retries`]'s figures to a storm's phase.
async fn add_retries(c: &Ctx, p: &mut Phase, prefix: &str) {
    let (failed, deadline, claims) = provisioning_retries(c, prefix).await;
    p.add(
        "ProvisioningFailed Events (csi-provisioner retries)",
        failed,
    );
    p.add("of them DeadlineExceeded (its --timeout)", deadline);
    p.add("claims with a retry", claims);
}

/// (claim, PV) of the Bound claims whose names start with `prefix`.
async fn volume_names(c: &Ctx, prefix: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = claims_api(c)
        .list(&ListParams::default())
        .await
        .expect("claims")
        .items
        .into_iter()
        .filter(|p| p.name_any().starts_with(prefix))
        .filter_map(|p| Some((p.name_any(), p.spec?.volume_name?)))
        .collect();
    v.sort();
    v
}

fn logical_volumes(client: kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("topolvm.io", "v1", "LogicalVolume"));
    Api::all_with(client, &ar)
}

/// Phase 6's verdict: each claim of the storm Bound to a PV of its own whose claimRef is it,
/// no PV of the class without its claim, and the thin LVs on the node (`thin_lvs`, probed at
/// the phase's end) = the class's PVs + the driver's snapshot contents. "ok: …" or what is
/// wrong.
async fn nothing_lost(c: &Ctx, prefix: &str, thin_lvs: usize) -> String {
    let claims = claims_api(c)
        .list(&ListParams::default())
        .await
        .expect("claims")
        .items;
    let pvs: Vec<PersistentVolume> = Api::<PersistentVolume>::all(c.client.clone())
        .list(&ListParams::default())
        .await
        .expect("PVs")
        .items
        .into_iter()
        .filter(|pv| {
            pv.spec
                .as_ref()
                .and_then(|s| s.storage_class_name.as_deref())
                == Some(SC)
        })
        .collect();
    let contents = snapshots::api(
        &c.client,
        "volumesnapshotcontents",
        "VolumeSnapshotContent",
        None,
    )
    .list(&ListParams::default())
    .await
    .expect("VolumeSnapshotContents")
    .items
    .into_iter()
    .filter(|o| o.data["spec"]["driver"] == "topolvm.io")
    .count();
    let lvs = logical_volumes(c.client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items.len())
        .unwrap_or(0);
    let mut wrong = Vec::new();
    let by_name: HashMap<String, &PersistentVolume> =
        pvs.iter().map(|pv| (pv.name_any(), pv)).collect();
    let mut used: HashMap<String, String> = HashMap::new();
    for claim in claims.iter().filter(|p| p.name_any().starts_with(prefix)) {
        let name = claim.name_any();
        let phase = claim.status.as_ref().and_then(|s| s.phase.clone());
        let Some(pv_name) = claim.spec.as_ref().and_then(|s| s.volume_name.clone()) else {
            wrong.push(format!("{name} has no volume ({phase:?})"));
            continue;
        };
        if phase.as_deref() != Some("Bound") {
            wrong.push(format!("{name} is {phase:?}"));
        }
        if let Some(other) = used.insert(pv_name.clone(), name.clone()) {
            wrong.push(format!("{pv_name} bound to both {other} and {name}"));
        }
        let Some(pv) = by_name.get(&pv_name) else {
            wrong.push(format!("{name}'s {pv_name} is not a PV of {SC}"));
            continue;
        };
        let r = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
        if r.and_then(|r| r.uid.as_deref()) != claim.metadata.uid.as_deref() {
            wrong.push(format!("{pv_name}'s claimRef is not {name}"));
        }
    }
    let live: HashSet<(String, String)> = claims
        .iter()
        .filter_map(|p| Some((p.name_any(), p.metadata.uid.clone()?)))
        .collect();
    for pv in &pvs {
        let r = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
        let owner = r.and_then(|r| Some((r.name.clone()?, r.uid.clone()?)));
        if !owner.is_some_and(|o| live.contains(&o)) {
            wrong.push(format!("{} has no claim of its own", pv.name_any()));
        }
    }
    let storm = used.len();
    let expected = pvs.len() + contents;
    if thin_lvs != expected {
        wrong.push(format!(
            "{thin_lvs} thin LVs on the node, {} PVs + {contents} snapshot contents",
            pvs.len()
        ));
    }
    if wrong.is_empty() {
        format!(
            "ok: {storm} claims, each Bound to its own PV; {thin_lvs} thin LVs = {} PVs + {contents} snapshot contents; {lvs} LogicalVolumes",
            pvs.len()
        )
    } else {
        format!("NOT OK: {}", wrong.join("; "))
    }
}

/// What a peer could leave on the disk itself once its VG is gone: a PV label or a signature.
const DISK_LEFTOVERS: &str = "echo \"pvs: $(lvm pvs --noheadings -o pv_name 2>/dev/null | tr -d ' ' | tr '\\n' ' ')\"
echo \"signatures: $(wipefs --noheadings -o TYPE /dev/disk/by-id/virtio-lvms-d1 2>/dev/null | tr '\\n' ' ')\"";

/// The uninstall: everything of the run deleted, the peer gone, the node and the API clean.
async fn uninstall(c: &mut Ctx, m: &mut Meter, peer: Peer, objects: &[Value], run: &mut Run) {
    let t = Instant::now();
    let dp = DeleteParams::default();
    let lp = ListParams::default();
    let _ = Api::<Pod>::namespaced(c.client.clone(), APPS)
        .delete_collection(&dp, &lp)
        .await;
    c.until("the workloads' Pods gone", SLOW, |cl| async move {
        let pods = Api::<Pod>::namespaced(cl, APPS)
            .list(&ListParams::default())
            .await
            .ok()?;
        pods.items.is_empty().then_some(())
    })
    .await;
    let _ = snapshots::api(&c.client, "volumesnapshots", "VolumeSnapshot", Some(APPS))
        .delete_collection(&dp, &lp)
        .await;
    c.until("every VolumeSnapshotContent gone", SLOW, |cl| async move {
        let n = snapshots::api(&cl, "volumesnapshotcontents", "VolumeSnapshotContent", None)
            .list(&ListParams::default())
            .await
            .ok()?;
        n.items.is_empty().then_some(())
    })
    .await;
    let n = claims_api(c)
        .list(&lp)
        .await
        .map(|l| l.items.len())
        .unwrap_or(0);
    let _ = claims_api(c).delete_collection(&dp, &lp).await;
    c.until("every PersistentVolume gone", within(n), |cl| async move {
        let pvs = Api::<PersistentVolume>::all(cl)
            .list(&ListParams::default())
            .await
            .ok()?;
        pvs.items.is_empty().then_some(())
    })
    .await;
    let volumes = t.elapsed().as_secs_f64();
    install::delete_cluster(c).await;
    match peer {
        Peer::Go => kustomize::delete_objects(&c.client, objects).await,
        Peer::Lvms => install::helm(c, "uninstall", &[]),
    }
    c.operator_namespace_gone(&format!("{}'s namespace gone", peer.name()))
        .await;
    teardown::assert_nothing_left(c, &format!("nv-left-{}", m.probes)).await;
    m.probes += 1;
    let disk = c
        .on_node(&format!("nv-disk-{}", m.probes), DISK_LEFTOVERS)
        .await;
    if disk.lines().collect::<Vec<_>>() != ["pvs: ", "signatures: "] {
        // Noted, then wiped: the next peer starts on a clean disk.
        run.notes.push(format!(
            "{} left on {DISK_A} after its uninstall: {}",
            peer.name(),
            disk.replace('\n', "; ")
        ));
        m.probes += 1;
        c.on_node(
            &format!("nv-wipe-{}", m.probes),
            "wipefs -a /dev/disk/by-id/virtio-lvms-d1 >/dev/null; echo wiped",
        )
        .await;
    }
    // What the operator manages outside its namespace.
    let mut left = Vec::new();
    if Api::<StorageClass>::all(c.client.clone())
        .get_opt(SC)
        .await
        .ok()
        .flatten()
        .is_some()
    {
        left.push(format!("StorageClass {SC}"));
        let _ = Api::<StorageClass>::all(c.client.clone())
            .delete(SC, &dp)
            .await;
    }
    let vsc = snapshots::api(
        &c.client,
        "volumesnapshotclasses",
        "VolumeSnapshotClass",
        None,
    );
    if vsc.get_opt(SC).await.ok().flatten().is_some() {
        left.push(format!("VolumeSnapshotClass {SC}"));
        let _ = vsc.delete(SC, &dp).await;
    }
    let drivers = Api::<CSIDriver>::all(c.client.clone());
    if drivers.get_opt("topolvm.io").await.ok().flatten().is_some() {
        left.push("CSIDriver topolvm.io".into());
        let _ = drivers.delete("topolvm.io", &dp).await;
    }
    let node = Api::<Node>::all(c.client.clone())
        .get(NODE)
        .await
        .expect("the Node");
    let annotations: Vec<String> = node
        .annotations()
        .keys()
        .filter(|k| k.contains("topolvm.io"))
        .cloned()
        .collect();
    if !annotations.is_empty() {
        left.push(format!("Node annotations {annotations:?}"));
        let none: serde_json::Map<String, Value> = annotations
            .iter()
            .map(|k| (k.clone(), Value::Null))
            .collect();
        Api::<Node>::all(c.client.clone())
            .patch(
                NODE,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": none}})),
            )
            .await
            .expect("removing the Node's capacity annotations");
    }
    if !left.is_empty() {
        run.notes.push(format!(
            "{} left after its uninstall (deleted before the next peer): {}",
            peer.name(),
            left.join(", ")
        ));
    }
    // Its CRDs too (helm keeps a chart's; kubectl delete -k here skips them): the next peer
    // installs its own.
    let crds = Api::<CustomResourceDefinition>::all(c.client.clone());
    let ours: Vec<String> = crds
        .list(&lp)
        .await
        .expect("CRDs")
        .items
        .into_iter()
        .filter(|d| d.spec.group == "lvm.topolvm.io" || d.spec.group == "topolvm.io")
        .map(|d| d.name_any())
        .collect();
    for name in &ours {
        let _ = crds.delete(name, &dp).await;
    }
    c.until("the peer's CRDs gone", SLOW, |cl| async move {
        let left = Api::<CustomResourceDefinition>::all(cl)
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .filter(|d| d.spec.group == "lvm.topolvm.io" || d.spec.group == "topolvm.io")
            .count();
        (left == 0).then_some(())
    })
    .await;
    let mut p = Phase::new("9. uninstall");
    p.add("claims deleted → every PV gone s", volumes);
    p.add("uninstall in all s", t.elapsed().as_secs_f64());
    run.phases.push(p);
}

/// A run of `peer`: install, phases (a panic is the run's failure), uninstall.
async fn one_run(c: &mut Ctx, m: &mut Meter, peer: Peer, round: usize, preload: usize) -> Run {
    let mut run = Run {
        peer,
        phases: Vec::new(),
        notes: Vec::new(),
        failed: None,
    };
    println!("\n== {} (round {}) ==", peer.name(), round + 1);
    let objects = install_peer(c, peer, &mut run).await;
    let tag = peer.tag(round);
    let r = AssertUnwindSafe(phases(c, m, &tag, preload, &mut run))
        .catch_unwind()
        .await;
    if let Err(p) = r {
        let msg =
            lvms::runtime::process::panic_message(p.as_ref()).unwrap_or_else(|| "panicked".into());
        println!("{}: FAILED: {msg}", peer.name());
        // Its first line: the node's story after it is in the log.
        run.failed = Some(msg.lines().next().unwrap_or_default().to_string());
    }
    // A failed uninstall stops the bench: the next peer would not start clean.
    uninstall(c, m, peer, &objects, &mut run).await;
    run
}

/// The lvms under test: the commit, and whether the tree it was built from had changes.
fn lvms_commit() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(lvms_testkit::env::repo())
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    let commit = git(&["rev-parse", "--short", "HEAD"]);
    let dirty = !git(&["status", "--porcelain", "--", "src", "Cargo.lock"]).is_empty();
    format!(
        "{commit}{}",
        if dirty {
            " with uncommitted changes under src/"
        } else {
            ""
        }
    )
}

fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")?
                .split_once(':')
                .map(|x| x.1.trim())
        })
        .unwrap_or("?")
        .to_string();
    let kib: u64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("MemTotal:")?
                .trim()
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0);
    let hw = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"));
    format!(
        "{} × {model}, {:.0} GiB; the node: QEMU {}, 2 vCPUs, 4 GiB",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        kib as f64 / (1 << 20) as f64,
        std::env::var("LVMS_GUEST_ACCEL").unwrap_or_else(|_| if hw {
            "KVM".into()
        } else {
            "TCG (software emulation)".into()
        })
    )
}

/// "median (min–max)" over the runs, or "–".
fn cell(all: &[f64]) -> String {
    if all.is_empty() {
        return "–".into();
    }
    let m = median(all.to_vec());
    let min = all.iter().copied().fold(f64::INFINITY, f64::min);
    let max = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let p = if m.abs() < 100.0 { 2 } else { 0 };
    if all.len() < 2 {
        format!("{m:.p$}")
    } else {
        format!("{m:.p$} ({min:.p$}–{max:.p$})")
    }
}

fn render(runs: &[Run], header: &str) -> String {
    let mut s = header.to_string();
    let mut names: Vec<&str> = Vec::new();
    for r in runs {
        for p in &r.phases {
            if !names.contains(&p.name.as_str()) {
                names.push(&p.name);
            }
        }
    }
    names.sort_by_key(|n| n.split('.').next().unwrap_or_default().to_string());
    let peers = [Peer::Go, Peer::Lvms];
    for name in names {
        let of = |peer: Peer| -> Vec<&Phase> {
            runs.iter()
                .filter(|r| r.peer == peer)
                .flat_map(|r| r.phases.iter().filter(|p| p.name == name))
                .collect()
        };
        let mut figures: Vec<&str> = Vec::new();
        for peer in peers {
            for p in of(peer) {
                for (f, _) in &p.figures {
                    if !figures.contains(&f.as_str()) {
                        figures.push(f);
                    }
                }
            }
        }
        let _ = writeln!(s, "\n### {name}\n");
        let _ = writeln!(
            s,
            "| figure | LVMS {} | lvms | lvms / LVMS |",
            lvms_go::VERSION
        );
        let _ = writeln!(s, "|---|---:|---:|---:|");
        for f in figures {
            let vals =
                |peer: Peer| -> Vec<f64> { of(peer).iter().filter_map(|p| p.figure(f)).collect() };
            let (a, b) = (vals(Peer::Go), vals(Peer::Lvms));
            let ratio = if !a.is_empty() && !b.is_empty() && median(a.clone()) != 0.0 {
                format!("{:.2}", median(b.clone()) / median(a.clone()))
            } else {
                "–".into()
            };
            let _ = writeln!(s, "| {f} | {} | {} | {ratio} |", cell(&a), cell(&b));
        }
        for peer in peers {
            for p in of(peer) {
                for n in &p.notes {
                    let _ = writeln!(s, "\n{}: {n}", peer.name());
                }
            }
        }
    }
    let _ = writeln!(s);
    for r in runs {
        for n in &r.notes {
            let _ = writeln!(s, "- {n}");
        }
        if let Some(f) = &r.failed {
            let _ = writeln!(s, "- **{} FAILED**: {f}", r.peer.name());
        }
    }
    s
}

async fn bench() -> Result<()> {
    START.get_or_init(Instant::now);
    let peers: Vec<Peer> = std::env::var("LVMS_NODE_VERSUS_PEERS")
        .unwrap_or_else(|_| "LVMS,lvms".into())
        .split(',')
        .map(|p| match p.trim() {
            "LVMS" => Peer::Go,
            "lvms" => Peer::Lvms,
            other => panic!("LVMS_NODE_VERSUS_PEERS: {other:?} is neither LVMS nor lvms"),
        })
        .collect();
    let repeat = env_list("LVMS_NODE_VERSUS_REPEAT", &[1])[0].max(1);
    let preload = env_list("LVMS_NODE_VERSUS_PRELOAD", &[500])[0];
    if peers.contains(&Peer::Go) {
        // Before the node boots: a comparison without LVMS says nothing.
        lvms_go::bin()?;
        lvms_go::config_dir()?;
    }
    // The first disk larger than the node tier's (sparse: only what the volumes write is used).
    let disks: Vec<(&str, u64)> = ctx::DISKS
        .iter()
        .map(|&(d, mib)| (d, if d == DISK_A { DISK_A_MIB } else { mib }))
        .collect();
    let mut c = Ctx::start_with_disks(&disks).await;
    let source = {
        let proxy = StatsSource::Proxy(c.client.clone());
        match proxy.summary(false).await {
            Ok(_) => proxy,
            Err(e) => {
                println!(
                    "kubelet's stats through the API server's node proxy: {e}; reading its read-only port"
                );
                StatsSource::ReadOnlyPort(c.node.kubelet_port)
            }
        }
    };
    let seen: Shared = Arc::default();
    let watches = [
        observe(claims_api(&c), seen.clone(), on_claim, nothing),
        observe(
            Api::<Pod>::namespaced(c.client.clone(), APPS),
            seen.clone(),
            on_pod,
            nothing,
        ),
        observe(
            Api::<Pod>::namespaced(c.client.clone(), LVMS_NS),
            seen.clone(),
            on_operator_ns_pod,
            nothing,
        ),
        observe(
            snapshots::api(&c.client, "volumesnapshots", "VolumeSnapshot", Some(APPS)),
            seen.clone(),
            on_snapshot,
            nothing,
        ),
        observe(
            Api::<PersistentVolume>::all(c.client.clone()),
            seen.clone(),
            nothing,
            pv_gone,
        ),
    ];
    let header = format!(
        "## Claims on the real node, LVMS {} and lvms side by side\n\n{} (UTC), `cargo bench --bench node_versus` (LVMS_NODE_VERSUS_PEERS={}, LVMS_NODE_VERSUS_REPEAT={repeat}, LVMS_NODE_VERSUS_PRELOAD={preload}{}); lvms at {}; machine: {}. Kubelet's stats from {}. Method: the doc comment of benches/node_versus.rs. Figures are medians (min–max) over the rounds; `·` rows are single containers.\n",
        lvms_go::VERSION,
        Timestamp::now().strftime("%Y-%m-%d %H:%M"),
        peers.iter().map(|p| p.name()).collect::<Vec<_>>().join(","),
        match (storms_only(), pods_only()) {
            (true, _) => ", LVMS_NODE_VERSUS_STORMS_ONLY=1",
            (false, true) => ", LVMS_NODE_VERSUS_PODS_ONLY=1",
            (false, false) => "",
        },
        lvms_commit(),
        machine(),
        source.describe(),
    );
    let mut m = Meter {
        sampler: Sampler::start(source),
        seen,
        probes: 0,
        lvm: Lvm::default(),
        t0: Instant::now(),
        api0: 0.0,
        restarts0: BTreeMap::new(),
    };
    let mut runs = Vec::new();
    for round in 0..repeat {
        for &peer in &peers {
            let run = one_run(&mut c, &mut m, peer, round, preload).await;
            runs.push(run);
            // After each peer: a later failure keeps what was measured.
            publish("node_versus", &render(&runs, &header))?;
        }
    }
    for w in watches {
        w.abort();
    }
    let failed: Vec<String> = runs
        .iter()
        .filter_map(|r| Some(format!("{}: {}", r.peer.name(), r.failed.as_ref()?)))
        .collect();
    c.finish(failed.is_empty());
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed.join("\n").into())
    }
}
