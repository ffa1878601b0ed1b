//! The real-kernel tier: what needs device-mapper (thin pools, activation, RAID, mounts) runs in
//! a QEMU guest booting Debian's cloud kernel (`deploy/dev/build-guest.sh`, `testkit::guest`),
//! while the control plane and the operator run on the host; the guest reaches the test's
//! kube-apiserver through one loopback forward and nothing else.
//!
//! One guest boots for the whole group (`group.rs`), so this binary has its own harness: it
//! reports each scenario as a test in libtest's format (`test NAME ... ok`, `test result: ...`),
//! and takes libtest's name filters (`cargo test --test guest -- raid`, `--exact`, `--skip`,
//! `--list`). `LVMS_GUEST_KERNEL` picks the kernel; run-tests.sh runs the group on 6.1 and 6.12.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod csi;
mod group;
mod group_snapshot;
mod harness;
mod mount;
mod node;
mod raid;
mod sanity;
mod script;
mod soak;
mod thick;
mod thin;
mod wipe;

use std::process::ExitCode;
use std::time::Instant;

use group::{ScenarioFn, run_group};
use lvms_testkit::guest::TestArgs;

/// A guest kernel the tier runs on: Debian's current cloud kernel and the 6.12 one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kernel {
    K6_1,
    K6_12,
}

impl Kernel {
    /// The kernel of this run, from `LVMS_GUEST_KERNEL` (unset: Debian's current, 6.1).
    fn of_run() -> Kernel {
        Kernel::parse(&std::env::var("LVMS_GUEST_KERNEL").unwrap_or_default())
    }

    fn parse(name: &str) -> Kernel {
        if name.starts_with("6.12") || name.contains("6.12.") {
            Kernel::K6_12
        } else {
            Kernel::K6_1
        }
    }
}

/// One scenario: the kernels it runs on (run-tests.sh runs one group per kernel and asks this
/// table which scenarios each takes: `--list --kernel K`), its kill plan on each kernel (the
/// group snapshots' `LVMS_GROUP_KILLS` unless set), and its body.
struct Scenario {
    name: &'static str,
    kernels: &'static [Kernel],
    kills: &'static [(Kernel, &'static str)],
    run: ScenarioFn,
}

/// Every scenario of the tier, in the order the host sides take their turns.
const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "harness",
        kernels: &[Kernel::K6_1],
        kills: &[],
        run: |c| Box::pin(harness::a_script_runs_as_root_on_a_device_mapper_kernel(c)),
    },
    Scenario {
        name: "thin",
        kernels: &[Kernel::K6_1],
        kills: &[],
        run: |c| {
            Box::pin(thin::a_thin_class_gets_an_active_pool_sized_as_configured_and_is_torn_down(c))
        },
    },
    Scenario {
        name: "thin-autoextend",
        // On 6.1: the 6.12 group leads to the real node, the longer of make test's two chains.
        kernels: &[Kernel::K6_1],
        kills: &[],
        run: |c| {
            Box::pin(thin::a_pool_under_a_writer_is_extended_before_writes_fail(
                c,
            ))
        },
    },
    Scenario {
        name: "thin-crash",
        kernels: &[Kernel::K6_1],
        kills: &[],
        run: |c| {
            Box::pin(
                thin::sigkill_between_the_thin_pool_lvcreate_and_its_outcome_never_creates_it_twice(
                    c,
                ),
            )
        },
    },
    Scenario {
        name: "csi-thin",
        kernels: &[Kernel::K6_1],
        kills: &[],
        run: |c| {
            Box::pin(
                csi::thin_volumes_snapshots_restores_and_clones_are_made_as_topolvm_makes_them(c),
            )
        },
    },
    Scenario {
        name: "csi-mount",
        kernels: &[Kernel::K6_12],
        kills: &[],
        run: |c| {
            Box::pin(
                mount::published_volumes_are_formatted_once_mounted_snapshotted_restored_and_grown(
                    c,
                ),
            )
        },
    },
    Scenario {
        name: "csi-mount-crash",
        kernels: &[Kernel::K6_12],
        kills: &[],
        run: |c| {
            Box::pin(mount::sigkill_after_format_or_mount_never_formats_twice_or_mounts_twice(c))
        },
    },
    Scenario {
        name: "thin-validate",
        kernels: &[Kernel::K6_12],
        kills: &[],
        run: |c| Box::pin(thin::an_inactive_pool_is_validated_and_activated_by_the_next_pass(c)),
    },
    Scenario {
        name: "vgcreate-crash",
        kernels: &[Kernel::K6_1],
        kills: &[],
        run: |c| {
            Box::pin(thick::sigkill_between_vgcreate_and_its_outcome_never_runs_vgcreate_twice(c))
        },
    },
    Scenario {
        name: "wipe",
        kernels: &[Kernel::K6_12],
        kills: &[],
        run: |c| Box::pin(wipe::force_wipe_removes_a_device_mapper_child_and_builds_the_vg(c)),
    },
    Scenario {
        name: "raid1",
        kernels: &[Kernel::K6_12],
        kills: &[],
        run: |c| Box::pin(raid::a_raid1_class_builds_a_vg_whose_lvmd_options_make_a_mirrored_lv(c)),
    },
    Scenario {
        name: "raid5",
        kernels: &[Kernel::K6_12],
        kills: &[],
        run: |c| Box::pin(raid::a_raid5_class_stripes_an_lv_with_parity_across_three_pvs(c)),
    },
    Scenario {
        name: "raid-lost",
        kernels: &[Kernel::K6_12],
        kills: &[],
        run: |c| Box::pin(raid::a_member_disk_removed_at_run_time_fails_the_raid_health_check(c)),
    },
    Scenario {
        name: "soak",
        kernels: &[Kernel::K6_1],
        kills: &[],
        run: |c| Box::pin(soak::seeded_random_kills_converge_with_each_step_taking_effect_once(c)),
    },
    // Last: its host side holds the turn for its two suites (~10 min), and a job waiting behind
    // it would wait that long for its turn. On 6.1 only, with all three kills: 6.12's group
    // snapshots are taken on the real node (tests/node, `group-snapshot`), which run-tests.sh
    // runs after the 6.12 group, so the two kernels' queues end together.
    Scenario {
        name: "group-snapshot",
        kernels: &[Kernel::K6_1],
        kills: &[(Kernel::K6_1, "hold,snap,release")],
        run: |c| {
            Box::pin(
            group_snapshot::group_snapshots_are_consistent_follow_their_policy_and_survive_kills(c),
        )
        },
    },
    Scenario {
        name: "sanity-thick",
        kernels: &[Kernel::K6_12],
        kills: &[],
        run: |c| Box::pin(sanity::csi_sanity_passes_on_a_thick_class(c)),
    },
    Scenario {
        name: "sanity-thin",
        kernels: &[Kernel::K6_1],
        kills: &[],
        run: |c| Box::pin(sanity::csi_sanity_passes_on_a_thin_class(c)),
    },
];

fn main() -> ExitCode {
    let args = TestArgs::parse(std::env::args().skip(1));
    // Every scenario runs somewhere: one without a kernel would never run.
    if let Some(s) = SCENARIOS.iter().find(|s| s.kernels.is_empty()) {
        println!("guest scenario {} names no kernel to run on", s.name);
        return ExitCode::FAILURE;
    }
    let kernel = args.kernel.as_deref().map(Kernel::parse);
    let chosen: Vec<(&'static str, ScenarioFn)> = SCENARIOS
        .iter()
        .filter(|s| args.selects(s.name))
        .filter(|s| kernel.is_none_or(|k| s.kernels.contains(&k)))
        .map(|s| (s.name, s.run))
        .collect();
    // The kill plans of this kernel's run, unless the caller chose its own.
    let run_kernel = Kernel::of_run();
    for s in SCENARIOS
        .iter()
        .filter(|s| chosen.iter().any(|(n, _)| *n == s.name))
    {
        if let Some((_, plan)) = s.kills.iter().find(|(k, _)| *k == run_kernel)
            && std::env::var_os("LVMS_GROUP_KILLS").is_none()
        {
            // SAFETY: set before the runtime or any other thread starts.
            unsafe { std::env::set_var("LVMS_GROUP_KILLS", plan) };
        }
    }
    let filtered = SCENARIOS.len() - chosen.len();
    if args.list {
        for (name, _) in &chosen {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    println!("\nrunning {} tests", chosen.len());
    let started = Instant::now();
    let results = if chosen.is_empty() {
        Vec::new()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime")
            .block_on(run_group(&chosen))
    };
    if lvms_testkit::guest::report(&results, filtered, started) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(101)
    }
}
