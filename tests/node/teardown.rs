//! The uninstall, as docs/install.md tells it: workloads and claims deleted, the LVMCluster
//! deleted while the operator runs, then `helm uninstall`. The node keeps nothing of lvms.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams};
use lvms_testkit::dev::deploy::helm_bin;
use lvms_testkit::snapshots;

use crate::ctx::{APPS, Ctx, LVMS_NS, NODE, SLOW};
use crate::install::CLUSTER;

/// What lvms could leave on the node: its volume groups, device-mapper devices, mounts.
pub const LEFTOVERS: &str = r#"echo "vgs: $(lvm vgs --noheadings -o vg_name --select 'vg_name=vg1 || vg_name=vg2' | tr -d ' ' | tr '\n' ' ')"
echo "dm: $(dmsetup ls | awk '$1 ~ /^vg[12]-/ {print $1}' | tr '\n' ' ')"
echo "mounts: $(grep -c topolvm.io /proc/mounts)""#;

pub async fn uninstall_leaves_nothing_on_the_node(c: &mut Ctx) {
    let dp = DeleteParams::default();
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), APPS);
    let _ = pods.delete_collection(&dp, &ListParams::default()).await;
    let groups = snapshots::group_api(
        &c.client,
        "volumegroupsnapshots",
        "VolumeGroupSnapshot",
        Some(APPS),
    );
    let _ = groups.delete_collection(&dp, &ListParams::default()).await;
    let snaps = snapshots::api(&c.client, "volumesnapshots", "VolumeSnapshot", Some(APPS));
    let _ = snaps.delete_collection(&dp, &ListParams::default()).await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(c.client.clone(), APPS);
    let _ = claims.delete_collection(&dp, &ListParams::default()).await;
    c.until("every lvms PersistentVolume gone", SLOW, |cl| async move {
        let pvs = Api::<PersistentVolume>::all(cl)
            .list(&ListParams::default())
            .await
            .ok()?;
        pvs.items.is_empty().then_some(())
    })
    .await;

    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "lvm.topolvm.io",
        "v1alpha1",
        "LVMCluster",
    ));
    let clusters: Api<DynamicObject> = Api::namespaced_with(c.client.clone(), LVMS_NS, &ar);
    clusters
        .delete(CLUSTER, &dp)
        .await
        .expect("deleting the LVMCluster");
    c.until("the LVMCluster gone", SLOW, |cl| {
        let ar = ar.clone();
        async move {
            let gone = Api::<DynamicObject>::namespaced_with(cl, LVMS_NS, &ar)
                .get_opt(CLUSTER)
                .await
                .ok()?
                .is_none();
            gone.then_some(())
        }
    })
    .await;

    let out = std::process::Command::new(helm_bin())
        .args(["uninstall", "lvms", "--kubeconfig"])
        .arg(&c.cp.kubeconfig)
        .output()
        .expect("running helm");
    assert!(
        out.status.success(),
        "helm uninstall: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    c.until(
        "lvms's Pods gone",
        Duration::from_secs(300),
        |cl| async move {
            let pods = Api::<Pod>::namespaced(cl, LVMS_NS)
                .list(&ListParams::default())
                .await
                .ok()?;
            pods.items.is_empty().then_some(())
        },
    )
    .await;

    let left = c.on_node("leftovers", LEFTOVERS).await;
    assert_eq!(
        left.lines().collect::<Vec<_>>(),
        ["vgs: ", "dm: ", "mounts: 0"],
        "what lvms left on the node"
    );
    let node = Api::<Node>::all(c.client.clone())
        .get(NODE)
        .await
        .expect("the Node");
    let finalizers = node.metadata.finalizers.unwrap_or_default();
    assert!(
        finalizers.is_empty(),
        "finalizers left on the Node: {finalizers:?}"
    );
}
