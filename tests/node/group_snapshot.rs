//! A VolumeGroupSnapshot of two claims taken under a Pod that writes to both, restored into
//! two new claims a Pod reads: consistent by the guest tier's checker
//! ([`lvms_testkit::consistency`]): record n+1 goes to one volume only once record n is durable
//! on the other, so a consistent pair has no record missing its predecessor.

use std::collections::BTreeMap;
use std::time::Duration;

use lvms_testkit::consistency::consistent;
use lvms_testkit::snapshots;
use serde_json::{Value, json};

use crate::ctx::{APPS, Ctx};
use crate::workloads::{BUSYBOX, pvc, pvc_from_snapshot};

/// A Pod with claims `data` at /d and `wal` at /w running `script` (its output is the
/// termination message).
fn two_claim_pod(name: &str, data: &str, wal: &str, script: &str, restart: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": APPS},
        "spec": {
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "app", "image": BUSYBOX, "imagePullPolicy": "Never",
                "command": ["sh", "-c", format!("( {script} ) >/dev/termination-log 2>&1")],
                "volumeMounts": [
                    {"name": "d", "mountPath": "/d"},
                    {"name": "w", "mountPath": "/w"}
                ]
            }],
            "volumes": [
                {"name": "d", "persistentVolumeClaim": {"claimName": data}},
                {"name": "w", "persistentVolumeClaim": {"claimName": wal}}
            ]
        }
    })
}

/// Record n to data (even n) or wal (odd n), each made durable before the next.
const WRITER: &str = r#"n=0
while :; do
  if [ $((n % 2)) -eq 0 ]; then f=/d/records; else f=/w/records; fi
  echo "$n" >>"$f"
  sync
  n=$((n+1))
done"#;

/// One line for the checker: `tag last_data last_wal data_records wal_records`.
const READER: &str = r#"last() { if [ -s "$1" ]; then tail -n1 "$1"; else echo -1; fi; }
count() { if [ -f "$1" ]; then wc -l <"$1" | tr -d ' '; else echo 0; fi; }
echo "1 $(last /d/records) $(last /w/records) $(count /d/records) $(count /w/records)""#;

pub async fn a_group_snapshot_under_a_writing_pod_restores_consistent(c: &mut Ctx) {
    // 300 MiB: xfs's minimum, so each member is what its claim asked for, and a restore of
    // the same size is not refused as smaller than the snapshot (csi-provisioner checks).
    for claim in ["g-data", "g-wal"] {
        let mut p = pvc(claim, "lvms-vg1", 300, false);
        p["metadata"]["labels"] = json!({"lvms-test/group": "g"});
        c.apply_json(p).await;
    }
    let writer = c
        .start_pod(two_claim_pod(
            "g-writer", "g-data", "g-wal", WRITER, "Never",
        ))
        .await;
    c.pod_running(&writer).await;
    // Let it write a while first.
    tokio::time::sleep(Duration::from_secs(20)).await;
    c.apply_json(json!({
        "apiVersion": "groupsnapshot.storage.k8s.io/v1", "kind": "VolumeGroupSnapshot",
        "metadata": {"name": "g1", "namespace": APPS},
        "spec": {
            "volumeGroupSnapshotClassName": "lvms-vg1",
            "source": {"selector": {"matchLabels": {"lvms-test/group": "g"}}}
        }
    }))
    .await;
    let uid = c
        .until(
            "the VolumeGroupSnapshot readyToUse",
            Duration::from_secs(300),
            |cl| async move {
                let g = snapshots::group_api(
                    &cl,
                    "volumegroupsnapshots",
                    "VolumeGroupSnapshot",
                    Some(APPS),
                )
                .get("g1")
                .await
                .ok()?;
                (g.data["status"]["readyToUse"] == true)
                    .then(|| g.metadata.uid.clone().unwrap_or_default())
            },
        )
        .await;
    // Its member VolumeSnapshots, by the claim each was taken of.
    let members: BTreeMap<String, String> = c
        .until(
            "the group's two member snapshots",
            Duration::from_secs(120),
            |cl| {
                let uid = uid.clone();
                async move {
                    let snaps =
                        snapshots::api(&cl, "volumesnapshots", "VolumeSnapshot", Some(APPS))
                            .list(&Default::default())
                            .await
                            .ok()?;
                    let m: BTreeMap<String, String> = snaps
                        .items
                        .iter()
                        .filter(|s| {
                            s.metadata
                                .owner_references
                                .iter()
                                .flatten()
                                .any(|o| o.uid == uid)
                        })
                        .filter_map(|s| {
                            Some((
                                s.data["spec"]["source"]["persistentVolumeClaimName"]
                                    .as_str()?
                                    .to_string(),
                                s.metadata.name.clone()?,
                            ))
                        })
                        .collect();
                    (m.len() == 2).then_some(m)
                }
            },
        )
        .await;
    c.delete_pod(&writer).await;
    for (claim, snap) in &members {
        c.apply_json(pvc_from_snapshot(
            &format!("r-{claim}"),
            "lvms-vg1",
            300,
            snap,
        ))
        .await;
    }
    let line = c
        .run_pod(two_claim_pod(
            "g-reader", "r-g-data", "r-g-wal", READER, "Never",
        ))
        .await;
    let (a, b) = consistent(line.trim()).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        a.max(b) >= 4,
        "the writer had written only up to {}",
        a.max(b)
    );
    println!("group snapshot consistent: data ends at record {a}, wal at {b}");
}
