//! Deleting the LVMCluster: LVMS's gates block it (DeletionPending), then ordered teardown,
//! waiting for kubelet to unregister the driver, then the finalizer goes.

use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use lvms::api::{LVMVolumeGroup, LVMVolumeGroupNodeStatus};
use serde_json::json;

use lvms_testkit::events::assert_no_duplicate_events;
use lvms_testkit::fixtures::thin;
use lvms_testkit::journal::open_intents;
use lvms_testkit::kubelet::{create_node, register_csi_node};
use lvms_testkit::{Scenario, eventually};

const T: Duration = Duration::from_secs(45);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_waits_for_pvcs_then_tears_everything_down() {
    let s = Scenario::new("op-delete").await;
    let c = &s.client;
    create_node(c, "node-a", false).await;
    register_csi_node(c, "node-a", true).await;
    let _op = s.operator(&[], &[]);
    s.create_cluster(thin("my-lvmcluster")).await;
    let scs: Api<StorageClass> = Api::all(c.clone());
    eventually(T, || async { scs.get_opt("lvms-vg1").await.unwrap() })
        .await
        .expect("lvms-vg1");
    let nss: Api<LVMVolumeGroupNodeStatus> = Api::namespaced(c.clone(), &s.ns.name);
    eventually(T, || async { nss.get_opt("node-a").await.unwrap() })
        .await
        .expect("node status");
    eventually(T, || async {
        s.cluster("my-lvmcluster")
            .await
            .filter(|c| !c.metadata.finalizers.clone().unwrap_or_default().is_empty())
    })
    .await
    .expect("finalizer added");

    // LogicalVolumes holding TopoLVM's finalizer: one on node-a, one on a node that is gone
    // (no vg-manager will ever let that one go).
    let lvs: Api<lvms::api::LogicalVolume> = Api::all(c.clone());
    for (name, node) in [("lv-on-a", "node-a"), ("lv-on-gone", "node-gone")] {
        let lv: lvms::api::LogicalVolume = serde_json::from_value(json!({
            "apiVersion": "topolvm.io/v1", "kind": "LogicalVolume",
            "metadata": {"name": name, "finalizers": ["topolvm.io/logicalvolume"]},
            "spec": {"name": name, "nodeName": node, "size": "1Gi", "deviceClass": "vg1"}
        }))
        .unwrap();
        lvs.create(&PostParams::default(), &lv)
            .await
            .expect("LogicalVolume");
    }

    // A PVC on the lvms StorageClass blocks deletion.
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data"},
        "spec": {"storageClassName": "lvms-vg1", "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .unwrap();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(c.clone(), &s.ns.name);
    pvcs.create(&PostParams::default(), &pvc)
        .await
        .expect("PVC");
    s.clusters()
        .delete("my-lvmcluster", &DeleteParams::default())
        .await
        .expect("delete");
    let pending = eventually(T, || async {
        s.events()
            .await
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("DeletionPending"))
    })
    .await
    .expect("a DeletionPending event");
    assert_eq!(pending.type_.as_deref(), Some("Warning"));
    assert!(
        pending
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("/data"),
        "{:?}",
        pending.note
    );
    // As LVMS, before its gates: the finalizer of the gone node's LogicalVolume is stripped,
    // node-a's is left to its vg-manager.
    let finalizers = |name: &'static str| {
        let lvs = lvs.clone();
        async move {
            lvs.get(name)
                .await
                .unwrap()
                .metadata
                .finalizers
                .unwrap_or_default()
        }
    };
    eventually(T, || async {
        finalizers("lv-on-gone").await.is_empty().then_some(())
    })
    .await
    .expect("the finalizer of a gone node's LogicalVolume stripped");
    assert_eq!(finalizers("lv-on-a").await, ["topolvm.io/logicalvolume"]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        scs.get_opt("lvms-vg1").await.unwrap().is_some(),
        "torn down despite the PVC"
    );
    assert!(s.cluster("my-lvmcluster").await.is_some());

    // Without the PVC: teardown in LVMS's order, then wait for kubelet to unregister.
    pvcs.delete("data", &DeleteParams::default())
        .await
        .expect("delete PVC");
    // kube-controller-manager's pvc-protection controller is not running here: do its part.
    let unfinalize = json!({"metadata": {"finalizers": null}});
    let _ = pvcs
        .patch("data", &PatchParams::default(), &Patch::Merge(&unfinalize))
        .await;
    let vgs: Api<LVMVolumeGroup> = Api::namespaced(c.clone(), &s.ns.name);
    let dss: Api<DaemonSet> = Api::namespaced(c.clone(), &s.ns.name);
    eventually(T, || async {
        let gone = vgs
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
            && dss.get_opt("vg-manager").await.unwrap().is_none()
            && nss
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .is_empty()
            && scs.get_opt("lvms-vg1").await.unwrap().is_none();
        gone.then_some(())
    })
    .await
    .expect("VGs, DaemonSet, node statuses and StorageClasses deleted");
    // As in LVMS, the CSIDriver goes next, then teardown waits for kubelet to unregister
    // topolvm.io from every CSINode; until then the cluster keeps its finalizer.
    eventually(T, || async {
        Api::<CSIDriver>::all(c.clone())
            .get_opt("topolvm.io")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await
    .expect("CSIDriver deleted");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        s.cluster("my-lvmcluster").await.is_some(),
        "finalizer removed while node-a still registered"
    );
    register_csi_node(c, "node-a", false).await;
    eventually(T, || async {
        s.cluster("my-lvmcluster").await.is_none().then_some(())
    })
    .await
    .expect("LVMCluster gone after teardown");
    assert_no_duplicate_events(&s.events().await);
    // The operator keeps running: a pass woken by the last deletions may still be in flight
    // when the cluster is seen gone. Nothing may stay open once it ends.
    let closed = eventually(Duration::from_secs(5), || async {
        (open_intents(&s.journal_dir) == 0).then_some(())
    })
    .await;
    assert!(
        closed.is_some(),
        "intents left open: {:?}",
        lvms_testkit::journal::open_intent_lines(&s.journal_dir)
    );
    // The journal tells the teardown: each object deleted once (a stage that goes on within
    // its pass must not plan on a cache that still shows what it removed), in LVMS's order.
    let j = lvms_testkit::journal::settled(&s.operator_journal(), Duration::from_secs(5));
    let recs: Vec<lvms_journal::Record> = j.iter().map(|r| r.expect("journal record")).collect();
    // Deletes that took effect (a failed attempt retried later is not a second delete).
    let ok: std::collections::BTreeSet<u64> = recs
        .iter()
        .filter_map(|r| match &r.body {
            lvms_journal::Body::Outcome(o)
                if matches!(o.result, lvms_journal::OutcomeResult::Ok(_)) =>
            {
                Some(o.intent_seq)
            }
            _ => None,
        })
        .collect();
    let deletes: Vec<(String, String)> = recs
        .into_iter()
        .filter(|r| ok.contains(&r.seq))
        .filter_map(|r| match r.body {
            lvms_journal::Body::Intent(i) if i.unit == "lvmcluster" && i.action == "delete" => {
                Some((i.object.kind, i.object.name))
            }
            _ => None,
        })
        .collect();
    let mut once = deletes.clone();
    once.sort();
    once.dedup();
    assert_eq!(once.len(), deletes.len(), "deleted twice: {deletes:?}");
    let order = [
        "LVMVolumeGroup",
        "DaemonSet",
        "LVMVolumeGroupNodeStatus",
        "StorageClass",
        "CSIDriver",
    ];
    let rank = |kind: &str| order.iter().position(|k| *k == kind);
    let ranks: Vec<_> = deletes.iter().map(|(k, _)| rank(k)).collect();
    assert!(ranks.iter().all(Option::is_some), "{deletes:?}");
    assert!(ranks.is_sorted(), "out of LVMS's order: {deletes:?}");
    assert!(
        deletes.contains(&("LVMVolumeGroupNodeStatus".into(), "node-a".into())),
        "{deletes:?}"
    );
}

/// A node status create still in flight when the LVMCluster is deleted (a busy API server):
/// teardown used to end around it, the create landed after its owner was gone, the garbage
/// collector marked it deleted and our finalizer kept it for good (a later LVMCluster's
/// teardown then waited on it forever). Teardown now waits for the writes in flight and
/// lets such an object go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_in_flight_at_deletion_leaves_no_node_status_behind() {
    let s = Scenario::new("op-delete-inflight").await;
    let c = &s.client;
    create_node(c, "node-a", false).await;
    register_csi_node(c, "node-a", true).await;
    let op = s.operator(&[("LVMS_STALL_IN", "lvmvgnodestatus#apply=3000")], &[]);
    s.create_cluster(thin("my-lvmcluster")).await;
    eventually(T, || async {
        op.log_text()
            .contains("LVMS_STALL_IN reached")
            .then_some(())
    })
    .await
    .expect("the node status create stalled");
    s.clusters()
        .delete("my-lvmcluster", &DeleteParams::default())
        .await
        .expect("delete LVMCluster");
    register_csi_node(c, "node-a", false).await;
    eventually(T, || async {
        s.cluster("my-lvmcluster").await.is_none().then_some(())
    })
    .await
    .expect("LVMCluster gone after teardown");
    // Past the stall: whatever the create made must be gone, not kept by our finalizer.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let nss: Api<LVMVolumeGroupNodeStatus> = Api::namespaced(c.clone(), &s.ns.name);
    let left = eventually(Duration::from_secs(15), || async {
        nss.get_opt("node-a").await.unwrap().is_none().then_some(())
    })
    .await;
    assert!(
        left.is_some(),
        "node status left behind: {:?}\n{}",
        nss.get_opt("node-a").await.unwrap().map(|n| n.metadata),
        op.log_text()
    );
}
