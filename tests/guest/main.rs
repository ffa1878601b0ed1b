//! The real-kernel tier: what needs device-mapper (thin pools, activation, RAID, mounts) runs in
//! a QEMU guest booting Debian's cloud kernel (`deploy/dev/build-guest.sh`, `testkit::guest`),
//! while the control plane and the operator run on the host; the guest reaches the test's
//! kube-apiserver through one loopback forward and nothing else. One guest boots for the whole
//! group (`group.rs`); `LVMS_GUEST_KERNEL` picks the kernel (run-tests.sh runs the group on 6.1
//! and 6.12), `LVMS_GUEST_SCENARIOS=a,b` a subset.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod group;
mod harness;
mod node;
mod raid;
mod thick;
mod thin;
mod wipe;

use group::{ScenarioFn, run_group};

/// Every scenario of the tier, in the order the host sides take their turns.
const SCENARIOS: &[(&str, ScenarioFn)] = &[
    ("harness", |c| {
        Box::pin(harness::a_script_runs_as_root_on_a_device_mapper_kernel(c))
    }),
    ("thin", |c| {
        Box::pin(thin::a_thin_class_gets_an_active_pool_sized_as_configured_and_is_torn_down(c))
    }),
    ("thin-crash", |c| {
        Box::pin(
            thin::sigkill_between_the_thin_pool_lvcreate_and_its_outcome_never_creates_it_twice(c),
        )
    }),
    ("thin-validate", |c| {
        Box::pin(thin::an_inactive_pool_is_validated_and_activated_by_the_next_pass(c))
    }),
    ("vgcreate-crash", |c| {
        Box::pin(thick::sigkill_between_vgcreate_and_its_outcome_never_runs_vgcreate_twice(c))
    }),
    ("wipe", |c| {
        Box::pin(wipe::force_wipe_removes_a_device_mapper_child_and_builds_the_vg(c))
    }),
    ("raid1", |c| {
        Box::pin(raid::a_raid1_class_builds_a_vg_whose_lvmd_options_make_a_mirrored_lv(c))
    }),
    ("raid5", |c| {
        Box::pin(raid::a_raid5_class_stripes_an_lv_with_parity_across_three_pvs(c))
    }),
    ("raid-lost", |c| {
        Box::pin(raid::a_member_disk_removed_at_run_time_fails_the_raid_health_check(c))
    }),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_real_kernel_scenario_in_one_guest() {
    run_group(SCENARIOS).await;
}
