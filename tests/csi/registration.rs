//! kubelet plugin registration through vg-manager's own `topolvm.io-reg.sock`, spoken as kubelet
//! speaks it (testkit::plugin_watcher: raw HTTP/2 with the socket path as `:authority`, then
//! NodeGetInfo, the CSINode entry, NotifyRegistrationStatus): the LVMCluster goes Ready with
//! no CSINode written by the test itself.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::CSINode;
use kube::Api;
use lvms::api::LVMStateType;
use lvms_testkit::disks::{Disk, require_prerequisites};
use lvms_testkit::fixtures::{host_selector, lvm_cluster};
use lvms_testkit::kubelet::create_node;
use lvms_testkit::kubelet::plugin_watcher::{KubeletConn, register};
use lvms_testkit::{Scenario, eventually};
use serde_json::json;

use crate::common::NODE;

const T: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_gets_ready_through_kubelets_registration_path() {
    require_prerequisites();
    let s = Scenario::new("csi-register").await;
    let disk = Disk::new(&s.dir.join("disks"), "dreg", 200);
    create_node(&s.client, NODE, false).await;
    // A short directory: a Unix socket path has at most 108 bytes.
    let reg_dir = std::env::temp_dir().join(format!("lvms-reg-{}", std::process::id()));
    let reg_dir_arg = reg_dir.display().to_string();
    let _op = s.operator(&[], &[]);
    let vgm = s.vg_manager(NODE, &[("LVMS_REGISTRATION_DIR", reg_dir_arg.as_str())]);
    let class = format!("r{}", std::process::id());
    let dc = json!({"name": class, "default": true, "nodeSelector": host_selector(NODE),
                    "deviceSelector": {"paths": [disk.link]}});
    s.create_cluster(lvm_cluster("my-lvmcluster", json!([dc])))
        .await;
    let socket = reg_dir.join("topolvm.io-reg.sock");
    let up = eventually(T, || async { socket.exists().then_some(()) }).await;
    assert!(up.is_some(), "no {}:\n{}", socket.display(), vgm.log_text());

    // Every socket passes through the `:authority` shim: kubelet's request shape (a path as
    // `:authority`, which h2 alone refuses with a stream reset) reaches the node socket too, as
    // any gRPC client's would (issue 38: grpc-core clients were refused).
    let mut node = KubeletConn::connect(&vgm.csi_socket)
        .await
        .expect("node socket");
    node.unary("/csi.v1.Identity/GetPluginInfo", &[])
        .await
        .expect("the node socket takes a path as :authority");
    // As LVMS: vg-manager is not ready while kubelet has not registered the driver.
    let waiting = eventually(T, || async {
        let (code, body) = vgm.diagnostics_get("/readyz").ok()?;
        (code == 503 && body.contains("kubelet has not registered topolvm.io")).then_some(())
    })
    .await;
    assert!(
        waiting.is_some(),
        "/readyz before registration: {:?}",
        vgm.diagnostics_get("/readyz")
    );

    // kubelet's registration, through the shim on the registration socket.
    let info = register(&s.client, NODE, &socket)
        .await
        .unwrap_or_else(|e| panic!("registration failed: {e}\n{}", vgm.log_text()));
    assert_eq!(info.name, "topolvm.io");
    assert_eq!(info.r#type, "CSIPlugin");
    assert_eq!(info.endpoint, vgm.csi_socket.display().to_string());
    assert_eq!(info.supported_versions, ["1.0.0"]);
    let csi_node = Api::<CSINode>::all(s.client.clone())
        .get(NODE)
        .await
        .expect("CSINode");
    let driver = &csi_node.spec.drivers[0];
    assert_eq!(driver.name, "topolvm.io");
    assert_eq!(driver.node_id, NODE);
    assert_eq!(
        driver.topology_keys.as_deref(),
        Some(&["topology.topolvm.io/node".to_string()][..])
    );
    let node = Api::<Node>::all(s.client.clone())
        .get(NODE)
        .await
        .expect("node");
    assert_eq!(
        node.metadata
            .labels
            .unwrap_or_default()
            .get("topology.topolvm.io/node")
            .map(String::as_str),
        Some(NODE)
    );
    s.wait_state("my-lvmcluster", LVMStateType::Ready, T).await;
    let told = eventually(T, || async {
        vgm.log_text()
            .contains("kubelet registered the CSI node plugin")
            .then_some(())
    })
    .await;
    assert!(
        told.is_some(),
        "NotifyRegistrationStatus never reached vg-manager"
    );
    let ready = eventually(T, || async {
        (vgm.diagnostics_get("/readyz").ok()?.0 == 200).then_some(())
    })
    .await;
    assert!(
        ready.is_some(),
        "/readyz after registration: {:?}",
        vgm.diagnostics_get("/readyz")
    );
    let _ = std::fs::remove_dir_all(&reg_dir);
}
