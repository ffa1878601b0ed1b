//! The uninstall, as docs/install.md tells it: workloads and claims deleted, the LVMCluster
//! deleted while the operator runs, then `helm uninstall`. The node keeps nothing of lvms.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use lvms_testkit::snapshots;

use crate::ctx::{APPS, Ctx, NODE, SLOW};
use crate::install::delete_cluster;

/// What lvms could leave on the node: its volume groups, device-mapper devices, mounts.
const LEFTOVERS: &str = r#"echo "vgs: $(lvm vgs --noheadings -o vg_name --select 'vg_name=vg1 || vg_name=vg2' | tr -d ' ' | tr '\n' ' ')"
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

    delete_cluster(c).await;

    crate::install::helm(c, "uninstall", &[]);
    assert_nothing_left(c, "leftovers").await;
    let node = Api::<Node>::all(c.client.clone())
        .get(NODE)
        .await
        .expect("the Node");
    let finalizers = node.metadata.finalizers.unwrap_or_default();
    assert!(
        finalizers.is_empty(),
        "finalizers left on the Node: {finalizers:?}"
    );
    // Nor room advertised in classes that are gone (vg-manager removes it with its last class).
    let capacity =
        lvms::api::topolvm::node_capacity_annotations(node.metadata.annotations.as_ref());
    assert!(
        capacity.is_empty(),
        "capacity annotations left on the Node: {capacity:?}"
    );
}

/// Waits until lvms's Pods are gone, then looks at the node (probe Pod `probe`): no volume
/// group, dm device or mount of lvms's left.
pub async fn assert_nothing_left(c: &mut Ctx, probe: &str) {
    c.operator_pods_gone("lvms's Pods gone", Duration::from_secs(300))
        .await;
    let left = c.on_node(probe, LEFTOVERS).await;
    assert_eq!(
        left.lines().collect::<Vec<_>>(),
        ["vgs: ", "dm: ", "mounts: 0"],
        "what lvms left on the node"
    );
}
