//! The CSI driver's thin volumes on a real kernel: the operator on the host serves the
//! controller, vg-manager in the guest realises its LogicalVolumes in an active thin pool. A
//! thin volume, a snapshot of it (read-only), a restore of the snapshot and a clone of the
//! volume are made through the operator's socket; lvm2 in the guest shows each as TopoLVM
//! makes them; all are deleted before the class is torn down.

use std::time::Duration;

use lvms::csi::proto::controller_client::ControllerClient;
use lvms::csi::proto::volume_content_source::{SnapshotSource, Type as Source, VolumeSource};
use lvms::csi::proto::{
    CreateSnapshotRequest, CreateVolumeRequest, DeleteSnapshotRequest, DeleteVolumeRequest,
    VolumeContentSource,
};
use serde_json::Value;
use tonic::transport::Channel;

use crate::group::Ctx;
use crate::node::{HostCtx, NodeRun, lv, run_node};
use crate::thin::{POOL, thin_class};

/// In the guest: wait for the four CSI volumes, record them, mark, wait until they are gone.
const GUEST: &str = r#"
tagged() { lvs --noheadings -o lv_name -S lv_tags=lvms-volume "$VG" 2>/dev/null | wc -l; }
i=0
until [ "$(tagged)" -ge 4 ]; do
  i=$((i+1)); [ $i -gt 600 ] && fail "the four CSI volumes never appeared" 16; sleep 1
done
lvs -a --reportformat json --units b --nosuffix \
  -o lv_name,lv_attr,lv_size,pool_lv,origin,lv_tags "$VG" >"$GUEST_OUT/lvs-csi.json"
echo "LVMS-JOB-MARK $JOB volumes-seen" >/dev/console
i=0
until [ "$(tagged)" -eq 0 ]; do
  i=$((i+1)); [ $i -gt 600 ] && fail "the CSI volumes were never removed" 17; sleep 1
done
"#;

/// A 64 MiB CreateVolume on `node` in class `vg`, optionally from a snapshot or volume.
fn request(name: &str, node: &str, vg: &str, source: Option<Source>) -> CreateVolumeRequest {
    let mut r = lvms_testkit::fixtures::csi::create_volume(name, node, vg, 64 << 20);
    r.volume_content_source = source.map(|t| VolumeContentSource { r#type: Some(t) });
    r
}

/// Software emulation: each lvm2 command ~0.5–1 s, so an RPC gets a generous deadline.
fn slow<T>(msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.set_timeout(Duration::from_secs(240));
    r
}

async fn controller(h: &HostCtx<'_>) -> ControllerClient<Channel> {
    let channel = lvms_testkit::eventually(Duration::from_secs(60), || async {
        lvms::csi::client::connect(&h.socket).await.ok()
    })
    .await
    .expect("the operator's CSI socket");
    ControllerClient::new(channel)
}

fn host(h: HostCtx<'_>) -> futures::future::BoxFuture<'_, ()> {
    Box::pin(async move {
        let vg = h.vg.clone();
        let mut c = controller(&h).await;
        let made =
            |r: Result<tonic::Response<lvms::csi::proto::CreateVolumeResponse>, tonic::Status>,
             what: &str| {
                r.unwrap_or_else(|e| panic!("{what}: {e}"))
                    .into_inner()
                    .volume
                    .expect("a volume")
                    .volume_id
            };
        let v = made(
            c.create_volume(slow(request("pvc-thin", &h.node, &vg, None)))
                .await,
            "thin volume",
        );
        let snap = c
            .create_snapshot(slow(CreateSnapshotRequest {
                source_volume_id: v.clone(),
                name: "snap-thin".into(),
                ..Default::default()
            }))
            .await
            .unwrap_or_else(|e| panic!("CreateSnapshot: {e}"))
            .into_inner()
            .snapshot
            .expect("a snapshot");
        assert!(snap.ready_to_use, "a thin snapshot is ready at once");
        let s = snap.snapshot_id;
        let restored = Source::Snapshot(SnapshotSource {
            snapshot_id: s.clone(),
        });
        let r = made(
            c.create_volume(slow(request("pvc-restore", &h.node, &vg, Some(restored))))
                .await,
            "restore",
        );
        let cloned = Source::Volume(VolumeSource {
            volume_id: v.clone(),
        });
        let k = made(
            c.create_volume(slow(request("pvc-clone", &h.node, &vg, Some(cloned))))
                .await,
            "clone",
        );
        std::fs::write(
            std::env::temp_dir().join(format!("lvms-csi-guest-ids-{}", std::process::id())),
            format!("{v} {s} {r} {k}"),
        )
        .expect("recording the ids");
        h.guest.mark("volumes-seen").await;
        for id in [&r, &k, &v] {
            c.delete_volume(slow(DeleteVolumeRequest {
                volume_id: id.to_string(),
                ..Default::default()
            }))
            .await
            .unwrap_or_else(|e| panic!("DeleteVolume {id}: {e}"));
        }
        c.delete_snapshot(slow(DeleteSnapshotRequest {
            snapshot_id: s,
            ..Default::default()
        }))
        .await
        .expect("DeleteSnapshot");
    })
}

/// Thin volume, snapshot, restore and clone through the CSI controller, realised by
/// vg-manager on a real kernel, then deleted.
pub async fn thin_volumes_snapshots_restores_and_clones_are_made_as_topolvm_makes_them(ctx: Ctx) {
    let vg = format!("x{}", std::process::id());
    let after = format!("VG={vg}\n{GUEST}");
    let r = run_node(
        ctx,
        NodeRun {
            pool: Some(POOL),
            after_ready: &after,
            host: Some(host),
            ..NodeRun::new(
                "csi-thin",
                &vg,
                thin_class(&vg, &["csi0"]),
                vec![("csi0", 512)],
            )
        },
    )
    .await;
    let ids = std::fs::read_to_string(
        std::env::temp_dir().join(format!("lvms-csi-guest-ids-{}", std::process::id())),
    )
    .expect("the ids the host recorded");
    let ids: Vec<&str> = ids.split_whitespace().collect();
    let (v, s, restore, clone) = (ids[0], ids[1], ids[2], ids[3]);
    let lvs: Value = serde_json::from_str(&r.out.read("lvs-csi.json")).expect("lvs json");
    let attr = |row: &Value| row["lv_attr"].as_str().unwrap_or_default().to_string();
    let vol = lv(&lvs, v);
    assert!(attr(&vol).starts_with('V'), "a thin volume: {vol}");
    assert_eq!(vol["pool_lv"], POOL, "in the class's pool: {vol}");
    assert!(
        vol["lv_tags"]
            .as_str()
            .unwrap_or_default()
            .contains("lvms-volume")
    );
    let snap = lv(&lvs, s);
    assert_eq!(
        snap["origin"], v,
        "the snapshot's origin is the volume: {snap}"
    );
    assert_eq!(
        attr(&snap).chars().nth(1),
        Some('r'),
        "a snapshot is read-only: {snap}"
    );
    let rest = lv(&lvs, restore);
    assert_eq!(
        rest["origin"], s,
        "a restore is a thin snapshot of the snapshot: {rest}"
    );
    assert_eq!(
        attr(&rest).chars().nth(1),
        Some('w'),
        "a restore is writable: {rest}"
    );
    assert_eq!(
        attr(&rest).chars().nth(4),
        Some('a'),
        "a restore is active: {rest}"
    );
    let cl = lv(&lvs, clone);
    assert_eq!(
        cl["origin"], v,
        "a clone is a thin snapshot of its source: {cl}"
    );
    assert_eq!(
        attr(&cl).chars().nth(4),
        Some('a'),
        "a clone is active: {cl}"
    );
}
