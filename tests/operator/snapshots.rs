//! VolumeSnapshotClasses and VolumeGroupSnapshotClasses are discovered, not assumed: with the
//! snapshot (group snapshot) CRDs served, thin classes get `lvms-<class>` (driver topolvm.io,
//! Delete); thick classes get none.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::json;

use kube::api::DeleteParams;
use lvms_testkit::fixtures::two_classes;
use lvms_testkit::snapshots::{group_api, install_group_api, remove_group_api};
use lvms_testkit::{Scenario, eventually};

const T: Duration = Duration::from_secs(30);

/// A minimal stand-in for the external-snapshotter's CRD (schema-less; only discovery and
/// storage matter here).
async fn install_snapshot_class_crd(client: &kube::Client) {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "volumesnapshotclasses.snapshot.storage.k8s.io",
            "annotations": {"api-approved.kubernetes.io": "https://github.com/kubernetes-csi/external-snapshotter/pull/419"}},
        "spec": {"group": "snapshot.storage.k8s.io", "scope": "Cluster",
            "names": {"plural": "volumesnapshotclasses", "singular": "volumesnapshotclass",
                      "kind": "VolumeSnapshotClass", "listKind": "VolumeSnapshotClassList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch(
        "volumesnapshotclasses.snapshot.storage.k8s.io",
        &PatchParams::apply("test").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("snapshot CRD");
    eventually(T, || async {
        let c = api
            .get("volumesnapshotclasses.snapshot.storage.k8s.io")
            .await
            .ok()?;
        let established = c
            .status?
            .conditions?
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        established.then_some(())
    })
    .await
    .expect("snapshot CRD established");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thin_classes_get_a_volume_snapshot_class_when_the_api_exists() {
    let s = Scenario::new("op-vsc").await;
    install_snapshot_class_crd(&s.client).await;
    let _op = s.operator(&[], &[]);
    s.create_cluster(two_classes("my-lvmcluster")).await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("snapshot.storage.k8s.io", "v1", "VolumeSnapshotClass"),
        "volumesnapshotclasses",
    );
    let vscs: Api<DynamicObject> = Api::all_with(s.client.clone(), &ar);
    let fast = eventually(T, || async { vscs.get_opt("lvms-fast").await.unwrap() })
        .await
        .expect("VolumeSnapshotClass lvms-fast");
    assert_eq!(fast.data["driver"], "topolvm.io");
    assert_eq!(fast.data["deletionPolicy"], "Delete");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        vscs.get_opt("lvms-bulk").await.unwrap().is_none(),
        "a thick class got a VolumeSnapshotClass"
    );
}

/// external-snapshotter v8.6's own group snapshot CRDs (v1 and v1beta2 served, v1beta2 stored,
/// v1beta1 deprecated, with their schemas): the class is written at v1 and the server accepts
/// it; thick classes get none; deleting the cluster removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thin_classes_get_a_volume_group_snapshot_class_when_the_api_exists() {
    let s = Scenario::new("op-vgsc").await;
    install_group_api(&s.client).await;
    let _op = s.operator(&[], &[]);
    s.create_cluster(two_classes("my-lvmcluster")).await;
    let vgscs = group_api(
        &s.client,
        "volumegroupsnapshotclasses",
        "VolumeGroupSnapshotClass",
        None,
    );
    let fast = eventually(T, || async { vgscs.get_opt("lvms-fast").await.unwrap() })
        .await
        .expect("VolumeGroupSnapshotClass lvms-fast");
    assert_eq!(fast.data["driver"], "topolvm.io");
    assert_eq!(fast.data["deletionPolicy"], "Delete");
    let labels = fast.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("owned-by.topolvm.io/name").map(String::as_str),
        Some("my-lvmcluster"),
        "{labels:?}"
    );
    assert_eq!(
        labels.get("owned-by.topolvm.io/kind").map(String::as_str),
        Some("LVMCluster")
    );
    // The same object at the stored version.
    let stored: Api<DynamicObject> = Api::all_with(
        s.client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(
                "groupsnapshot.storage.k8s.io",
                "v1beta2",
                "VolumeGroupSnapshotClass",
            ),
            "volumegroupsnapshotclasses",
        ),
    );
    assert_eq!(
        stored.get("lvms-fast").await.expect("at v1beta2").data["driver"],
        "topolvm.io"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        vgscs.get_opt("lvms-bulk").await.unwrap().is_none(),
        "a thick class got a VolumeGroupSnapshotClass"
    );

    s.clusters()
        .delete("my-lvmcluster", &DeleteParams::default())
        .await
        .expect("deleting the LVMCluster");
    eventually(T, || async {
        vgscs
            .get_opt("lvms-fast")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await
    .expect("teardown removes the VolumeGroupSnapshotClass");
    eventually(T, || async {
        s.cluster("my-lvmcluster").await.is_none().then_some(())
    })
    .await
    .expect("the LVMCluster is gone");
    remove_group_api(&s.client).await;
}
