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
mod dead_node;
mod demo;
mod group_snapshot;
mod install;
mod kustomize;
mod metrics;
mod restarts;
mod snapshots;
mod stats;
mod swap;
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

/// A scenario and the earlier ones whose claims and Pods it builds on.
#[derive(Clone, Copy)]
struct Scenario {
    name: &'static str,
    needs: &'static [&'static str],
    run: ScenarioFn,
}

/// Every scenario, in the order they run on the one node (the install comes first, the
/// teardown last). A scenario chosen alone (`--exact reboot`, run-tests.sh's rerun on a new
/// node) brings what it `needs` with it, run first and not reported as tests of their own.
const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "install",
        needs: &[],
        run: |c| {
            Box::pin(install::helm_install_runs_lvms_as_pods_and_kubelet_registers_the_driver(c))
        },
    },
    // Right after the install, while its own claims are the only ones on the node (all of a dead
    // node's claims are written off): the node is powered off and boots again.
    Scenario {
        name: "dead-node",
        needs: &[],
        run: |c| {
            Box::pin(
                dead_node::a_dead_node_is_written_off_and_what_it_left_is_repaired_when_it_returns(
                    c,
                ),
            )
        },
    },
    // `make demo` (install, demo, teardown): for reading; `make test` skips it.
    Scenario {
        name: "demo",
        needs: &[],
        run: |c| Box::pin(demo::a_claim_becomes_a_mounted_volume_shown_as_a_user_sees_it(c)),
    },
    Scenario {
        name: "data-across-pods",
        needs: &[],
        run: |c| Box::pin(volumes::data_written_by_one_pod_is_read_by_the_next_on_xfs_and_ext4(c)),
    },
    Scenario {
        name: "block",
        needs: &[],
        run: |c| Box::pin(volumes::a_raw_block_claim_is_written_and_read_by_pods(c)),
    },
    Scenario {
        name: "expand",
        needs: &[],
        run: |c| Box::pin(volumes::a_claim_grown_while_mounted_is_seen_grown_in_the_pod(c)),
    },
    Scenario {
        name: "ephemeral",
        needs: &[],
        run: |c| Box::pin(volumes::a_generic_ephemeral_volume_lives_and_goes_with_its_pod(c)),
    },
    Scenario {
        name: "snapshot-restore",
        needs: &["data-across-pods"],
        run: |c| {
            Box::pin(snapshots::a_snapshot_is_restored_into_a_claim_a_pod_reads(
                c,
            ))
        },
    },
    Scenario {
        name: "group-snapshot",
        needs: &[],
        run: |c| {
            Box::pin(group_snapshot::a_group_snapshot_under_a_writing_pod_restores_consistent(c))
        },
    },
    Scenario {
        name: "volume-stats",
        needs: &["data-across-pods"],
        run: |c| Box::pin(stats::kubelet_volume_stats_match_what_the_pod_wrote(c)),
    },
    Scenario {
        name: "volume-health",
        needs: &["volume-stats"],
        run: |c| Box::pin(stats::an_abnormal_volume_shows_where_kubelet_shows_it(c)),
    },
    Scenario {
        name: "metrics",
        needs: &[],
        run: |c| Box::pin(metrics::both_endpoints_serve_a_reader_and_refuse_a_stranger(c)),
    },
    Scenario {
        name: "container-kill",
        needs: &[],
        run: |c| {
            Box::pin(restarts::the_vg_manager_container_killed_mid_provisioning_loses_nothing(c))
        },
    },
    Scenario {
        name: "reboot",
        needs: &["volume-stats"],
        run: |c| Box::pin(restarts::a_rebooted_node_mounts_the_pods_volume_again_with_its_data(c)),
    },
    Scenario {
        name: "teardown",
        needs: &[],
        run: |c| Box::pin(teardown::uninstall_leaves_nothing_on_the_node(c)),
    },
    Scenario {
        name: "kustomize",
        needs: &[],
        run: |c| Box::pin(kustomize::the_kustomize_tree_installs_runs_a_pod_and_uninstalls(c)),
    },
    // LVMS itself (openshift/lvm-operator v4.20.0) on the disks lvms left clean, then the swap
    // to lvms and back (docs/migrate-from-lvms.md).
    Scenario {
        name: "lvms-go",
        needs: &[],
        run: |c| Box::pin(swap::lvms_itself_installs_and_provisions(c)),
    },
    Scenario {
        name: "lvms-go-volumes",
        needs: &["lvms-go"],
        run: |c| Box::pin(swap::lvms_itself_makes_the_volumes_the_swap_keeps(c)),
    },
    Scenario {
        name: "swap",
        needs: &["lvms-go-volumes"],
        run: |c| Box::pin(swap::lvms_takes_over_what_lvms_itself_made(c)),
    },
    Scenario {
        name: "swap-back",
        needs: &["swap"],
        run: |c| Box::pin(swap::lvms_itself_takes_them_back(c)),
    },
];

/// The scenarios to run, in table order: the chosen ones (reported) and what they need that
/// was not chosen (run first, not reported).
fn plan(chosen: impl Fn(&str) -> bool) -> Vec<(Scenario, bool)> {
    let table: Vec<(&str, &[&str])> = SCENARIOS.iter().map(|s| (s.name, s.needs)).collect();
    lvms_testkit::guest::with_needs(&table, chosen)
        .into_iter()
        .map(|(i, report)| (SCENARIOS[i], report))
        .collect()
}

fn main() -> ExitCode {
    let args = TestArgs::parse(std::env::args().skip(1));
    let planned = plan(|name| args.selects(name));
    let reported = planned.iter().filter(|(_, r)| *r).count();
    let filtered = SCENARIOS.len() - reported;
    if args.list {
        for (s, _) in planned.iter().filter(|(_, r)| *r) {
            println!("{}: test", s.name);
        }
        return ExitCode::SUCCESS;
    }
    println!("\nrunning {reported} tests");
    let started = Instant::now();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let results = if reported == 0 {
        Vec::new()
    } else {
        rt.block_on(async {
            let mut ctx = Ctx::start().await;
            let mut results = Vec::new();
            // Needed scenarios that failed: what they need fails with their message.
            let mut broken: Vec<(&str, String)> = Vec::new();
            for (s, report) in &planned {
                let t = Instant::now();
                let role = if *report {
                    ""
                } else {
                    " (needed by what follows)"
                };
                println!(
                    "== node scenario {}{role} ({:.0}s into the tier)",
                    s.name,
                    started.elapsed().as_secs_f64()
                );
                let unmet = s.needs.iter().find_map(|n| {
                    broken
                        .iter()
                        .find(|(b, _)| b == n)
                        .map(|(b, e)| format!("needs {b}, which failed: {e}"))
                });
                let r = match unmet {
                    Some(e) => Err(e),
                    None => AssertUnwindSafe((s.run)(&mut ctx))
                        .catch_unwind()
                        .await
                        .map_err(|p| {
                            lvms::runtime::process::panic_message(p.as_ref())
                                .unwrap_or_else(|| "panicked".into())
                        }),
                };
                println!(
                    "== node scenario {}: {} in {:.0}s",
                    s.name,
                    if r.is_ok() { "ok" } else { "FAILED" },
                    t.elapsed().as_secs_f64()
                );
                if let Err(e) = &r {
                    broken.push((s.name, e.clone()));
                }
                if *report {
                    results.push((s.name, r));
                }
            }
            ctx.finish(broken.is_empty());
            results
        })
    };
    if lvms_testkit::guest::report(&results, filtered, started) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
