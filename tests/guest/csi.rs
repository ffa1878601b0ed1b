//! The CSI driver's thin volumes on a real kernel, through the upstream controllers: the
//! operator on the host serves the controller, vg-manager in the guest realises its
//! LogicalVolumes in an active thin pool. A claim (csi-provisioner), a VolumeSnapshot of it
//! (snapshot-controller + csi-snapshotter, read-only), a claim restored from the snapshot and a
//! claim cloned from the first are made as a user makes them; lvm2 in the guest shows each as
//! TopoLVM makes them; all are deleted before the class is torn down.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use lvms_testkit::eventually;
use lvms_testkit::fixtures::csi::claim;
use lvms_testkit::snapshots;
use serde_json::{Value, json};

use crate::group::Ctx;
use crate::node::{HostCtx, NodeRun, lv, run_node};
use crate::thin::{POOL, thin_class};

/// In the guest: wait for the four CSI volumes, record them, mark, wait until they are gone.
const GUEST: &str = include_str!("scripts/csi-thin.sh");

/// Software emulation: each lvm2 command ~0.5–1 s, so every wait is generous.
pub const SLOW: Duration = Duration::from_secs(300);

/// TopoLVM's minimum for xfs (the class's filesystem): every claim is this size.
pub const SIZE: &str = "300Mi";

/// The bound VolumeSnapshotContent of VolumeSnapshot `name` once it is ready to use.
pub async fn snapshot_ready(
    snaps: &Api<kube::api::DynamicObject>,
    name: &str,
    peers: &[lvms_testkit::dev::csi_peers::Sidecar],
) -> String {
    let content = eventually(SLOW, || async {
        let s = snaps.get(name).await.ok()?;
        let status = s.data.get("status")?;
        (status["readyToUse"] == true)
            .then(|| {
                status["boundVolumeSnapshotContentName"]
                    .as_str()
                    .map(String::from)
            })
            .flatten()
    })
    .await;
    content.unwrap_or_else(|| {
        panic!(
            "snapshot {name} never ready; csi-snapshotter log:\n{}",
            lvms_testkit::process::tail(&peers[1].log_text(), 30)
        )
    })
}

/// The claim's volume handle once it is Bound (the LV's name in the guest).
pub async fn bound_handle(
    h: &HostCtx<'_>,
    name: &str,
    logs: &[lvms_testkit::dev::csi_peers::Sidecar],
) -> String {
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(h.s.client.clone(), &h.s.ns.name);
    let pvs: Api<PersistentVolume> = Api::all(h.s.client.clone());
    let got = eventually(SLOW, || async {
        let c = pvcs.get(name).await.ok()?;
        if c.status.as_ref()?.phase.as_deref() != Some("Bound") {
            return None;
        }
        let pv = pvs
            .get(c.spec.as_ref()?.volume_name.as_deref()?)
            .await
            .ok()?;
        Some(pv.spec?.csi?.volume_handle)
    })
    .await;
    got.unwrap_or_else(|| {
        panic!(
            "claim {name} never Bound;{}",
            logs.iter()
                .map(|l| format!(
                    "\n{} log:\n{}",
                    l.name,
                    lvms_testkit::process::tail(&l.log_text(), 20)
                ))
                .collect::<String>()
        )
    })
}

fn host(h: HostCtx<'_>) -> futures::future::BoxFuture<'_, ()> {
    Box::pin(async move {
        let client = h.s.client.clone();
        let ns = h.s.ns.name.clone();
        snapshots::install_api(&client).await;
        // The operator found no snapshot API when it started, so it made no class: the test
        // makes one as a user would.
        let class = format!("snap-{}", h.vg);
        let pp = PatchParams::apply("lvms-test").force();
        snapshots::apply_class(&client, &class).await;
        let kubeconfig = &lvms_testkit::env::env().cp.kubeconfig;
        let peers = snapshots::controllers(&h.socket, kubeconfig, &h.s.dir, "240s");
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
        let sc = format!("lvms-{}", h.vg);
        let make = |name: &'static str, source: Option<Value>| {
            let pvcs = pvcs.clone();
            let c = claim(name, &sc, SIZE, &h.node, source);
            async move { pvcs.create(&PostParams::default(), &c).await.expect(name) }
        };
        make("data", None).await;
        let v = bound_handle(&h, "data", &peers).await;

        let snaps = snapshots::api(&client, "volumesnapshots", "VolumeSnapshot", Some(&ns));
        snaps
            .patch(
                "snap",
                &pp,
                &Patch::Apply(&snapshots::snapshot("snap", &class, "data")),
            )
            .await
            .expect("VolumeSnapshot");
        let content = snapshot_ready(&snaps, "snap", &peers).await;
        let contents = snapshots::api(
            &client,
            "volumesnapshotcontents",
            "VolumeSnapshotContent",
            None,
        );
        let s = contents
            .get(&content)
            .await
            .expect("VolumeSnapshotContent")
            .data["status"]["snapshotHandle"]
            .as_str()
            .expect("a snapshot handle")
            .to_string();

        make(
            "restore",
            Some(json!({"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "snap"})),
        )
        .await;
        make(
            "clone",
            Some(json!({"kind": "PersistentVolumeClaim", "name": "data"})),
        )
        .await;
        let r = bound_handle(&h, "restore", &peers).await;
        let k = bound_handle(&h, "clone", &peers).await;
        std::fs::write(
            std::env::temp_dir().join(format!("lvms-csi-guest-ids-{}", std::process::id())),
            format!("{v} {s} {r} {k}"),
        )
        .expect("recording the ids");
        h.guest.mark("volumes-seen").await;

        // Delete as a user does: the restore and the clone, the snapshot, then the claim.
        for name in ["restore", "clone"] {
            pvcs.delete(name, &DeleteParams::default())
                .await
                .expect(name);
        }
        snaps
            .delete("snap", &DeleteParams::default())
            .await
            .expect("delete snapshot");
        pvcs.delete("data", &DeleteParams::default())
            .await
            .expect("delete data");
        let pvs: Api<PersistentVolume> = Api::all(client.clone());
        let gone = eventually(SLOW, || async {
            let left = pvs.list(&ListParams::default()).await.ok()?.items.len()
                + contents
                    .list(&ListParams::default())
                    .await
                    .ok()?
                    .items
                    .len();
            (left == 0).then_some(())
        })
        .await;
        assert!(
            gone.is_some(),
            "PVs or snapshot contents stayed; provisioner log:\n{}",
            lvms_testkit::process::tail(&peers[2].log_text(), 30)
        );
        drop(peers);
        snapshots::remove_api(&client).await;
    })
}

/// One CSI scenario on a thin class of its own (one disk): `after` (a script file's text,
/// reading node.sh's variables and those of `env`) runs in the guest once the class is Ready,
/// `host` on the host meanwhile.
pub async fn run_thin_csi(
    ctx: Ctx,
    name: &str,
    vg: &str,
    disk: (&str, u64),
    after: &str,
    env: Vec<(&'static str, String)>,
    host: crate::node::HostHook,
) -> crate::node::NodeResult {
    run_node(
        ctx,
        NodeRun {
            pool: Some(POOL),
            after_ready: after,
            env,
            host: Some(host),
            ..NodeRun::new(name, vg, thin_class(vg, &[disk.0]), vec![disk])
        },
    )
    .await
}

/// A thin claim, a VolumeSnapshot of it, a claim restored from it and a clone, through
/// csi-provisioner, snapshot-controller and csi-snapshotter, realised by vg-manager on a real
/// kernel, then deleted.
pub async fn thin_volumes_snapshots_restores_and_clones_are_made_as_topolvm_makes_them(ctx: Ctx) {
    let vg = format!("x{}", std::process::id());
    // The states a killed lvm2 leaves in a pool, made at the first two snapshots (the
    // snapshot's and the restore's or clone's): vg-manager repairs them and nothing shows.
    let r = run_node(
        ctx,
        NodeRun {
            pool: Some(POOL),
            prepare: include_str!("scripts/thin-faults.sh"),
            after_ready: GUEST,
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
    let log = r.out.read("vg-manager.log");
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains(" WARN ")).collect();
    let warnings = lvms_testkit::process::tail(&warnings.join("\n"), 30);
    assert!(
        log.contains("thin device in the pool under no LV") && r.out.read("stray-id").trim() != "",
        "the stray device was deleted by vg-manager: {warnings}"
    );
    assert!(
        log.contains("thin LV without its device in the pool")
            && r.out.read("hollow-lv").trim() != "",
        "the hollow LV (guest: {:?}) was made again by vg-manager: {warnings}",
        r.out.read("hollow-lv")
    );
    let ids = r.out.read("thin-ids");
    let (kernel, lvm) = ids.split_once('\n').expect("two lines");
    assert_eq!(
        kernel.trim(),
        lvm.trim(),
        "the pool's devices are exactly lvm2's thin volumes"
    );
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
