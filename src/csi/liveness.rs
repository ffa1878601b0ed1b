//! What the upstream livenessprobe sidecar does, in-process: every `every`, connect to a CSI
//! socket by its path and call Identity.Probe; the result goes to `report` (the process's
//! `/healthz`). A socket file that was removed, or a server that no longer answers, fails the
//! probe, so kubelet restarts the pod and the socket is bound again.

use std::path::PathBuf;
use std::time::Duration;

use super::proto::ProbeRequest;
use super::proto::identity_client::IdentityClient;

/// Why the CSI socket did not answer Probe.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("CSI socket {}: {source}", path.display())]
    Connect {
        path: PathBuf,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("CSI socket {}: {source}", path.display())]
    Probe {
        path: PathBuf,
        #[source]
        source: tonic::Status,
    },
    #[error("CSI socket {}: no answer within {timeout:?}", path.display())]
    Timeout { path: PathBuf, timeout: Duration },
}

/// One probe of the socket at `path`, within `timeout`.
pub async fn probe(path: &std::path::Path, timeout: Duration) -> Result<(), ProbeError> {
    let call = async {
        let channel = super::client::connect(path)
            .await
            .map_err(|source| ProbeError::Connect {
                path: path.to_path_buf(),
                source,
            })?;
        IdentityClient::new(channel)
            .probe(ProbeRequest {})
            .await
            .map(drop)
            .map_err(|source| ProbeError::Probe {
                path: path.to_path_buf(),
                source,
            })
    };
    tokio::time::timeout(timeout, call)
        .await
        .unwrap_or_else(|_| {
            Err(ProbeError::Timeout {
                path: path.to_path_buf(),
                timeout,
            })
        })
}

/// Probe `path` every `every` until the task is aborted; each result goes to `report`.
pub fn spawn(
    path: PathBuf,
    every: Duration,
    report: impl Fn(Result<(), ProbeError>) + Send + 'static,
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
