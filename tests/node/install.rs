//! The install, as a user does it: `helm install` of the chart with only the image names and
//! pull policy overridden, then the sample LVMCluster naming the node's disks.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::Api;
use kube::api::ListParams;
use lvms_testkit::dev::deploy::helm_bin;
use lvms_testkit::env::repo;
use serde_json::json;

use crate::ctx::{Ctx, DISK_A, DISK_B, LVMS_NS, NODE, SLOW};

/// The values a user overrides to install from images in the node's containerd (the install
/// section of docs/install.md shows this command).
pub const HELM_SETS: &[(&str, &str)] = &[
    ("image.repository", "localhost/lvms"),
    ("image.tag", "dev"),
    ("image.pullPolicy", "Never"),
    ("sidecars.provisioner", "localhost/csi-provisioner:dev"),
    ("sidecars.resizer", "localhost/csi-resizer:dev"),
    ("sidecars.snapshotter", "localhost/csi-snapshotter:dev"),
];

pub const CLUSTER: &str = "my-lvmcluster";

/// `helm install lvms` of the chart with [`HELM_SETS`] and `sets`, `helm upgrade lvms` of it
/// keeping the values installed and setting `sets`, or `helm uninstall lvms`; a failure is a
/// panic with helm's output.
pub fn helm(c: &Ctx, verb: &str, sets: &[(&str, &str)]) {
    let mut cmd = std::process::Command::new(helm_bin());
    cmd.args([verb, "lvms"]);
    if verb == "install" || verb == "upgrade" {
        cmd.arg(repo().join("deploy/helm/lvms"));
        if verb == "upgrade" {
            cmd.arg("--reuse-values");
        }
        for (k, v) in HELM_SETS.iter().chain(sets) {
            cmd.arg("--set").arg(format!("{k}={v}"));
        }
    }
    let out = cmd
        .arg("--kubeconfig")
        .arg(&c.cp.kubeconfig)
        .output()
        .expect("running helm");
    assert!(
        out.status.success(),
        "helm {verb} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Two thin classes: `vg1` (xfs, the default) on one disk, `vg2` (ext4) on the other.
pub fn lvmcluster() -> serde_json::Value {
    let class = |name: &str, fs: &str, disk: &str, default: bool| {
        json!({
            "name": name, "default": default, "fstype": fs,
            "deviceSelector": {"paths": [format!("/dev/disk/by-id/virtio-{disk}")]},
            "thinPoolConfig": {"name": "thin-pool-1", "sizePercent": 90, "overprovisionRatio": 10}
        })
    };
    json!({
        "apiVersion": "lvm.topolvm.io/v1alpha1", "kind": "LVMCluster",
        "metadata": {"name": CLUSTER, "namespace": LVMS_NS},
        "spec": {"storage": {"deviceClasses": [
            class("vg1", "xfs", DISK_A, true),
            class("vg2", "ext4", DISK_B, false),
        ]}}
    })
}

/// The LVMClusters of the operator's namespace.
pub fn clusters(client: kube::Client) -> Api<kube::api::DynamicObject> {
    let ar = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "lvm.topolvm.io",
        "v1alpha1",
        "LVMCluster",
    ));
    Api::namespaced_with(client, LVMS_NS, &ar)
}

/// The LVMCluster's `status.state`, once it has one.
pub async fn cluster_state(client: kube::Client) -> Option<String> {
    let lc = clusters(client).get(CLUSTER).await.ok()?;
    lc.data["status"]["state"].as_str().map(str::to_string)
}

/// Deletes the LVMCluster (the operator still runs) and waits until it is gone.
pub async fn delete_cluster(c: &mut Ctx) {
    clusters(c.client.clone())
        .delete(CLUSTER, &kube::api::DeleteParams::default())
        .await
        .expect("deleting the LVMCluster");
    c.until("the LVMCluster gone", SLOW, |cl| async move {
        let gone = clusters(cl).get_opt(CLUSTER).await.ok()?.is_none();
        gone.then_some(())
    })
    .await;
}

/// The vg-manager DaemonSet the operator made, once there is one.
pub async fn vg_manager_daemonset(c: kube::Client) -> Option<DaemonSet> {
    Api::<DaemonSet>::namespaced(c, LVMS_NS)
        .get("vg-manager")
        .await
        .ok()
}

fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The Ready Pods of `ns` matching `selector`.
pub async fn ready_pods(c: kube::Client, ns: &str, selector: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(c, ns)
        .list(&ListParams::default().labels(selector))
        .await
        .map(|l| l.items.into_iter().filter(pod_ready).collect())
        .unwrap_or_default()
}

pub async fn helm_install_runs_lvms_as_pods_and_kubelet_registers_the_driver(c: &mut Ctx) {
    let t0 = Instant::now();
    helm(c, "install", &[]);

    let operator = c
        .until("the operator Pod Ready", SLOW, |cl| async move {
            ready_pods(cl, LVMS_NS, "app.kubernetes.io/name=lvms-operator")
                .await
                .into_iter()
                .next()
        })
        .await;
    assert_eq!(
        operator.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some(NODE)
    );
    // This control plane serves groupsnapshot.storage.k8s.io/v1: the chart's `auto` found it.
    let snapshotter = operator
        .spec
        .as_ref()
        .and_then(|s| s.containers.iter().find(|c| c.name == "csi-snapshotter"))
        .and_then(|c| c.args.clone())
        .unwrap_or_default();
    assert!(
        snapshotter
            .iter()
            .any(|a| a == "--feature-gates=CSIVolumeGroupSnapshot=true"),
        "groupSnapshots=auto on a cluster serving the v1 API: {snapshotter:?}"
    );
    c.figures.push((
        "helm install → operator Ready".into(),
        t0.elapsed().as_secs_f64(),
    ));

    let t1 = Instant::now();
    c.apply_json(lvmcluster()).await;
    let state = c
        .until("the LVMCluster Ready", SLOW, |cl| async move {
            cluster_state(cl).await.filter(|s| s == "Ready")
        })
        .await;
    assert_eq!(state, "Ready");
    c.figures.push((
        "LVMCluster applied → Ready".into(),
        t1.elapsed().as_secs_f64(),
    ));

    // The vg-manager DaemonSet's Pod runs on the node, made by the DaemonSet controller.
    c.until(
        "the vg-manager DaemonSet's Pod ready",
        SLOW,
        |cl| async move {
            let s = vg_manager_daemonset(cl).await?.status?;
            (s.desired_number_scheduled == 1 && s.number_ready == 1).then_some(())
        },
    )
    .await;

    // kubelet registered the driver: the CSINode is kubelet's (owned by the Node it made it for).
    let csinode = c
        .until(
            "kubelet to register topolvm.io",
            Duration::from_secs(120),
            |cl| async move {
                let n = Api::<CSINode>::all(cl).get(NODE).await.ok()?;
                n.spec
                    .drivers
                    .iter()
                    .any(|d| d.name == "topolvm.io")
                    .then_some(n)
            },
        )
        .await;
    let owner = csinode
        .metadata
        .owner_references
        .clone()
        .unwrap_or_default();
    assert!(
        owner.iter().any(|o| o.kind == "Node" && o.name == NODE),
        "the CSINode is not kubelet's (owners {owner:?})"
    );
    let driver = csinode
        .spec
        .drivers
        .iter()
        .find(|d| d.name == "topolvm.io")
        .expect("topolvm.io");
    assert_eq!(driver.node_id, NODE);
    assert!(
        driver
            .topology_keys
            .as_ref()
            .is_some_and(|k| k.iter().any(|k| k == "topology.topolvm.io/node")),
        "topology keys: {:?}",
        driver.topology_keys
    );

    for sc in ["lvms-vg1", "lvms-vg2"] {
        Api::<StorageClass>::all(c.client.clone())
            .get(sc)
            .await
            .unwrap_or_else(|e| panic!("StorageClass {sc}: {e}"));
    }
}
