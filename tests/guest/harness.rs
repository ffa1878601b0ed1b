use lvms_testkit::guest::Job;

use crate::group::Ctx;
use crate::node::by_id;
use crate::script::Script;

/// The harness itself: the job runs as root on a kernel with device-mapper, sees its scratch
/// disk by serial, its files come back, and its exit status is the outcome's.
pub async fn a_script_runs_as_root_on_a_device_mapper_kernel(ctx: Ctx) {
    let script = Script::new()
        .var("DISK", by_id("harness-a"))
        .then(include_str!("scripts/harness.sh"));
    let guest = ctx
        .member
        .submit(Job::new("harness", &script).disk("harness-a", 48));
    guest.mark("checked").await;
    assert_eq!(guest.exited().await, 3, "the job's own status");
    let out = guest.outcome().await;
    assert_eq!(out.status, 3, "console:\n{}", out.tail(30));
    assert_eq!(out.read("uid").trim(), "0");
    assert_eq!(out.read("release").trim(), ctx.image.release());
    assert_eq!(
        out.read("cwd").trim(),
        "/work/harness",
        "each job in its own directory"
    );
    assert!(
        out.read("dm").contains("Driver version"),
        "device-mapper answers in the guest: {}",
        out.read("dm")
    );
    assert!(
        out.read("disk").trim().starts_with("/dev/vd"),
        "{}",
        out.read("disk")
    );
    assert_eq!(out.read("size").trim(), (48u64 << 20).to_string());
}
