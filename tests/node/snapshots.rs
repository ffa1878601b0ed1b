//! A VolumeSnapshot of a claim restored into a new claim that a Pod reads.

use std::time::Duration;

use lvms_testkit::snapshots;

use crate::ctx::{APPS, Ctx};
use crate::workloads::{pod, pvc_from_snapshot};

pub async fn a_snapshot_is_restored_into_a_claim_a_pod_reads(c: &mut Ctx) {
    // The claim the volumes scenario wrote, in the thin class; its VolumeSnapshotClass is the
    // operator's (same name as the class's StorageClass).
    let before = c
        .run_pod(pod(
            "snap-source",
            "data-xfs",
            false,
            "cat /data/hello; md5sum /data/blob | cut -d' ' -f1",
        ))
        .await;
    let mut snap = snapshots::snapshot("data-xfs-1", "lvms-vg1", "data-xfs");
    snap["metadata"]["namespace"] = APPS.into();
    c.apply_json(snap).await;
    c.until(
        "the VolumeSnapshot readyToUse",
        Duration::from_secs(300),
        |cl| async move {
            let s = snapshots::api(&cl, "volumesnapshots", "VolumeSnapshot", Some(APPS))
                .get("data-xfs-1")
                .await
                .ok()?;
            (s.data["status"]["readyToUse"] == true).then_some(())
        },
    )
    .await;
    c.apply_json(pvc_from_snapshot(
        "restored",
        "lvms-vg1",
        1024,
        "data-xfs-1",
    ))
    .await;
    let after = c
        .run_pod(pod(
            "snap-restored",
            "restored",
            false,
            "cat /data/hello; md5sum /data/blob | cut -d' ' -f1",
        ))
        .await;
    assert_eq!(
        after, before,
        "the restored claim holds what the source held"
    );
}
