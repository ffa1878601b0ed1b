//! Leftovers of an earlier scenario: cluster-scoped objects, and lvms objects anywhere.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use lvms::api::{LVMCluster, LVMVolumeGroup, LVMVolumeGroupNodeStatus};
use serde_json::json;

async fn strip_and_delete<K>(api: Api<K>)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let lp = ListParams::default();
    let unfinalize = json!({"metadata": {"finalizers": null}});
    for o in api.list_metadata(&lp).await.expect("list").items {
        let ns = o.namespace().unwrap_or_default();
        let api: Api<K> = Api::namespaced(api.clone().into_client(), &ns);
        let _ = api
            .patch(
                &o.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&unfinalize),
            )
            .await;
        let _ = api.delete(&o.name_any(), &DeleteParams::default()).await;
    }
}

/// Strips the finalizers of every object of a cluster-scoped kind, then deletes it.
async fn strip_and_delete_cluster<K>(client: &Client)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api = Api::<K>::all(client.clone());
    let unfinalize = json!({"metadata": {"finalizers": null}});
    // A kind whose CRD is not installed has nothing left over.
    let Ok(list) = api.list_metadata(&ListParams::default()).await else {
        return;
    };
    for o in list.items {
        let _ = api
            .patch(
                &o.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&unfinalize),
            )
            .await;
        let _ = api.delete(&o.name_any(), &DeleteParams::default()).await;
    }
}

/// Deletes every object of a cluster-scoped kind.
async fn delete_all<K>(client: &Client, what: &str)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api = Api::<K>::all(client.clone());
    for o in api
        .list_metadata(&ListParams::default())
        .await
        .expect(what)
        .items
    {
        let _ = api.delete(&o.name_any(), &DeleteParams::default()).await;
    }
}

/// Leftovers of an earlier scenario (finalizers stripped so nothing hangs, and no stray
/// LVMCluster elsewhere for the next operator to report).
pub async fn clean_cluster_scoped(client: &Client) {
    strip_and_delete(Api::<LVMCluster>::all(client.clone())).await;
    strip_and_delete(Api::<LVMVolumeGroup>::all(client.clone())).await;
    strip_and_delete(Api::<LVMVolumeGroupNodeStatus>::all(client.clone())).await;
    // The CSI tests' volumes: a LogicalVolume or PV of an earlier scenario names a node of
    // the same name as the next one's.
    strip_and_delete_cluster::<lvms::api::LogicalVolume>(client).await;
    strip_and_delete_cluster::<k8s_openapi::api::core::v1::PersistentVolume>(client).await;
    // vg-manager puts TopoLVM's `topolvm.io/node` on its Node; no operator is left to take it off.
    strip_and_delete_cluster::<Node>(client).await;
    delete_all::<CSINode>(client, "csinodes").await;
    delete_all::<StorageClass>(client, "scs").await;
    // deploy/admission's policies: an install's refusals must not outlive its scenario.
    delete_all::<ValidatingAdmissionPolicyBinding>(client, "policy bindings").await;
    delete_all::<ValidatingAdmissionPolicy>(client, "policies").await;
    let _ = Api::<CSIDriver>::all(client.clone())
        .delete("topolvm.io", &DeleteParams::default())
        .await;
}
