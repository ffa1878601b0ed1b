//! The other install a user has: the kustomize tree (`kubectl apply --server-side -k
//! deploy/default`), with the image names set in an overlay as a user sets them; then a claim in
//! a Pod, and the uninstall again, CRDs included.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, GroupVersionKind};
use lvms_testkit::dev::deploy::{apply_all, render, write_namespace_overlay};
use lvms_testkit::env::repo;
use serde_json::Value;

use crate::ctx::{Ctx, LVMS_NS, SLOW};
use crate::install::{cluster_state, delete_cluster, lvmcluster, ready_pods};
use crate::teardown::assert_nothing_left;
use crate::workloads::{pod, pvc};

/// The overlay's image lines (kustomize's `images:`): the same names as the Helm values.
const IMAGES: &str = "images:
  - {name: quay.io/lvms/lvms, newName: localhost/lvms, newTag: dev}
  - {name: registry.k8s.io/sig-storage/csi-provisioner, newName: localhost/csi-provisioner, newTag: dev}
  - {name: registry.k8s.io/sig-storage/csi-resizer, newName: localhost/csi-resizer, newTag: dev}
  - {name: registry.k8s.io/sig-storage/csi-snapshotter, newName: localhost/csi-snapshotter, newTag: dev}
";

pub async fn the_kustomize_tree_installs_runs_a_pod_and_uninstalls(c: &mut Ctx) {
    // helm uninstall took the namespace with it: the tree makes it again once it is gone.
    c.operator_namespace_gone("the namespace of the Helm install gone")
        .await;
    let dir = c.dir.join("kustomize");
    write_namespace_overlay(&dir, &repo().join("deploy/default"), LVMS_NS).expect("overlay");
    let k = dir.join("kustomization.yaml");
    let text = std::fs::read_to_string(&k).expect("kustomization.yaml") + IMAGES;
    std::fs::write(&k, text).expect("kustomization.yaml");
    let objects = render(&dir).unwrap_or_else(|e| panic!("kustomize build: {e}"));
    apply_all(&c.client, &objects)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    c.until(
        "the operator Pod Ready (kustomize)",
        SLOW,
        |cl| async move {
            ready_pods(cl, LVMS_NS, "app.kubernetes.io/name=lvms-operator")
                .await
                .into_iter()
                .next()
        },
    )
    .await;
    c.apply_json(lvmcluster()).await;
    c.until("the LVMCluster Ready (kustomize)", SLOW, |cl| async move {
        cluster_state(cl).await.filter(|s| s == "Ready")
    })
    .await;
    c.apply_json(pvc("k-data", "lvms-vg1", 256, false)).await;
    let out = c
        .run_pod(pod(
            "k-app",
            "k-data",
            false,
            "echo kept >/data/k; cat /data/k",
        ))
        .await;
    assert_eq!(out.trim(), "kept");

    // Uninstall: the claim, the LVMCluster (while the operator runs), then the tree's objects.
    let _ = Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(
        c.client.clone(),
        crate::ctx::APPS,
    )
    .delete("k-data", &DeleteParams::default())
    .await;
    delete_cluster(c).await;
    delete_objects(&c.client, &objects).await;
    assert_nothing_left(c, "leftovers-k").await;
    // Then the CRDs, as `kubectl delete -k` takes them too: the swap node runs this scenario
    // first, and LVMS's own install after it starts from no lvm.topolvm.io API at all.
    delete_crds(c, &objects).await;
}

/// Deletes the tree's CustomResourceDefinitions and waits until the API server serves none of
/// them (a CRD goes once its objects have).
async fn delete_crds(c: &mut Ctx, objects: &[Value]) {
    let crds: Vec<String> = objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    assert!(!crds.is_empty(), "the tree renders no CRD");
    let api = Api::<CustomResourceDefinition>::all(c.client.clone());
    for name in &crds {
        let _ = api.delete(name, &DeleteParams::default()).await;
    }
    c.until("the tree's CRDs gone", SLOW, |cl| {
        let crds = crds.clone();
        async move {
            let api = Api::<CustomResourceDefinition>::all(cl);
            for name in &crds {
                if api.get_opt(name).await.ok()?.is_some() {
                    return None;
                }
            }
            Some(())
        }
    })
    .await;
}

/// `kubectl delete -k`: every rendered object but the CRDs (kept, as Helm keeps them), in
/// reverse order.
pub async fn delete_objects(client: &kube::Client, objects: &[Value]) {
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    for o in objects.iter().rev() {
        let (Some(api_version), Some(kind), Some(name)) = (
            o["apiVersion"].as_str(),
            o["kind"].as_str(),
            o["metadata"]["name"].as_str(),
        ) else {
            continue;
        };
        if kind == "CustomResourceDefinition" {
            continue;
        }
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let Some((ar, caps)) = discovery.resolve_gvk(&gvk) else {
            continue;
        };
        let api: Api<DynamicObject> = match (caps.scope, o["metadata"]["namespace"].as_str()) {
            (kube::discovery::Scope::Namespaced, Some(ns)) => {
                Api::namespaced_with(client.clone(), ns, &ar)
            }
            _ => Api::all_with(client.clone(), &ar),
        };
        let _ = api.delete(name, &DeleteParams::default()).await;
    }
}
