//! The operator's helpers for users' volumes, against the real csi-provisioner and API server:
//! LVMS's PVC helper (`NotEnoughCapacity` on a claim no node can hold), its PV helper (the
//! hostname label; `ClaimReferenceRemoved` once the claim reference is cut), and TopoLVM's
//! Node finalizer (a deleted Node's claims and LogicalVolumes cleaned up before it goes) and its
//! PVC reconciler (legacy finalizers, the resize nudge).
//! Each Event exactly once, to the object it is about.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use lvms_testkit::eventually;
use serde_json::json;

use crate::common::{NODE, ThickNode};

const SLOW: Duration = Duration::from_secs(90);

fn claim(name: &str, class: &str, size: &str) -> PersistentVolumeClaim {
    lvms_testkit::fixtures::csi::claim(name, &format!("lvms-{class}"), size, NODE, None)
}

/// Events in `ns` with this reason about the object named `name`.
async fn events(client: &kube::Client, ns: &str, reason: &str, name: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect()
}

async fn one_event(client: &kube::Client, ns: &str, reason: &str, name: &str) -> Event {
    let got = eventually(SLOW, || async {
        events(client, ns, reason, name).await.into_iter().next()
    })
    .await;
    got.unwrap_or_else(|| panic!("no {reason} Event about {name} in {ns}"))
}

/// TopoLVM's PVC reconciler on a bound claim in a user's namespace (not the operator's: the
/// real node tier found the operator watching claims only in its own): its legacy finalizers
/// (an older TopoLVM's) come off; once the claim's filesystem waits to grow
/// (`FileSystemResizePending`, written here as csi-resizer writes it after
/// ControllerExpandVolume), the Pod using it is annotated `topolvm.io/last-resizefs-requested-at`
/// after that moment, once, and a Pod of another claim is not.
async fn topolvm_pvc_reconciler(client: &kube::Client, operator_ns: &str, class: &str) {
    let ns = format!("{operator_ns}-user");
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .expect("the user's namespace");
    let ns = ns.as_str();
    let claim = "user-data";
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    pvcs.create(&PostParams::default(), &self::claim(claim, class, "20Mi"))
        .await
        .expect("the user's claim");
    eventually(SLOW, || async {
        bound_volume(&pvcs.get(claim).await.ok()?)
    })
    .await
    .expect("the user's claim Bound");
    pvcs.patch(
        claim,
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(json!([
                {"op": "add", "path": "/metadata/finalizers/-", "value": "topolvm.io/pvc"},
                {"op": "add", "path": "/metadata/finalizers/-", "value": "topolvm.cybozu.com/pvc"},
            ]))
            .unwrap(),
        ),
    )
    .await
    .expect("legacy finalizers");
    let cleaned = eventually(SLOW, || async {
        let f = pvcs
            .get(claim)
            .await
            .ok()?
            .metadata
            .finalizers
            .unwrap_or_default();
        (!f.iter()
            .any(|x| x.ends_with("/pvc") && x.starts_with("topolvm")))
        .then_some(f)
    })
    .await
    .expect("the legacy finalizers never came off");
    assert!(
        cleaned.iter().any(|f| f == "kubernetes.io/pvc-protection"),
        "only the legacy ones: {cleaned:?}"
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    for (name, c) in [("uses-data", claim), ("uses-other", "other")] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}],
                     "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": c}}]},
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("pod");
    }
    let since = k8s_openapi::jiff::Timestamp::now();
    pvcs.patch_status(
        claim,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": [{
            "type": "FileSystemResizePending", "status": "True",
            "lastTransitionTime": since.to_string(),
        }]}})),
    )
    .await
    .expect("FileSystemResizePending");
    let key = "topolvm.io/last-resizefs-requested-at";
    let at = eventually(SLOW, || async {
        pods.get("uses-data")
            .await
            .ok()?
            .metadata
            .annotations?
            .get(key)
            .cloned()
    })
    .await
    .expect("the claim's Pod never nudged");
    let at: k8s_openapi::jiff::Timestamp = at.parse().expect("an RFC 3339 time");
    // Seconds precision of the condition: the nudge is not before its second.
    assert!(at.as_second() >= since.as_second(), "{at} before {since}");
    // Once: a later pass (the helper looks again) leaves it as it is.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let again = pods
        .get("uses-data")
        .await
        .unwrap()
        .metadata
        .annotations
        .unwrap();
    assert_eq!(
        again[key].parse::<k8s_openapi::jiff::Timestamp>().unwrap(),
        at
    );
    let other = pods.get("uses-other").await.unwrap().metadata.annotations;
    assert!(
        other.as_ref().is_none_or(|a| !a.contains_key(key)),
        "{other:?}"
    );
    for p in ["uses-data", "uses-other"] {
        pods.delete(p, &DeleteParams::default())
            .await
            .expect("delete pod");
    }
    pvcs.delete(claim, &DeleteParams::default())
        .await
        .expect("delete claim");
    eventually(SLOW, || async {
        pvcs.get_opt(claim).await.ok()?.is_none().then_some(())
    })
    .await
    .expect("the user's claim deleted");
    let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .delete(ns, &DeleteParams::default())
        .await;
}

fn bound_volume(c: &PersistentVolumeClaim) -> Option<String> {
    (c.status.as_ref()?.phase.as_deref() == Some("Bound"))
        .then(|| c.spec.as_ref()?.volume_name.clone())
        .flatten()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_pvs_and_a_deleted_node_are_looked_after_as_lvms_and_topolvm_do() {
    let n = ThickNode::start_with("csi-helpers", &[], 400, json!({"fstype": "ext4"})).await;
    let provisioner = n.provisioner();
    let client = n.s.client.clone();
    let ns = n.s.ns.name.clone();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
    let pvs: Api<PersistentVolume> = Api::all(client.clone());

    // vg-manager puts TopoLVM's finalizer on its Node with the capacity annotations.
    let node = Api::<Node>::all(client.clone())
        .get(NODE)
        .await
        .expect("node");
    assert!(
        node.metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == "topolvm.io/node"),
        "no topolvm.io/node finalizer on {NODE}: {:?}",
        node.metadata.finalizers
    );

    // A claim no node can hold: Pending, and LVMS's Warning with what each node has.
    pvcs.create(&PostParams::default(), &claim("huge", &n.class, "10Gi"))
        .await
        .expect("claim");
    let warned = one_event(&client, &ns, "NotEnoughCapacity", "huge").await;
    let note = warned.note.clone().unwrap_or_default();
    assert!(
        note.starts_with("Requested storage (10Gi) is greater than available capacity on any node (node node-a has ")
            && note.ends_with("free storage)."),
        "{note}"
    );
    assert_eq!(warned.type_.as_deref(), Some("Warning"));

    // A claim that fits binds; its PV gets the hostname label from its topology.
    pvcs.create(&PostParams::default(), &claim("data", &n.class, "20Mi"))
        .await
        .expect("claim");
    let pv_name = eventually(SLOW, || async {
        bound_volume(&pvcs.get("data").await.ok()?)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "data never Bound; provisioner log:\n{}",
            provisioner.log_text()
        )
    });
    let labelled = eventually(SLOW, || async {
        let pv = pvs.get(&pv_name).await.ok()?;
        (pv.metadata.labels?.get("kubernetes.io/hostname")? == NODE).then_some(())
    })
    .await;
    assert!(
        labelled.is_some(),
        "PV {pv_name} never got kubernetes.io/hostname={NODE}"
    );
    topolvm_pvc_reconciler(&client, &ns, &n.class).await;

    // Cut the claim reference: the PV is no longer managed; LVMS's Warning, in `default`.
    pvs.patch(
        &pv_name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"claimRef": null}})),
    )
    .await
    .expect("claimRef removed");
    let cut = one_event(&client, "default", "ClaimReferenceRemoved", &pv_name).await;
    assert_eq!(
        cut.note.as_deref(),
        Some(
            "Claim reference has been removed. This PV is no longer dynamically managed by LVM Storage and will need to be cleaned up manually."
        )
    );
    assert_eq!(
        cut.regarding.as_ref().and_then(|r| r.kind.as_deref()),
        Some("PersistentVolume")
    );

    // A third claim binds (its LogicalVolume is on node-a), then node-a is deleted.
    pvcs.create(&PostParams::default(), &claim("keep", &n.class, "20Mi"))
        .await
        .expect("claim");
    eventually(SLOW, || async {
        bound_volume(&pvcs.get("keep").await.ok()?)
    })
    .await
    .expect("keep Bound");
    // Both Warnings were still published once, after all the passes since (the PVC helper
    // looks again every 15 s).
    tokio::time::sleep(Duration::from_secs(16)).await;
    for (ns, reason, name) in [
        (ns.as_str(), "NotEnoughCapacity", "huge"),
        ("default", "ClaimReferenceRemoved", pv_name.as_str()),
    ] {
        let all = events(&client, ns, reason, name).await;
        assert_eq!(all.len(), 1, "{reason} about {name}: {all:?}");
        assert_eq!(lvms_testkit::events::series_count(&all[0]), 1, "{all:?}");
    }

    Api::<Node>::all(client.clone())
        .delete(NODE, &DeleteParams::default())
        .await
        .expect("delete node-a");
    let gone = eventually(SLOW, || async {
        Api::<Node>::all(client.clone())
            .get_opt(NODE)
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "node-a stayed (finalizer never removed); operator log:\n{}",
        n.op.log_text()
    );
    // Its claims were deleted (no pod uses them: pvc-protection lets them go). `huge` is not
    // one of them: csi-provisioner dropped its selected node when the node refused it.
    let claims_gone = eventually(SLOW, || async {
        let left: Vec<String> = pvcs
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .collect();
        (left == ["huge"]).then_some(())
    })
    .await;
    assert!(
        claims_gone.is_some(),
        "claims of node-a stayed: {:?}",
        pvcs.list(&ListParams::default()).await.map(|l| l
            .items
            .into_iter()
            .map(|c| c.metadata.name)
            .collect::<Vec<_>>())
    );
    // ... and no LogicalVolume of node-a is left holding a finalizer nobody will remove.
    let lvs_gone = eventually(SLOW, || async { n.none_on_node().await?.then_some(()) }).await;
    assert!(lvs_gone.is_some(), "LogicalVolumes of node-a stayed");

    // The journal tells it: one finalizer removal for node-a, nothing left open.
    let j = lvms_testkit::journal::settled(&n.s.operator_journal(), SLOW);
    let recs: Vec<_> = j.iter().collect::<Result<_, _>>().expect("journal");
    let effects = lvms_testkit::journal::effects(&recs, "topolvm-node");
    assert_eq!(
        effects.get("remove-node-finalizer").map(|e| e.took),
        Some(1),
        "{effects:?}"
    );
    assert!(
        effects.get("release-logical-volume").map(|e| e.took) >= Some(1),
        "{effects:?}"
    );
    for (unit, action) in [
        ("persistent-volume-claim", "report-not-enough-capacity"),
        ("persistent-volume", "report-claim-reference-removed"),
    ] {
        let e = lvms_testkit::journal::effects(&recs, unit);
        assert_eq!(e.get(action).map(|e| e.took), Some(1), "{unit}: {e:?}");
    }
}

/// Restart the operator (same socket and journal) with `env`.
fn restart(n: &mut ThickNode, socket: &str, env: &[(&str, &str)]) {
    n.op.kill();
    n.op = n.s.operator(env, &["--csi-socket", socket]);
}

/// Wait until the operator SIGKILLed itself at `point`.
fn died_at(n: &mut ThickNode, point: &str) {
    let status =
        n.op.wait_exit(Duration::from_secs(60))
            .unwrap_or_else(|| panic!("the operator did not reach {point}:\n{}", n.op.log_text()));
    assert!(
        lvms_testkit::dev::operator::OperatorProcess::killed_by_sigkill(&status),
        "{point}: {status:?}"
    );
}

/// The operator SIGKILLed at each fault point of the helpers' steps: every NotEnoughCapacity
/// Warning is still published exactly once, and a deleted Node's cleanup, interrupted at each
/// of its steps, still finishes with nothing left open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_killed_at_each_helper_fault_point_reports_once_and_still_finishes_a_node() {
    let mut n =
        ThickNode::start_with("csi-helpers-crash", &[], 400, json!({"fstype": "ext4"})).await;
    let client = n.s.client.clone();
    let ns = n.s.ns.name.clone();
    let socket = std::env::temp_dir().join(format!("lvms-csi-help-{}.sock", std::process::id()));
    let socket = socket.display().to_string();
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);

    // A claim no node can hold per life; the operator dies around its report.
    let points = [
        "intent-durable:persistent-volume-claim#report-not-enough-capacity",
        "applied:persistent-volume-claim#report-not-enough-capacity",
        "step-outcome:persistent-volume-claim#report-not-enough-capacity",
        "event-written:event-publisher",
    ];
    for (i, point) in points.iter().enumerate() {
        restart(&mut n, &socket, &[("LVMS_CRASH_AT", point)]);
        pvcs.create(
            &PostParams::default(),
            &claim(&format!("huge-{i}"), &n.class, "10Gi"),
        )
        .await
        .expect("claim");
        died_at(&mut n, point);
    }
    restart(&mut n, &socket, &[]);
    for i in 0..points.len() {
        let name = format!("huge-{i}");
        one_event(&client, &ns, "NotEnoughCapacity", &name).await;
    }
    // Past a recheck (15 s), each still has one Event, never repeated.
    tokio::time::sleep(Duration::from_secs(16)).await;
    for i in 0..points.len() {
        let name = format!("huge-{i}");
        let all = events(&client, &ns, "NotEnoughCapacity", &name).await;
        assert_eq!(all.len(), 1, "{name}: {all:?}");
        assert_eq!(
            lvms_testkit::events::series_count(&all[0]),
            1,
            "{name}: {all:?}"
        );
    }

    // node-a with two volumes and a claim on it, deleted; the operator dies at one step of the
    // cleanup per life, each next life replays it and goes on to the next.
    let mut ctl = n.controller().await;
    for v in ["pvc-h1", "pvc-h2"] {
        ctl.create_volume(crate::common::create_request(v, 32 << 20, &n.class))
            .await
            .expect("CreateVolume");
    }
    let on_a = claim("on-a", &n.class, "32Mi");
    pvcs.create(&PostParams::default(), &on_a)
        .await
        .expect("claim");
    let chain = [
        "intent-durable:topolvm-node#record-written-off",
        "intent-durable:topolvm-node#delete-claim",
        "applied:topolvm-node#release-logical-volume",
        "intent-durable:topolvm-node#release-logical-volume",
        "applied:topolvm-node#remove-node-finalizer",
    ];
    restart(&mut n, &socket, &[("LVMS_CRASH_AT", chain[0])]);
    let uid = Api::<Node>::all(client.clone())
        .get(NODE)
        .await
        .expect("node-a")
        .metadata
        .uid;
    Api::<Node>::all(client.clone())
        .delete(NODE, &DeleteParams::default())
        .await
        .expect("delete node-a");
    for (i, point) in chain.iter().enumerate() {
        died_at(&mut n, point);
        let next: Vec<(&str, &str)> = chain
            .get(i + 1)
            .map(|p| vec![("LVMS_CRASH_AT", *p)])
            .unwrap_or_default();
        restart(&mut n, &socket, &next);
    }
    let gone = eventually(SLOW, || async {
        let node = Api::<Node>::all(client.clone()).get_opt(NODE).await.ok()?;
        let claim = pvcs.get_opt("on-a").await.ok()?;
        (node.is_none() && claim.is_none() && n.none_on_node().await?).then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "node-a's cleanup never finished:\n{}",
        n.op.log_text()
    );
    let j = lvms_testkit::journal::settled(&n.s.operator_journal(), SLOW);
    let recs: Vec<_> = j.iter().collect::<Result<_, _>>().expect("journal");
    let effects = lvms_testkit::journal::effects(&recs, "topolvm-node");
    for action in [
        "record-written-off",
        "delete-claim",
        "release-logical-volume",
        "remove-node-finalizer",
    ] {
        assert!(effects.contains_key(action), "{action}: {effects:?}");
    }
    // The write-off's Warning, its step killed before it was made: published once, by replay.
    let warned: Vec<Event> = events(&client, "default", "VolumesWrittenOff", NODE)
        .await
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.uid.clone()) == uid)
        .collect();
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert_eq!(lvms_testkit::events::series_count(&warned[0]), 1);
}
