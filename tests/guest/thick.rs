use serde_json::json;

use crate::group::Ctx;
use crate::node::{NodeRun, by_id, one_step_after_the_crash, run_node};

/// SIGKILL between `vgcreate` and its outcome on a real kernel (activation on): the restarted
/// vg-manager finds the VG on the host, closes the open vgcreate as already done, never runs it
/// again, and the class converges and tears down.
pub async fn sigkill_between_vgcreate_and_its_outcome_never_runs_vgcreate_twice(ctx: Ctx) {
    let vg = format!("c{}", std::process::id());
    let r = run_node(
        ctx,
        NodeRun {
            crash_at: Some(format!("applied:vg/{vg}#vgcreate")),
            ..NodeRun::new(
                "vgcreate-crash",
                &vg,
                json!([{
                    "name": vg, "default": true,
                    "deviceSelector": {"paths": [by_id("crash0")]}
                }]),
                vec![("crash0", 128)],
            )
        },
    )
    .await;
    let replay = one_step_after_the_crash(&r.out, "vgcreate");
    assert_eq!(
        replay.as_deref(),
        Some("already-done"),
        "the open vgcreate was resolved from the host"
    );
}
