//! The node service on a real kernel: claims made by csi-provisioner become volumes that
//! `lvms-dev kubelet` (kubelet's calls, in the guest) publishes through vg-manager's node
//! socket: an xfs and an ext4 filesystem formatted once and mounted, a raw block device bound
//! at its target, each written; VolumeSnapshots of the mounted volumes (snapshot-controller,
//! csi-snapshotter) restored into new claims that hold what was written before the snapshot
//! and nothing written after; a clone; online growth through csi-resizer and
//! NodeExpandVolume; NodeGetVolumeStats against `df`; unpublish; delete.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use lvms_journal::{Body, Journal};
use lvms_testkit::eventually;
use lvms_testkit::fixtures::csi::claim;
use lvms_testkit::snapshots;
use serde_json::{Value, json};

use crate::csi::{SIZE, SLOW, bound_handle, run_thin_csi, snapshot_ready};
use crate::group::Ctx;
use crate::node::HostCtx;

/// The size the two filesystems grow to.
const GROWN: &str = "400Mi";

/// In the guest, once the class is Ready: kubelet's part.
const GUEST: &str = include_str!("scripts/mount.sh");

/// A StorageClass of the scenario's device class with another filesystem.
fn storage_class(name: &str, vg: &str, fs_type: &str) -> StorageClass {
    serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "topolvm.io",
        "parameters": {"topolvm.io/device-class": vg, "csi.storage.k8s.io/fstype": fs_type},
        "allowVolumeExpansion": true,
        "volumeBindingMode": "WaitForFirstConsumer",
    }))
    .expect("a StorageClass")
}

fn host(h: HostCtx<'_>) -> futures::future::BoxFuture<'_, ()> {
    Box::pin(async move {
        let client = h.s.client.clone();
        let ns = h.s.ns.name.clone();
        snapshots::install_api(&client).await;
        let pp = PatchParams::apply("lvms-test").force();
        let class = format!("snap-{}", h.vg);
        snapshots::apply_class(&client, &class).await;
        let ext4 = format!("ext4-{}", h.vg);
        let scs: Api<StorageClass> = Api::all(client.clone());
        scs.create(&PostParams::default(), &storage_class(&ext4, &h.vg, "ext4"))
            .await
            .expect("the ext4 StorageClass");
        let kubeconfig = &lvms_testkit::env::env().cp.kubeconfig;
        let mut peers = snapshots::controllers(&h.socket, kubeconfig, &h.s.dir, "240s");
        peers.push(
            lvms_testkit::dev::csi_peers::Sidecar::start(
                "csi-resizer",
                &[
                    "--leader-election=false".into(),
                    "--timeout=240s".into(),
                    "--retry-interval-start=500ms".into(),
                    format!("--csi-address={}", h.socket.display()),
                ],
                &[],
                kubeconfig,
                &h.s.dir.join("csi-resizer.log"),
            )
            .unwrap_or_else(|e| panic!("{e}")),
        );
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
        let sc = format!("lvms-{}", h.vg);
        let make = |name: &'static str, class: &str, source: Option<Value>, block: bool| {
            let pvcs = pvcs.clone();
            let mut c = claim(name, class, SIZE, &h.node, source);
            if block {
                c.spec.as_mut().expect("spec").volume_mode = Some("Block".into());
            }
            async move { pvcs.create(&PostParams::default(), &c).await.expect(name) }
        };
        make("data", &sc, None, false).await;
        make("data4", &ext4, None, false).await;
        make("blk", &sc, None, true).await;
        h.guest.mark("written").await;

        let snaps = snapshots::api(&client, "volumesnapshots", "VolumeSnapshot", Some(&ns));
        for (snap, of) in [("snap", "data"), ("snap4", "data4")] {
            snaps
                .patch(
                    snap,
                    &pp,
                    &Patch::Apply(&snapshots::snapshot(snap, &class, of)),
                )
                .await
                .expect("VolumeSnapshot");
        }
        for snap in ["snap", "snap4"] {
            snapshot_ready(&snaps, snap, &peers).await;
        }
        // The clone before the growth (a clone asks at least its source's size).
        make(
            "clone",
            &sc,
            Some(json!({"kind": "PersistentVolumeClaim", "name": "data"})),
            false,
        )
        .await;
        bound_handle(&h, "clone", &peers).await;
        let grow = json!({"spec": {"resources": {"requests": {"storage": GROWN}}}});
        for v in ["data", "data4"] {
            pvcs.patch(v, &PatchParams::default(), &Patch::Merge(&grow))
                .await
                .expect("grow the claim");
        }
        let from = |snap: &str| {
            Some(
                json!({"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": snap}),
            )
        };
        make("restore", &sc, from("snap"), false).await;
        make("restore4", &ext4, from("snap4"), false).await;
        h.guest.mark("checked").await;

        for name in ["restore", "restore4", "clone", "blk"] {
            pvcs.delete(name, &DeleteParams::default())
                .await
                .expect(name);
        }
        for snap in ["snap", "snap4"] {
            snaps
                .delete(snap, &DeleteParams::default())
                .await
                .expect(snap);
        }
        for name in ["data", "data4"] {
            pvcs.delete(name, &DeleteParams::default())
                .await
                .expect(name);
        }
        let pvs: Api<k8s_openapi::api::core::v1::PersistentVolume> = Api::all(client.clone());
        let gone = eventually(SLOW, || async {
            let left = pvs.list(&ListParams::default()).await.ok()?.items.len();
            (left == 0).then_some(())
        })
        .await;
        assert!(gone.is_some(), "PVs stayed after their claims were deleted");
        drop(peers);
        snapshots::remove_api(&client).await;
        scs.delete(&ext4, &DeleteParams::default())
            .await
            .expect("delete the ext4 class");
    })
}

/// `df`'s figures for the data volume (size used avail itotal iused iavail) and the stats the
/// node service reported at the same moment.
fn assert_stats_match_df(stats: &Value, df: &str) {
    let df: Vec<i64> = df
        .split_whitespace()
        .map(|n| n.parse().expect("df figures"))
        .collect();
    let usage = |unit: &str| {
        stats["usage"]
            .as_array()
            .and_then(|u| u.iter().find(|x| x["unit"] == unit))
            .cloned()
            .unwrap_or_else(|| panic!("no {unit} usage in {stats}"))
    };
    let (b, i) = (usage("BYTES"), usage("INODES"));
    assert_eq!(
        [&b["total"], &b["used"], &b["available"]].map(|v| v.as_i64().unwrap_or(-1)),
        [df[0], df[1], df[2]],
        "bytes as df reports them: {stats}"
    );
    assert_eq!(
        [&i["total"], &i["used"], &i["available"]].map(|v| v.as_i64().unwrap_or(-1)),
        [df[3], df[4], df[5]],
        "inodes as df reports them: {stats}"
    );
    assert_eq!(stats["abnormal"], false, "{stats}");
}

/// Claims published as kubelet publishes them, on a real kernel: xfs and ext4 formatted once
/// and mounted, a block volume bound; snapshots restored with the data from before and not
/// after; a clone; online growth; stats equal to `df`; unpublished and deleted.
pub async fn published_volumes_are_formatted_once_mounted_snapshotted_restored_and_grown(ctx: Ctx) {
    let vg = format!("m{}", std::process::id());
    let r = run_thin_csi(
        ctx,
        "csi-mount",
        &vg,
        ("mnt0", 1024),
        GUEST,
        Vec::new(),
        host,
    )
    .await;
    let out = &r.out;
    assert_eq!(
        out.read("fstype-data").trim(),
        "TYPE=xfs",
        "the class's fstype"
    );
    assert_eq!(
        out.read("fstype-data4").trim(),
        "TYPE=ext4",
        "the StorageClass's fstype"
    );
    assert_eq!(
        out.read("mode-data").trim(),
        "2777",
        "a fresh filesystem's root"
    );
    let published = out.read("mounts-published.txt");
    assert!(
        published.contains("/mnt/kubelet/data ") && published.contains("nouuid"),
        "xfs mounted with nouuid: {published}"
    );
    assert!(published.contains("/mnt/kubelet/blk "), "{published}");
    assert_eq!(
        out.read("block-ok").trim(),
        "ok",
        "the block volume reads back"
    );
    for restored in ["restore", "restore4"] {
        assert_eq!(
            out.read(&format!("check-{restored}")).trim(),
            "before\ndone",
            "{restored} holds what was written before the snapshot and nothing after"
        );
    }
    assert!(
        out.read("check-clone").starts_with("before"),
        "the clone holds its source's data"
    );
    for v in ["data", "data4"] {
        let size = |f: &str| -> u64 { out.read(&format!("{f}-{v}")).trim().parse().expect(f) };
        assert!(
            size("size-after") > size("size-before") + (64 << 20),
            "{v}'s filesystem grew online: {} → {}",
            size("size-before"),
            size("size-after")
        );
    }
    let stats: Value = serde_json::from_str(out.read("stats-data.json").trim()).expect("stats");
    assert_stats_match_df(&stats, &out.read("df-data.txt"));
    let blk: Value = serde_json::from_str(out.read("stats-blk.json").trim()).expect("stats");
    assert_eq!(
        blk["usage"][0]["total"].as_i64(),
        Some(300 << 20),
        "a block volume reports its size: {blk}"
    );
    assert_eq!(
        out.read("mounts-after.txt").trim(),
        "",
        "every target unmounted"
    );
    assert_eq!(
        out.read("targets-after.txt").trim(),
        "",
        "every target removed"
    );

    // The journal: one format per fresh volume (data, data4; never a restore or clone), one
    // mount per publish, nothing open.
    let (j, intents) = crate::node::journal_intents(&out.out, "csi-node");
    let count = |action: &str| intents.iter().filter(|i| i.action == action).count();
    assert_eq!(
        count("format"),
        2,
        "data and data4 formatted, once each: {intents:#?}"
    );
    assert_eq!(count("mount"), 6, "one mount per publish");
    assert_eq!(count("unmount"), 6, "one unmount per published volume");
    assert_eq!(count("resize-filesystem"), 2);
    assert!(j.open_intents().expect("open intents").is_empty());
}

/// In the guest: vg-manager SIGKILLed after mkfs and before the format's outcome, then after
/// the mount and before its outcome; kubelet's publish is retried across each restart.
const CRASH_GUEST: &str = include_str!("scripts/mount-crash.sh");

fn crash_host(h: HostCtx<'_>) -> futures::future::BoxFuture<'_, ()> {
    Box::pin(async move {
        let kubeconfig = &lvms_testkit::env::env().cp.kubeconfig;
        let provisioner = lvms_testkit::dev::csi_peers::Sidecar::start(
            "csi-provisioner",
            &[
                "--feature-gates=Topology=true".into(),
                "--extra-create-metadata".into(),
                "--leader-election=false".into(),
                "--retry-interval-start=500ms".into(),
                "--retry-interval-max=5s".into(),
                "--timeout=240s".into(),
                format!("--csi-address={}", h.socket.display()),
            ],
            &[],
            kubeconfig,
            &h.s.dir.join("csi-provisioner.log"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(h.s.client.clone(), &h.s.ns.name);
        pvcs.create(
            &PostParams::default(),
            &claim("one", &format!("lvms-{}", h.vg), SIZE, &h.node, None),
        )
        .await
        .expect("claim");
        h.guest.mark("checked").await;
        pvcs.delete("one", &DeleteParams::default())
            .await
            .expect("delete");
        let pvs: Api<k8s_openapi::api::core::v1::PersistentVolume> = Api::all(h.s.client.clone());
        let gone = eventually(SLOW, || async {
            (pvs.list(&ListParams::default())
                .await
                .ok()?
                .items
                .is_empty())
            .then_some(())
        })
        .await;
        assert!(gone.is_some(), "the PV stayed after its claim was deleted");
        drop(provisioner);
    })
}

/// SIGKILL of vg-manager after mkfs and before the format's outcome, and after the mount and
/// before its outcome: after each restart kubelet's retried publish succeeds, the device was
/// formatted once (same filesystem UUID), the target is mounted once, the data written before
/// the second kill is there, and replay closed each open intent as already done. Then a SIGKILL
/// after an unmount whose unpublish is never retried: the next start removes the idle gate.
pub async fn sigkill_after_format_or_mount_never_formats_twice_or_mounts_twice(ctx: Ctx) {
    let vg = format!("k{}", std::process::id());
    let r = run_thin_csi(
        ctx,
        "csi-mount-crash",
        &vg,
        ("mntk0", 512),
        CRASH_GUEST,
        Vec::new(),
        crash_host,
    )
    .await;
    let out = &r.out;
    for tag in ["format", "mount"] {
        assert_eq!(
            out.read(&format!("status-{tag}")).trim(),
            "137",
            "vg-manager SIGKILLed itself at the {tag} crash point"
        );
    }
    let uuid = out.read("uuid-killed-format");
    assert!(
        uuid.starts_with("UUID="),
        "mkfs ran before the kill: {uuid}"
    );
    for f in ["uuid-format", "uuid-killed-mount", "uuid-mount"] {
        assert_eq!(out.read(f), uuid, "{f}: never formatted again");
    }
    assert_eq!(out.read("mounts-killed-format").trim(), "0");
    assert_eq!(out.read("mounts-format").trim(), "1");
    assert_eq!(
        out.read("mounts-killed-mount").trim(),
        "1",
        "mounted before the kill"
    );
    assert_eq!(
        out.read("mounts-mount").trim(),
        "1",
        "and not mounted again"
    );
    assert_eq!(out.read("data-after").trim(), "written before the kill");

    let j = Journal::open_copy(out.out.join("journal/vg-manager")).expect("the guest's journal");
    let recs: Vec<_> = j.iter().filter_map(Result::ok).collect();
    let intents: Vec<_> = recs
        .iter()
        .filter(|r| matches!(&r.body, Body::Intent(i) if i.unit == "csi-node"))
        .collect();
    let of = |action: &str| -> Vec<_> {
        intents
            .iter()
            .filter(|r| matches!(&r.body, Body::Intent(i) if i.action == action))
            .collect()
    };
    let verdict = |seq| {
        recs.iter().find_map(|o| match &o.body {
            Body::Outcome(d) if d.intent_seq == seq => Some(
                d.result
                    .done()
                    .and_then(|d| d.replay)
                    .map(|v| v.as_str().to_string()),
            ),
            _ => None,
        })
    };
    let formats = of("format");
    assert_eq!(formats.len(), 1, "one format: {intents:#?}");
    assert_eq!(
        verdict(formats[0].seq),
        Some(Some("already-done".into())),
        "replay found the filesystem the killed life made"
    );
    let mounts = of("mount");
    assert_eq!(
        mounts.len(),
        2,
        "one mount per publish that mounted: {intents:#?}"
    );
    assert_eq!(verdict(mounts[1].seq), Some(Some("already-done".into())));

    // Killed after an unmount, no retry: the gate stayed, idle, until the next start's sweep.
    assert_eq!(out.read("status-unmount").trim(), "137");
    assert_eq!(out.read("mounts-killed-unmount").trim(), "0");
    assert_eq!(
        out.read("gates-killed-unmount").trim(),
        "1",
        "the kill left the gate"
    );
    let unmounts = of("unmount");
    let killed = unmounts
        .iter()
        .find(|r| verdict(r.seq) == Some(Some("already-done".into())))
        .unwrap_or_else(|| panic!("no unmount replayed as already done: {unmounts:#?}"));
    let swept = of("gate-remove")
        .into_iter()
        .filter(|r| r.seq > killed.seq)
        .collect::<Vec<_>>();
    assert_eq!(
        swept.len(),
        1,
        "one removal of the idle gate after the killed unmount: {intents:#?}"
    );
    assert_eq!(
        verdict(swept[0].seq),
        Some(None),
        "the removal was taken by the sweep, not replayed"
    );
    assert!(j.open_intents().expect("open intents").is_empty());
}
