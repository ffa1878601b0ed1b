//! A node that dies without a graceful delete (topolvm#868), on real lvm2, a real API server
//! and kube-controller-manager's own taint eviction and Pod garbage collection: node-a with
//! two bound claims (one used by a Pod) stops (its vg-manager killed, its Ready condition
//! Unknown as the node lifecycle controller writes it) and is tainted
//! `node.kubernetes.io/out-of-service`; its Pod is evicted. Nothing happens within `--dead-node-grace`; then the
//! operator records what it writes off on the Node (one Warning), deletes the claims (the
//! Pod, force-deleted by kube-controller-manager's Pod GC, lets the used one go) and
//! releases the LogicalVolumes; `lvms audit` lists each written-off volume. The node comes
//! back: the record goes, its vg-manager's audit reports both LVs as leaked-lv, the `leaked`
//! repair removes them, and a claim of the same name binds on it again. Last, a Node deleted
//! while its kubelet still reports Ready keeps its claims (one Warning) until it is not.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use lvms_testkit::eventually;
use serde_json::{Value, json};

use crate::common::{NODE, ThickNode};

const SLOW: Duration = Duration::from_secs(90);
const GRACE_S: u64 = 20;

fn claim(name: &str, class: &str) -> PersistentVolumeClaim {
    lvms_testkit::fixtures::csi::claim(name, &format!("lvms-{class}"), "20Mi", NODE, None)
}

/// node-a's Ready condition as the node lifecycle controller (or kubelet) writes it.
async fn set_ready(client: &kube::Client, status: &str) {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    Api::<Node>::all(client.clone())
        .patch_status(
            NODE,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [{
                "type": "Ready", "status": status, "reason": "Test",
                "lastHeartbeatTime": now, "lastTransitionTime": now,
            }]}})),
        )
        .await
        .expect("node-a's Ready condition");
}

async fn set_taints(client: &kube::Client, taints: Value) {
    Api::<Node>::all(client.clone())
        .patch(
            NODE,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": taints}})),
        )
        .await
        .expect("node-a's taints");
}

/// node-a without its written-off record, within [`SLOW`].
async fn record_gone(client: &kube::Client) -> Option<()> {
    eventually(SLOW, || async {
        let node = Api::<Node>::all(client.clone()).get(NODE).await.ok()?;
        let a = node.metadata.annotations.unwrap_or_default();
        (!a.contains_key("lvms.topolvm.io/written-off")).then_some(())
    })
    .await
}

async fn node_uid(client: &kube::Client) -> String {
    Api::<Node>::all(client.clone())
        .get(NODE)
        .await
        .expect("node-a")
        .metadata
        .uid
        .expect("a uid")
}

fn bound_volume(c: &PersistentVolumeClaim) -> Option<String> {
    (c.status.as_ref()?.phase.as_deref() == Some("Bound"))
        .then(|| c.spec.as_ref()?.volume_name.clone())
        .flatten()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_node_is_written_off_after_its_grace_and_its_leftovers_are_found_when_it_returns() {
    let mut n = ThickNode::start_with("csi-dead-node", &[], 400, json!({"fstype": "ext4"})).await;
    let grace = format!("{GRACE_S}s");
    n.op.kill();
    n.op = n.s.operator(&[], &["--dead-node-grace", &grace]);
    let provisioner = n.provisioner();
    let client = n.s.client.clone();
    let ns = n.s.ns.name.clone();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    set_ready(&client, "True").await;
    let uid = node_uid(&client).await;

    // Two claims bound on node-a; a Pod on node-a mounts one.
    for c in ["data", "idle"] {
        pvcs.create(&PostParams::default(), &claim(c, &n.class))
            .await
            .expect("claim");
    }
    let mut bound = Vec::new();
    for c in ["data", "idle"] {
        let pv = eventually(SLOW, || async { bound_volume(&pvcs.get(c).await.ok()?) })
            .await
            .unwrap_or_else(|| {
                panic!(
                    "{c} never Bound; provisioner:\n{}\noperator:\n{}",
                    lvms_testkit::process::tail(&provisioner.log_text(), 30),
                    lvms_testkit::process::tail(&n.op.log_text(), 30)
                )
            });
        bound.push(pv);
    }
    let volumes = n
        .logical_volumes()
        .list(&ListParams::default())
        .await
        .expect("LogicalVolumes")
        .items;
    let mut lv_ids: Vec<String> = volumes
        .iter()
        .filter(|v| v.spec.node_name == NODE)
        .filter_map(|v| v.status.as_ref()?.volume_id.clone())
        .collect();
    lv_ids.sort();
    assert_eq!(lv_ids.len(), 2, "{volumes:?}");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "app"},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "busybox"}],
                 "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("pod");

    // A Ready node tainted out-of-service keeps everything (one Warning says why).
    set_taints(
        &client,
        json!([{"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoSchedule"}]),
    )
    .await;
    let held = eventually(SLOW, || async {
        lvms_testkit::events::about_node(&client, &uid, "NodeStillReady")
            .await
            .into_iter()
            .next()
    })
    .await
    .expect("no NodeStillReady Warning about a Ready node tainted out-of-service");
    assert!(
        held.note
            .as_deref()
            .unwrap_or_default()
            .contains("--dead-node-grace"),
        "{held:?}"
    );

    // node-a dies: its vg-manager gone, its kubelet silent, tainted out of service.
    n.stop_vg_manager();
    set_ready(&client, "Unknown").await;
    let died = std::time::Instant::now();
    set_taints(
        &client,
        json!([{"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}]),
    )
    .await;
    // The Pod evicted, as the taint eviction controller does on a NoExecute taint (this tier
    // runs no node lifecycle controller, which it needs): it stays terminating, no kubelet
    // confirms, until kube-controller-manager's Pod GC force-deletes it off an out-of-service
    // node that is not Ready.
    pods.delete("app", &DeleteParams::default())
        .await
        .expect("evict app");
    // Within the grace: nothing written off.
    tokio::time::sleep(Duration::from_secs(GRACE_S / 2)).await;
    for c in ["data", "idle"] {
        let claim = pvcs.get(c).await.expect("claim");
        assert!(
            claim.metadata.deletion_timestamp.is_none(),
            "{c} deleted {:?} into a {GRACE_S} s grace",
            died.elapsed()
        );
    }
    assert!(
        lvms_testkit::events::about_node(&client, &uid, "VolumesWrittenOff")
            .await
            .is_empty()
    );

    // After it: both claims gone (the Pod force-deleted by kube-controller-manager's Pod GC),
    // their PVs and LogicalVolumes too; the LVs stay on disk.
    let gone = eventually(SLOW, || async {
        let claims = pvcs.list(&ListParams::default()).await.ok()?.items;
        let pod = pods.get_opt("app").await.ok()?;
        let pv_left = pvs.list(&ListParams::default()).await.ok()?.items;
        let none_on_a = n.none_on_node().await?;
        (claims.is_empty()
            && pod.is_none()
            && !pv_left
                .iter()
                .any(|p| bound.contains(p.metadata.name.as_ref().unwrap()))
            && none_on_a)
            .then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "node-a's volumes were not written off: claims {:?}, pod {:?}\noperator log:\n{}",
        pvcs.list(&ListParams::default()).await.map(|l| l
            .items
            .into_iter()
            .map(|c| c.metadata)
            .collect::<Vec<_>>()),
        pods.get_opt("app").await.map(|p| p.map(|p| p.metadata)),
        lvms_testkit::process::tail(&n.op.log_text(), 40)
    );
    assert!(
        died.elapsed() >= Duration::from_secs(GRACE_S),
        "written off after {:?}, before the grace",
        died.elapsed()
    );
    for id in &lv_ids {
        assert!(
            n.lvs().contains_key(id),
            "{id} left the disk: {:?}",
            n.lvs()
        );
    }
    let warned = lvms_testkit::events::about_node(&client, &uid, "VolumesWrittenOff").await;
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert_eq!(warned[0].type_.as_deref(), Some("Warning"));
    let note = warned[0].note.clone().unwrap_or_default();
    for id in &lv_ids {
        assert!(note.contains(id.as_str()), "{id} not in: {note}");
    }
    // The record is on the Node, and `lvms audit` lists each written-off volume.
    let node = Api::<Node>::all(client.clone())
        .get(NODE)
        .await
        .expect("node-a");
    let record: Value = serde_json::from_str(
        node.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("lvms.topolvm.io/written-off"))
            .expect("the written-off record on node-a"),
    )
    .expect("the record is JSON");
    assert_eq!(record["count"], 2, "{record}");
    assert_eq!(record["trigger"], "out-of-service", "{record}");
    let found = n.audit(false, |x| lv_ids.iter().any(|i| i == x)).0;
    let written: Vec<String> = found
        .iter()
        .filter(|(k, _)| k == "written-off")
        .map(|(_, lv)| lv.clone())
        .collect();
    assert_eq!(written, lv_ids, "{found:?}");

    // The node comes back (the admin removes the taint; kubelet reports Ready), its
    // vg-manager too: the record goes, and its audit reports what is left on its disks.
    set_taints(&client, json!(null)).await;
    set_ready(&client, "True").await;
    n.restart_vg_manager(&[]);
    let forgotten = record_gone(&client).await;
    assert!(
        forgotten.is_some(),
        "the record stayed on node-a:\n{}",
        lvms_testkit::process::tail(&n.op.log_text(), 30)
    );
    // The Event goes out with the step's outcome, after the record's removal: waited for.
    let back = eventually(SLOW, || async {
        let e = lvms_testkit::events::about_node(&client, &uid, "WrittenOffVolumesOnDisk").await;
        (!e.is_empty()).then_some(e)
    })
    .await
    .expect("no WrittenOffVolumesOnDisk Warning");
    assert_eq!(back.len(), 1, "{back:?}");
    let leaked: Vec<(String, String)> = lv_ids
        .iter()
        .map(|id| ("leaked-lv".to_string(), id.clone()))
        .collect();
    assert_eq!(n.audit(true, |x| lv_ids.iter().any(|i| i == x)).0, leaked);

    // Under the repair policy the LVs the journal proves lvms made go.
    n.restart_vg_manager(&[("LVMS_AUDIT_REPAIR", "leaked")]);
    let repaired = eventually(SLOW, || async {
        let lvs = n.lvs();
        lv_ids.iter().all(|id| !lvs.contains_key(id)).then_some(())
    })
    .await;
    assert!(repaired.is_some(), "leaked LVs stayed: {:?}", n.lvs());
    assert_eq!(n.audit(true, |x| lv_ids.iter().any(|i| i == x)).0, vec![]);

    // The workload can come back: a claim of the same name binds on node-a again.
    pvcs.create(&PostParams::default(), &claim("data", &n.class))
        .await
        .expect("claim");
    eventually(SLOW, || async {
        bound_volume(&pvcs.get("data").await.ok()?)
    })
    .await
    .expect("a new data never Bound on the returned node");

    // A Node deleted while its kubelet reports Ready keeps its claims (TopoLVM would delete
    // them now); once it is not Ready for the grace, they go and so does the Node.
    Api::<Node>::all(client.clone())
        .delete(NODE, &DeleteParams::default())
        .await
        .expect("delete node-a");
    let still = eventually(SLOW, || async {
        lvms_testkit::events::about_node(&client, &uid, "NodeStillReady")
            .await
            .into_iter()
            .find(|e| e.note.as_deref().unwrap_or_default().contains("deleted"))
    })
    .await;
    assert!(
        still.is_some(),
        "no NodeStillReady Warning for the deleted node"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    let kept = pvcs.get("data").await.expect("data");
    assert!(
        kept.metadata.deletion_timestamp.is_none(),
        "a Ready node's claim was deleted"
    );
    n.stop_vg_manager();
    set_ready(&client, "Unknown").await;
    let finished = eventually(SLOW, || async {
        let node = Api::<Node>::all(client.clone()).get_opt(NODE).await.ok()?;
        let claim = pvcs.get_opt("data").await.ok()?;
        (node.is_none() && claim.is_none()).then_some(())
    })
    .await;
    assert!(
        finished.is_some(),
        "the deleted node never finished:\n{}",
        lvms_testkit::process::tail(&n.op.log_text(), 40)
    );

    // The journal: each write once, nothing left open.
    let j = lvms_testkit::journal::settled(&n.s.operator_journal(), SLOW);
    let recs: Vec<_> = j.iter().collect::<Result<_, _>>().expect("journal");
    let effects = lvms_testkit::journal::effects(&recs, "topolvm-node");
    for (action, took) in [
        ("record-written-off", 2),
        ("forget-written-off", 1),
        ("delete-claim", 3),
        ("release-logical-volume", 3),
        ("remove-node-finalizer", 1),
        ("report-node-still-ready", 2),
    ] {
        assert_eq!(
            effects.get(action).map(|e| e.took),
            Some(took),
            "{action}: {effects:?}"
        );
    }
}

/// The operator SIGKILLed at seeded random moments while it writes a node off and while the
/// node comes back (`LVMS_DEAD_NODE_KILLS_SEED`, default 3; `LVMS_DEAD_NODE_KILLS`, default 4
/// per phase): the write-off still ends with every claim and LogicalVolume of the node gone,
/// one record naming all of them, each Warning published once, and nothing left open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_off_killed_at_random_moments_converges_with_each_warning_once() {
    let seed = std::env::var("LVMS_DEAD_NODE_KILLS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let kills: u32 = std::env::var("LVMS_DEAD_NODE_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let mut rng = lvms_testkit::rng::Rng(seed);
    let mut n = ThickNode::start_with("csi-dead-kills", &[], 400, json!({"fstype": "ext4"})).await;
    let provisioner = n.provisioner();
    let client = n.s.client.clone();
    let ns = n.s.ns.name.clone();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    set_ready(&client, "True").await;
    let uid = node_uid(&client).await;
    let names = ["k1", "k2", "k3"];
    for c in names {
        pvcs.create(&PostParams::default(), &claim(c, &n.class))
            .await
            .expect("claim");
    }
    for c in names {
        eventually(SLOW, || async { bound_volume(&pvcs.get(c).await.ok()?) })
            .await
            .unwrap_or_else(|| {
                panic!(
                    "{c} never Bound; provisioner:\n{}\noperator:\n{}",
                    lvms_testkit::process::tail(&provisioner.log_text(), 30),
                    lvms_testkit::process::tail(&n.op.log_text(), 30)
                )
            });
    }
    // Kills at random moments of `phase`, each life given 0–4 s; then one life left to run.
    let mut kill_at_random = |phase: &str| {
        let waits: Vec<u64> = (0..kills).map(|_| rng.below(4000)).collect();
        println!("seed {seed}, {phase}: kills after {waits:?} ms");
        waits
    };

    // node-a dies; the operator is killed again and again while it writes the node off.
    n.stop_vg_manager();
    set_ready(&client, "Unknown").await;
    set_taints(
        &client,
        json!([{"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}]),
    )
    .await;
    for ms in kill_at_random("write-off") {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        n.restart_operator();
    }
    let gone = eventually(SLOW, || async {
        let claims = pvcs.list(&ListParams::default()).await.ok()?.items;
        (claims.is_empty() && n.none_on_node().await?).then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "seed {seed}: node-a's volumes were not written off:\n{}",
        lvms_testkit::process::tail(&n.op.log_text(), 40)
    );
    let record = eventually(SLOW, || async {
        let node = Api::<Node>::all(client.clone()).get(NODE).await.ok()?;
        let text = node
            .metadata
            .annotations?
            .get("lvms.topolvm.io/written-off")?
            .clone();
        serde_json::from_str::<Value>(&text).ok()
    })
    .await
    .expect("the record on node-a");
    assert_eq!(record["count"], 3, "seed {seed}: {record}");
    let warned = eventually(SLOW, || async {
        let w = lvms_testkit::events::about_node(&client, &uid, "VolumesWrittenOff").await;
        (!w.is_empty()).then_some(w)
    })
    .await
    .expect("no VolumesWrittenOff Warning");

    // node-a comes back, and the operator is killed again and again while it forgets the record.
    set_taints(&client, json!(null)).await;
    set_ready(&client, "True").await;
    for ms in kill_at_random("back") {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        n.restart_operator();
    }
    let forgotten = record_gone(&client).await;
    assert!(forgotten.is_some(), "seed {seed}: the record stayed");
    let back = eventually(SLOW, || async {
        let w = lvms_testkit::events::about_node(&client, &uid, "WrittenOffVolumesOnDisk").await;
        (!w.is_empty()).then_some(w)
    })
    .await
    .expect("no WrittenOffVolumesOnDisk Warning");

    // Past the recheck: each Warning once, never repeated; nothing open.
    let j = lvms_testkit::journal::settled(&n.s.operator_journal(), SLOW);
    assert_eq!(j.open_intents().expect("open intents"), vec![]);
    tokio::time::sleep(Duration::from_secs(5)).await;
    for (reason, first) in [
        ("VolumesWrittenOff", &warned),
        ("WrittenOffVolumesOnDisk", &back),
    ] {
        let all = lvms_testkit::events::about_node(&client, &uid, reason).await;
        assert_eq!(all.len(), 1, "seed {seed}: {reason}: {all:?}");
        assert_eq!(
            all[0].metadata.uid, first[0].metadata.uid,
            "seed {seed}: {reason}"
        );
        assert_eq!(
            lvms_testkit::events::series_count(&all[0]),
            1,
            "seed {seed}: {reason}: {all:?}"
        );
    }
    let recs: Vec<_> = j.iter().collect::<Result<_, _>>().expect("journal");
    let effects = lvms_testkit::journal::effects(&recs, "topolvm-node");
    for action in ["record-written-off", "forget-written-off"] {
        let e = effects.get(action).cloned().unwrap_or_default();
        assert_eq!(e.took, 1, "seed {seed}: {action}: {:?}", e.verdicts);
    }
}
