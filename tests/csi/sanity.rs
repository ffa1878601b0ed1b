//! csi-sanity (built from its Go module) against the operator's socket: its Identity and
//! Controller suites, on a thick class with lvm2 metadata only (this host has no
//! device-mapper). The full suite, Node included, on a thick and a thin class, runs in the
//! real-kernel tier where mounts work (`cargo test --test guest -- sanity`).

use std::process::Command;

use lvms_testkit::dev::csi_peers::peer_bin;
use serde_json::json;

use crate::common::{MIB, ThickNode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csi_sanity_passes_identity_and_controller() {
    let n = ThickNode::start_with("csi-sanity", &[], 1024, json!({"fstype": "ext4"})).await;
    let bin = peer_bin("csi-sanity").unwrap_or_else(|e| panic!("{e}"));
    let report = n.s.dir.join("csi-sanity.log");
    let socket = n.op.csi_socket.clone();
    let node_socket = n.vgm.as_ref().expect("vg-manager").csi_socket.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(bin)
            .arg(format!("--csi.controllerendpoint={}", socket.display()))
            // vg-manager's node socket: NodeGetInfo and NodeGetCapabilities (cleanup asks).
            .arg(format!("--csi.endpoint={}", node_socket.display()))
            .arg(format!("--csi.testvolumesize={}", 64 * MIB))
            .arg(format!("--csi.testvolumeexpandsize={}", 128 * MIB))
            // Node Service: publishing needs an active LV (the guest tier runs it). Snapshots
            // and clones: a thick class refuses them (thin needs device-mapper: the guest tier).
            .arg("--ginkgo.skip=Node Service|[Ss]napshot|existing source volume")
            .arg("--ginkgo.v")
            .output()
            .expect("running csi-sanity")
    })
    .await
    .expect("csi-sanity task");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    std::fs::write(&report, &text).expect("keeping the report");
    let summary: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("Passed") && l.contains("Failed"))
        .collect();
    println!("csi-sanity: {summary:?}");
    assert!(
        out.status.success(),
        "csi-sanity failed ({}); report in {}:\n{}\noperator log tail:\n{}",
        out.status,
        report.display(),
        text.lines()
            .filter(|l| l.contains("[FAIL]") || l.contains("Expected") || l.contains("rpc error"))
            .take(60)
            .collect::<Vec<_>>()
            .join("\n"),
        n.op.log_text()
            .lines()
            .rev()
            .take(20)
            .collect::<Vec<_>>()
            .join("\n")
    );
    // Nothing left behind by its create/delete cases.
    assert!(n.lvs().is_empty(), "{:?}", n.lvs());
}
