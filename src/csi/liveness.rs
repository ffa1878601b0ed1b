//! What the upstream livenessprobe sidecar does, in-process: every `every`, connect to a CSI
//! socket by its path and call Identity.Probe; the result goes to `report` (the process's
//! `/healthz`). A socket file that was removed, or a server that no longer answers, fails the
//! probe, so kubelet restarts the pod and the socket is bound again.

use std::path::PathBuf;
use std::time::Duration;

use super::proto::ProbeRequest;
use super::proto::identity_client::IdentityClient;

/// One probe of the socket at `path`, within `timeout`.
pub async fn probe(path: &std::path::Path, timeout: Duration) -> Result<(), String> {
    let what = |e: &dyn std::fmt::Display| format!("CSI socket {}: {e}", path.display());
    let call = async {
        let channel = super::client::connect(path).await.map_err(|e| what(&e))?;
        IdentityClient::new(channel)
            .probe(ProbeRequest {})
            .await
            .map(drop)
            .map_err(|e| what(&e))
    };
    tokio::time::timeout(timeout, call)
        .await
        .unwrap_or_else(|_| Err(what(&format!("no answer within {timeout:?}"))))
}

/// Probe `path` every `every` until the task is aborted; each result goes to `report`.
pub fn spawn(
    path: PathBuf,
    every: Duration,
    report: impl Fn(Result<(), String>) + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let result = probe(&path, every.max(Duration::from_secs(1))).await;
            if let Err(e) = &result {
                tracing::warn!(error = %e, "CSI socket liveness probe failed");
            }
            report(result);
        }
    })
}
