//! The VolumeSnapshot and VolumeGroupSnapshot APIs of external-snapshotter (its CRDs, built with
//! the CSI peers) and its controllers as processes: snapshot-controller, and csi-snapshotter and
//! csi-provisioner on an operator's CSI socket, as they run in a cluster and in the operator's
//! Deployment (group snapshots enabled in both controllers).

use std::path::Path;
use std::time::Duration;

use crate::dev::csi_peers::{Sidecar, snapshot_crds_dir};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};

use crate::eventually;

const SNAPSHOT_CRDS: [&str; 3] = [
    "snapshot.storage.k8s.io_volumesnapshotclasses.yaml",
    "snapshot.storage.k8s.io_volumesnapshotcontents.yaml",
    "snapshot.storage.k8s.io_volumesnapshots.yaml",
];

/// external-snapshotter v8.6 serves these at v1, v1beta2 (stored) and v1beta1.
const GROUP_SNAPSHOT_CRDS: [&str; 3] = [
    "groupsnapshot.storage.k8s.io_volumegroupsnapshotclasses.yaml",
    "groupsnapshot.storage.k8s.io_volumegroupsnapshotcontents.yaml",
    "groupsnapshot.storage.k8s.io_volumegroupsnapshots.yaml",
];

/// The feature gate both controllers get. With it csi-snapshotter v8.6 calls
/// GroupControllerGetCapabilities at start-up: a driver without the GroupController service
/// costs one error line (Unimplemented) and the sidecar runs on. But it then waits for its
/// `groupsnapshot.storage.k8s.io/v1` caches before handling any snapshot, and snapshot-controller
/// exits (after `--retry-crd-interval-max`, 30 s) when those CRDs are not served: hence
/// [`install_api`] installs them too.
pub const GROUP_SNAPSHOT_GATE: &str = "--feature-gates=CSIVolumeGroupSnapshot=true";

/// Installs the three `snapshot.storage.k8s.io` and the three `groupsnapshot.storage.k8s.io`
/// CRDs and waits until VolumeSnapshots and VolumeGroupSnapshots (v1) are served. Panics with
/// the fix when they were never built.
pub async fn install_api(client: &kube::Client) {
    install_crds(client, &SNAPSHOT_CRDS).await;
    install_group_api(client).await;
    let served = eventually(Duration::from_secs(60), || async {
        let api = api(client, "volumesnapshots", "VolumeSnapshot", Some("default"));
        api.list(&Default::default()).await.ok().map(|_| ())
    })
    .await;
    assert!(served.is_some(), "VolumeSnapshots never served");
}

/// Installs the three `groupsnapshot.storage.k8s.io` CRDs only and waits until
/// VolumeGroupSnapshots are served at v1.
pub async fn install_group_api(client: &kube::Client) {
    install_crds(client, &GROUP_SNAPSHOT_CRDS).await;
    let served = eventually(Duration::from_secs(60), || async {
        let api = group_api(
            client,
            "volumegroupsnapshots",
            "VolumeGroupSnapshot",
            Some("default"),
        );
        api.list(&Default::default()).await.ok().map(|_| ())
    })
    .await;
    assert!(served.is_some(), "VolumeGroupSnapshots never served");
}

/// Applies external-snapshotter's CRD files `files` from the peers' crds folder.
async fn install_crds(client: &kube::Client, files: &[&str]) {
    let mut objects = Vec::new();
    for f in files {
        let path = snapshot_crds_dir().join(f);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; run deploy/dev/build-test-bins.sh (it fetches external-snapshotter's CRDs)",
                path.display()
            )
        });
        objects.extend(crate::dev::deploy::parse_stream(&text).expect("CRD YAML"));
    }
    crate::dev::deploy::apply_all(client, &objects)
        .await
        .expect("snapshot CRDs");
}

/// Every snapshot kind the CRDs serve: (group, plural, kind).
const KINDS: [(&str, &str, &str); 6] = [
    (
        "groupsnapshot.storage.k8s.io",
        "volumegroupsnapshots",
        "VolumeGroupSnapshot",
    ),
    (
        "groupsnapshot.storage.k8s.io",
        "volumegroupsnapshotcontents",
        "VolumeGroupSnapshotContent",
    ),
    (
        "groupsnapshot.storage.k8s.io",
        "volumegroupsnapshotclasses",
        "VolumeGroupSnapshotClass",
    ),
    (
        "snapshot.storage.k8s.io",
        "volumesnapshots",
        "VolumeSnapshot",
    ),
    (
        "snapshot.storage.k8s.io",
        "volumesnapshotcontents",
        "VolumeSnapshotContent",
    ),
    (
        "snapshot.storage.k8s.io",
        "volumesnapshotclasses",
        "VolumeSnapshotClass",
    ),
];

/// Removes the CRDs again (with every snapshot object) and waits until they are gone: the next
/// scenario on this control plane finds the API as it was. The controllers are stopped by now,
/// so objects still carrying their finalizers would keep a CRD terminating, and a later
/// scenario's install would apply onto it and lose it when it finally goes: the finalizers are
/// dropped first.
pub async fn remove_api(client: &kube::Client) {
    remove(client, &KINDS).await;
}

/// Removes the three `groupsnapshot.storage.k8s.io` CRDs (with every group snapshot object).
pub async fn remove_group_api(client: &kube::Client) {
    remove(client, &KINDS[..3]).await;
}

async fn remove(client: &kube::Client, kinds: &[(&str, &str, &str)]) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let unfinalize = json!({"metadata": {"finalizers": null}});
    for (group, plural, kind) in kinds {
        let objects = dynamic(client, group, plural, kind, None);
        for o in objects
            .list(&Default::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
        {
            let name = o.metadata.name.clone().unwrap_or_default();
            let api = match o.metadata.namespace.as_deref() {
                Some(ns) => dynamic(client, group, plural, kind, Some(ns)),
                None => dynamic(client, group, plural, kind, None),
            };
            let _ = api
                .patch(
                    &name,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&unfinalize),
                )
                .await;
        }
        let _ = crds
            .delete(&format!("{plural}.{group}"), &DeleteParams::default())
            .await;
    }
    for (group, plural, _) in kinds {
        let name = format!("{plural}.{group}");
        let gone = eventually(Duration::from_secs(60), || async {
            crds.get_opt(&name)
                .await
                .ok()
                .and_then(|c| c.is_none().then_some(()))
        })
        .await;
        assert!(
            gone.is_some(),
            "CRD {name} still there 60 s after its deletion"
        );
    }
}

fn dynamic(
    client: &kube::Client,
    group: &str,
    plural: &str,
    kind: &str,
    namespace: Option<&str>,
) -> Api<kube::api::DynamicObject> {
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(group, "v1", kind),
        plural,
    );
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

/// A dynamic API of `snapshot.storage.k8s.io/v1` `kind` (`plural`), namespaced or not.
pub fn api(
    client: &kube::Client,
    plural: &str,
    kind: &str,
    namespace: Option<&str>,
) -> Api<kube::api::DynamicObject> {
    dynamic(client, "snapshot.storage.k8s.io", plural, kind, namespace)
}

/// A dynamic API of `groupsnapshot.storage.k8s.io/v1` `kind` (`plural`), namespaced or not.
pub fn group_api(
    client: &kube::Client,
    plural: &str,
    kind: &str,
    namespace: Option<&str>,
) -> Api<kube::api::DynamicObject> {
    dynamic(
        client,
        "groupsnapshot.storage.k8s.io",
        plural,
        kind,
        namespace,
    )
}

/// A VolumeSnapshotClass of TopoLVM's driver.
pub fn class(name: &str) -> Value {
    json!({
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
        "metadata": {"name": name},
        "driver": "topolvm.io", "deletionPolicy": "Delete",
    })
}

/// Applies the VolumeSnapshotClass `name` of TopoLVM's driver, as a user makes one.
pub async fn apply_class(client: &kube::Client, name: &str) {
    api(client, "volumesnapshotclasses", "VolumeSnapshotClass", None)
        .patch(
            name,
            &kube::api::PatchParams::apply("lvms-test").force(),
            &kube::api::Patch::Apply(&class(name)),
        )
        .await
        .expect("VolumeSnapshotClass");
}

/// A VolumeSnapshot of claim `pvc` in `class`.
pub fn snapshot(name: &str, class: &str, pvc: &str) -> Value {
    json!({
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
        "metadata": {"name": name},
        "spec": {"volumeSnapshotClassName": class,
                 "source": {"persistentVolumeClaimName": pvc}},
    })
}

/// The upstream controllers a claim, a snapshot, a group snapshot, a restore and a clone go
/// through: the snapshot-controller (cluster-wide), and csi-provisioner and csi-snapshotter on
/// `socket`, the snapshot ones with [`GROUP_SNAPSHOT_GATE`] (so [`install_api`] first).
/// `timeout` is each sidecar's RPC deadline. Logs under `dir`.
pub fn controllers(socket: &Path, kubeconfig: &Path, dir: &Path, timeout: &str) -> Vec<Sidecar> {
    let csi = format!("--csi-address={}", socket.display());
    let timeout = format!("--timeout={timeout}");
    let start = |name: &str, args: Vec<String>| {
        Sidecar::start(
            name,
            &args,
            &[],
            kubeconfig,
            &dir.join(format!("{name}.log")),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    vec![
        start(
            "snapshot-controller",
            s(&["--leader-election=false", GROUP_SNAPSHOT_GATE]),
        ),
        start(
            "csi-snapshotter",
            [
                s(&[
                    "--leader-election=false",
                    "--extra-create-metadata",
                    GROUP_SNAPSHOT_GATE,
                ]),
                vec![csi.clone(), timeout.clone()],
            ]
            .concat(),
        ),
        start(
            "csi-provisioner",
            [
                s(&[
                    "--feature-gates=Topology=true",
                    "--extra-create-metadata",
                    "--leader-election=false",
                    "--retry-interval-start=500ms",
                    "--retry-interval-max=5s",
                ]),
                vec![csi, timeout],
            ]
            .concat(),
        ),
    ]
}
