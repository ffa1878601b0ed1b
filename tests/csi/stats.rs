//! NodeGetVolumeStats on vg-manager's node socket, as TopoLVM answers it: bytes and inodes as
//! `df` reports them for the path a volume is published at, the LV's condition from lvm2
//! (healthy, then abnormal once the LV is removed behind vg-manager's back), NOT_FOUND for a
//! path that is not there, and the capabilities that say so.

use lvms::csi::proto::node_client::NodeClient;
use lvms::csi::proto::node_service_capability::{Type as Cap, rpc::Type as NodeRpc};
use lvms::csi::proto::volume_usage::Unit;
use lvms::csi::proto::{NodeGetCapabilitiesRequest, NodeGetVolumeStatsRequest};
use lvms_testkit::disks::lvm;

use crate::common::{MIB, ThickNode, create_request, create_until_ok};

/// `df` of `dir`: size, used, avail (bytes), itotal, iused, iavail.
fn df(dir: &std::path::Path) -> Vec<i64> {
    let out = std::process::Command::new("df")
        .args(["-B1", "--output=size,used,avail,itotal,iused,iavail"])
        .arg(dir)
        .output()
        .expect("df");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .nth(1)
        .expect("a df line")
        .split_whitespace()
        .map(|v| v.parse().expect("a number"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_stats_match_df_and_a_lost_lv_is_abnormal() {
    let n = ThickNode::start("csi-stats", &[]).await;
    let id = create_until_ok(
        n.controller().await,
        create_request("pvc-stats", 32 * MIB, &n.class),
    )
    .await;
    let socket = n.vgm.as_ref().expect("vg-manager").csi_socket.clone();
    let mut node = NodeClient::new(
        lvms::csi::client::connect(&socket)
            .await
            .expect("node socket"),
    );
    let caps: Vec<i32> = node
        .node_get_capabilities(NodeGetCapabilitiesRequest {})
        .await
        .expect("capabilities")
        .into_inner()
        .capabilities
        .into_iter()
        .filter_map(|c| match c.r#type {
            Some(Cap::Rpc(r)) => Some(r.r#type),
            _ => None,
        })
        .collect();
    assert_eq!(
        caps,
        [
            NodeRpc::GetVolumeStats as i32,
            NodeRpc::ExpandVolume as i32,
            NodeRpc::VolumeCondition as i32
        ]
    );

    // This host has no device-mapper (LVs are metadata only), so nothing is mounted: a
    // directory on the test's filesystem stands in for the published path (the same statfs).
    let dir = n.s.dir.clone();
    let ask = |volume_id: String, path: String| {
        let mut node = node.clone();
        async move {
            node.node_get_volume_stats(NodeGetVolumeStatsRequest {
                volume_id,
                volume_path: path,
                staging_target_path: String::new(),
            })
            .await
        }
    };
    let path = dir.display().to_string();
    let stats = ask(id.clone(), path.clone())
        .await
        .expect("stats")
        .into_inner();
    let want = df(&dir);
    let bytes = &stats.usage[0];
    let inodes = &stats.usage[1];
    assert_eq!(bytes.unit, Unit::Bytes as i32);
    assert_eq!(inodes.unit, Unit::Inodes as i32);
    assert_eq!(
        bytes.total, want[0],
        "total bytes: {stats:?} vs df {want:?}"
    );
    assert_eq!(
        inodes.total, want[3],
        "total inodes: {stats:?} vs df {want:?}"
    );
    // Used and available move as the tests write their logs: equal within 64 MiB / 1000.
    assert!(
        (bytes.used - want[1]).abs() < 64 << 20,
        "{stats:?} vs df {want:?}"
    );
    assert!(
        (bytes.available - want[2]).abs() < 64 << 20,
        "{stats:?} vs df {want:?}"
    );
    assert!(
        (inodes.used - want[4]).abs() < 1000,
        "{stats:?} vs df {want:?}"
    );
    // With activation off (this tier) lvm2 cannot tell the LV's state (`lv_attr` state `X`):
    // abnormal, as TopoLVM's VerifyHealth reports it. The healthy case is the guest tier's
    // csi-mount, on real device-mapper.
    let unknown = stats.volume_condition.expect("a condition");
    assert!(
        unknown.abnormal && unknown.message.contains("unknown state"),
        "{unknown:?}"
    );

    // The LV removed behind vg-manager's back: the volume is abnormal, saying which LV.
    let (ok, out) = lvm("lvremove", &["-f", &format!("{}/{id}", n.class)]);
    assert!(ok, "lvremove: {out}");
    let lost = ask(id.clone(), path)
        .await
        .expect("stats")
        .into_inner()
        .volume_condition
        .expect("a condition");
    assert!(
        lost.abnormal && lost.message.contains(&id) && lost.message.contains("not found"),
        "{lost:?}"
    );
    // A path that is not there.
    let missing = ask(id, "/nonexistent/lvms-stats".into())
        .await
        .expect_err("a missing path");
    assert_eq!(missing.code(), tonic::Code::NotFound);
}
