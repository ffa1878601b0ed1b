//! The harness runs kube-controller-manager's garbage collector: owned objects go with owners.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use lvms_testkit::{TestNs, eventually};

#[tokio::test]
async fn deleting_an_owner_garbage_collects_its_configmap() {
    let ns = TestNs::new("gc").await;
    let api: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    let owner: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap();
    let owner = api
        .create(&PostParams::default(), &owner)
        .await
        .expect("create owner");
    let uid = owner.metadata.uid.clone().expect("owner uid");
    let child: ConfigMap = serde_json::from_value(json!({
        "metadata": {
            "name": "child",
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}]
        }
    }))
    .unwrap();
    api.create(&PostParams::default(), &child)
        .await
        .expect("create child");

    api.delete("owner", &DeleteParams::background())
        .await
        .expect("delete owner");
    let gone = eventually(Duration::from_secs(60), || async {
        match api.get_opt("child").await {
            Ok(None) => Some(()),
            _ => None,
        }
    })
    .await;
    assert!(
        gone.is_some(),
        "the owned ConfigMap still exists 60s after its owner was deleted: no garbage collection"
    );
}
