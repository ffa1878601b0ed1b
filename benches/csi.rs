//! The CSI driver's provisioning path: PVC create → Bound through the real csi-provisioner,
//! `lvms operator`'s controller and `lvms vg-manager`'s volumes actor on real lvm2 and a loop
//! device, with the real kube-controller-manager binding the claims.
//!
//!   sudo cargo bench --bench csi        # root: loop devices and lvm2
//!
//! One control plane (etcd, kube-apiserver, kube-controller-manager with the PV binder and
//! protection controllers), one node with a thick ext4 class on a sparse loop disk (`LVMS_BENCH_DISK_MIB`, 32 GiB)
//! (lvm2 with activation off and no udev, as in the tests: lvcreate is metadata-only here, so
//! on a real node the host share is larger still). Measured:
//! - **sequential**: `LVMS_BENCH_SEQ` (20) claims of 32Mi, each created once the previous one is
//!   Bound; latency = create → `status.phase=Bound` seen (polled every 5 ms);
//! - **concurrent**: `LVMS_BENCH_CONCURRENT` (100) claims created back to back; each one's
//!   latency from its own create to its PV created (csi-provisioner, the controller and the node
//!   done) and to Bound (then kube-controller-manager's binder, whose client is held to its
//!   default 20 requests/s: three writes per claim), timestamped by watches;
//! - **delete**: the concurrent claims deleted back to back; latency = delete → PV gone;
//! - **a full node**: `LVMS_BENCH_PRELOAD` (500) more claims made (in storms of the concurrent
//!   size), then the concurrent storm again: per-claim cost against the empty node's (the disk,
//!   `LVMS_BENCH_DISK_MIB`, 32 GiB sparse, holds them);
//! - lvm2 commands per claim, from vg-manager's pass lines;
//! - `LVMS_BENCH_KCM_QPS=<n>`: kube-controller-manager's client allowed n requests/s (default 20,
//!   as in a cluster), to tell its binder's share of create → Bound;
//! - **lvms's share** of the node-side path: vg-manager logs one `volumes pass` line per pass
//!   (took, host command time, the rest being lvms: journal appends with their fsyncs, API
//!   writes, decisions); summed over the sequential phase.
//!
//! The table goes to stdout and `<target>/bench-csi.md`.
//!
//! `cargo test --all-targets` also builds and runs this target; without `--bench` it returns
//! at once.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::CSINode;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use lvms::api::LVMCluster;
use lvms_testkit::bench::{Result, env_list, lvms_bin, main_with, publish, wait_ready};
use lvms_testkit::dev::csi_peers::Sidecar;
use lvms_testkit::dev::operator::{
    NO_DM_LVM_CONFIG, OperatorOptions, OperatorProcess, VgManagerOptions,
};
use lvms_testkit::dev::{ControlPlane, Lifetime, Options};
use lvms_testkit::disks::{Disk, missing_prerequisites};
use lvms_testkit::fixtures;
use serde_json::{Value, json};

const NAMESPACE: &str = "lvms-bench";
const NODE: &str = "bench-node";
const CLASS: &str = "bench";
const TIMEOUT: Duration = Duration::from_secs(180);

fn main() {
    main_with("csi", bench);
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn claim(name: &str) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {"volume.kubernetes.io/selected-node": NODE}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": format!("lvms-{CLASS}"),
                 "resources": {"requests": {"storage": "32Mi"}}}
    }))
    .expect("claim")
}

async fn setup(client: &Client) -> Result<()> {
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &fixtures::namespace(NAMESPACE))
        .await?;
    let mut node = fixtures::node(NODE);
    node.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("topology.topolvm.io/node".into(), NODE.into());
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await?;
    Api::<Node>::all(client.clone())
        .patch(
            NODE,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": []}})),
        )
        .await?;
    Api::<CSINode>::all(client.clone())
        .patch(
            NODE,
            &PatchParams::apply("bench-kubelet").force(),
            &Patch::Apply(&fixtures::with_topology_keys(fixtures::csi_node(
                NODE, true,
            ))),
        )
        .await?;
    Ok(())
}

async fn bench() -> Result<()> {
    if let Some(missing) = missing_prerequisites(&["losetup", "vgcreate", "lsblk", "blkid"]) {
        return Err(missing.into());
    }
    let sequential = env_list("LVMS_BENCH_SEQ", &[20])[0];
    let concurrent = env_list("LVMS_BENCH_CONCURRENT", &[100])[0];
    let preload = env_list("LVMS_BENCH_PRELOAD", &[500])[0];
    let disk_mib = env_list("LVMS_BENCH_DISK_MIB", &[32768])[0];
    let bin = lvms_bin();
    let work = std::env::temp_dir()
        .join("lvms-bench-csi")
        .join(std::process::id().to_string());
    println!("work dir (logs, journals, images): {}", work.display());
    let mut opts = Options::new(work.join("cp"), Lifetime::DieWithParent);
    opts.bin_dir = lvms_testkit::dev::control_plane::bin_dir();
    opts.controller_manager = true;
    // kube-controller-manager's client is held to 20 requests/s by default (as in a cluster):
    // `LVMS_BENCH_KCM_QPS` raises it to show how much of create → Bound is its binder's.
    if let Ok(qps) = std::env::var("LVMS_BENCH_KCM_QPS") {
        let qps: u32 = qps.parse()?;
        opts.controller_manager_args = vec![
            format!("--kube-api-qps={qps}"),
            format!("--kube-api-burst={}", qps.saturating_mul(2)),
        ];
    }
    let cp = ControlPlane::start(opts).await?;
    let client = cp.client().await?;
    lvms_testkit::dev::crds::install_crds(&client, Duration::from_secs(60)).await?;
    setup(&client).await?;

    let disk = Disk::new(&work.join("disks"), "d0", disk_mib as u64);
    let op = OperatorProcess::start(&OperatorOptions {
        bin: bin.clone(),
        kubeconfig: cp.kubeconfig.clone(),
        namespace: NAMESPACE.into(),
        journal_dir: work.join("journal"),
        log: work.join("operator.log"),
        env: vec![],
        args: vec![],
    })?;
    let vm = OperatorProcess::start_vg_manager(&VgManagerOptions {
        bin: bin.clone(),
        kubeconfig: cp.kubeconfig.clone(),
        namespace: NAMESPACE.into(),
        node: NODE.into(),
        dir: work.join("node"),
        lvm_config: NO_DM_LVM_CONFIG.into(),
        env: vec![
            ("LVMS_LOG_FORMAT".into(), "json".into()),
            (
                "RUST_LOG".into(),
                "info,lvms::vgmanager::volumes=debug".into(),
            ),
        ],
    })?;
    wait_ready(&op, Duration::from_millis(50), TIMEOUT).await?;
    wait_ready(&vm, Duration::from_millis(50), TIMEOUT).await?;
    let cluster: LVMCluster = serde_json::from_value(fixtures::lvm_cluster(
        "bench",
        json!([{"name": CLASS, "default": true, "fstype": "ext4",
                "deviceSelector": {"paths": [disk.link]},
                "nodeSelector": fixtures::host_selector(NODE)}]),
    ))?;
    Api::<LVMCluster>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &cluster)
        .await?;
    // The class is usable once the node publishes its capacity.
    let nodes: Api<Node> = Api::all(client.clone());
    let t0 = Instant::now();
    loop {
        let n = nodes.get(NODE).await?;
        let key = format!("capacity.topolvm.io/{CLASS}");
        if n.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(&key))
            .is_some()
        {
            break;
        }
        if t0.elapsed() > TIMEOUT {
            return Err(
                format!("no capacity annotation; vg-manager log:\n{}", vm.log_text()).into(),
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let peers_log = work.join("csi-provisioner.log");
    let _provisioner = Sidecar::start(
        "csi-provisioner",
        &[
            format!("--csi-address={}", op.csi_socket.display()),
            "--feature-gates=Topology=true".into(),
            "--extra-create-metadata".into(),
            "--leader-election=false".into(),
            "--worker-threads=100".into(),
            "--kube-api-qps=200".into(),
            "--kube-api-burst=400".into(),
        ],
        &[],
        &cp.kubeconfig,
        &peers_log,
    )?;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NAMESPACE);

    // Warm-up: the provisioner's caches, the first connection, the first pass.
    one(&pvcs, "warmup", Duration::from_millis(5)).await?;

    // Sequential.
    let log_before = vm.log_text().len();
    let mut seq = Vec::new();
    for i in 0..sequential {
        seq.push(one(&pvcs, &format!("seq-{i:03}"), Duration::from_millis(5)).await?);
    }
    let split = passes(&vm.log_text()[log_before..]);
    seq.sort();

    // Concurrent, on a node holding only the warm-up and sequential claims.
    let empty = storm(&client, &pvcs, &vm, "par", concurrent).await?;
    // Their delete: each claim's PV gone (csi-provisioner's DeleteVolume, the node's lvremove).
    let deleted = delete_all(&client, &pvcs, &vm, "par").await?;
    // The same storm on a node that already holds `preload` volumes, made in storms of
    // `concurrent`, after which the per-claim cost should not have grown with them.
    let mut made = 0;
    while made < preload {
        let n = concurrent.min(preload - made);
        storm(&client, &pvcs, &vm, &format!("pre{made:04}"), n).await?;
        made += n;
    }
    let full = if preload > 0 {
        Some(storm(&client, &pvcs, &vm, "full", concurrent).await?)
    } else {
        None
    };

    let mut out = String::new();
    let _ = writeln!(
        out,
        "| claims | p50 create → Bound ms | p99 ms | max ms | all bound ms | p50 create → PV ms | all PVs ms | lvm2 commands per claim | vg-manager passes |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let _ = writeln!(
        out,
        "| 1 at a time ({sequential}) | {:.1} | {:.1} | {:.1} | | | | {:.1} | {} |",
        ms(percentile(&seq, 0.5)),
        ms(percentile(&seq, 0.99)),
        ms(*seq.last().unwrap_or(&Duration::ZERO)),
        split.commands as f64 / sequential.max(1) as f64,
        split.passes,
    );
    let mut row = |what: String, s: &Storm| {
        let _ = writeln!(
            out,
            "| {what} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {} | {:.1} | {} |",
            ms(percentile(&s.latencies, 0.5)),
            ms(percentile(&s.latencies, 0.99)),
            ms(*s.latencies.last().unwrap_or(&Duration::ZERO)),
            ms(s.all),
            if s.provisioned.is_empty() {
                String::new()
            } else {
                format!("{:.1}", ms(percentile(&s.provisioned, 0.5)))
            },
            if s.provisioned.is_empty() {
                String::new()
            } else {
                format!("{:.1}", ms(s.all_provisioned))
            },
            s.split.commands as f64 / s.latencies.len().max(1) as f64,
            s.split.passes,
        );
    };
    row(format!("{concurrent} at once"), &empty);
    row(format!("delete of {concurrent} (→ PV gone)"), &deleted);
    if let Some(full) = &full {
        row(
            format!(
                "{concurrent} at once, {} volumes already on the node",
                preload + sequential + 1
            ),
            full,
        );
    }
    if let Some(full) = &full {
        let _ = writeln!(
            out,
            "\nPer claim on the full node vs the empty one: p50 create → Bound **{:.2}×**, all bound **{:.2}×**, all PVs **{:.2}×**.",
            percentile(&full.latencies, 0.5).as_secs_f64()
                / percentile(&empty.latencies, 0.5).as_secs_f64().max(1e-9),
            full.all.as_secs_f64() / empty.all.as_secs_f64().max(1e-9),
            full.all_provisioned.as_secs_f64() / empty.all_provisioned.as_secs_f64().max(1e-9),
        );
    }
    let _ = writeln!(
        out,
        "\nvg-manager's volumes passes over the {sequential} sequential claims: {} passes, {:.1} ms in all = host commands {:.1} ms ({} commands) + lvms {:.1} ms (**{:.1} %**)",
        split.passes,
        ms(split.took),
        ms(split.host),
        split.commands,
        ms(split.took.saturating_sub(split.host)),
        100.0 * split.took.saturating_sub(split.host).as_secs_f64()
            / split.took.as_secs_f64().max(1e-9)
    );
    publish("csi", &out)?;
    drop(cp);
    drop(disk);
    Ok(())
}

/// A storm's figures: each claim's latency (sorted), the time until the last, vg-manager's
/// passes meanwhile.
struct Storm {
    latencies: Vec<Duration>,
    all: Duration,
    /// Create → the claim's PV created (the driver done); empty for deletes.
    provisioned: Vec<Duration>,
    all_provisioned: Duration,
    split: Split,
}

/// `n` claims created back to back; each one's latency from its own create to its PV created
/// (the driver's part: csi-provisioner, the controller, the node) and to Bound (then
/// kube-controller-manager's binder), from watches that timestamp each change as it arrives
/// (polling hundreds of claims every few ms would load the API server the figures depend on).
async fn storm(
    client: &Client,
    pvcs: &Api<PersistentVolumeClaim>,
    vm: &OperatorProcess,
    prefix: &str,
    n: usize,
) -> Result<Storm> {
    use futures::StreamExt as _;
    use kube::runtime::{WatchStreamExt as _, watcher};
    let log_before = vm.log_text().len();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Seen::default()));
    let pv_task = {
        let (seen, pvs) = (seen.clone(), Api::<PersistentVolume>::all(client.clone()));
        tokio::spawn(async move {
            let mut w = watcher(pvs, watcher::Config::default())
                .applied_objects()
                .boxed();
            while let Some(Ok(pv)) = w.next().await {
                let claim = pv.spec.and_then(|s| s.claim_ref).and_then(|r| r.name);
                if let Some(claim) = claim {
                    seen.lock()
                        .unwrap()
                        .pv
                        .entry(claim)
                        .or_insert_with(Instant::now);
                }
            }
        })
    };
    let pvc_task = {
        let (seen, pvcs) = (seen.clone(), pvcs.clone());
        tokio::spawn(async move {
            let mut w = watcher(pvcs, watcher::Config::default())
                .applied_objects()
                .boxed();
            while let Some(Ok(c)) = w.next().await {
                if c.status.and_then(|s| s.phase).as_deref() == Some("Bound") {
                    let name = c.metadata.name.unwrap_or_default();
                    seen.lock()
                        .unwrap()
                        .bound
                        .entry(name)
                        .or_insert_with(Instant::now);
                }
            }
        })
    };
    let mut created = BTreeMap::new();
    let started = Instant::now();
    for i in 0..n {
        let name = format!("{prefix}-{i:03}");
        pvcs.create(&PostParams::default(), &claim(&name)).await?;
        created.insert(name, Instant::now());
    }
    let (bound, provisioned) = loop {
        let done = {
            let s = seen.lock().unwrap();
            let of = |m: &BTreeMap<String, Instant>| -> Vec<Duration> {
                created
                    .iter()
                    .filter_map(|(name, t)| m.get(name).map(|at| at.saturating_duration_since(*t)))
                    .collect()
            };
            let (b, p) = (of(&s.bound), of(&s.pv));
            (b.len() == n && p.len() == n).then_some((b, p))
        };
        if let Some(done) = done {
            break done;
        }
        if started.elapsed() > TIMEOUT {
            pv_task.abort();
            pvc_task.abort();
            return Err(format!("{prefix}: not all {n} bound").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    pv_task.abort();
    pvc_task.abort();
    settle(vm).await;
    let last = |m: &BTreeMap<String, Instant>| {
        created
            .keys()
            .filter_map(|name| m.get(name))
            .max()
            .map(|t| t.saturating_duration_since(started))
            .unwrap_or_default()
    };
    let (all, all_provisioned) = {
        let s = seen.lock().unwrap();
        (last(&s.bound), last(&s.pv))
    };
    let (mut latencies, mut provisioned) = (bound, provisioned);
    latencies.sort();
    provisioned.sort();
    Ok(Storm {
        latencies,
        all,
        provisioned,
        all_provisioned,
        split: passes(&vm.log_text()[log_before..]),
    })
}

/// Waits (≤ 10 s) for vg-manager's next `volumes pass` line: the pass that finished a phase's
/// last volume logs it once it has published the node's capacity, after the phase saw its end.
async fn settle(vm: &OperatorProcess) {
    let from = vm.log_text().len();
    let t = Instant::now();
    while !vm.log_text()[from..].contains("volumes pass") && t.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// When each claim was first seen with a PV naming it, and Bound.
#[derive(Default)]
struct Seen {
    pv: BTreeMap<String, Instant>,
    bound: BTreeMap<String, Instant>,
}

/// Every claim named `<prefix>-*` deleted back to back; each one's latency from its delete
/// until its PV is gone.
async fn delete_all(
    client: &Client,
    pvcs: &Api<PersistentVolumeClaim>,
    vm: &OperatorProcess,
    prefix: &str,
) -> Result<Storm> {
    let log_before = vm.log_text().len();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let mut deleted = BTreeMap::new();
    for c in pvcs.list(&Default::default()).await?.items {
        let name = c.metadata.name.clone().unwrap_or_default();
        if !name.starts_with(&format!("{prefix}-")) {
            continue;
        }
        let pv = c
            .spec
            .and_then(|s| s.volume_name)
            .ok_or_else(|| format!("{name} has no PV"))?;
        pvcs.delete(&name, &Default::default()).await?;
        deleted.insert(pv, Instant::now());
    }
    let n = deleted.len();
    let mut gone: BTreeMap<String, Duration> = BTreeMap::new();
    let started = Instant::now();
    while gone.len() < n {
        let present: std::collections::BTreeSet<String> = pvs
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        for (pv, t) in &deleted {
            if !present.contains(pv) && !gone.contains_key(pv) {
                gone.insert(pv.clone(), t.elapsed());
            }
        }
        if started.elapsed() > TIMEOUT {
            return Err(format!("{prefix}: {} of {n} PVs gone", gone.len()).into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let all = started.elapsed();
    settle(vm).await;
    let mut latencies: Vec<Duration> = gone.into_values().collect();
    latencies.sort();
    Ok(Storm {
        latencies,
        all,
        provisioned: Vec::new(),
        all_provisioned: Duration::ZERO,
        split: passes(&vm.log_text()[log_before..]),
    })
}

/// One claim: created, polled until Bound; its latency.
async fn one(pvcs: &Api<PersistentVolumeClaim>, name: &str, poll: Duration) -> Result<Duration> {
    let t = Instant::now();
    pvcs.create(&PostParams::default(), &claim(name)).await?;
    loop {
        let c = pvcs.get(name).await?;
        if c.status.and_then(|s| s.phase).as_deref() == Some("Bound") {
            return Ok(t.elapsed());
        }
        if t.elapsed() > TIMEOUT {
            return Err(format!("{name} not Bound in {TIMEOUT:?}").into());
        }
        tokio::time::sleep(poll).await;
    }
}

#[derive(Default)]
struct Split {
    took: Duration,
    host: Duration,
    commands: u64,
    passes: u32,
}

/// The `volumes pass` lines of vg-manager's JSON log, summed.
fn passes(log: &str) -> Split {
    let mut s = Split::default();
    for line in log.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let f = &v["fields"];
        if f["message"] != "volumes pass" {
            continue;
        }
        let us = |k: &str| Duration::from_micros(f[k].as_u64().unwrap_or(0));
        s.took += us("took_us");
        s.host += us("host_us");
        s.commands += f["host_commands"].as_u64().unwrap_or(0);
        s.passes += 1;
    }
    s
}
