//! Volumes as Pods use them: a filesystem claim (xfs and ext4) keeps its data across Pods and
//! gets the Pod's fsGroup, grows while mounted, a raw block claim, a generic ephemeral volume.

use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::ctx::{APPS, Ctx, NODE};
use crate::workloads::{ephemeral_pod, pod, pvc};

/// The claims later scenarios use (snapshot, stats, container kill, reboot): `data-xfs` in
/// `lvms-vg1`, `data-ext4` in `lvms-vg2`, each with /data/hello and an 8 MiB /data/blob.
pub const CLAIMS: [(&str, &str, &str); 2] = [
    ("data-xfs", "lvms-vg1", "xfs"),
    ("data-ext4", "lvms-vg2", "ext4"),
];

/// What the writer printed, line by line: fstype, the mount's group, the Pod's groups, the
/// blob's md5.
const WRITE: &str = r#"awk '$2 == "/data" {print $3}' /proc/mounts
stat -c %g /data
id -G
echo "hello from $(hostname)" >/data/hello
dd if=/dev/urandom of=/data/blob bs=1M count=8 2>/dev/null
md5sum /data/blob | cut -d' ' -f1
sync"#;

const READ: &str = r#"cat /data/hello
md5sum /data/blob | cut -d' ' -f1
stat -c %g /data/blob"#;

pub async fn data_written_by_one_pod_is_read_by_the_next_on_xfs_and_ext4(c: &mut Ctx) {
    for (claim, sc, fs) in CLAIMS {
        c.apply_json(pvc(claim, sc, 1024, false)).await;
        let out = c
            .run_pod(pod(&format!("write-{fs}"), claim, false, WRITE))
            .await;
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 4, "{fs} writer printed: {out}");
        assert_eq!(lines[0], fs, "the mounted filesystem");
        assert_eq!(
            lines[1], "2000",
            "the volume's group is the Pod's fsGroup ({fs})"
        );
        assert!(
            lines[2].split(' ').any(|g| g == "2000"),
            "the Pod runs with its fsGroup: {}",
            lines[2]
        );
        let md5 = lines[3];

        let pv = c.bound_pv(claim).await;
        let spec = pv.spec.expect("PV spec");
        let csi = spec.csi.expect("a CSI volume");
        assert_eq!(csi.driver, "topolvm.io");
        assert_eq!(csi.fs_type.as_deref(), Some(fs));
        let terms = serde_json::to_value(&spec.node_affinity).expect("affinity");
        assert_eq!(
            terms["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0], NODE,
            "the PV is pinned to the node the scheduler chose: {terms}"
        );

        let out = c
            .run_pod(pod(&format!("read-{fs}"), claim, false, READ))
            .await;
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{fs} reader printed: {out}");
        assert!(lines[0].starts_with("hello from write-"), "{out}");
        assert_eq!(lines[1], md5, "the blob read back ({fs})");
        assert_eq!(lines[2], "2000", "the file keeps the fsGroup ({fs})");
    }
}

/// The size `df` reports for /data, in KiB, once it is at least `want` (the Pod waits for it).
fn wait_for_size(want_kib: u64) -> String {
    format!(
        r#"i=0
while :; do
  s=$(df -Pk /data | awk 'NR==2 {{print $2}}')
  [ "$s" -ge {want_kib} ] && break
  i=$((i+1)); [ $i -lt 600 ] || {{ echo "still $s KiB"; exit 1; }}
  sleep 1
done
echo "$s""#
    )
}

pub async fn a_claim_grown_while_mounted_is_seen_grown_in_the_pod(c: &mut Ctx) {
    c.apply_json(pvc("grow", "lvms-vg1", 512, false)).await;
    // The Pod starts on 512 MiB (xfs shows about 490 MiB of it) and waits to see at least
    // 900 MiB (xfs shows 960 MiB of 1 GiB: its log is internal).
    let name = c
        .start_pod(pod("grow", "grow", false, &wait_for_size(900 * 1024)))
        .await;
    c.pod_running(&name).await;
    Api::<PersistentVolumeClaim>::namespaced(c.client.clone(), APPS)
        .patch(
            "grow",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": "1Gi"}}}})),
        )
        .await
        .expect("growing the claim");
    let grown = std::time::Instant::now();
    let (phase, out) = c.pod_end(&name).await;
    c.figures.push((
        "claim grown → the Pod sees the size".into(),
        grown.elapsed().as_secs_f64(),
    ));
    c.delete_pod(&name).await;
    assert_eq!(phase, "Succeeded", "the Pod never saw the new size: {out}");
    let kib: u64 = out
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("df said {out:?}"));
    assert!(kib >= 900 * 1024, "{kib} KiB");
    let status = c
        .until(
            "the claim's status at 1Gi",
            Duration::from_secs(120),
            |cl| async move {
                let p = Api::<PersistentVolumeClaim>::namespaced(cl, APPS)
                    .get("grow")
                    .await
                    .ok()?;
                let cap = p.status?.capacity?.get("storage")?.0.clone();
                (cap == "1Gi").then_some(cap)
            },
        )
        .await;
    assert_eq!(status, "1Gi");
}

pub async fn a_raw_block_claim_is_written_and_read_by_pods(c: &mut Ctx) {
    c.apply_json(pvc("raw", "lvms-vg1", 256, true)).await;
    let write = r#"dd if=/dev/urandom of=/tmp/x bs=1M count=4 2>/dev/null
dd if=/tmp/x of=/dev/xvda bs=1M conv=fsync 2>/dev/null
md5sum </tmp/x | cut -d' ' -f1
blockdev --getsize64 /dev/xvda"#;
    let out = c.run_pod(pod("raw-write", "raw", true, write)).await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert_eq!(lines[1], (256u64 << 20).to_string(), "the device's size");
    let read = "dd if=/dev/xvda bs=1M count=4 2>/dev/null | md5sum | cut -d' ' -f1";
    let again = c.run_pod(pod("raw-read", "raw", true, read)).await;
    assert_eq!(
        again.trim(),
        lines[0],
        "the block device kept what was written"
    );
}

pub async fn a_generic_ephemeral_volume_lives_and_goes_with_its_pod(c: &mut Ctx) {
    let script = r#"awk '$2 == "/data" {print $3}' /proc/mounts
echo x >/data/x && cat /data/x"#;
    let name = c
        .start_pod(ephemeral_pod("scratch", "lvms-vg2", 256, script))
        .await;
    let (phase, out) = c.pod_end(&name).await;
    assert_eq!(phase, "Succeeded", "{out}");
    assert_eq!(out.lines().collect::<Vec<_>>(), ["ext4", "x"], "{out}");
    // The claim is the Pod's (ephemeral-volume controller): it goes with it.
    let claim = Api::<PersistentVolumeClaim>::namespaced(c.client.clone(), APPS)
        .get("scratch-data")
        .await
        .expect("the ephemeral claim");
    let owners = claim.metadata.owner_references.unwrap_or_default();
    assert!(
        owners
            .iter()
            .any(|o| o.kind == "Pod" && o.name == "scratch")
    );
    c.delete_pod(&name).await;
    c.until(
        "the ephemeral claim gone with its Pod",
        Duration::from_secs(300),
        |cl| async move {
            let gone = Api::<PersistentVolumeClaim>::namespaced(cl, APPS)
                .get_opt("scratch-data")
                .await
                .ok()?
                .is_none();
            gone.then_some(())
        },
    )
    .await;
}
