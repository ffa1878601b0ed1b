//! PVCs through the real csi-provisioner and csi-resizer (built from their Go modules) on the
//! operator's socket: WaitForFirstConsumer claim → PV Bound with TopoLVM's handle and node
//! affinity → LV on node-a; grown; deleted; and 50 claims at once.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use lvms_testkit::eventually;
use serde_json::json;

use crate::common::{MIB, NODE, ThickNode};

const SLOW: Duration = Duration::from_secs(120);

fn claim(name: &str, class: &str, size: &str) -> PersistentVolumeClaim {
    lvms_testkit::fixtures::csi::claim(name, &format!("lvms-{class}"), size, NODE, None)
}

fn sidecars(n: &ThickNode) -> Vec<lvms_testkit::dev::csi_peers::Sidecar> {
    vec![
        n.sidecar_env(
            "csi-provisioner",
            &[
                "--feature-gates=Topology=true",
                "--extra-create-metadata",
                // CSIStorageCapacity per node and class from GetCapacity (no pod here to own
                // them: -1).
                "--enable-capacity",
                "--capacity-ownerref-level=-1",
                "--capacity-poll-interval=2s",
                "--leader-election=false",
                "--timeout=30s",
                "--retry-interval-start=500ms",
                "--retry-interval-max=5s",
                "--worker-threads=100",
                "--v=4",
            ],
            &[("NAMESPACE", n.s.ns.name.as_str())],
        ),
        n.sidecar(
            "csi-resizer",
            &[
                "--leader-election=false",
                "--timeout=30s",
                "--retry-interval-start=500ms",
                "--retry-interval-max=5s",
                "--v=4",
            ],
        ),
    ]
}

async fn bound(
    pvcs: &Api<PersistentVolumeClaim>,
    name: &str,
    peers: &[lvms_testkit::dev::csi_peers::Sidecar],
) -> PersistentVolumeClaim {
    eventually(SLOW, || async {
        let c = pvcs.get(name).await.ok()?;
        (c.status.as_ref()?.phase.as_deref() == Some("Bound")).then_some(c)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "claim {name} never Bound; {}",
            peers
                .iter()
                .map(|p| format!("{} log tail:\n{}", p.name, tail(&p.log_text())))
                .collect::<String>()
        )
    })
}

/// (storage class, bytes) of each CSIStorageCapacity for node-a's topology segment.
async fn storage_capacity(n: &ThickNode) -> Vec<(String, u64)> {
    let api: Api<k8s_openapi::api::storage::v1::CSIStorageCapacity> =
        Api::namespaced(n.s.client.clone(), &n.s.ns.name);
    let Ok(list) = api.list(&Default::default()).await else {
        return Vec::new();
    };
    list.items
        .into_iter()
        .filter(|c| {
            let t = serde_json::to_value(&c.node_topology).unwrap_or_default();
            t["matchLabels"]["topology.topolvm.io/node"] == NODE
        })
        .map(|c| {
            let bytes = c
                .capacity
                .and_then(|q| lvms::api::quantity::parse_quantity_bytes(&q.0).ok())
                .unwrap_or(0);
            (c.storage_class_name, bytes)
        })
        .collect()
}

/// `lvms explain SUBJECT JOURNALS -o json` against the test control plane.
fn explain_json(subject: &str, journals: &[String]) -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lvms"))
        .arg("explain")
        .arg(subject)
        .args(journals)
        .args(["-o", "json"])
        .env("KUBECONFIG", &lvms_testkit::env::env().cp.kubeconfig)
        .output()
        .expect("lvms explain");
    assert!(
        out.status.success(),
        "lvms explain {subject}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("explain JSON")
}

fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_binds_grows_and_is_deleted_through_the_upstream_sidecars() {
    let n = ThickNode::start_with("csi-pvc", &[], 400, json!({"fstype": "ext4"})).await;
    let peers = sidecars(&n);
    let before = n.capacity().await.expect("capacity");
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(n.s.client.clone(), &n.s.ns.name);
    pvcs.create(&PostParams::default(), &claim("data", &n.class, "40Mi"))
        .await
        .expect("claim");
    let c = bound(&pvcs, "data", &peers).await;
    let pv_name = c
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .expect("volume name");
    let pvs: Api<PersistentVolume> = Api::all(n.s.client.clone());
    let pv = pvs.get(&pv_name).await.expect("PV");
    let csi = pv
        .spec
        .as_ref()
        .and_then(|s| s.csi.clone())
        .expect("a CSI PV");
    assert_eq!(csi.driver, "topolvm.io");
    assert_eq!(csi.fs_type.as_deref(), Some("ext4"));
    // The handle is the LogicalVolume's uid, which names the LV on disk.
    let lv = n
        .logical_volumes()
        .get(&pv_name)
        .await
        .expect("LogicalVolume named for the PV");
    assert_eq!(Some(csi.volume_handle.clone()), lv.metadata.uid);
    let affinity =
        serde_json::to_value(pv.spec.as_ref().and_then(|s| s.node_affinity.clone())).unwrap();
    assert_eq!(
        affinity["required"]["nodeSelectorTerms"][0]["matchExpressions"][0],
        json!({"key": "topology.topolvm.io/node", "operator": "In", "values": [NODE]})
    );
    assert_eq!(n.lvs().get(&csi.volume_handle), Some(&(40 * MIB)));
    n.capacity_where(|c| c == before - 40 * MIB).await;
    // The PV's story: the operator's LogicalVolume writes and the node's lvcreate, nothing
    // held back, the claim Bound.
    let journals = [
        "--journal".to_string(),
        n.s.operator_journal().display().to_string(),
        "--node-journal".to_string(),
        format!("{NODE}={}", n.s.vg_manager_journal(NODE).display()),
    ];
    for subject in [
        format!("pv/{pv_name}"),
        format!("logicalvolume/{pv_name}"),
        format!("pvc/{}/data", n.s.ns.name),
    ] {
        let e = explain_json(&subject, &journals);
        assert_eq!(e["held_back"], json!([]), "{subject}: {e:#}");
        let records = e["records"].as_array().cloned().unwrap_or_default();
        for (source, record) in [
            ("operator", "Intent "),
            (&*format!("node/{NODE}"), "Intent lvcreate"),
        ] {
            assert!(
                records.iter().any(|r| r["source"] == source
                    && r["record"].as_str().unwrap_or_default().starts_with(record)
                    && r["object"] == format!("LogicalVolume/{pv_name}")),
                "{subject}: no {record:?} from {source}: {e:#}"
            );
        }
    }
    // csi-provisioner's CSIStorageCapacity for node-a's segment follows GetCapacity.
    let published = eventually(SLOW, || async {
        let caps = storage_capacity(&n).await;
        (caps == vec![(format!("lvms-{}", n.class), before - 40 * MIB)]).then_some(())
    })
    .await;
    assert!(
        published.is_some(),
        "CSIStorageCapacity never showed {} bytes: {:?}",
        before - 40 * MIB,
        storage_capacity(&n).await
    );

    // Grow the claim: csi-resizer → ControllerExpandVolume → lvresize → PV capacity.
    pvcs.patch(
        "data",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": "64Mi"}}}})),
    )
    .await
    .expect("resize");
    let grown = eventually(SLOW, || async {
        let pv = pvs.get(&pv_name).await.ok()?;
        let cap = pv.spec?.capacity?.get("storage")?.0.clone();
        (cap == "64Mi").then_some(())
    })
    .await;
    assert!(
        grown.is_some(),
        "PV never grew; resizer log:\n{}",
        tail(&peers[1].log_text())
    );
    assert_eq!(n.lvs().get(&csi.volume_handle), Some(&(64 * MIB)));

    // Delete: the PV (reclaim Delete) goes, and with it the LV.
    pvcs.delete("data", &DeleteParams::default())
        .await
        .expect("delete");
    let gone = eventually(SLOW, || async {
        pvs.get_opt(&pv_name).await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "PV stayed; provisioner log:\n{}",
        tail(&peers[0].log_text())
    );
    assert!(n.lvs().is_empty(), "{:?}", n.lvs());
    n.capacity_where(|c| c == before).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_claims_at_once_all_bind_with_nothing_lost_or_duplicated() {
    let n = ThickNode::start_with("csi-fifty", &[], 2048, json!({"fstype": "ext4"})).await;
    let peers = sidecars(&n);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(n.s.client.clone(), &n.s.ns.name);
    let names: Vec<String> = (0..50).map(|i| format!("c{i:02}")).collect();
    let t0 = std::time::Instant::now();
    for name in &names {
        pvcs.create(&PostParams::default(), &claim(name, &n.class, "32Mi"))
            .await
            .expect("claim");
    }
    let mut handles = BTreeSet::new();
    for name in &names {
        let c = bound(&pvcs, name, &peers).await;
        let pv = c.spec.and_then(|s| s.volume_name).expect("volume");
        let pv = Api::<PersistentVolume>::all(n.s.client.clone())
            .get(&pv)
            .await
            .expect("PV");
        handles.insert(pv.spec.and_then(|s| s.csi).expect("csi").volume_handle);
    }
    println!("50 claims bound in {:?}", t0.elapsed());
    assert_eq!(handles.len(), 50, "one volume per claim");
    let lvs = n.lvs();
    assert_eq!(
        lvs.keys().cloned().collect::<BTreeSet<_>>(),
        handles,
        "no orphan, no duplicate LV"
    );
    assert!(lvs.values().all(|s| *s == 32 * MIB));
    let lv_objects = n
        .logical_volumes()
        .list(&Default::default())
        .await
        .expect("list");
    assert_eq!(lv_objects.items.len(), 50, "one LogicalVolume per claim");
}

/// A claim larger than its node's volume group stays Pending; `lvms explain` says which node and
/// class hold it back and why: lvms's NotEnoughCapacity Warning (as LVMS's PVC helper sends
/// it) or csi-provisioner's ProvisioningFailed carrying the driver's ResourceExhausted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_too_big_for_its_node_is_explained() {
    let n = ThickNode::start_with("csi-pending", &[], 200, json!({})).await;
    let peers = sidecars(&n);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(n.s.client.clone(), &n.s.ns.name);
    pvcs.create(&PostParams::default(), &claim("too-big", &n.class, "1Gi"))
        .await
        .expect("claim");
    let subject = format!("pvc/{}/too-big", n.s.ns.name);
    let journal = n.s.operator_journal().display().to_string();
    let explained = eventually(SLOW, || async {
        let e = explain_json(&subject, &["--journal".to_string(), journal.clone()]);
        let h = e["held_back"].as_array()?.first()?.clone();
        h["step"].is_object().then_some((e, h))
    })
    .await;
    let Some((e, h)) = explained else {
        panic!(
            "explain never named a failing step; provisioner log:\n{}",
            tail(&peers[0].log_text())
        );
    };
    assert_eq!(h["status"], "Pending", "{e:#}");
    // RESOURCE_EXHAUSTED (TopoLVM's answer for a node without room) makes csi-provisioner hand
    // the claim back to the scheduler: its node may already be gone from it.
    let node = h["node"].as_str();
    assert!(node.is_none() || node == Some(NODE), "{e:#}");
    assert_eq!(h["class"], format!("lvms-{}", n.class), "{e:#}");
    let error = h["step"]["error"].as_str().unwrap_or_default();
    let why = h["step"]["step"].as_str().unwrap_or_default();
    assert!(
        (why == "NotEnoughCapacity" && error.contains("node node-a has"))
            || (why == "ProvisioningFailed" && error.contains("ResourceExhausted")),
        "the lack of capacity is named: {e:#}"
    );
    assert!(e["found"].as_bool().unwrap_or(false));
    // The text says the same on its first lines (the README's worked example comes from here).
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lvms"))
        .args(["explain", &subject, "--journal", &journal])
        .env("KUBECONFIG", &lvms_testkit::env::env().cp.kubeconfig)
        .output()
        .expect("lvms explain");
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    let head: String = text.lines().take(12).collect::<Vec<_>>().join("\n");
    // Read a moment after the JSON: the claim may have lost its node in between.
    assert!(
        (head.contains("node node-a, class lvms-") || head.contains("  class lvms-"))
            && head.contains("Pending")
            && head.contains(why),
        "{text}"
    );
}
