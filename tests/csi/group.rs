//! The GroupController on the host tier: its capability, its error codes, and the members it
//! refuses before anything is written (thick volumes; volumes on two nodes), each refusal
//! naming the offending members. Taking a group needs thin pools: the real-kernel tier's
//! `group-snapshot` scenario.

use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use lvms::api::{LogicalVolume, LogicalVolumeSpec};
use lvms::csi::proto::group_controller_client::GroupControllerClient;
use lvms::csi::proto::{
    CreateVolumeGroupSnapshotRequest, DeleteVolumeGroupSnapshotRequest,
    GetVolumeGroupSnapshotRequest, GroupControllerGetCapabilitiesRequest,
};
use serde_json::json;
use tonic::Code;

use crate::common::{MIB, ThickNode, create_request, create_until_ok, delete_until_ok};

/// A LogicalVolume another node made (its vg-manager is not running here): only the
/// controller's view of it matters.
async fn volume_elsewhere(n: &ThickNode, name: &str, node: &str, class: &str) -> String {
    let api = n.logical_volumes();
    let lv = LogicalVolume::new(
        name,
        LogicalVolumeSpec {
            name: name.into(),
            node_name: node.into(),
            size: k8s_openapi::apimachinery::pkg::api::resource::Quantity("64Mi".into()),
            device_class: Some(class.into()),
            lvcreate_option_class: None,
            source: None,
            access_type: None,
        },
    );
    let made = api
        .create(&PostParams::default(), &lv)
        .await
        .expect("LogicalVolume");
    let id = made.metadata.uid.clone().expect("uid");
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"volumeID": id, "currentSize": "64Mi"}})),
    )
    .await
    .expect("status");
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_snapshots_refuse_thick_members_and_members_on_two_nodes_naming_them() {
    let n = ThickNode::start("csi-group", &[]).await;
    let ctl = n.controller().await;
    let mut group = GroupControllerClient::new(
        lvms::csi::client::connect(&n.op.csi_socket)
            .await
            .expect("the controller socket"),
    );
    let caps = group
        .group_controller_get_capabilities(GroupControllerGetCapabilitiesRequest {})
        .await
        .expect("capabilities")
        .into_inner();
    assert_eq!(caps.capabilities.len(), 1, "{caps:?}");

    // Thick members: refused before anything is written, each named.
    let a = create_until_ok(ctl.clone(), create_request("pvc-ga", 16 * MIB, &n.class)).await;
    let b = create_until_ok(ctl.clone(), create_request("pvc-gb", 16 * MIB, &n.class)).await;
    let e = group
        .create_volume_group_snapshot(CreateVolumeGroupSnapshotRequest {
            name: "groupsnapshot-thick".into(),
            source_volume_ids: vec![a.clone(), b.clone()],
            ..Default::default()
        })
        .await
        .expect_err("thick members are refused");
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    for want in [a.as_str(), b.as_str(), "thick class"] {
        assert!(e.message().contains(want), "{want:?} in {e}");
    }

    // Members on two nodes (a thin class this cluster does not name is left to the node, so
    // only the spread is checked here).
    let x = volume_elsewhere(&n, "pvc-gx", "node-x", "thin-elsewhere").await;
    let y = volume_elsewhere(&n, "pvc-gy", "node-y", "thin-elsewhere").await;
    let e = group
        .create_volume_group_snapshot(CreateVolumeGroupSnapshotRequest {
            name: "groupsnapshot-spread".into(),
            source_volume_ids: vec![x.clone(), y.clone()],
            ..Default::default()
        })
        .await
        .expect_err("members on two nodes are refused");
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    for want in [
        format!("node node-x: {x}"),
        format!("node node-y: {y}"),
        "one node".to_string(),
    ] {
        assert!(e.message().contains(&want), "{want:?} in {e}");
    }
    // Unknown members and no name.
    let e = group
        .create_volume_group_snapshot(CreateVolumeGroupSnapshotRequest {
            name: "groupsnapshot-gone".into(),
            source_volume_ids: vec![a.clone(), "no-such-volume".into()],
            ..Default::default()
        })
        .await
        .expect_err("an unknown member");
    assert!(e.message().contains("no-such-volume"), "{e}");
    let e = group
        .create_volume_group_snapshot(CreateVolumeGroupSnapshotRequest {
            source_volume_ids: vec![a.clone()],
            ..Default::default()
        })
        .await
        .expect_err("no name");
    assert_eq!(e.code(), Code::InvalidArgument);
    // Nothing was written for any refused group.
    let written = n
        .logical_volumes()
        .list(&ListParams::default())
        .await
        .expect("LogicalVolumes")
        .items
        .iter()
        .filter(|lv| {
            lv.metadata
                .annotations
                .as_ref()
                .is_some_and(|x| x.contains_key("lvms.topolvm.io/group-snapshot"))
        })
        .count();
    assert_eq!(written, 0, "a refused group writes no member");

    // Get and Delete of a group that does not exist: NotFound, and success.
    let e = group
        .get_volume_group_snapshot(GetVolumeGroupSnapshotRequest {
            group_snapshot_id: "groupsnapshot-none".into(),
            ..Default::default()
        })
        .await
        .expect_err("no such group");
    assert_eq!(e.code(), Code::NotFound, "{e}");
    group
        .delete_volume_group_snapshot(DeleteVolumeGroupSnapshotRequest {
            group_snapshot_id: "groupsnapshot-none".into(),
            ..Default::default()
        })
        .await
        .expect("deleting a group that is not there succeeds");

    for name in ["pvc-gx", "pvc-gy"] {
        n.logical_volumes()
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete");
    }
    delete_until_ok(ctl.clone(), a).await;
    delete_until_ok(ctl, b).await;
}
