//! What kubelet (and the node lifecycle controller) would do on a real cluster: there is none
//! here, so the tests create the Nodes and register the CSI plugin themselves.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::CSINode;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::fixtures;

/// Nodes (cluster-scoped): `taint` adds an untolerated NoSchedule taint.
pub async fn create_node(client: &Client, name: &str, taint: bool) {
    let node = if taint {
        fixtures::tainted(fixtures::node(name))
    } else {
        fixtures::node(name)
    };
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let api = Api::<Node>::all(client.clone());
    api.create(&PostParams::default(), &node)
        .await
        .expect("creating node");
    // The TaintNodesByCondition admission plugin marks a new node not-ready; kubelet would
    // clear that once the node is up. There is no kubelet here, so do it for it.
    let clear = json!({"spec": {"taints": taints}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&clear))
        .await
        .expect("clearing the not-ready taint");
}

/// What kubelet does when vg-manager's node plugin registers (or unregisters).
pub async fn register_csi_node(client: &Client, node: &str, registered: bool) {
    Api::<CSINode>::all(client.clone())
        .patch(
            node,
            &PatchParams::apply("test-kubelet").force(),
            &Patch::Apply(&fixtures::csi_node(node, registered)),
        )
        .await
        .expect("CSINode");
}

/// What kubelet does with NodeGetInfo when the node plugin registers: the CSINode lists the
/// driver with TopoLVM's topology key, and the Node carries it as a label (csi-provisioner
/// builds a claim's accessibility requirements from both).
pub async fn register_with_topology(client: &Client, node: &str) {
    Api::<CSINode>::all(client.clone())
        .patch(
            node,
            &PatchParams::apply("test-kubelet").force(),
            &Patch::Apply(&fixtures::with_topology_keys(fixtures::csi_node(
                node, true,
            ))),
        )
        .await
        .expect("CSINode topology keys");
    Api::<Node>::all(client.clone())
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"topology.topolvm.io/node": node}}})),
        )
        .await
        .expect("topology label");
}
