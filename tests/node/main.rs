//! The real node tier: a Kubernetes node (kubelet, kube-proxy, containerd 2) in a QEMU guest
//! booting Debian's 6.12 cloud kernel, joined to a control plane on the host (kube-apiserver,
//! kube-controller-manager, kube-scheduler, the snapshot controller); lvms installed with
//! `helm install` of its chart, only image names and pull policy overridden, its images imported
//! into the node's containerd. Nothing of lvms is started by a test: the operator Deployment and
//! the vg-manager DaemonSet run as Pods, and kubelet does what kubelet does.
//!
//! One node for the whole tier (a boot under emulation takes minutes), so this binary has its own
//! harness, as tests/guest: each scenario, in table order, is a test in libtest's format; a
//! failed one does not stop the rest. `cargo test --test node -- --list`.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod ctx;
mod demo;
mod group_snapshot;
mod install;
mod kustomize;
mod restarts;
mod snapshots;
mod stats;
mod teardown;
mod volumes;
mod workloads;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::process::ExitCode;
use std::time::Instant;

use futures::FutureExt as _;
use lvms_testkit::guest::TestArgs;

use ctx::Ctx;

pub type ScenarioFn = for<'a> fn(&'a mut Ctx) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Every scenario, in the order they run on the one node (later ones build on earlier ones:
/// the install comes first, the teardown last).
const SCENARIOS: &[(&str, ScenarioFn)] = &[
    ("install", |c| {
        Box::pin(install::helm_install_runs_lvms_as_pods_and_kubelet_registers_the_driver(c))
    }),
    // `make demo` (install, demo, teardown): for reading; `make test` skips it.
    ("demo", |c| {
        Box::pin(demo::a_claim_becomes_a_mounted_volume_shown_as_a_user_sees_it(c))
    }),
    ("data-across-pods", |c| {
        Box::pin(volumes::data_written_by_one_pod_is_read_by_the_next_on_xfs_and_ext4(c))
    }),
    ("block", |c| {
        Box::pin(volumes::a_raw_block_claim_is_written_and_read_by_pods(c))
    }),
    ("expand", |c| {
        Box::pin(volumes::a_claim_grown_while_mounted_is_seen_grown_in_the_pod(c))
    }),
    ("ephemeral", |c| {
        Box::pin(volumes::a_generic_ephemeral_volume_lives_and_goes_with_its_pod(c))
    }),
    ("snapshot-restore", |c| {
        Box::pin(snapshots::a_snapshot_is_restored_into_a_claim_a_pod_reads(
            c,
        ))
    }),
    ("group-snapshot", |c| {
        Box::pin(group_snapshot::a_group_snapshot_under_a_writing_pod_restores_consistent(c))
    }),
    ("volume-stats", |c| {
        Box::pin(stats::kubelet_volume_stats_match_what_the_pod_wrote(c))
    }),
    ("volume-health", |c| {
        Box::pin(stats::an_abnormal_volume_shows_where_kubelet_shows_it(c))
    }),
    ("container-kill", |c| {
        Box::pin(restarts::the_vg_manager_container_killed_mid_provisioning_loses_nothing(c))
    }),
    ("reboot", |c| {
        Box::pin(restarts::a_rebooted_node_mounts_the_pods_volume_again_with_its_data(c))
    }),
    ("teardown", |c| {
        Box::pin(teardown::uninstall_leaves_nothing_on_the_node(c))
    }),
    ("kustomize", |c| {
        Box::pin(kustomize::the_kustomize_tree_installs_runs_a_pod_and_uninstalls(c))
    }),
];

fn main() -> ExitCode {
    let args = TestArgs::parse(std::env::args().skip(1));
    let chosen: Vec<(&'static str, ScenarioFn)> = SCENARIOS
        .iter()
        .filter(|(name, _)| args.selects(name))
        .copied()
        .collect();
    let filtered = SCENARIOS.len() - chosen.len();
    if args.list {
        for (name, _) in &chosen {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    println!("\nrunning {} tests", chosen.len());
    let started = Instant::now();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let results = if chosen.is_empty() {
        Vec::new()
    } else {
        rt.block_on(async {
            let mut ctx = Ctx::start().await;
            let mut results = Vec::new();
            for (name, run) in &chosen {
                let t = Instant::now();
                println!(
                    "== node scenario {name} ({:.0}s into the tier)",
                    started.elapsed().as_secs_f64()
                );
                let r = AssertUnwindSafe(run(&mut ctx)).catch_unwind().await;
                let r = r.map_err(|p| {
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "panicked".into())
                });
                println!(
                    "== node scenario {name}: {} in {:.0}s",
                    if r.is_ok() { "ok" } else { "FAILED" },
                    t.elapsed().as_secs_f64()
                );
                results.push((*name, r));
            }
            ctx.finish(results.iter().all(|(_, r)| r.is_ok()));
            results
        })
    };
    if lvms_testkit::guest::report(&results, filtered, started) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
