//! What the long-running commands (operator, vg-manager) share: logging, a small runtime, a
//! client, and SIGTERM (kubelet) or SIGINT (a person) as the graceful end.

use std::future::Future;
use std::process::ExitCode;

use anyhow::Context as _;
use tokio::signal::unix::{SignalKind, signal};

/// Logging only (short commands: `lvms journal`, `lvms dev ...`).
pub fn init_logging(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // Fails only when a subscriber is already installed: that one keeps logging.
    let _ = if format == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// Logging and traces (service `service` unless OTEL_SERVICE_NAME says otherwise), a
/// two-worker runtime and a client (KUBECONFIG or in-cluster), then `body`. Spans still
/// buffered are exported when this returns.
pub fn run_daemon<F, Fut>(log_format: &str, service: &str, body: F) -> anyhow::Result<ExitCode>
where
    F: FnOnce(kube::Client) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let _telemetry = crate::telemetry::otel::init(log_format, service)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let client = crate::telemetry::api_requests::counted_client()
            .await
            .context("connecting to the API server (KUBECONFIG or in-cluster)")?;
        body(client).await?;
        Ok(ExitCode::SUCCESS)
    })
}

pub async fn terminated() {
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    match (term, int) {
        (Ok(mut t), Ok(mut i)) => {
            tokio::select! {
                _ = t.recv() => {}
                _ = i.recv() => {}
            }
        }
        // Without signal handlers there is nothing to wait for but a kill.
        _ => std::future::pending::<()>().await,
    }
}
