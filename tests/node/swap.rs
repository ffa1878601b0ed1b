//! The swap from LVMS itself to lvms, and back, on the real node, as docs/migrate-from-lvms.md
//! tells a user to do it. LVMS is openshift/lvm-operator built from its Go module
//! (deploy/dev/build-lvms-go.sh, with its embedded TopoLVM), installed from its own tree
//! (`config/default`) with its image renamed to the one imported into the node's containerd.
//! What OpenShift would add is made by hand: the PriorityClass its Pods name and the TLS Secrets
//! the service CA would issue; its SecurityContextConstraints and webhook configuration are left
//! out (no OpenShift API, no service CA to sign for the API server).
//!
//! These run after the kustomize scenario, on disks lvms left clean.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use lvms_testkit::dev::deploy::{apply_all, parse_stream, render};
use lvms_testkit::env::repo;
use lvms_testkit::{lvms_go, snapshots};
use serde_json::{Value, json};

use crate::ctx::{APPS, Ctx, DISK_A, DISK_B, DISK_C, LVMS_NS, SLOW};
use crate::install::{CLUSTER, cluster_state, clusters, helm, ready_pods};
use crate::kustomize::delete_objects;
use crate::workloads::{pod, pvc, pvc_from_snapshot};

/// Kinds of LVMS's tree that stay through the swap: its CRDs (lvms's are applied over them),
/// the Namespace (it holds the LVMCluster), and what OpenShift made for it.
const KEPT: &[&str] = &[
    "CustomResourceDefinition",
    "Namespace",
    "PriorityClass",
    "Secret",
];

/// A file whose content any Pod can check again: 20000 numbered lines.
const BLOB: &str = "seq 1 20000 >/data/blob";
const READ: &str = "cat /data/f; md5sum /data/blob | cut -d' ' -f1";

/// LVMS's tree as a user would apply it here, plus what OpenShift would have made.
pub fn lvms_go_objects(c: &Ctx) -> Vec<Value> {
    let config = lvms_go::config_dir().unwrap_or_else(|e| panic!("{e}"));
    let dir = c.dir.join("lvms-go");
    std::fs::create_dir_all(&dir).expect("overlay dir");
    // kustomize takes no absolute base: a copy of the tree inside the overlay.
    let copy = dir.join("lvms-config");
    let _ = std::fs::remove_dir_all(&copy);
    let cp = std::process::Command::new("cp")
        .arg("-r")
        .arg(&config)
        .arg(&copy)
        .status()
        .expect("cp");
    assert!(cp.success(), "copying {} failed", config.display());
    let image = lvms_go::image();
    let (name, tag) = image.rsplit_once(':').expect("image:tag");
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- lvms-config/default\nimages:\n- {{name: quay.io/lvms_dev/lvms-operator, newName: {name}, newTag: {tag}}}\n"
        ),
    )
    .expect("kustomization.yaml");
    let mut objects: Vec<Value> = render(&dir)
        .unwrap_or_else(|e| panic!("kustomize build of LVMS's tree: {e}"))
        .into_iter()
        .filter(|o| {
            !matches!(
                o["kind"].as_str(),
                Some("SecurityContextConstraints" | "ValidatingWebhookConfiguration")
            )
        })
        .collect();
    assert!(
        objects.iter().any(|o| o["kind"] == "Deployment"),
        "LVMS's tree has no Deployment"
    );
    objects.push(json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "openshift-user-critical"}, "value": 1000000000
    }));
    let pki = lvms_testkit::dev::pki::Pki::create(&dir.join("pki")).expect("certificates");
    let pem = |p: std::path::PathBuf| std::fs::read_to_string(p).expect("pem");
    let (crt, key) = (pem(pki.serving_cert()), pem(pki.serving_key()));
    for secret in [
        "lvms-operator-webhook-server-cert",
        "lvms-operator-metrics-cert",
        "vg-manager-metrics-cert",
    ] {
        objects.push(json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": secret, "namespace": LVMS_NS},
            "stringData": {"tls.crt": crt, "tls.key": key}
        }));
    }
    objects
}

/// The LVMCluster LVMS makes volumes from: a thin class and a thick one.
fn go_cluster() -> Value {
    let disk = |d: &str| json!({"paths": [format!("/dev/disk/by-id/virtio-{d}")]});
    json!({
        "apiVersion": "lvm.topolvm.io/v1alpha1", "kind": "LVMCluster",
        "metadata": {"name": CLUSTER, "namespace": LVMS_NS},
        "spec": {"storage": {"deviceClasses": [
            {"name": "vg1", "default": true, "fstype": "xfs", "deviceSelector": disk(DISK_A),
             "thinPoolConfig": {"name": "thin-pool-1", "sizePercent": 90, "overprovisionRatio": 10}},
            {"name": "vg2", "fstype": "ext4", "deviceSelector": disk(DISK_B)}
        ]}}
    })
}

pub async fn operator_ready(c: &mut Ctx, who: &str) {
    c.until(
        &format!("{who}'s operator Pod Ready"),
        SLOW,
        |cl| async move {
            ready_pods(cl, LVMS_NS, "app.kubernetes.io/name=lvms-operator")
                .await
                .into_iter()
                .next()
        },
    )
    .await;
}

pub async fn cluster_ready(c: &mut Ctx, who: &str) {
    c.until(
        &format!("the LVMCluster Ready under {who}"),
        SLOW,
        |cl| async move { cluster_state(cl).await.filter(|s| s == "Ready") },
    )
    .await;
}

pub async fn lvms_itself_installs_and_provisions(c: &mut Ctx) {
    // The kustomize scenario's uninstall took the namespace: LVMS's tree makes it again.
    c.operator_namespace_gone("the namespace of the last install gone")
        .await;
    let objects = lvms_go_objects(c);
    apply_all(&c.client, &objects)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    operator_ready(c, "LVMS").await;
    let img = ready_pods(
        c.client.clone(),
        LVMS_NS,
        "app.kubernetes.io/name=lvms-operator",
    )
    .await
    .into_iter()
    .next()
    .and_then(|p| p.spec?.containers.first()?.image.clone());
    assert_eq!(
        img,
        Some(lvms_go::image()),
        "the operator runs LVMS's image"
    );
    c.apply_json(go_cluster()).await;
    cluster_ready(c, "LVMS").await;
    c.apply_json(pvc("go-first", "lvms-vg1", 256, false)).await;
    let out = c
        .run_pod(pod(
            "go-first-app",
            "go-first",
            false,
            "echo by-lvms-go >/data/f; cat /data/f",
        ))
        .await;
    assert_eq!(out.trim(), "by-lvms-go");
}

/// Day 2 under LVMS: a third class without a device selector (Dynamic discovery, the policy
/// unset as LVMS 4.20 stores it; its node status says `RuntimeDynamic`) takes the disk no other
/// class has.
async fn add_dynamic_class(c: &mut Ctx) {
    let lc = clusters(c.client.clone())
        .get(CLUSTER)
        .await
        .expect("the LVMCluster");
    let mut classes = lc.data["spec"]["storage"]["deviceClasses"]
        .as_array()
        .cloned()
        .expect("deviceClasses");
    classes.push(json!({"name": "vg3", "fstype": "xfs"}));
    clusters(c.client.clone())
        .patch(
            CLUSTER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"storage": {"deviceClasses": classes}}})),
        )
        .await
        .expect("adding class vg3");
    // LVMS names devices by kernel name: the one device is none of the other classes'.
    c.until(
        &format!("class vg3 Ready on the third disk ({DISK_C}), Dynamic"),
        SLOW,
        |cl| async move {
            let ns = node_status_of(&cl).await?;
            let all = ns.as_array()?.clone();
            let vg3 = all.iter().find(|s| s["name"] == "vg3")?;
            let devices = vg3["devices"].as_array()?;
            let others: Vec<&Value> = all
                .iter()
                .filter(|s| s["name"] != "vg3")
                .flat_map(|s| s["devices"].as_array().into_iter().flatten())
                .collect();
            let ok = vg3["deviceDiscoveryPolicy"] == "RuntimeDynamic"
                && devices.len() == 1
                && !others.contains(&&devices[0]);
            (ok && cluster_state(cl).await.as_deref() == Some("Ready")).then_some(())
        },
    )
    .await;
}

pub async fn lvms_itself_makes_the_volumes_the_swap_keeps(c: &mut Ctx) {
    add_dynamic_class(c).await;
    // A thin claim with data, its snapshot and its clone; a thick claim a Pod holds across the
    // swap.
    c.apply_json(pvc("go-data", "lvms-vg1", 256, false)).await;
    let wrote = c
        .run_pod(pod(
            "go-writer",
            "go-data",
            false,
            &format!("echo go-data >/data/f; {BLOB}; sync; {READ}"),
        ))
        .await;
    let mut snap = snapshots::snapshot("go-snap", "lvms-vg1", "go-data");
    snap["metadata"]["namespace"] = APPS.into();
    c.apply_json(snap).await;
    snapshot_ready(c, "go-snap").await;
    let mut clone = pvc("go-clone", "lvms-vg1", 256, false);
    clone["spec"]["dataSource"] = json!({"kind": "PersistentVolumeClaim", "name": "go-data"});
    c.apply_json(clone).await;
    let cloned = c
        .run_pod(pod("go-clone-reader", "go-clone", false, READ))
        .await;
    assert_eq!(cloned, wrote, "LVMS's clone holds what its source held");
    c.apply_json(pvc("go-held", "lvms-vg2", 256, false)).await;
    c.start_pod(pod(
        "go-held",
        "go-held",
        false,
        "echo held >/data/f; sync; while :; do sleep 5; done",
    ))
    .await;
    c.pod_running("go-held").await;
}

async fn snapshot_ready(c: &mut Ctx, name: &str) {
    let n = name.to_string();
    c.until(
        &format!("VolumeSnapshot {name} readyToUse"),
        Duration::from_secs(300),
        |cl| {
            let n = n.clone();
            async move {
                let s = snapshots::api(&cl, "volumesnapshots", "VolumeSnapshot", Some(APPS))
                    .get(&n)
                    .await
                    .ok()?;
                (s.data["status"]["readyToUse"] == true).then_some(())
            }
        },
    )
    .await;
}

/// lvm2 on the node, one line per object: `pv <uuid> <name> <vg>`, `vg <uuid> <name> <size>`,
/// `lv <uuid> <vg>/<name> <size> <attr>` (sizes in bytes).
async fn lvm_state(c: &mut Ctx, probe: &str) -> BTreeMap<String, String> {
    let out = c
        .on_node(
            probe,
            "pvs --noheadings -o pv_uuid,pv_name,vg_name | sed s/^/pv/; \
             vgs --noheadings --units b --nosuffix -o vg_uuid,vg_name,vg_size | sed s/^/vg/; \
             lvs -a --noheadings --units b --nosuffix -o lv_uuid,vg_name,lv_name,lv_size,lv_attr | sed s/^/lv/",
        )
        .await;
    out.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let key = |k: &str| format!("{} {}", w[0], k);
            match w.as_slice() {
                ["pv", uuid, rest @ ..] => Some((key(uuid), rest.join(" "))),
                ["vg", uuid, rest @ ..] => Some((key(uuid), rest.join(" "))),
                ["lv", uuid, vg, name, size, attr] => {
                    Some((key(uuid), format!("{vg}/{name} {size} {}", &attr[..1])))
                }
                _ => None,
            }
        })
        .collect()
}

/// The thin pool's data size in `state`, by its name.
fn pool_size(state: &BTreeMap<String, String>) -> u64 {
    state
        .values()
        .find_map(|v| {
            let (name, rest) = v.split_once(' ')?;
            (name == "vg1/thin-pool-1").then(|| rest.split(' ').next()?.parse().ok())?
        })
        .unwrap_or_else(|| panic!("no thin pool vg1/thin-pool-1 in {state:#?}"))
}

/// The LVMCluster's spec, each class without `storageClassOptions` (returned apart).
async fn cluster_spec(c: &Ctx) -> (Value, Vec<Value>) {
    let lc = clusters(c.client.clone())
        .get(CLUSTER)
        .await
        .expect("the LVMCluster");
    let mut spec = lc.data["spec"].clone();
    let mut options = Vec::new();
    for dc in spec["storage"]["deviceClasses"]
        .as_array_mut()
        .expect("deviceClasses")
    {
        options.push(
            dc.as_object_mut()
                .and_then(|o| o.remove("storageClassOptions"))
                .unwrap_or(Value::Null),
        );
    }
    (spec, options)
}

/// Each volume group's node status (LVMVolumeGroupNodeStatus `lvms-node`) without its
/// `status`/`reason` words, which may be said differently: the policy and the devices.
async fn node_status_of(client: &kube::Client) -> Option<Value> {
    let ar = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "lvm.topolvm.io",
        "v1alpha1",
        "LVMVolumeGroupNodeStatus",
    ));
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), LVMS_NS, &ar);
    let ns = api.get(crate::ctx::NODE).await.ok()?;
    let mut by_vg: Vec<Value> = ns.data["spec"]["nodeStatus"]
        .as_array()?
        .iter()
        .map(|s| {
            json!({"name": s["name"], "deviceDiscoveryPolicy": s["deviceDiscoveryPolicy"],
                   "devices": s["devices"]})
        })
        .collect();
    by_vg.sort_by_key(|v| v["name"].to_string());
    Some(json!(by_vg))
}

async fn node_status(c: &Ctx) -> Value {
    node_status_of(&c.client)
        .await
        .expect("the node's LVMVolumeGroupNodeStatus")
}

pub async fn lvms_takes_over_what_lvms_itself_made(c: &mut Ctx) {
    let state0 = lvm_state(c, "lvm-before").await;
    let (spec0, _) = cluster_spec(c).await;
    let status0 = node_status(c).await;
    assert!(
        state0.keys().any(|k| k.starts_with("lv ")),
        "LVMS made no LV: {state0:#?}"
    );

    // 1. LVMS's operator and its vg-manager go; everything they made stays.
    let objects = lvms_go_objects(c);
    let gone: Vec<Value> = objects
        .iter()
        .filter(|o| !KEPT.contains(&o["kind"].as_str().unwrap_or_default()))
        .cloned()
        .collect();
    delete_objects(&c.client, &gone).await;
    let ds: Api<k8s_openapi::api::apps::v1::DaemonSet> = Api::namespaced(c.client.clone(), LVMS_NS);
    ds.delete("vg-manager", &DeleteParams::default())
        .await
        .expect("deleting LVMS's vg-manager DaemonSet");
    c.operator_pods_gone("LVMS's Pods gone", SLOW).await;
    let swapped_at = k8s_openapi::jiff::Timestamp::now();

    // 2. lvms's CRDs over LVMS's (Helm installs a chart's CRDs only where there are none).
    let mut crds = Vec::new();
    for f in std::fs::read_dir(repo().join("deploy/helm/lvms/crds")).expect("crds") {
        let text = std::fs::read_to_string(f.expect("crd").path()).expect("crd");
        crds.extend(parse_stream(&text).expect("crd yaml"));
    }
    apply_all(&c.client, &crds)
        .await
        .unwrap_or_else(|e| panic!("applying lvms's CRDs: {e}"));

    // 3. helm install, into the namespace that is there.
    helm(c, "install", &[("createNamespace", "false")]);
    operator_ready(c, "lvms").await;
    cluster_ready(c, "lvms").await;

    // Nothing recreated or wiped: every PV, VG and LV LVMS made, with its uuid and size; the
    // thin pool only grows to its share of the VG (lvms's reading of sizePercent), by LVMS's own
    // test (int(pool / vg × 100) ≥ sizePercent), so no pass plans an extension again (LVMS's
    // `-l 90%VG` left some pools a few extents short). Waited for: the LVMCluster's Ready is
    // the one LVMS left until lvms's operator writes its own, which can come before
    // lvms's vg-manager's first pass.
    let vg_of = |state: &BTreeMap<String, String>| -> u64 {
        state
            .values()
            .find_map(|v| v.strip_prefix("vg1 ")?.parse().ok())
            .unwrap_or_else(|| panic!("no VG vg1 in {state:#?}"))
    };
    let started = std::time::Instant::now();
    let mut looks = 0;
    let state1 = loop {
        looks += 1;
        let state = lvm_state(c, &format!("lvm-after-{looks}")).await;
        let (pool1, vg1) = (pool_size(&state), vg_of(&state));
        if pool1 * 100 / vg1 >= 90 {
            break state;
        }
        assert!(
            // SLOW: beside the first node (both emulated on two cores) a pass takes minutes.
            started.elapsed() < SLOW,
            "the thin pool is {pool1} of a {vg1} VG: below its 90 % {:?} after lvms's install",
            started.elapsed()
        );
        // Each look is a Pod, whose start costs the node what the pass it waits for needs.
        tokio::time::sleep(Duration::from_secs(30)).await;
    };
    let (pool0, pool1) = (pool_size(&state0), pool_size(&state1));
    assert!(pool1 >= pool0, "the thin pool shrank: {pool0} → {pool1}");
    for (k, v) in &state0 {
        let now = state1.get(k).unwrap_or_else(|| {
            panic!("{k} ({v}) is gone after the swap:\nbefore {state0:#?}\nafter {state1:#?}")
        });
        // The pool and its hidden data LV: compared above.
        if v.starts_with("vg1/thin-pool-1 ") || v.starts_with("vg1/[thin-pool-1_tdata] ") {
            continue;
        }
        assert_eq!(now, v, "{k} changed in the swap");
    }
    let (spec1, options) = cluster_spec(c).await;
    assert_eq!(spec1, spec0, "the LVMCluster's spec changed in the swap");
    for o in &options {
        assert!(
            o.is_null()
                || *o
                    == json!({"additionalParameters": {}, "reclaimPolicy": "Delete",
                              "volumeBindingMode": "WaitForFirstConsumer"}),
            "storageClassOptions: {o}"
        );
    }
    assert_eq!(
        node_status(c).await,
        status0,
        "the node status's policy or devices changed"
    );

    // The held Pod ran through it; LVMS's claim, clone and snapshot are lvms's now.
    c.pod_running("go-held").await;
    let data = c.run_pod(pod("go-read", "go-data", false, READ)).await;
    assert!(data.starts_with("go-data\n"), "{data}");
    let clone = c
        .run_pod(pod("go-clone-read", "go-clone", false, READ))
        .await;
    assert_eq!(clone, data);
    c.apply_json(pvc_from_snapshot("go-restored", "lvms-vg1", 300, "go-snap"))
        .await;
    let restored = c
        .run_pod(pod("go-restored-read", "go-restored", false, READ))
        .await;
    assert_eq!(restored, data, "LVMS's snapshot restored by lvms");

    // Grown, snapshotted and deleted through lvms.
    grow(c, "go-data", 512).await;
    let df = c
        .run_pod(pod("go-grown", "go-data", false, "df -Pm /data | tail -1"))
        .await;
    let size: u64 = df
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    assert!(size > 400, "the filesystem did not grow: {df}");
    claim_grown(c, "go-data", 512).await;
    let mut snap = snapshots::snapshot("lvms-snap", "lvms-vg1", "go-data");
    snap["metadata"]["namespace"] = APPS.into();
    c.apply_json(snap).await;
    snapshot_ready(c, "lvms-snap").await;
    delete_claim(c, "go-clone").await;

    // New claims, every class.
    for (claim, class) in [
        ("new-thin", "lvms-vg1"),
        ("new-thick", "lvms-vg2"),
        ("new-dynamic", "lvms-vg3"),
    ] {
        c.apply_json(pvc(claim, class, 256, false)).await;
        let out = c
            .run_pod(pod(
                &format!("{claim}-app"),
                claim,
                false,
                "echo new >/data/f; cat /data/f",
            ))
            .await;
        assert_eq!(out.trim(), "new");
    }

    // lvms said each thing once, not again what LVMS had said.
    let events = Api::<Event>::namespaced(c.client.clone(), LVMS_NS)
        .list(&ListParams::default())
        .await
        .expect("events");
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    // About LVMS's own kinds (kubelet's probe Events on Pods repeat by design).
    for e in events.items.iter().filter(|e| {
        e.metadata
            .creation_timestamp
            .as_ref()
            .is_some_and(|t| t.0 >= swapped_at)
            && e.involved_object
                .api_version
                .as_deref()
                .is_some_and(|v| v.starts_with("lvm.topolvm.io/"))
    }) {
        let key = format!(
            "{}/{} {} {}",
            e.involved_object.kind.clone().unwrap_or_default(),
            e.involved_object.name.clone().unwrap_or_default(),
            e.reason.clone().unwrap_or_default(),
            e.message.clone().unwrap_or_default()
        );
        *seen.entry(key).or_default() += e.count.unwrap_or(1).max(1) as u32;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "Events said more than once: {twice:#?}");
}

pub async fn lvms_itself_takes_them_back(c: &mut Ctx) {
    // As docs/migrate-from-lvms.md says: the Pods lvms mounted are gone (the scenario deleted
    // them), and their gates with them. A deleted Pod can leave the API before kubelet's
    // NodeUnpublishVolume ends; the user waits for the gates, here as there.
    let started = std::time::Instant::now();
    loop {
        let gates = c
            .on_node("gates-before", "dmsetup ls | grep -c ^lvms- || true")
            .await;
        if gates.trim() == "0" {
            break;
        }
        assert!(
            started.elapsed() < SLOW,
            "{} gates still there {:?} after the Pods went",
            gates.trim(),
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    // lvms goes: helm uninstall, and the DaemonSet its operator made.
    helm(c, "uninstall", &[]);
    let ds: Api<k8s_openapi::api::apps::v1::DaemonSet> = Api::namespaced(c.client.clone(), LVMS_NS);
    let _ = ds.delete("vg-manager", &DeleteParams::default()).await;
    c.operator_pods_gone("lvms's Pods gone", SLOW).await;
    // No gate of lvms's left but under a running Pod (go-held was mounted by LVMS: none).
    let gates = c
        .on_node("gates", "dmsetup ls | grep -c ^lvms- || true")
        .await;
    assert_eq!(gates.trim(), "0", "lvms left device-mapper gates");

    // LVMS again, over lvms's CRDs and objects.
    let objects = lvms_go_objects(c);
    apply_all(&c.client, &objects)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    operator_ready(c, "LVMS again").await;
    cluster_ready(c, "LVMS again").await;
    c.pod_running("go-held").await;

    // LVMS's own operations on what lvms made and on its own volumes.
    grow(c, "go-data", 768).await;
    let df = c
        .run_pod(pod(
            "go-grown-again",
            "go-data",
            false,
            "df -Pm /data | tail -1; cat /data/f",
        ))
        .await;
    let size: u64 = df
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    assert!(
        size > 650 && df.contains("go-data"),
        "LVMS did not grow it: {df}"
    );
    claim_grown(c, "go-data", 768).await;
    delete_claim(c, "new-thin").await;
    delete_claim(c, "new-thick").await;
    c.apply_json(pvc("go-again", "lvms-vg1", 256, false)).await;
    let out = c
        .run_pod(pod(
            "go-again-app",
            "go-again",
            false,
            "echo again >/data/f; cat /data/f",
        ))
        .await;
    assert_eq!(out.trim(), "again");
    // The Pod that held its claim through both swaps ends; the claim still has what it wrote.
    c.delete_pod("go-held").await;
    let held = c
        .run_pod(pod("go-held-read", "go-held", false, "cat /data/f"))
        .await;
    assert_eq!(held.trim(), "held");
}

/// Patches claim `name` to `mib` MiB and waits until its volume has that size (the controller's
/// part); the filesystem grows when a Pod next mounts it, and the claim then reports the size.
async fn grow(c: &mut Ctx, name: &str, mib: u64) {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(c.client.clone(), APPS);
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(
            json!({"spec": {"resources": {"requests": {"storage": format!("{mib}Mi")}}}}),
        ),
    )
    .await
    .unwrap_or_else(|e| panic!("growing {name}: {e}"));
    let pv = c.bound_pv(name).await.metadata.name.unwrap_or_default();
    c.until(&format!("the volume of {name} at {mib}Mi"), SLOW, |cl| {
        let pv = pv.clone();
        async move {
            let v = Api::<k8s_openapi::api::core::v1::PersistentVolume>::all(cl)
                .get(&pv)
                .await
                .ok()?;
            at_least(v.spec?.capacity.as_ref(), mib).then_some(())
        }
    })
    .await;
}

/// Whether a `capacity` map holds at least `mib` MiB of storage.
fn at_least(
    capacity: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
    mib: u64,
) -> bool {
    capacity
        .and_then(|c| c.get("storage"))
        .and_then(|q| lvms::api::quantity::parse_quantity_bytes(&q.0).ok())
        .is_some_and(|b| b >= mib << 20)
}

/// Waits until claim `name` reports at least `mib` MiB (its filesystem grown on the node).
async fn claim_grown(c: &mut Ctx, name: &str, mib: u64) {
    let n = name.to_string();
    c.until(&format!("claim {name} at {mib}Mi"), SLOW, |cl| {
        let n = n.clone();
        async move {
            let p = Api::<PersistentVolumeClaim>::namespaced(cl, APPS)
                .get(&n)
                .await
                .ok()?;
            at_least(p.status?.capacity.as_ref(), mib).then_some(())
        }
    })
    .await;
}

/// Deletes claim `name` and waits until its PersistentVolume is gone too.
async fn delete_claim(c: &mut Ctx, name: &str) {
    let pv = c.bound_pv(name).await;
    let pv_name = pv.metadata.name.clone().unwrap_or_default();
    let _ = Api::<PersistentVolumeClaim>::namespaced(c.client.clone(), APPS)
        .delete(name, &DeleteParams::default())
        .await;
    c.until(&format!("the volume of {name} gone"), SLOW, |cl| {
        let pv_name = pv_name.clone();
        async move {
            let gone = Api::<k8s_openapi::api::core::v1::PersistentVolume>::all(cl)
                .get_opt(&pv_name)
                .await
                .ok()?
                .is_none();
            gone.then_some(())
        }
    })
    .await;
}
