//! Seeded random-kill soak: `lvms operator` + two `lvms vg-manager`s (node-a, node-b, one
//! loop-device disk each, real lvm2 with activation off) on a real kube-apiserver. Each cycle
//! creates an LVMCluster with one thick class per node, waits for Ready, edits the classes'
//! StorageClass labels, deletes the cluster and waits until it is gone, while a seeded RNG
//! SIGKILLs the three processes at random moments (sometimes two in quick succession,
//! sometimes the same one again during its replay) and arms `LVMS_CRASH_AT` fault points to
//! hit narrow windows. After each cycle, at rest, it collects violations (never stopping at
//! the first): convergence, leftovers on the host and in the API, journal integrity and open
//! intents, one vgcreate effect per VG, Events aimed at objects of another cycle, and Event
//! series counts against the journals' Published records.
//!
//! Every cycle reuses the same names (the LVMCluster's and its classes'), as a user applying
//! the same manifest again does: each volume group's unit is stopped and started again by name,
//! right after its previous incarnation's teardown. Check 7 then holds each cycle to one live
//! instance per unit: no failed host step in a cycle without kills, no host command twice
//! unless replay proved the first not done.
//!
//! `cargo test --test soak` runs both tests: the kill soak (10 cycles, seed 1;
//! `LVMS_SOAK_SEED=<n>`, `LVMS_SOAK_CYCLES=100` for the long run) and the churn without kills
//! (20 cycles; `LVMS_CHURN_CYCLES=200`). Root, lvm2, loop devices.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod chaos;
mod checks;
mod clean;
mod cycle;
mod journals;
mod plan;
mod report;
mod rng;
mod seen;
mod timeline;
mod who;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::api::Api;
use lvms::api::{LVMCluster, LVMVolumeGroup, LVMVolumeGroupNodeStatus};
use lvms_testkit::Scenario;
use lvms_testkit::disks::{Disk, require_prerequisites};
use lvms_testkit::kubelet::create_node;

use crate::chaos::Chaos;
use crate::cycle::Soak;
use crate::journals::read_journal;
use crate::plan::CyclePlan;
use crate::report::Report;
use crate::rng::Rng;
use crate::seen::{SeenMap, watch_uids};
use crate::timeline::Timeline;
use crate::who::Who;

const NODES: [&str; 2] = ["node-a", "node-b"];

fn env_u64(name: &str) -> Option<u64> {
    let raw = std::env::var(name).ok()?;
    Some(
        raw.trim()
            .parse()
            .unwrap_or_else(|e| panic!("{name}={raw:?} is not a number: {e}")),
    )
}

/// One soak run at a time in this binary: both tests own the cluster-scoped CSIDriver and the
/// host's lvm2.
static ONE_RUN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_random_kills_converge_and_leave_nothing_behind() {
    let _one = ONE_RUN.lock().await;
    let seed = env_u64("LVMS_SOAK_SEED").unwrap_or(1);
    let cycles = env_u64("LVMS_SOAK_CYCLES").unwrap_or(10) as usize;
    run("soak", seed, cycles, true).await;
}

/// Issue 41: create → Ready → edit → delete at full speed with the same names, no kill at all.
/// Every host command must run once and none may fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn churn_without_kills_runs_each_host_command_once() {
    let _one = ONE_RUN.lock().await;
    let cycles = env_u64("LVMS_CHURN_CYCLES").unwrap_or(20) as usize;
    run("churn", 1, cycles, false).await;
}

async fn run(tag: &str, seed: u64, cycles: usize, kills: bool) {
    require_prerequisites();
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "the soak needs root (loop devices, lvm2 on them): run it as root on a host or in a privileged container"
    );
    let started = Instant::now();
    println!(
        "{tag}: seed {seed}, {cycles} cycles, kills {}",
        if kills { "on" } else { "off" }
    );

    let s = Scenario::new(tag).await;
    let disks_dir = s.dir.join("disks");
    let disk_a = Disk::new(&disks_dir, "soak-a", 128);
    let disk_b = Disk::new(&disks_dir, "soak-b", 128);
    for n in NODES {
        create_node(&s.client, n, false).await;
    }
    let seen: SeenMap = Arc::default();
    let ns = &s.ns.name;
    let watchers = [
        watch_uids(
            Api::<LVMCluster>::namespaced(s.client.clone(), ns),
            "LVMCluster",
            seen.clone(),
        ),
        watch_uids(
            Api::<LVMVolumeGroup>::namespaced(s.client.clone(), ns),
            "LVMVolumeGroup",
            seen.clone(),
        ),
        watch_uids(
            Api::<LVMVolumeGroupNodeStatus>::namespaced(s.client.clone(), ns),
            "LVMVolumeGroupNodeStatus",
            seen.clone(),
        ),
    ];
    let mut soak = Soak {
        s: &s,
        disks: [&disk_a, &disk_b],
        chaos: Chaos::new(&s),
        seen,
        timeline: Timeline::default(),
        report: Report::default(),
        not_converged_in_a_row: 0,
        names: {
            // Unique to this process on the shared host lvm2; the same in every cycle.
            let p = format!("{}{}", &tag[..1], std::process::id());
            [p.clone(), format!("{p}a"), format!("{p}b")]
        },
    };
    soak.timeline.begin(); // cycle 0: setup
    let setup_deadline = Instant::now() + Duration::from_secs(60);
    let up = soak.chaos.until_ready(&Who::ALL, setup_deadline).await;
    assert!(
        up,
        "the operator and both vg-managers never became ready; logs under {}",
        s.dir.display()
    );

    let mut rng = Rng(seed);
    let mut done = 0;
    for k in 1..=cycles {
        let plan = if kills {
            CyclePlan::draw(&mut rng, &soak.names[1], &soak.names[2])
        } else {
            CyclePlan::churn(&mut rng)
        };
        println!(
            "cycle {k}: plan {} random kill(s) {:?}, fault {:?}",
            plan.kills.len(),
            plan.kills
                .iter()
                .map(|k| format!("{}@{:?}+{}ms", k.who, k.phase, k.after.as_millis()))
                .collect::<Vec<_>>(),
            plan.fault
                .as_ref()
                .map(|f| format!("{}@{:?} {}", f.who, f.phase, f.spec))
        );
        let go_on = soak.run_cycle(k, &plan, kills).await;
        done = k;
        if !go_on {
            break;
        }
    }
    if !kills {
        soak.after_churn(done).await;
    }
    // The end of the run: Events once more (late publications of the last cycle).
    let _ = soak.chaos.quiesce().await;
    let mut journals = Vec::new();
    for who in Who::ALL {
        if let Ok(r) = read_journal(&s, who) {
            journals.push((who, r));
        }
    }
    soak.check_events(&journals).await;
    // The processes checkpoint every 16 records here (chaos.rs): a long journal without the
    // publisher's checkpoints means every start read it all, and the kills missed that path.
    for (who, records) in &journals {
        let checkpoints = records
            .iter()
            .filter(|r| {
                matches!(&r.body, lvms_journal::Body::Snapshot(s)
                    if s.projection == lvms_actors::PUBLISHER_CHECKPOINT)
            })
            .count();
        println!(
            "{who}: {} records, {checkpoints} Event publisher checkpoints",
            records.len()
        );
        if records.len() >= 64 && checkpoints == 0 {
            soak.report.add(
                done,
                "checkpoints",
                &who.to_string(),
                format!(
                    "{who}: {} records and no publisher checkpoint",
                    records.len()
                ),
            );
        }
    }
    for w in &watchers {
        w.abort();
    }

    let elapsed = started.elapsed();
    let report = &soak.report;
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for v in &report.list {
        *by_kind.entry(v.kind).or_default() += 1;
    }
    if !report.list.is_empty() {
        println!("{tag} violations (seed {seed}):");
        for v in &report.list {
            println!("  cycle {} seed {seed} [{}] {}", v.cycle, v.kind, v.detail);
        }
    }
    println!(
        "{tag} summary: seed {seed}, cycles {done}/{cycles}, kills {} random / {} fault-point ({} armed), violations {} {:?}, elapsed {:.1}s (logs and journals: {})",
        soak.chaos.random_kills,
        soak.chaos.fault_kills,
        soak.chaos.faults_armed,
        report.list.len(),
        by_kind,
        elapsed.as_secs_f64(),
        s.dir.display()
    );
    assert!(
        report.list.is_empty(),
        "{tag} (seed {seed}) found {} violation(s) {by_kind:?}; see the list above",
        report.list.len()
    );
}
