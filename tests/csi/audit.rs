//! The orphan audit on real lvm2 and a real API server: every kind of orphan the trackers
//! describe, provoked (a LogicalVolume force-deleted, an LV removed behind lvms's back, LVs put
//! in the VG by hand, a PersistentVolume and a LogicalVolume nobody backs), reported by
//! `lvms audit --now` exactly, each Warning published once however many audits see it; then
//! the `leaked` repair policy removes what the journal proves lvms made, and only that,
//! including after vg-manager is SIGKILLed in the middle of the removal.

use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use lvms::api::LogicalVolume;
use lvms_journal::Journal;
use lvms_testkit::dev::operator::OperatorProcess;
use lvms_testkit::disks::lvm;
use serde_json::{Value, json};

use crate::common::{MIB, NODE, ThickNode, create_request, create_until_ok};

/// `lvms audit --now -o json` against the test control plane.
fn audit(n: &ThickNode) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lvms"))
        .args(["audit", "--now", "--timeout", "60s", "-o", "json", "-n"])
        .arg(&n.s.ns.name)
        .env("KUBECONFIG", &lvms_testkit::env::env().cp.kubeconfig)
        .output()
        .expect("lvms audit");
    assert!(
        out.status.success(),
        "lvms audit: {}\nvg-manager's log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        lvms_testkit::process::tail(
            &n.vgm.as_ref().map(|v| v.log_text()).unwrap_or_default(),
            40
        )
    );
    serde_json::from_slice(&out.stdout).expect("audit JSON")
}

/// (kind, the LV or object it names) of every finding, nodes' and cluster's, sorted.
fn findings(a: &Value) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = a["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|n| n["findings"].as_array().cloned().unwrap_or_default())
        .chain(a["cluster"].as_array().cloned().unwrap_or_default())
        .map(|f| {
            let what = f["lv"]
                .as_str()
                .or(f["logicalVolume"].as_str())
                .unwrap_or_default()
                .to_string();
            (f["kind"].as_str().unwrap_or_default().to_string(), what)
        })
        .collect();
    out.sort();
    out
}

/// The audit's Warnings in the namespace: reason → how many Event objects, and their counts.
async fn warnings(n: &ThickNode) -> Vec<(String, u64)> {
    let events: Api<Event> = Api::namespaced(n.s.client.clone(), &n.s.ns.name);
    let mut out: Vec<(String, u64)> = events
        .list(&ListParams::default())
        .await
        .expect("Events")
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("LVMVolumeGroupNodeStatus")
                && e.type_.as_deref() == Some("Warning")
        })
        .filter_map(|e| {
            let count = lvms_testkit::events::series_count(&e);
            let reason = e.reason?;
            [
                "LeakedLogicalVolume",
                "ForeignLogicalVolume",
                "MissingLogicalVolume",
            ]
            .contains(&reason.as_str())
            .then_some((reason, count))
        })
        .collect();
    out.sort();
    out
}

fn lvm_ok(cmd: &str, args: &[&str]) {
    let (ok, out) = lvm(cmd, args);
    assert!(ok, "{cmd} {args:?}: {out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_orphan_kind_is_reported_once_and_leaked_lvs_are_repaired_by_policy() {
    let mut n = ThickNode::start("csi-audit", &[]).await;
    let class = n.class.clone();
    let ctl = n.controller().await;
    let leaked = create_until_ok(ctl.clone(), create_request("pvc-leaked", 16 * MIB, &class)).await;
    let missing =
        create_until_ok(ctl.clone(), create_request("pvc-missing", 16 * MIB, &class)).await;
    let kept = create_until_ok(ctl.clone(), create_request("pvc-kept", 16 * MIB, &class)).await;
    let before = audit(&n);
    assert_eq!(findings(&before), vec![], "a healthy node: {before:#}");

    // vg-manager away (it would put its finalizer back), the orphans are made.
    n.stop_vg_manager();
    let lvs = n.logical_volumes();
    let by_id = |id: &str| {
        let lvs = lvs.clone();
        let id = id.to_string();
        async move {
            lvs.list(&ListParams::default())
                .await
                .expect("LogicalVolumes")
                .items
                .into_iter()
                .find(|l| l.status.as_ref().and_then(|s| s.volume_id.as_deref()) == Some(&id))
                .and_then(|l| l.metadata.name)
                .expect("the volume's LogicalVolume")
        }
    };
    // 1. A LogicalVolume force-deleted (finalizer stripped): its LV leaks; the journal holds
    //    its lvcreate.
    let name = by_id(&leaked).await;
    lvs.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("strip the finalizer");
    lvs.delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
    // 2. An LV removed behind lvms's back.
    lvm_ok("lvremove", &["-f", &format!("{class}/{missing}")]);
    // 3. LVs put in the VG by hand: one with lvms's tag, one without.
    lvm_ok(
        "lvcreate",
        &[
            "-n",
            "tagged",
            "-L",
            "8m",
            "-Zn",
            "--addtag",
            "lvms-volume",
            &class,
        ],
    );
    lvm_ok("lvcreate", &["-n", "foreign", "-L", "8m", "-Zn", &class]);
    // 4. A PersistentVolume of the driver that no LogicalVolume backs.
    let pvs: Api<PersistentVolume> = Api::all(n.s.client.clone());
    let pv_name = format!("stale-{}", n.s.ns.name);
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": pv_name},
        "spec": {
            "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "csi": {"driver": "topolvm.io", "volumeHandle": "no-such-volume"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.topolvm.io/node", "operator": "In", "values": [NODE]}]}]}},
        },
    }))
    .unwrap();
    pvs.create(&PostParams::default(), &pv)
        .await
        .expect("stale PV");
    // 5. A LogicalVolume on a node that does not exist.
    let gone_name = format!("gone-{}", n.s.ns.name);
    let gone: LogicalVolume = serde_json::from_value(json!({
        "apiVersion": "topolvm.io/v1", "kind": "LogicalVolume",
        "metadata": {"name": gone_name},
        "spec": {"name": "pvc-gone", "nodeName": "node-gone", "size": "16Mi", "deviceClass": class},
    }))
    .unwrap();
    lvs.create(&PostParams::default(), &gone)
        .await
        .expect("gone-node LogicalVolume");
    n.restart_vg_manager(&[]);

    let want = |leaked_too: bool, foreign2: bool| {
        let mut w = vec![
            ("foreign-lv".to_string(), "foreign".to_string()),
            ("gone-node".into(), gone_name.clone()),
            ("leaked-lv".into(), "tagged".into()),
            ("missing-lv".into(), missing.clone()),
            ("stale-pv".into(), "no-such-volume".into()),
        ];
        if leaked_too {
            w.push(("leaked-lv".into(), leaked.clone()));
        }
        if foreign2 {
            w.push(("foreign-lv".into(), "foreign2".into()));
        }
        w.sort();
        w
    };
    let first = audit(&n);
    assert_eq!(findings(&first), want(true, false), "{first:#}");
    assert_eq!(first["counts"]["leaked-lv"], 2);
    assert_eq!(first["counts"]["half-finished"], 0);
    let node = &first["nodes"][0];
    let proven = node["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["lv"] == leaked.as_str())
        .expect("the leaked LV");
    assert_eq!(proven["repairable"], true, "{proven:#}");
    assert_eq!(proven["logicalVolume"], name.as_str());
    assert!(
        proven["journal"].as_array().is_some_and(|j| j
            .iter()
            .any(|l| l.as_str().is_some_and(|l| l.contains("lvcreate ok")))),
        "the journal records explain it: {proven:#}"
    );
    // A second audit finds the same, and publishes nothing again.
    let second = audit(&n);
    assert_eq!(findings(&second), want(true, false));
    let published = lvms_testkit::eventually(Duration::from_secs(30), || async {
        let w = warnings(&n).await;
        (w.len() == 4).then_some(w)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "four Warnings, got {:?}",
            futures::executor::block_on(warnings(&n))
        )
    });
    assert_eq!(
        published,
        vec![
            ("ForeignLogicalVolume".to_string(), 1),
            ("LeakedLogicalVolume".into(), 1),
            ("LeakedLogicalVolume".into(), 1),
            ("MissingLogicalVolume".into(), 1),
        ],
        "one Event per finding, each once"
    );

    // vg-manager SIGKILLed once a new finding's report is durable, before its outcome: replay
    // publishes the Warning, and no later audit reports it again.
    lvm_ok("lvcreate", &["-n", "foreign2", "-L", "8m", "-Zn", &class]);
    n.restart_vg_manager(&[("LVMS_CRASH_AT", "intent-durable:audit#report-finding")]);
    let vgm = n.vgm.as_mut().expect("vg-manager");
    let status = vgm
        .wait_exit(Duration::from_secs(60))
        .unwrap_or_else(|| panic!("vg-manager did not reach the report:\n{}", vgm.log_text()));
    assert!(OperatorProcess::killed_by_sigkill(&status), "{status:?}");
    n.restart_vg_manager(&[]);
    assert_eq!(findings(&audit(&n)), want(true, true));
    let published = lvms_testkit::eventually(Duration::from_secs(30), || async {
        let w = warnings(&n).await;
        (w.len() == 5).then_some(w)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "five Warnings, got {:?}",
            futures::executor::block_on(warnings(&n))
        )
    });
    assert!(
        published.iter().all(|(_, count)| *count == 1),
        "each once: {published:?}"
    );

    // The repair policy, and vg-manager SIGKILLed once the removal's intent is durable.
    n.restart_vg_manager(&[
        ("LVMS_AUDIT_REPAIR", "leaked"),
        ("LVMS_CRASH_AT", "intent-durable:audit#remove-leaked-lv"),
    ]);
    let vgm = n.vgm.as_mut().expect("vg-manager");
    let status = vgm
        .wait_exit(Duration::from_secs(60))
        .unwrap_or_else(|| panic!("vg-manager did not reach the removal:\n{}", vgm.log_text()));
    assert!(OperatorProcess::killed_by_sigkill(&status), "{status:?}");
    assert!(n.lvs().contains_key(&leaked), "killed before lvremove");
    n.restart_vg_manager(&[("LVMS_AUDIT_REPAIR", "leaked")]);
    let repaired = audit(&n);
    assert_eq!(findings(&repaired), want(false, true), "{repaired:#}");
    let on_disk = n.lvs();
    assert!(
        !on_disk.contains_key(&leaked),
        "the next audit removed it: {on_disk:?}"
    );
    for lv in ["tagged", "foreign", "foreign2", kept.as_str()] {
        assert!(
            on_disk.contains_key(lv),
            "{lv} is not lvms's to remove: {on_disk:?}"
        );
    }
    let j = Journal::open_copy(n.s.vg_manager_journal(NODE)).expect("journal");
    assert_eq!(
        j.open_intents().expect("open intents"),
        vec![],
        "nothing left open"
    );
    // The killed removal replayed as not done (it never ran), then made by the next audit,
    // after a fresh look at what names the LV: one removal took effect.
    let recs: Vec<lvms_journal::Record> = j.iter().filter_map(Result::ok).collect();
    let removals = lvms_testkit::journal::effects(&recs, "audit")
        .remove("remove-leaked-lv")
        .unwrap_or_default();
    assert_eq!(removals.took, 1, "{:?}", removals.verdicts);
    assert!(
        removals.verdicts.iter().any(|v| v.contains("not-done")),
        "{:?}",
        removals.verdicts
    );

    // Nothing of this test is left for others.
    let _ = pvs.delete(&pv_name, &DeleteParams::default()).await;
    let _ = lvs.delete(&gone_name, &DeleteParams::default()).await;
}
