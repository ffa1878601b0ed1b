//! CreateVolume → LogicalVolume → lvcreate on node-a's VG → status → the RPC's answer; grow;
//! delete; and a volume LVMS left behind (TopoLVM-shaped LV + LogicalVolume) kept working.

use kube::api::{Patch, PatchParams, PostParams};
use lvms::api::{LogicalVolume, LogicalVolumeSpec};
use lvms::csi::proto::{
    CapacityRange, ControllerExpandVolumeRequest, DeleteVolumeRequest, GetCapacityRequest, Topology,
};
use lvms_testkit::disks::lvm;
use lvms_testkit::eventually;
use serde_json::json;
use tonic::Code;

use crate::common::{MIB, NODE, T, ThickNode, create_request};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_is_created_grown_and_deleted_on_the_nodes_vg() {
    let t0 = std::time::Instant::now();
    let n = ThickNode::start("csi-thick", &[]).await;
    println!("node ready and capacity published after {:?}", t0.elapsed());
    let mut ctl = n.controller().await;
    let before = n.capacity().await.expect("capacity published");

    // GetCapacity for node-a's segment is the node's annotation.
    let cap = ctl
        .get_capacity(GetCapacityRequest {
            parameters: [("topolvm.io/device-class".to_string(), n.class.clone())].into(),
            accessible_topology: Some(Topology {
                segments: [("topology.topolvm.io/node".to_string(), NODE.to_string())].into(),
            }),
            ..Default::default()
        })
        .await
        .expect("GetCapacity")
        .into_inner();
    assert_eq!(cap.available_capacity as u64, before);

    let req = create_request("pvc-0001", 64 * MIB, &n.class);
    let vol = ctl
        .create_volume(req.clone())
        .await
        .unwrap_or_else(|e| panic!("CreateVolume: {e}\n{}", n.op.log_text()))
        .into_inner()
        .volume
        .expect("a volume");
    assert_eq!(vol.capacity_bytes as u64, 64 * MIB);
    assert_eq!(
        vol.accessible_topology[0].segments["topology.topolvm.io/node"],
        NODE
    );
    // The handle is the LV on disk, named after the LogicalVolume's uid, as TopoLVM's.
    let lv = n
        .logical_volumes()
        .get("pvc-0001")
        .await
        .expect("LogicalVolume");
    assert_eq!(Some(vol.volume_id.clone()), lv.metadata.uid);
    assert_eq!(n.lvs().get(&vol.volume_id), Some(&(64 * MIB)));
    assert!(
        lv.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == "topolvm.io/logicalvolume")
    );
    n.capacity_where(|c| c == before - 64 * MIB).await;

    // The same request again is the same volume, not a second one.
    let again = ctl
        .create_volume(req.clone())
        .await
        .expect("repeat")
        .into_inner();
    assert_eq!(again.volume.expect("volume").volume_id, vol.volume_id);
    assert_eq!(n.lvs().len(), 1);
    // Same name, other size: ALREADY_EXISTS.
    let other = create_request("pvc-0001", 32 * MIB, &n.class);
    let err = ctl
        .create_volume(other)
        .await
        .expect_err("incompatible repeat");
    assert_eq!(err.code(), Code::AlreadyExists, "{err}");

    // Grow: lvresize on the node, then the RPC answers with the new size.
    let grown = ctl
        .controller_expand_volume(ControllerExpandVolumeRequest {
            volume_id: vol.volume_id.clone(),
            capacity_range: Some(CapacityRange {
                required_bytes: (96 * MIB) as i64,
                limit_bytes: 0,
            }),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("ControllerExpandVolume: {e}\n{}", n.op.log_text()))
        .into_inner();
    assert_eq!(grown.capacity_bytes as u64, 96 * MIB);
    assert!(
        grown.node_expansion_required,
        "a mount volume needs its filesystem grown"
    );
    assert_eq!(n.lvs().get(&vol.volume_id), Some(&(96 * MIB)));
    n.capacity_where(|c| c == before - 96 * MIB).await;

    // No room: the node refuses and the RPC says so with RESOURCE_EXHAUSTED.
    let huge = create_request("pvc-0002", 1 << 30, &n.class);
    let err = ctl.create_volume(huge).await.expect_err("no room");
    assert_eq!(err.code(), Code::ResourceExhausted, "{err}");
    // The controller deletes the refused LogicalVolume; the node lets it go.
    let gone = eventually(T, || async {
        let lv = n.logical_volumes().get_opt("pvc-0002").await.unwrap();
        lv.is_none().then_some(())
    })
    .await;
    assert!(gone.is_some(), "the refused LogicalVolume stayed");

    // Delete: lvremove, the LogicalVolume gone, the capacity back.
    ctl.delete_volume(DeleteVolumeRequest {
        volume_id: vol.volume_id.clone(),
        ..Default::default()
    })
    .await
    .unwrap_or_else(|e| panic!("DeleteVolume: {e}"));
    assert!(n.lvs().is_empty(), "{:?}", n.lvs());
    assert!(
        n.logical_volumes()
            .get_opt("pvc-0001")
            .await
            .unwrap()
            .is_none()
    );
    n.capacity_where(|c| c == before).await;
    // Deleting again is success (CSI: an unknown id is already deleted).
    ctl.delete_volume(DeleteVolumeRequest {
        volume_id: vol.volume_id.clone(),
        ..Default::default()
    })
    .await
    .expect("repeat delete");

    // The node's journal tells the volume's story under its LogicalVolume.
    let j = lvms_journal::Journal::open_copy(n.s.vg_manager_journal(NODE)).expect("journal");
    let actions: Vec<String> = j
        .iter()
        .filter_map(Result::ok)
        .filter_map(|r| match r.body {
            lvms_journal::Body::Intent(i)
                if i.unit == "volumes" && i.object.uid == vol.volume_id =>
            {
                Some(i.action)
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        actions,
        [
            "add-finalizer",
            "lvcreate",
            "write-status",
            "lvresize",
            "write-status",
            "lvremove",
            "remove-finalizer"
        ],
        "volume story"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_lvms_left_as_topolvm_did_is_expanded_and_deleted() {
    let mut n = ThickNode::start("csi-swap", &[]).await;
    // The swap: LVMS's node pods are gone before lvms's vg-manager runs. With a node
    // plugin watching, a LogicalVolume without status.volumeID is one to create, and it
    // would race the lvcreate below for the LV (CI saw "already exists").
    n.stop_vg_manager();
    // What LVMS leaves in a cluster: a LogicalVolume with TopoLVM's finalizer, label and
    // status, and its LV named after the object's uid.
    let mut lv = LogicalVolume::new(
        "pvc-legacy",
        LogicalVolumeSpec {
            name: "pvc-legacy".into(),
            node_name: NODE.into(),
            size: k8s_openapi::apimachinery::pkg::api::resource::Quantity("32Mi".into()),
            device_class: Some(n.class.clone()),
            lvcreate_option_class: None,
            source: None,
            access_type: None,
        },
    );
    lv.metadata.finalizers = Some(vec!["topolvm.io/logicalvolume".into()]);
    lv.metadata.labels = Some(
        [(
            "app.kubernetes.io/created-by".into(),
            "topolvm-controller".into(),
        )]
        .into(),
    );
    let api = n.logical_volumes();
    let made = api
        .create(&PostParams::default(), &lv)
        .await
        .expect("LogicalVolume");
    let uid = made.metadata.uid.clone().expect("uid");
    let (ok, out) = lvm("lvcreate", &["-n", &uid, "-L", "32m", "-y", &n.class]);
    assert!(ok, "lvcreate: {out}");
    api.patch_status(
        "pvc-legacy",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"volumeID": uid, "currentSize": "32Mi"}})),
    )
    .await
    .expect("status as TopoLVM wrote it");
    n.restart_vg_manager(&[]);

    let mut ctl = n.controller().await;
    let grown = ctl
        .controller_expand_volume(ControllerExpandVolumeRequest {
            volume_id: uid.clone(),
            capacity_range: Some(CapacityRange {
                required_bytes: (48 * MIB) as i64,
                limit_bytes: 0,
            }),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("expand: {e}\n{}", n.op.log_text()))
        .into_inner();
    assert_eq!(grown.capacity_bytes as u64, 48 * MIB);
    assert_eq!(n.lvs().get(&uid), Some(&(48 * MIB)));
    ctl.delete_volume(DeleteVolumeRequest {
        volume_id: uid.clone(),
        ..Default::default()
    })
    .await
    .expect("delete");
    assert!(n.lvs().is_empty());
    let gone = eventually(T, || async {
        api.get_opt("pvc-legacy").await.ok().filter(Option::is_none)
    })
    .await;
    assert!(gone.is_some(), "the LogicalVolume was not removed");
}
