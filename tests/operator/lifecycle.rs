//! Create → the LVMS object set → status progression driven by node statuses; day-2 edits;
//! the singleton and namespace rules.

use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use lvms::api::{LVMCluster, LVMStateType, LVMVolumeGroup, LVMVolumeGroupNodeStatus};
use serde_json::json;

use lvms_testkit::events::assert_no_duplicate_events;
use lvms_testkit::fixtures::{thin, two_classes};
use lvms_testkit::kubelet::{create_node, register_csi_node};
use lvms_testkit::{Scenario, TestNs, eventually};

const T: Duration = Duration::from_secs(30);

/// The names of the node statuses there are, sorted.
async fn sorted_names(api: &Api<LVMVolumeGroupNodeStatus>) -> Vec<String> {
    let mut n: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|x| x.name_any())
        .collect();
    n.sort();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_yields_the_lvms_object_set_and_status_follows_node_statuses() {
    let s = Scenario::new("op-create").await;
    let c = &s.client;
    create_node(c, "node-a", false).await;
    create_node(c, "node-b", false).await;
    create_node(c, "node-tainted", true).await;
    register_csi_node(c, "node-a", true).await;
    register_csi_node(c, "node-b", true).await;
    let _op = s.operator(&[], &[]);
    let cluster = s.create_cluster(two_classes("my-lvmcluster")).await;
    let uid = cluster.uid().unwrap();

    // CSIDriver with LVMS's fields and owner labels.
    let driver = eventually(T, || async {
        Api::<CSIDriver>::all(c.clone())
            .get_opt("topolvm.io")
            .await
            .unwrap()
    })
    .await
    .expect("CSIDriver topolvm.io");
    let spec = driver.spec;
    assert_eq!(spec.attach_required, Some(false));
    assert_eq!(spec.pod_info_on_mount, Some(true));
    assert_eq!(spec.storage_capacity, Some(true));
    assert_eq!(
        driver.metadata.labels.as_ref().unwrap()["owned-by.topolvm.io/uid"],
        uid
    );

    // One LVMVolumeGroup per class, controlled by the cluster.
    let vgs: Api<LVMVolumeGroup> = Api::namespaced(c.clone(), &s.ns.name);
    let got = eventually(T, || async {
        let l = vgs.list(&ListParams::default()).await.unwrap().items;
        (l.len() == 2).then_some(l)
    })
    .await
    .expect("two LVMVolumeGroups");
    for vg in &got {
        let owner = &vg.owner_references()[0];
        assert_eq!(
            (owner.uid.as_str(), owner.controller),
            (uid.as_str(), Some(true))
        );
    }
    let fast = got
        .iter()
        .find(|v| v.name_any() == "fast")
        .expect("vg fast");
    assert!(fast.spec.thin_pool_config.is_some() && fast.spec.default);

    // The DaemonSet: LVMS's shape, our command and image.
    let ds = eventually(T, || async {
        Api::<DaemonSet>::namespaced(c.clone(), &s.ns.name)
            .get_opt("vg-manager")
            .await
            .unwrap()
    })
    .await
    .expect("DaemonSet vg-manager");
    let pod = ds.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("vg-manager"));
    assert_eq!(pod.host_pid, Some(true));
    let ctr = &pod.containers[0];
    assert_eq!(ctr.image.as_deref(), Some("localhost/lvms:dev"));
    assert_eq!(
        ctr.command.as_deref().unwrap(),
        ["/usr/bin/lvms", "vg-manager"]
    );
    assert_eq!(
        ctr.security_context.as_ref().unwrap().privileged,
        Some(true)
    );
    let env: Vec<_> = ctr.env.iter().flatten().map(|e| e.name.as_str()).collect();
    assert!(
        env.contains(&"NODE_NAME") && env.contains(&"NAMESPACE"),
        "{env:?}"
    );

    // StorageClasses: parameters, options, labels, the default annotation.
    let scs: Api<StorageClass> = Api::all(c.clone());
    let fast_sc = eventually(T, || async { scs.get_opt("lvms-fast").await.unwrap() })
        .await
        .unwrap();
    let bulk_sc = eventually(T, || async { scs.get_opt("lvms-bulk").await.unwrap() })
        .await
        .unwrap();
    assert_eq!(fast_sc.provisioner, "topolvm.io");
    assert_eq!(
        fast_sc.parameters.as_ref().unwrap()["topolvm.io/device-class"],
        "fast"
    );
    assert_eq!(
        fast_sc.parameters.as_ref().unwrap()["csi.storage.k8s.io/fstype"],
        "xfs"
    );
    assert_eq!(fast_sc.labels()["tier"], "fast");
    assert_eq!(
        fast_sc.annotations()["storageclass.kubernetes.io/is-default-class"],
        "true"
    );
    assert_eq!(bulk_sc.reclaim_policy.as_deref(), Some("Retain"));
    assert_eq!(bulk_sc.volume_binding_mode.as_deref(), Some("Immediate"));
    assert_eq!(
        bulk_sc.annotations()["storageclass.kubernetes.io/is-default-class"],
        "false"
    );

    // Node statuses for the two valid nodes only (the tainted one is not tolerated).
    let nss: Api<LVMVolumeGroupNodeStatus> = Api::namespaced(c.clone(), &s.ns.name);
    let names = eventually(T, || async {
        let n = sorted_names(&nss).await;
        (n.len() == 2).then_some(n)
    })
    .await
    .expect("two node statuses");
    assert_eq!(names, ["node-a", "node-b"]);
    let na = nss.get("node-a").await.unwrap();
    assert!(
        na.finalizers()
            .iter()
            .any(|f| f == "delete-protection.lvm.openshift.io")
    );

    // Finalizer; Progressing while no vg-manager has reported.
    let cl = s
        .wait_state("my-lvmcluster", LVMStateType::Progressing, T)
        .await;
    assert!(cl.finalizers().iter().any(|f| f == "lvmcluster.topolvm.io"));
    let vgr = cl
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "VolumeGroupsReady")
        .unwrap();
    assert_eq!(vgr.reason, "VGReadinessInProgress");

    // vg-manager reports: Ready on both nodes → Ready, with deviceClassStatuses.
    let ready = |dev: &str| {
        json!([
        {"name": "fast", "status": "Ready", "devices": [dev], "deviceDiscoveryPolicy": "Preconfigured"},
        {"name": "bulk", "status": "Ready", "devices": ["/dev/loop11"], "deviceDiscoveryPolicy": "Preconfigured"}])
    };
    s.set_node_status("node-a", ready("/dev/loop10")).await;
    s.set_node_status("node-b", ready("/dev/loop10")).await;
    let cl = s.wait_state("my-lvmcluster", LVMStateType::Ready, T).await;
    let st = cl.status.unwrap();
    assert!(st.ready);
    let fast_status = st
        .device_class_statuses
        .iter()
        .find(|d| d.name == "fast")
        .unwrap();
    assert_eq!(fast_status.node_status.len(), 2);

    // Degraded on one node → Degraded; Failed wins over Degraded → Failed; back to Ready.
    s.set_node_status(
        "node-b",
        json!([
        {"name": "fast", "status": "Degraded", "reason": "a PV is missing"},
        {"name": "bulk", "status": "Ready"}]),
    )
    .await;
    s.wait_state("my-lvmcluster", LVMStateType::Degraded, T)
        .await;
    s.set_node_status(
        "node-a",
        json!([
        {"name": "fast", "status": "Failed", "reason": "vgcreate failed"},
        {"name": "bulk", "status": "Ready"}]),
    )
    .await;
    let failed = s.wait_state("my-lvmcluster", LVMStateType::Failed, T).await;
    let cond = failed
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "VolumeGroupsReady")
        .unwrap();
    assert_eq!(cond.reason, "VGsFailed");
    s.set_node_status("node-a", ready("/dev/loop10")).await;
    s.set_node_status("node-b", ready("/dev/loop10")).await;
    s.wait_state("my-lvmcluster", LVMStateType::Ready, T).await;
    assert_no_duplicate_events(&s.events().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn day_two_edits_converge() {
    let s = Scenario::new("op-edit").await;
    let c = &s.client;
    let _op = s.operator(&[], &[]);
    s.create_cluster(two_classes("my-lvmcluster")).await;
    let scs: Api<StorageClass> = Api::all(c.clone());
    let vgs: Api<LVMVolumeGroup> = Api::namespaced(c.clone(), &s.ns.name);
    eventually(T, || async { scs.get_opt("lvms-bulk").await.unwrap() })
        .await
        .expect("lvms-bulk");

    // additionalLabels replaced, overprovisionRatio raised, class `bulk` removed, `extra` added.
    let patch = json!({"spec": {"storage": {"deviceClasses": [
        {"name": "fast", "default": true,
         "deviceSelector": {"paths": ["/dev/loop10"]},
         "thinPoolConfig": {"name": "thin-pool-1", "overprovisionRatio": 7},
         "storageClassOptions": {"additionalLabels": {"team": "db"}}},
        {"name": "extra", "deviceSelector": {"paths": ["/dev/loop13"]}}
    ]}}});
    s.patch_cluster("my-lvmcluster", &patch).await;

    let fast = eventually(T, || async {
        scs.get_opt("lvms-fast")
            .await
            .unwrap()
            .filter(|sc| sc.labels().get("team").map(String::as_str) == Some("db"))
    })
    .await
    .expect("lvms-fast relabelled");
    assert!(
        !fast.labels().contains_key("tier"),
        "a dropped additionalLabel stays: {:?}",
        fast.labels()
    );
    eventually(T, || async { scs.get_opt("lvms-extra").await.unwrap() })
        .await
        .expect("lvms-extra");
    eventually(T, || async {
        scs.get_opt("lvms-bulk")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await
    .expect("lvms-bulk deleted after its class was removed");
    eventually(T, || async {
        vgs.get_opt("bulk").await.unwrap().is_none().then_some(())
    })
    .await
    .expect("LVMVolumeGroup bulk deleted");
    eventually(T, || async {
        vgs.get_opt("fast").await.unwrap().filter(|v| {
            v.spec
                .thin_pool_config
                .as_ref()
                .map(|t| t.overprovision_ratio)
                == Some(7)
        })
    })
    .await
    .expect("overprovisionRatio reached the LVMVolumeGroup");
    assert_no_duplicate_events(&s.events().await);
}

/// The generation ResourcesAvailable reports observed, and the object's resourceVersion.
fn observed(c: &LVMCluster) -> Option<(i64, u64)> {
    let g = c
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "ResourcesAvailable")?
        .observed_generation?;
    Some((g, c.resource_version()?.parse().ok()?))
}

/// An edit is reported observed only once its objects carry it (LVMS writes status after
/// every resource): for each of several `spec.tolerations` edits, the LVMCluster write that
/// first reports the new generation comes after the DaemonSet write that carries it. Both are
/// seen by watches; this API server's resourceVersions are etcd revisions, one order over
/// every write (opaque to clients in general, comparable against this test's own etcd).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_is_reported_observed_only_after_its_objects_carry_it() {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let s = Scenario::new("op-observed").await;
    let c = &s.client;
    create_node(c, "node-a", false).await;
    register_csi_node(c, "node-a", true).await;
    let _op = s.operator(&[], &[]);
    let cluster = s.create_cluster(thin("my-lvmcluster")).await;
    let clusters: Api<LVMCluster> = Api::namespaced(c.clone(), &s.ns.name);
    let daemonsets: Api<DaemonSet> = Api::namespaced(c.clone(), &s.ns.name);
    let first = cluster.metadata.generation.unwrap_or(1);
    eventually(T, || async {
        observed(&clusters.get("my-lvmcluster").await.unwrap()).filter(|(g, _)| *g == first)
    })
    .await
    .expect("generation 1 observed");

    // Every write of either object from here on, with its resourceVersion.
    let mut cluster_writes = watcher(clusters.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    let mut ds_writes = watcher(daemonsets.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    for n in 1..=5 {
        let value = format!("edit-{n}");
        let edited = clusters
            .patch(
                "my-lvmcluster",
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"tolerations": [{
                    "key": "test-edit", "operator": "Equal", "value": value, "effect": "NoSchedule",
                }]}})),
            )
            .await
            .unwrap();
        let generation = edited.metadata.generation.unwrap();
        let reported = tokio::time::timeout(T, async {
            loop {
                let obj: LVMCluster = cluster_writes.next().await.unwrap().unwrap();
                if let Some((g, rv)) = observed(&obj).filter(|(g, _)| *g >= generation) {
                    break (g, rv);
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("generation {generation} never reported observed"));
        let carried = tokio::time::timeout(T, async {
            loop {
                let ds: DaemonSet = ds_writes.next().await.unwrap().unwrap();
                let has = ds
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.spec.as_ref())
                    .and_then(|s| s.tolerations.as_ref())
                    .is_some_and(|ts| ts.iter().any(|t| t.value.as_deref() == Some(&value)));
                if has {
                    break ds.resource_version().unwrap().parse::<u64>().unwrap();
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("edit {value} never reached the DaemonSet"));
        assert!(
            carried < reported.1,
            "generation {} was reported observed (resourceVersion {}) before the DaemonSet \
             carried edit {value} (resourceVersion {carried})",
            reported.0,
            reported.1
        );
    }
    assert_no_duplicate_events(&s.events().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_cluster_or_one_elsewhere_is_failed_and_never_reconciled() {
    let s = Scenario::new("op-single").await;
    let _op = s.operator(&[], &[]);
    s.create_cluster(thin("first")).await;
    s.wait_state("first", LVMStateType::Progressing, T).await;
    s.create_cluster(thin("second")).await;
    let second = s.wait_state("second", LVMStateType::Failed, T).await;
    let cond = &second.status.as_ref().unwrap().conditions[0];
    assert_eq!(cond.reason, "DuplicateLVMCluster");
    assert!(cond.message.contains("first"), "{}", cond.message);
    assert!(
        second.finalizers().is_empty(),
        "a rejected cluster got a finalizer"
    );

    let other = TestNs::new("op-elsewhere").await;
    let api: Api<lvms::api::LVMCluster> = Api::namespaced(s.client.clone(), &other.name);
    let c: lvms::api::LVMCluster = serde_json::from_value(thin("elsewhere")).unwrap();
    api.create(&Default::default(), &c).await.unwrap();
    let got = eventually(T, || async {
        api.get("elsewhere")
            .await
            .ok()
            .filter(|c| c.status.as_ref().and_then(|s| s.state) == Some(LVMStateType::Failed))
    })
    .await
    .expect("cluster outside the namespace reported Failed");
    assert_eq!(
        got.status.unwrap().conditions[0].reason,
        "LVMClusterOutsideOperatorNamespace"
    );

    let warned = eventually(T, || async {
        let ev = s.events().await;
        ev.iter()
            .any(|e| {
                e.reason.as_deref() == Some("DuplicateLVMCluster")
                    && e.type_.as_deref() == Some("Warning")
            })
            .then_some(())
    })
    .await;
    assert!(warned.is_some(), "no DuplicateLVMCluster Warning event");
    // The first cluster's objects describe only `first`.
    let vgs: Api<LVMVolumeGroup> = Api::namespaced(s.client.clone(), &s.ns.name);
    let l = vgs.list(&ListParams::default()).await.unwrap().items;
    assert!(l.iter().all(|v| v.owner_references()[0].name == "first"));
}

/// As LVMS: a node left out for an untolerated `node.kubernetes.io/not-ready` taint is not a
/// silent exclusion. The valid nodes get their statuses, ResourcesAvailable names the node,
/// and once the taint is lifted the node gets its status and the cluster is available.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_not_ready_node_is_reported_until_its_taint_is_lifted() {
    let s = Scenario::new("op-not-ready").await;
    let c = &s.client;
    create_node(c, "node-a", false).await;
    create_node(c, "node-b", false).await;
    register_csi_node(c, "node-a", true).await;
    register_csi_node(c, "node-b", true).await;
    let nodes = Api::<k8s_openapi::api::core::v1::Node>::all(c.clone());
    let not_ready = json!({"spec": {"taints": [
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
    ]}});
    nodes
        .patch("node-b", &PatchParams::default(), &Patch::Merge(&not_ready))
        .await
        .unwrap();
    let _op = s.operator(&[], &[]);
    s.create_cluster(thin("my-lvmcluster")).await;

    let statuses: Api<LVMVolumeGroupNodeStatus> = Api::namespaced(c.clone(), &s.ns.name);
    let names = || sorted_names(&statuses);
    let message = eventually(T, || async {
        let cluster = s.cluster("my-lvmcluster").await?;
        cluster
            .status?
            .conditions
            .iter()
            .find(|k| k.type_ == "ResourcesAvailable" && k.status == "False")
            .map(|k| k.message.clone())
            .filter(|m| m.contains("node-b"))
    })
    .await
    .expect("ResourcesAvailable=False naming node-b");
    assert!(
        message.contains("node node-b has a node.kubernetes.io/not-ready taint"),
        "{message}"
    );
    assert_eq!(
        names().await,
        ["node-a"],
        "only the valid node has a status"
    );

    // Kubelet reports Ready: the taint goes, the node gets its status, the error clears.
    nodes
        .patch(
            "node-b",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"taints": null}})),
        )
        .await
        .unwrap();
    eventually(T, || async {
        (names().await == ["node-a", "node-b"]).then_some(())
    })
    .await
    .expect("node-b gets its node status");
    eventually(T, || async {
        let cluster = s.cluster("my-lvmcluster").await?;
        cluster
            .status?
            .conditions
            .iter()
            .any(|k| k.type_ == "ResourcesAvailable" && k.status == "True")
            .then_some(())
    })
    .await
    .expect("ResourcesAvailable=True once no node is held back");
}

/// LVMS's node-removal controller, day 2: a node deleted while the cluster lives leaves its
/// vg-manager's cleanup finalizer and its wiped-devices annotation on the LVMVolumeGroups. The
/// finalizer comes off (else removing the class would hang on it for good) and so does the
/// annotation (a node re-created under that name is wiped as a new node); a live node's keep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_nodes_finalizer_and_wiped_marker_come_off_while_the_cluster_lives() {
    let s = Scenario::new("op-node-gone").await;
    let c = &s.client;
    create_node(c, "node-a", false).await;
    let _op = s.operator(&[], &[]);
    s.create_cluster(two_classes("my-lvmcluster")).await;
    let vgs: Api<LVMVolumeGroup> = Api::namespaced(c.clone(), &s.ns.name);
    eventually(T, || async { vgs.get_opt("bulk").await.unwrap() })
        .await
        .expect("LVMVolumeGroup bulk");
    // What two vg-managers would have written: node-a (alive) and node-gone (deleted since).
    let keys = |node: &str| {
        (
            format!("cleanup.vgmanager.node.topolvm.io/{node}"),
            format!("wiped.devices.lvms.openshift.io/{node}"),
        )
    };
    let (fin_a, wiped_a) = keys("node-a");
    let (fin_gone, wiped_gone) = keys("node-gone");
    for vg in ["fast", "bulk"] {
        vgs.patch(
            vg,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {
                "finalizers": [fin_a, fin_gone],
                "annotations": {wiped_a.clone(): "wiped", wiped_gone.clone(): "wiped"},
            }})),
        )
        .await
        .unwrap();
    }
    for vg in ["fast", "bulk"] {
        let v = eventually(T, || async {
            vgs.get_opt(vg).await.unwrap().filter(|v| {
                !v.finalizers().contains(&fin_gone) && !v.annotations().contains_key(&wiped_gone)
            })
        })
        .await
        .unwrap_or_else(|| panic!("{vg}: the gone node's finalizer and annotation stay"));
        assert!(
            v.finalizers().contains(&fin_a),
            "{vg}: {:?}",
            v.finalizers()
        );
        assert!(
            v.annotations().contains_key(&wiped_a),
            "{vg}: {:?}",
            v.annotations()
        );
        assert!(v.metadata.deletion_timestamp.is_none());
    }
    // Day 2: class `bulk` removed. Its LVMVolumeGroup goes once node-a's vg-manager lets go
    // (the test plays it: there is no vg-manager here); no node-gone finalizer holds it.
    s.patch_cluster(
        "my-lvmcluster",
        &json!({"spec": {"storage": {"deviceClasses": [
            {"name": "fast", "default": true,
             "deviceSelector": {"paths": ["/dev/loop10"]},
             "thinPoolConfig": {"name": "thin-pool-1", "overprovisionRatio": 5},
             "storageClassOptions": {"additionalLabels": {"tier": "fast"}}}
        ]}}}),
    )
    .await;
    eventually(T, || async {
        vgs.get_opt("bulk")
            .await
            .unwrap()
            .filter(|v| v.metadata.deletion_timestamp.is_some())
    })
    .await
    .expect("bulk marked for deletion");
    // node-a's vg-manager lets go of its own finalizer only: whatever else is left holds it.
    let held = vgs.get("bulk").await.unwrap().finalizers().to_vec();
    let rest: Vec<&String> = held.iter().filter(|f| **f != fin_a).collect();
    vgs.patch(
        "bulk",
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(json!([
                {"op": "test", "path": "/metadata/finalizers", "value": held},
                {"op": "replace", "path": "/metadata/finalizers", "value": rest},
            ]))
            .unwrap(),
        ),
    )
    .await
    .unwrap();
    eventually(T, || async {
        vgs.get_opt("bulk").await.unwrap().is_none().then_some(())
    })
    .await
    .expect("bulk deleted");
    assert_no_duplicate_events(&s.events().await);
}
