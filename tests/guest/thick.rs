use lvms_journal::{Body, Journal};
use serde_json::json;

use crate::node::{NodeRun, run_node};

/// SIGKILL between `vgcreate` and its outcome on a real kernel (activation on): the restarted
/// vg-manager finds the VG on the host, closes the open vgcreate as already done, never runs it
/// again, and the class converges and tears down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_between_vgcreate_and_its_outcome_never_runs_vgcreate_twice() {
    let vg = format!("c{}", std::process::id());
    let r = run_node(NodeRun {
        name: "vgcreate-crash",
        vg: vg.clone(),
        pool: None,
        classes: json!([{
            "name": vg, "default": true,
            "deviceSelector": {"paths": ["/dev/disk/by-id/virtio-scratch0"]}
        }]),
        prepare: "",
        crash_at: Some(format!("applied:vg/{vg}#vgcreate")),
        disks: vec![("scratch0", 128)],
        edit: None,
        after_ready: "",
    })
    .await;
    assert_eq!(
        r.out.read("first-life-status").trim(),
        "137",
        "the first vg-manager life ends in SIGKILL at the crash point"
    );
    let j = Journal::open_copy(r.out.out.join("journal/vg-manager")).expect("the guest's journal");
    let recs: Vec<_> = j.iter().filter_map(Result::ok).collect();
    let creates: Vec<_> = recs
        .iter()
        .filter(|r| matches!(&r.body, Body::Intent(i) if i.action == "vgcreate"))
        .collect();
    assert_eq!(creates.len(), 1, "vgcreate journaled once: {creates:#?}");
    let replay = recs.iter().find_map(|o| match &o.body {
        Body::Outcome(out) if out.intent_seq == creates[0].seq => out
            .result
            .done()
            .and_then(|d| d.replay)
            .map(|v| v.as_str().to_string()),
        _ => None,
    });
    assert_eq!(
        replay.as_deref(),
        Some("already-done"),
        "the open vgcreate was resolved from the host"
    );
    assert!(j.open_intents().expect("open intents").is_empty());
}
