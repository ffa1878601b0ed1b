use std::path::Path;
use std::time::Duration;

use kube::api::{Api, DeleteParams};
use lvms::api::{LVMStateType, VGStatusType};
use lvms_journal::{Body, Journal};
use lvms_testkit::dev::operator::OperatorProcess;
use serde_json::json;

use lvms_testkit::disks::{Disk, pvs_of, require_prerequisites, vg_names};
use lvms_testkit::events::assert_no_duplicate_events;
use lvms_testkit::fixtures::{host_selector, lvm_cluster, thick_class};
use lvms_testkit::kubelet::{create_node, register_csi_node};
use lvms_testkit::{Scenario, eventually};

const T: Duration = Duration::from_secs(60);

fn lvmd(s: &Scenario, node: &str) -> Option<String> {
    std::fs::read_to_string(s.lvmd_path(node)).ok()
}

fn journal_intents(journal: &Path, action: &str) -> Vec<(u64, Option<String>)> {
    let j = Journal::open_copy(journal).expect("vg-manager journal");
    let recs: Vec<_> = j.iter().filter_map(Result::ok).collect();
    recs.iter()
        .filter_map(|r| match &r.body {
            Body::Intent(i) if i.action == action => {
                let replay = recs.iter().find_map(|o| match &o.body {
                    Body::Outcome(out) if out.intent_seq == r.seq => out
                        .result
                        .done()
                        .and_then(|d| d.replay)
                        .map(|v| v.as_str().to_string()),
                    _ => None,
                });
                Some((r.seq, replay))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_reach_ready_extend_reduce_and_tear_down() {
    require_prerequisites();
    let s = Scenario::new("vgm-e2e").await;
    let pid = std::process::id();
    let (vga, vgb) = (format!("a{pid}"), format!("b{pid}"));
    let disks = s.dir.join("disks");
    let a1 = Disk::new(&disks, "a1", 200);
    let a2 = Disk::new(&disks, "a2", 200);
    let fs = Disk::new(&disks, "fs", 64);
    let ro = Disk::read_only(&disks, "ro", 64);
    let pt = Disk::with_partition_table(&disks, "pt", 64);
    let b1 = Disk::new(&disks, "b1", 200);
    let mkfs = std::process::Command::new("mkfs.ext4")
        .args(["-q", "-F", &fs.loop_dev])
        .output()
        .expect("mkfs.ext4");
    assert!(
        mkfs.status.success(),
        "mkfs.ext4: {}",
        String::from_utf8_lossy(&mkfs.stderr)
    );

    for n in ["node-a", "node-b"] {
        create_node(&s.client, n, false).await;
        register_csi_node(&s.client, n, true).await;
    }
    let _op = s.operator(&[], &[]);
    let _va = s.vg_manager("node-a", &[]);
    let _vb = s.vg_manager("node-b", &[]);
    s.create_cluster(lvm_cluster(
        "my-lvmcluster",
        json!([
            {"name": vga, "default": true, "nodeSelector": host_selector("node-a"),
             "deviceSelector": {"paths": [a1.link], "optionalPaths": [fs.link, ro.link, pt.link]}},
            {"name": vgb, "nodeSelector": host_selector("node-b"),
             "deviceSelector": {"paths": [b1.link]}}
        ]),
    ))
    .await;

    let ea = s.ready_vg_entry("node-a", &vga, T, |_| true).await;
    assert_eq!(ea.devices, vec![a1.loop_dev.clone()]);
    let fs_excluded = ea
        .excluded
        .iter()
        .find(|x| x.name == fs.loop_dev)
        .expect("the ext4 disk is listed as excluded");
    assert!(
        fs_excluded.reasons.iter().any(|r| r.contains("ext4")),
        "reason should name the filesystem: {:?}",
        fs_excluded.reasons
    );
    let reasons = |dev: &str| -> Vec<String> {
        ea.excluded
            .iter()
            .find(|x| x.name == dev)
            .map(|x| x.reasons.clone())
            .unwrap_or_else(|| panic!("{dev} not listed as excluded: {:#?}", ea.excluded))
    };
    assert!(
        reasons(&ro.loop_dev)
            .iter()
            .any(|r| r.contains("read-only")),
        "{:?}",
        reasons(&ro.loop_dev)
    );
    assert!(
        reasons(&pt.loop_dev)
            .iter()
            .any(|r| r.contains("has a dos partition table")),
        "{:?}",
        reasons(&pt.loop_dev)
    );
    assert!(
        reasons(&b1.loop_dev)
            .iter()
            .any(|r| r.contains("not part of the device selector")),
        "{:?}",
        reasons(&b1.loop_dev)
    );
    let eb = s.ready_vg_entry("node-b", &vgb, T, |_| true).await;
    // node-a's /metrics: its class's VG gauges, as of the pass that made it Ready.
    let (code, text) = _va
        .metrics_get(&s.metrics_token().await)
        .expect("GET /metrics");
    assert_eq!(code, 200, "{text}");
    std::fs::write(s.dir.join("metrics-node-a.txt"), &text).expect("keeping the scrape");
    let m = lvms::telemetry::metrics::exposition::parse(&text).unwrap_or_else(|e| panic!("{e}"));
    let at = [("device_class", vga.as_str()), ("node", "node-a")];
    let gauge = |name| {
        m.value(name, &at)
            .unwrap_or_else(|| panic!("no {name}:\n{text}"))
    };
    let size = gauge("topolvm_volumegroup_size_bytes");
    let free = gauge("topolvm_volumegroup_available_bytes");
    assert!(size > 0.0 && free <= size, "size {size}, available {free}");
    assert_eq!(eb.devices, vec![b1.loop_dev.clone()]);
    assert_eq!(pvs_of(&vga), vec![a1.loop_dev.clone()]);
    assert_eq!(pvs_of(&vgb), vec![b1.loop_dev.clone()]);
    assert!(lvmd(&s, "node-a").is_some_and(|t| t.contains(&format!("volume-group: {vga}"))));
    assert!(
        lvmd(&s, "node-b")
            .is_some_and(|t| t.contains(&format!("volume-group: {vgb}")) && !t.contains(&vga))
    );
    s.wait_state("my-lvmcluster", LVMStateType::Ready, T).await;

    // Day 2: a new path → vgextend; removed again → vgreduce + pvremove.
    let edit = |paths: Vec<String>| {
        json!({"spec": {"storage": {"deviceClasses": [
            {"name": vga, "default": true, "nodeSelector": host_selector("node-a"),
             "deviceSelector": {"paths": paths, "optionalPaths": [fs.link, ro.link, pt.link]}},
            {"name": vgb, "nodeSelector": host_selector("node-b"), "deviceSelector": {"paths": [b1.link]}}
        ]}}})
    };
    s.patch_cluster(
        "my-lvmcluster",
        &edit(vec![a1.link.clone(), a2.link.clone()]),
    )
    .await;
    let grown = s
        .ready_vg_entry("node-a", &vga, T, |e| e.devices.len() == 2)
        .await;
    assert!(grown.devices.contains(&a2.loop_dev));
    assert_eq!(pvs_of(&vga).len(), 2);
    s.patch_cluster("my-lvmcluster", &edit(vec![a1.link.clone()]))
        .await;
    s.ready_vg_entry("node-a", &vga, T, |e| {
        e.devices == vec![a1.loop_dev.clone()]
    })
    .await;
    assert_eq!(pvs_of(&vga), vec![a1.loop_dev.clone()]);
    let removed = s
        .events()
        .await
        .into_iter()
        .any(|e| e.reason.as_deref() == Some("DeviceRemoved"));
    assert!(removed, "no DeviceRemoved event");

    // Each node says its class's room (checked gone after the delete below).
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(s.client.clone());
    let key = lvms::api::topolvm::capacity_annotation(&vga);
    eventually(T, || async {
        let node = nodes.get("node-a").await.ok()?;
        node.metadata.annotations?.contains_key(&key).then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("node-a never published {key}"));

    // Delete: vg-managers remove their VGs and finalizers; the cluster goes away.
    s.clusters()
        .delete("my-lvmcluster", &DeleteParams::default())
        .await
        .expect("delete");
    for n in ["node-a", "node-b"] {
        register_csi_node(&s.client, n, false).await;
    }
    eventually(T, || async {
        s.cluster("my-lvmcluster").await.is_none().then_some(())
    })
    .await
    .expect("LVMCluster deleted after the vg-managers cleaned up");
    let left = vg_names();
    assert!(
        !left.contains(&vga) && !left.contains(&vgb),
        "VGs left behind: {left:?}"
    );
    assert!(
        lvmd(&s, "node-a").is_none(),
        "lvmd.yaml kept after its last class was removed"
    );
    // Nor does a Node still say it has room in a class it no longer has.
    for n in ["node-a", "node-b"] {
        let left = eventually(T, || async {
            let node = nodes.get(n).await.ok()?;
            let keys =
                lvms::api::topolvm::node_capacity_annotations(node.metadata.annotations.as_ref());
            keys.is_empty().then_some(())
        })
        .await;
        assert!(
            left.is_some(),
            "{n} keeps capacity annotations after its last class went: {:?}",
            nodes.get(n).await.ok().and_then(|n| n.metadata.annotations)
        );
    }
    assert_no_duplicate_events(&s.events().await);
}

/// SIGKILL vg-manager at `point` of its vgcreate step, restart it, and check it converges
/// with one vgcreate. Returns the replay note recorded for that vgcreate, if any.
async fn crash_at_vgcreate(tag: &str, point: &str) -> Option<String> {
    require_prerequisites();
    let s = Scenario::new(&format!("vgm-crash-{tag}")).await;
    let vg = format!("{tag}{}", std::process::id());
    let d1 = Disk::new(&s.dir.join("disks"), &format!("{tag}1"), 200);
    create_node(&s.client, "node-a", false).await;
    register_csi_node(&s.client, "node-a", true).await;
    let _op = s.operator(&[], &[]);
    let point = format!("{point}:vg/{vg}#vgcreate");
    let mut crashing = s.vg_manager("node-a", &[("LVMS_CRASH_AT", &point)]);
    s.create_cluster(lvm_cluster(
        "my-lvmcluster",
        json!([thick_class(&vg, &d1.link)]),
    ))
    .await;
    let status = crashing
        .wait_exit(T)
        .unwrap_or_else(|| panic!("vg-manager did not crash:\n{}", crashing.log_text()));
    assert!(OperatorProcess::killed_by_sigkill(&status), "{status:?}");
    assert_eq!(
        pvs_of(&vg),
        vec![d1.loop_dev.clone()],
        "vgcreate ran before the crash"
    );
    assert!(
        s.vg_entry("node-a", &vg)
            .await
            .is_none_or(|e| e.status != Some(VGStatusType::Ready)),
        "the crash came before Ready was reported"
    );
    drop(crashing);

    let _vm = s.vg_manager("node-a", &[]);
    s.ready_vg_entry("node-a", &vg, T, |e| e.devices == vec![d1.loop_dev.clone()])
        .await;
    s.wait_state("my-lvmcluster", LVMStateType::Ready, T).await;
    let journal = s.vg_manager_journal("node-a");
    let creates = journal_intents(&journal, "vgcreate");
    assert_eq!(
        creates.len(),
        1,
        "vgcreate journaled more than once: {creates:?}"
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_no_duplicate_events(&s.events().await);
    lvms_testkit::journal::settled(&journal, T);
    creates[0].1.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_between_vgcreate_and_its_outcome_never_runs_vgcreate_twice() {
    let replay = crash_at_vgcreate("c", "applied").await;
    assert_eq!(
        replay.as_deref(),
        Some("already-done"),
        "the open vgcreate was not resolved from the host"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_between_the_vgcreate_outcome_and_the_status_write_converges() {
    let replay = crash_at_vgcreate("o", "step-outcome").await;
    // Outcomes are appended without an fsync of their own (only intents are write-ahead), so
    // the kill may or may not have lost it; either way the host is read, never vgcreate again.
    assert!(
        matches!(replay.as_deref(), None | Some("already-done")),
        "the vgcreate is either closed before the crash or resolved from the host: {replay:?}"
    );
}

/// Dynamic discovery (no deviceSelector) bounded by the node's --device-allowlist: the VG is
/// built on the allowed disk only, and a disk that appears later (added to the allowlist) is
/// picked up by the periodic requeue with one vgextend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_discovery_extends_when_a_new_disk_appears() {
    require_prerequisites();
    let s = Scenario::new("vgm-dynamic").await;
    let vg = format!("d{}", std::process::id());
    let disks = s.dir.join("disks");
    let d1 = Disk::new(&disks, "d1", 128);
    let d2 = Disk::new(&disks, "d2", 128);
    let allow = s.dir.join("allowlist");
    std::fs::write(&allow, format!("# test disks\n{}\n", d1.link)).expect("allowlist");
    create_node(&s.client, "node-a", false).await;
    register_csi_node(&s.client, "node-a", true).await;
    let _op = s.operator(&[], &[]);
    let allow_s = allow.to_string_lossy().into_owned();
    let _vm = s.vg_manager(
        "node-a",
        &[
            ("LVMS_DEVICE_ALLOWLIST", &allow_s),
            ("LVMS_RECONCILE_INTERVAL", "1s"),
        ],
    );
    s.create_cluster(lvm_cluster(
        "my-lvmcluster",
        json!([{"name": vg, "default": true, "deviceDiscoveryPolicy": "Dynamic"}]),
    ))
    .await;
    let e = s.ready_vg_entry("node-a", &vg, T, |_| true).await;
    assert_eq!(e.devices, vec![d1.loop_dev.clone()]);
    assert_eq!(
        e.device_discovery_policy,
        lvms::api::DeviceDiscoveryPolicyStatus::RuntimeDynamic,
        "{e:#?}"
    );
    assert!(
        e.excluded.iter().all(|x| x.name != d2.loop_dev),
        "a device off the allowlist is invisible: {:#?}",
        e.excluded
    );
    assert_eq!(pvs_of(&vg), vec![d1.loop_dev.clone()]);

    // A new disk appears on this node.
    std::fs::write(&allow, format!("{}\n{}\n", d1.link, d2.link)).expect("allowlist");
    let grown = s
        .ready_vg_entry("node-a", &vg, T, |e| e.devices.len() == 2)
        .await;
    assert!(grown.devices.contains(&d2.loop_dev), "{grown:#?}");
    let mut pvs = pvs_of(&vg);
    pvs.sort();
    let mut want = vec![d1.loop_dev.clone(), d2.loop_dev.clone()];
    want.sort();
    assert_eq!(pvs, want);
    let journal = s.vg_manager_journal("node-a");
    assert_eq!(journal_intents(&journal, "vgcreate").len(), 1);
    assert_eq!(journal_intents(&journal, "vgextend").len(), 1);
    // Steady state on the requeue: no further host mutation.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(journal_intents(&journal, "vgextend").len(), 1);
    assert!(lvmd(&s, "node-a").is_some_and(|t| t.contains(&format!("volume-group: {vg}"))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_wipe_wipes_once_then_builds_the_volume_group() {
    require_prerequisites();
    let s = Scenario::new("vgm-wipe").await;
    let vg = format!("w{}", std::process::id());
    let d1 = Disk::new(&s.dir.join("disks"), "w1", 128);
    let mkfs = std::process::Command::new("mkfs.ext4")
        .args(["-q", "-F", &d1.loop_dev])
        .output()
        .expect("mkfs.ext4");
    assert!(mkfs.status.success());
    create_node(&s.client, "node-a", false).await;
    register_csi_node(&s.client, "node-a", true).await;
    let _op = s.operator(&[], &[]);
    let _vm = s.vg_manager("node-a", &[]);
    s.create_cluster(lvm_cluster(
        "my-lvmcluster",
        json!([{"name": vg, "default": true,
                "deviceSelector": {"paths": [d1.link], "forceWipeDevicesAndDestroyAllData": true}}]),
    ))
    .await;
    s.ready_vg_entry("node-a", &vg, T, |e| e.devices == vec![d1.loop_dev.clone()])
        .await;
    assert_eq!(
        pvs_of(&vg),
        vec![d1.loop_dev.clone()],
        "the ext4 disk was not wiped into the VG"
    );
    let vgs: Api<lvms::api::LVMVolumeGroup> = Api::namespaced(s.client.clone(), &s.ns.name);
    let obj = vgs.get(&vg).await.expect("LVMVolumeGroup");
    assert!(
        obj.metadata
            .annotations
            .unwrap_or_default()
            .contains_key("wiped.devices.lvms.openshift.io/node-a"),
        "no per-node wiped annotation"
    );
    let wipes = journal_intents(&s.vg_manager_journal("node-a"), "wipefs");
    assert_eq!(wipes.len(), 1, "wiped more than once: {wipes:?}");
}
