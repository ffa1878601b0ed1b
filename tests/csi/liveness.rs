//! The livenessprobe sidecar's job, done by each process on its own CSI socket: `/healthz` is
//! 200 while Identity.Probe answers over the socket's path, and 503 naming the socket once it
//! does not (here: the socket file removed, as a cleanup of kubelet's plugin directory would),
//! so kubelet restarts the pod and the socket is bound again.

use std::time::Duration;

use lvms_testkit::dev::operator::OperatorProcess;
use lvms_testkit::eventually;

use crate::common::ThickNode;

const FAST: (&str, &str) = ("LVMS_CSI_PROBE_INTERVAL", "300ms");

/// `/healthz`, or None while the process is not listening yet.
fn healthz(p: &OperatorProcess) -> Option<(u16, String)> {
    p.diagnostics_get("/healthz").ok()
}

async fn goes_dead(p: &OperatorProcess, socket: &std::path::Path) {
    let (code, body) = healthz(p).expect("diagnostics");
    assert_eq!(code, 200, "{body}");
    std::fs::remove_file(socket).expect("removing the socket");
    let dead = eventually(Duration::from_secs(10), || async {
        let (code, body) = healthz(p)?;
        (code == 503).then_some(body)
    })
    .await
    .unwrap_or_else(|| panic!("/healthz stayed 200 without {}", socket.display()));
    assert!(
        dead.contains("not live") && dead.contains(&socket.display().to_string()),
        "{dead}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_fails_once_a_csi_socket_stops_answering() {
    let mut n = ThickNode::start("csi-live", &[FAST]).await;
    // The operator again with a fast probe (the harness starts it with the default).
    n.op.kill();
    n.op = n.s.operator(&[FAST], &[]);
    let op_socket = n.op.csi_socket.clone();
    eventually(Duration::from_secs(30), || async {
        (healthz(&n.op).is_some_and(|h| h.0 == 200) && op_socket.exists()).then_some(())
    })
    .await
    .expect("the operator up");
    goes_dead(&n.op, &op_socket).await;
    let vgm = n.vgm.as_ref().expect("vg-manager");
    goes_dead(vgm, &vgm.csi_socket.clone()).await;
}
