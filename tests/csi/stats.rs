//! NodeGetVolumeStats on vg-manager's node socket: the capabilities that offer it, and
//! NOT_FOUND for a path that is not there or where the volume is not published.

use lvms::csi::proto::node_service_capability::{Type as Cap, rpc::Type as NodeRpc};
use lvms::csi::proto::{NodeGetCapabilitiesRequest, NodeGetVolumeStatsRequest};

use crate::common::{MIB, ThickNode, create_request, create_until_ok};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_stats_are_offered_and_only_for_where_the_volume_is() {
    let n = ThickNode::start("csi-stats", &[]).await;
    let id = create_until_ok(
        n.controller().await,
        create_request("pvc-stats", 32 * MIB, &n.class),
    )
    .await;
    let mut node = n.node().await;
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

    // This host has no device-mapper (LVs are metadata only), so nothing is ever published
    // here: stats for any path are NOT_FOUND, a directory that exists included (they answered
    // for any directory once, `/etc` too). The figures against `df` and the LV's condition on
    // real mounts are the guest tier's csi-mount and the real node's volume-stats.
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
    let dir = n.s.dir.display().to_string();
    let elsewhere = ask(id.clone(), dir.clone())
        .await
        .expect_err("stats of a directory the volume is not published at");
    assert_eq!(elsewhere.code(), tonic::Code::NotFound, "{elsewhere:?}");
    assert!(
        elsewhere.message().contains(&dir) && elsewhere.message().contains(&id),
        "{elsewhere:?}"
    );
    // A path that is not there.
    let missing = ask(id, "/nonexistent/lvms-stats".into())
        .await
        .expect_err("a missing path");
    assert_eq!(missing.code(), tonic::Code::NotFound);
}
