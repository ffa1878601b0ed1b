//! A node status left by an LVMCluster that is gone (created by POST, so its owner reference
//! belongs to the create's Update manager) is adopted by the next LVMCluster's
//! create-or-apply, not refused as Invalid for having two controller owners.

use kube::api::{Api, PostParams};
use lvms::api::{LVMCluster, LVMVolumeGroupNodeStatus};
use lvms::kube::apply::create_or_apply;
use lvms::kube::kinds::Kind;
use lvms_testkit::Scenario;
use lvms_testkit::fixtures::{lvm_cluster, node_status, thick_class};
use serde_json::json;

fn owned_by(ns: &str, node: &str, owner: &LVMCluster) -> serde_json::Value {
    let mut o = node_status(ns, node, json!([]));
    o["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "lvm.topolvm.io/v1alpha1", "kind": "LVMCluster",
        "name": owner.metadata.name, "uid": owner.metadata.uid,
        "controller": true, "blockOwnerDeletion": true,
    }]);
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_status_of_a_previous_owner_is_adopted_by_create_or_apply() {
    let s = Scenario::new("adopt").await;
    let clusters: Api<LVMCluster> = Api::namespaced(s.client.clone(), &s.ns.name);
    let make = |name: &str| {
        serde_json::from_value::<LVMCluster>(lvm_cluster(
            name,
            json!([thick_class("vg1", "/dev/loop10")]),
        ))
        .expect("cluster")
    };
    let old = clusters
        .create(&PostParams::default(), &make("old"))
        .await
        .expect("old");
    let new = clusters
        .create(&PostParams::default(), &make("new"))
        .await
        .expect("new");
    // The old owner's operator created it (POST, as create_or_apply does).
    create_or_apply(
        &s.client,
        Kind::NodeStatus,
        &owned_by(&s.ns.name, "node-x", &old),
    )
    .await
    .expect("first create");
    // The new owner's operator finds the name taken.
    create_or_apply(
        &s.client,
        Kind::NodeStatus,
        &owned_by(&s.ns.name, "node-x", &new),
    )
    .await
    .unwrap_or_else(|e| panic!("adopting the leftover: {e:?}"));
    let got = Api::<LVMVolumeGroupNodeStatus>::namespaced(s.client.clone(), &s.ns.name)
        .get("node-x")
        .await
        .expect("node status");
    let owners: Vec<_> = got
        .metadata
        .owner_references
        .unwrap_or_default()
        .into_iter()
        .map(|o| o.uid)
        .collect();
    assert_eq!(owners, vec![new.metadata.uid.clone().expect("uid")]);
}
