//! The CSI boundary as a careless or hostile client meets it, on both of lvms's sockets: every
//! malformed request gets the spec's code and a message naming the field, nothing is left
//! behind, and nothing on the host is touched that is not the volume's.

use std::time::{Duration, Instant};

use kube::api::ListParams;
use lvms::csi::proto::controller_client::ControllerClient;
use lvms::csi::proto::volume_capability::{AccessType, MountVolume};
use lvms::csi::proto::{
    DeleteSnapshotRequest, NodeGetVolumeStatsRequest, NodeUnpublishVolumeRequest, Topology,
    TopologyRequirement,
};
use lvms_testkit::kubelet::plugin_watcher::KubeletConn;
use tonic::Code;
use tonic::transport::Channel;

use crate::common::{MIB, ThickNode, create_request, create_until_ok};

async fn logical_volume_names(n: &ThickNode) -> Vec<String> {
    n.logical_volumes()
        .list(&ListParams::default())
        .await
        .expect("list LogicalVolumes")
        .items
        .into_iter()
        .filter_map(|lv| lv.metadata.name)
        .collect()
}

/// An error of `code` whose message names `field`.
fn assert_refused<T: std::fmt::Debug>(
    got: Result<tonic::Response<T>, tonic::Status>,
    code: Code,
    field: &str,
    what: &str,
) {
    let e = got.expect_err(what);
    assert_eq!(e.code(), code, "{what}: {e:?}");
    assert!(e.message().contains(field), "{what}: {e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_refuses_bad_requests_precisely_and_leaves_nothing() {
    let n = ThickNode::start("csi-boundary", &[]).await;
    let mut ctl: ControllerClient<Channel> = n.controller().await;

    // Any client's :authority, on the controller's socket too.
    let mut raw = KubeletConn::connect(&n.op.csi_socket)
        .await
        .expect("controller socket");
    raw.unary("/csi.v1.Identity/GetPluginInfo", &[])
        .await
        .expect("the controller socket takes a path as :authority");

    // Names that cannot be object names: INVALID_ARGUMENT naming `name`, not the API
    // server's text as INTERNAL.
    let long = "a".repeat(300);
    for bad in ["../x", "-rf", long.as_str(), "UPPER_case", "nul\0x"] {
        let got = ctl
            .create_volume(create_request(bad, 8 * MIB, &n.class))
            .await;
        assert_refused(got, Code::InvalidArgument, "name", &format!("name {bad:?}"));
    }

    // A filesystem the node cannot make is refused at CreateVolume, not first at mount.
    let mut ntfs = create_request("pvc-ntfs", 8 * MIB, &n.class);
    ntfs.volume_capabilities[0].access_type = Some(AccessType::Mount(MountVolume {
        fs_type: "ntfs".into(),
        ..Default::default()
    }));
    assert_refused(
        ctl.create_volume(ntfs).await,
        Code::InvalidArgument,
        "fs_type",
        "ntfs",
    );

    // Pinned to a node that does not exist: refused at once, as TopoLVM does, no object left.
    let mut nowhere = create_request("pvc-nowhere", 8 * MIB, &n.class);
    let segment = Topology {
        segments: [(
            "topology.topolvm.io/node".to_string(),
            "no-such-node".to_string(),
        )]
        .into(),
    };
    nowhere.accessibility_requirements = Some(TopologyRequirement {
        requisite: vec![segment.clone()],
        preferred: vec![segment],
    });
    let started = Instant::now();
    assert_refused(
        ctl.create_volume(nowhere).await,
        Code::ResourceExhausted,
        "no-such-node",
        "a node that does not exist",
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "refused only after {:?}",
        started.elapsed()
    );

    // A grpc-timeout of more than the 8 digits gRPC allows: the server keeps serving.
    let mut odd = tonic::Request::new(create_request("pvc-odd-deadline", 8 * MIB, &n.class));
    odd.metadata_mut()
        .insert("grpc-timeout", "123456789S".parse().expect("metadata"));
    let id = match tokio::time::timeout(Duration::from_secs(60), ctl.create_volume(odd)).await {
        Ok(Ok(r)) => r.into_inner().volume.expect("a volume").volume_id,
        other => panic!("a long grpc-timeout was not served: {other:?}"),
    };

    // DeleteSnapshot given a volume's id deletes nothing.
    assert_refused(
        ctl.delete_snapshot(DeleteSnapshotRequest {
            snapshot_id: id.clone(),
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
        "snapshot_id",
        "DeleteSnapshot of a volume",
    );
    assert!(
        n.lvs().contains_key(&id),
        "the volume's LV went with a DeleteSnapshot: {:?}",
        n.lvs()
    );
    let names = logical_volume_names(&n).await;
    assert_eq!(
        names,
        ["pvc-odd-deadline"],
        "only the one valid claim has a LogicalVolume"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_rpcs_touch_only_the_volumes_own_paths() {
    let n = ThickNode::start("csi-node-paths", &[]).await;
    let id = create_until_ok(
        n.controller().await,
        create_request("pvc-paths", 16 * MIB, &n.class),
    )
    .await;
    let mut node = n.node().await;
    let unpublish = |target: &str| NodeUnpublishVolumeRequest {
        volume_id: id.clone(),
        target_path: target.into(),
    };

    // Not plain absolute paths: refused before anything runs.
    for bad in ["/", "-rf", "relative", "/var/lib/kubelet/../../etc"] {
        assert_refused(
            node.node_unpublish_volume(unpublish(bad)).await,
            Code::InvalidArgument,
            "target_path",
            &format!("unpublish {bad:?}"),
        );
    }

    // Someone else's mount at the target stays mounted (a tmpfs standing in for any).
    let other = n.s.dir.join("someone-elses");
    std::fs::create_dir_all(&other).expect("mkdir");
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "lvms-test"])
        .arg(&other)
        .status()
        .expect("mount");
    assert!(mounted.success(), "mount tmpfs at {}", other.display());
    let other_path = other.display().to_string();
    let got = node.node_unpublish_volume(unpublish(&other_path)).await;
    let still = lvms::csi::node::mountinfo::parse(
        &std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo"),
    )
    .expect("parse")
    .iter()
    .any(|m| m.mount_point == other_path);
    let _ = std::process::Command::new("umount").arg(&other).status();
    assert_refused(
        got,
        Code::FailedPrecondition,
        "target_path",
        "unpublish of another mount",
    );
    assert!(
        still,
        "unpublish unmounted a filesystem that is not the volume's"
    );

    // A host file named as a target is not deleted.
    let file = n.s.dir.join("passwd");
    std::fs::write(&file, "root:x:0:0").expect("write");
    assert_refused(
        node.node_unpublish_volume(unpublish(&file.display().to_string()))
            .await,
        Code::FailedPrecondition,
        "target_path",
        "unpublish of a host file",
    );
    assert!(file.exists(), "unpublish deleted a host file");

    // Stats answer only where the volume is published (nothing is, on this tier).
    for path in ["/etc", &n.s.dir.display().to_string()] {
        let got = node
            .node_get_volume_stats(NodeGetVolumeStatsRequest {
                volume_id: id.clone(),
                volume_path: path.to_string(),
                staging_target_path: String::new(),
            })
            .await;
        assert_refused(got, Code::NotFound, path, &format!("stats of {path}"));
    }
}
