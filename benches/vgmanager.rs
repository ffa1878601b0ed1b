//! `lvms vg-manager` on real lvm2 and loop devices: the reconcile of one volume group built
//! from 1, 8 and 32 disks, split into the time spent in host commands (lsblk, blkid, pvs, vgs,
//! losetup, vgcreate, ...) and the time that is lvms's own (journal appends with their fsyncs,
//! API calls, parsing and decisions).
//!
//!   sudo cargo bench --bench vgmanager        # root: loop devices and lvm2
//!
//! One control plane (etcd + kube-apiserver) for the whole run. Per disk count and repeat:
//! fresh loop devices (64 MiB sparse files), a fresh vg-manager (journal, lvmd.yaml), then an
//! LVMVolumeGroup naming those disks is created and the bench polls (10 ms) until this node's
//! LVMVolumeGroupNodeStatus lists it Ready with every disk. vg-manager logs one line per pass
//! (`volume group pass`: took_us, host_us, lvms_us, host_commands; debug level, JSON); the
//! figures are the sums over the passes until Ready. lvm2 runs with activation off and no udev
//! (as in the tests), so vgcreate itself is metadata-only here; on a real node the host share
//! is larger still.
//!
//! Knobs (env): `LVMS_BENCH_DISKS=1,8,32`, `LVMS_BENCH_REPEAT=3` (the median is reported),
//! `LVMS_BIN`, `LVMS_TEST_BINS`. Work files stay in `$TMPDIR/lvms-bench-vgmanager/<pid>/`;
//! the table goes to stdout and to `<target>/bench-vgmanager.md`.
//!
//! `cargo test --all-targets` also builds and runs this target; without `--bench` it returns
//! at once.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, PostParams};
use lvms::api::{LVMVolumeGroup, LVMVolumeGroupNodeStatus, VGStatusType};
use lvms_testkit::bench::{
    Result, control_plane, env_list, lvms_bin, main_with, publish, wait_ready,
};
use lvms_testkit::dev::ControlPlane;
use lvms_testkit::dev::operator::{NO_DM_LVM_CONFIG, OperatorProcess, VgManagerOptions};
use lvms_testkit::disks::{Disk, missing_prerequisites};
use lvms_testkit::fixtures::{node, node_status, volume_group};
use serde_json::{Value, json};

const NAMESPACE: &str = "lvms-bench";
const NODE: &str = "bench-node";
const POLL: Duration = Duration::from_millis(10);
const TIMEOUT: Duration = Duration::from_secs(120);

fn main() {
    main_with("vgmanager", bench);
}

#[derive(Clone, Copy, Default)]
struct Sample {
    wall: Duration,
    took: Duration,
    host: Duration,
    lvms: Duration,
    passes: u32,
    commands: u64,
}

impl Sample {
    fn share(&self) -> f64 {
        100.0 * self.lvms.as_secs_f64() / self.took.as_secs_f64().max(1e-9)
    }
}

async fn bench() -> Result<()> {
    if let Some(missing) = missing_prerequisites(&["losetup", "vgcreate", "lsblk", "blkid"]) {
        return Err(missing.into());
    }
    let counts = env_list("LVMS_BENCH_DISKS", &[1, 8, 32]);
    let repeat = env_list("LVMS_BENCH_REPEAT", &[3])[0].max(1);
    let bin = lvms_bin();
    let work = std::env::temp_dir()
        .join("lvms-bench-vgmanager")
        .join(std::process::id().to_string());
    println!("lvms: {}", bin.display());
    println!("work dir (logs, journals, images): {}", work.display());

    let bins = lvms_testkit::dev::control_plane::bin_dir();
    let (cp, client) = control_plane(&work.join("cp"), &bins, NAMESPACE).await?;
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node(NODE))
        .await?;
    // The operator creates each node's status and vg-manager only updates it (no operator
    // runs here): create it once, as the operator would.
    let status: LVMVolumeGroupNodeStatus =
        serde_json::from_value(node_status(NAMESPACE, NODE, json!([])))?;
    Api::<LVMVolumeGroupNodeStatus>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &status)
        .await?;

    let mut rows = Vec::new();
    for &n in &counts {
        let mut samples = Vec::new();
        for r in 0..repeat {
            let dir = work.join(format!("{n}d-{r}"));
            let s = measure(&client, &cp, &bin, &dir, n, r).await?;
            println!(
                "{n:>3} disk(s) run {r}: wall {:>6.1} ms, passes {:>6.1} ms = host {:>6.1} ms + lvms {:>5.1} ms ({:.1} %), {} pass(es), {} host commands",
                ms(s.wall),
                ms(s.took),
                ms(s.host),
                ms(s.lvms),
                s.share(),
                s.passes,
                s.commands
            );
            samples.push(s);
        }
        samples.sort_by_key(|s| s.took);
        rows.push((n, samples[samples.len() / 2]));
    }
    let report = render(&rows, repeat);
    publish("vgmanager", &report)?;
    drop(cp);
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn measure(
    client: &Client,
    cp: &ControlPlane,
    bin: &Path,
    dir: &Path,
    n: usize,
    r: usize,
) -> Result<Sample> {
    let vg = format!("bench{n}x{r}p{}", std::process::id());
    // Loop devices for this measurement; VG, PV labels and devices removed on drop.
    let disks: Vec<Disk> = (0..n)
        .map(|i| Disk::new(&dir.join("disks"), &format!("disk{i}"), 64))
        .collect();
    let loops: Vec<&str> = disks.iter().map(|d| d.loop_dev.as_str()).collect();
    let mut vm = OperatorProcess::start_vg_manager(&VgManagerOptions {
        bin: bin.to_path_buf(),
        kubeconfig: cp.kubeconfig.clone(),
        namespace: NAMESPACE.into(),
        node: NODE.into(),
        dir: dir.join("node"),
        lvm_config: NO_DM_LVM_CONFIG.into(),
        env: vec![
            ("LVMS_LOG_FORMAT".into(), "json".into()),
            (
                "RUST_LOG".into(),
                "info,lvms::vgmanager::volume_group=debug".into(),
            ),
        ],
    })?;
    wait_ready(&vm, Duration::from_millis(50), TIMEOUT).await?;

    let vgs: Api<LVMVolumeGroup> = Api::namespaced(client.clone(), NAMESPACE);
    let obj: LVMVolumeGroup = serde_json::from_value(volume_group(
        &vg,
        json!({"deviceSelector": {"paths": loops}}),
    ))?;
    let started = Instant::now();
    vgs.create(&PostParams::default(), &obj).await?;
    let statuses: Api<LVMVolumeGroupNodeStatus> = Api::namespaced(client.clone(), NAMESPACE);
    let wall = loop {
        if let Some(ns) = statuses.get_opt(NODE).await?
            && ns.spec.lvm_vg_status.iter().any(|e| {
                e.name == vg && e.status == Some(VGStatusType::Ready) && e.devices.len() == n
            })
        {
            break started.elapsed();
        }
        if started.elapsed() > TIMEOUT {
            return Err(format!(
                "{vg} not Ready with {n} disks in {TIMEOUT:?}; log {}",
                vm.log_text()
            )
            .into());
        }
        tokio::time::sleep(POLL).await;
    };
    // Let the pass that reported Ready log its line.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sample = passes(&vm.log_text(), &vg, wall)?;
    vm.terminate(Duration::from_secs(10));
    // The VG goes with the disks; the object is dropped without a vg-manager to clean up.
    let _ = lvms::kube::apply::edit_finalizers(
        client,
        lvms::kube::kinds::Kind::VolumeGroup,
        NAMESPACE,
        &vg,
        |f| f.clear(),
    )
    .await;
    let _ = vgs.delete(&vg, &Default::default()).await;
    drop(disks);
    Ok(sample)
}

/// Sums the `volume group pass` lines of `vg` in vg-manager's JSON log.
fn passes(log: &str, vg: &str, wall: Duration) -> Result<Sample> {
    let mut s = Sample {
        wall,
        ..Default::default()
    };
    for line in log.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let f = &v["fields"];
        if f["message"] != "volume group pass" || f["volume_group"] != vg {
            continue;
        }
        let us = |k: &str| Duration::from_micros(f[k].as_u64().unwrap_or(0));
        s.took += us("took_us");
        s.host += us("host_us");
        s.lvms += us("lvms_us");
        s.commands += f["host_commands"].as_u64().unwrap_or(0);
        s.passes += 1;
    }
    if s.passes == 0 {
        return Err(format!("no `volume group pass` line for {vg} in the vg-manager log").into());
    }
    Ok(s)
}

fn render(rows: &[(usize, Sample)], repeat: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| disks | create → Ready ms | passes ms | host commands ms | lvms ms | lvms share | passes | host commands |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (n, s) in rows {
        let _ = writeln!(
            out,
            "| {n} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} % | {} | {} |",
            ms(s.wall),
            ms(s.took),
            ms(s.host),
            ms(s.lvms),
            s.share(),
            s.passes,
            s.commands
        );
    }
    let _ = writeln!(
        out,
        "\n(median of {repeat} run(s) by pass time; lvm2 with activation off, no udev)"
    );
    out
}
