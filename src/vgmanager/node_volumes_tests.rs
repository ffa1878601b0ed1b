//! The node service on a fake host: what a stats call and a first publish cost in host
//! commands.

use std::sync::Arc;

use kube::runtime::reflector;
use lvms_journal::Journal;

use super::HostVolumes;
use crate::csi::node::publish::{Kind, PublishSpec};
use crate::csi::node::service::NodeVolumes;
use crate::vgmanager::context::NodeCtx;
use crate::vgmanager::fake_host::{Answer, FakeHost};
use crate::vgmanager::host::{HostOps, program_name};
use crate::vgmanager::node_api::RecordingApi;

const LVMD: &str = "device-classes:
- name: vg1
  volume-group: vg1
  default: true
  spare-gb: 0
";
/// Two active LVs, each published at its own path through its gate.
const LVS: &str = r#"{"report": [{"lv": [
  {"lv_name":"lv1", "vg_name":"vg1", "pool_lv":"", "lv_attr":"-wi-ao----", "lv_size":"41943040", "metadata_percent":"", "chunk_size":"0", "lv_metadata_size":"", "sync_percent":"", "lv_health_status":"", "lv_layout":"linear", "raid_sync_action":""},
  {"lv_name":"lv2", "vg_name":"vg1", "pool_lv":"", "lv_attr":"-wi-ao----", "lv_size":"41943040", "metadata_percent":"", "chunk_size":"0", "lv_metadata_size":"", "sync_percent":"", "lv_health_status":"", "lv_layout":"linear", "raid_sync_action":""},
  {"lv_name":"lv3", "vg_name":"vg1", "pool_lv":"", "lv_attr":"-wi-a-----", "lv_size":"41943040", "metadata_percent":"", "chunk_size":"0", "lv_metadata_size":"", "sync_percent":"", "lv_health_status":"", "lv_layout":"linear", "raid_sync_action":""}
]}]}"#;
const TARGET_1: &str = "/var/lib/kubelet/pods/p1/volumes/kubernetes.io~csi/pv-1/mount";
const TARGET_2: &str = "/var/lib/kubelet/pods/p2/volumes/kubernetes.io~csi/pv-2/mount";

struct Rig {
    host: Arc<FakeHost>,
    volumes: HostVolumes,
    _dir: tempfile::TempDir,
}

fn rig() -> Rig {
    let dir = tempfile::tempdir().expect("tempdir");
    let host = Arc::new(FakeHost::default());
    let lvmd_path = dir.path().join("lvmd.yaml");
    host.write_atomic(&lvmd_path, LVMD, 0o644)
        .expect("lvmd.yaml");
    host.stdout("lvs", LVS).mounts(format!(
        "22 1 0:21 / / rw,relatime - tmpfs rootfs rw\n\
         35 22 254:3 / {TARGET_1} rw,relatime - xfs /dev/mapper/lvms-lv1 rw\n\
         36 22 254:4 / {TARGET_2} rw,relatime - xfs /dev/mapper/lvms-lv2 rw\n"
    ));
    host.block_device("/dev/mapper/lvms-lv1", "254:3")
        .block_device("/dev/mapper/lvms-lv2", "254:4")
        .block_device("/dev/vg1/lv1", "254:1")
        .block_device("/dev/vg1/lv2", "254:2")
        .block_device("/dev/vg1/lv3", "254:5");
    let journal = Arc::new(Journal::open(dir.path().join("journal")).expect("journal"));
    // No read here may need the API: its client reaches nothing.
    let ctx = Arc::new(NodeCtx::for_tests(
        host.clone(),
        Arc::new(RecordingApi::default()),
        lvmd_path,
        reflector::store().0,
    ));
    Rig {
        host,
        volumes: HostVolumes::new(ctx, journal),
        _dir: dir,
    }
}

/// The programs the fake host ran, in order.
fn programs(r: &Rig) -> Vec<String> {
    r.host
        .calls()
        .iter()
        .filter_map(|c| program_name(c))
        .collect()
}

/// What kubelet does for each mounted volume every stats period: the published check, then
/// the LV's condition.
async fn stats(r: &Rig, id: &str, path: &str) -> Option<String> {
    r.volumes.published_at(id, path).await.expect("published");
    r.volumes.lv_attr(id).await.expect("lv_attr")
}

#[tokio::test]
async fn stats_of_mounted_volumes_run_one_lvm2_report_between_them_and_nothing_else() {
    let r = rig();
    for _ in 0..3 {
        assert_eq!(
            stats(&r, "lv1", TARGET_1).await.as_deref(),
            Some("-wi-ao----")
        );
        assert_eq!(
            stats(&r, "lv2", TARGET_2).await.as_deref(),
            Some("-wi-ao----")
        );
    }
    assert_eq!(programs(&r), ["lvs"], "{:?}", r.host.calls());
}

#[tokio::test]
async fn a_path_mounted_from_another_device_is_still_read_in_full_and_refused() {
    let r = rig();
    // lv2's path, asked as lv1's: the gate's number does not match, so the full read decides.
    let e = r
        .volumes
        .published_at("lv1", TARGET_2)
        .await
        .expect_err("not lv1's mount");
    assert!(
        e.message.contains("is not where volume lv1 is published"),
        "{}",
        e.message
    );
    assert!(
        programs(&r).contains(&"dmsetup".to_string()),
        "{:?}",
        r.host.calls()
    );
}

#[tokio::test]
async fn a_first_publish_looks_for_the_gate_once_and_runs_nothing_it_need_not() {
    let r = rig();
    // No signature anywhere yet (blkid's exit 2), no device-mapper device.
    r.host.answer("blkid", [Answer::Fails(2, String::new())]);
    let spec = PublishSpec {
        volume_id: "lv3".into(),
        target: "/var/lib/kubelet/pods/p3/volumes/kubernetes.io~csi/pv-3/mount".into(),
        kind: Kind::Filesystem {
            fs_type: "xfs".into(),
            options: vec!["nouuid".into()],
        },
        readonly: false,
    };
    r.volumes.publish(&spec).await.expect("publish");
    // The LV, the gate looked for (none), the LV's signature (buffers flushed, then blkid); the
    // gate made; the guard next to mkfs (kept: a signature seen then is never formatted over),
    // mkfs, the mount. No second look for the gate: the lock held since the first says.
    assert_eq!(
        programs(&r),
        [
            "lvs", "dmsetup", "blockdev", "blkid", "dmsetup", "dmsetup", "blockdev", "blkid",
            "mkfs.xfs", "mount"
        ],
        "{:?}",
        r.host.calls()
    );
    let calls = r.host.calls();
    assert_eq!(
        calls[4][1..3],
        ["create".to_string(), "lvms-lv3".to_string()],
        "{calls:?}"
    );
}
