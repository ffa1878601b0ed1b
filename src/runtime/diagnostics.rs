//! `/healthz`, `/readyz` and `/metrics` on a tiny HTTP/1.1 server (no web framework for three
//! routes).

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tracing::{debug, info};

use crate::telemetry::metrics::{CONTENT_TYPE as METRICS_CONTENT_TYPE, MetricsText};

/// Answers `/readyz` (or `/healthz`): `Ok` when ready (alive), else why not.
pub type ReadyCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

fn response(code: u16, body: &str) -> String {
    typed_response(code, "text/plain", body)
}

fn typed_response(code: u16, content_type: &str, body: &str) -> String {
    let status = match code {
        200 => "OK",
        404 => "Not Found",
        _ => "Service Unavailable",
    };
    format!(
        "HTTP/1.1 {code} {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Route one request line (pure, so the routes are unit-tested).
pub fn route(
    request_line: &str,
    live: &ReadyCheck,
    ready: &ReadyCheck,
    metrics: &MetricsText,
) -> String {
    let path = request_line.split_whitespace().nth(1).unwrap_or("/");
    match path {
        "/healthz" => match live() {
            Ok(()) => response(200, "ok\n"),
            Err(why) => response(503, &format!("not live: {why}\n")),
        },
        "/readyz" => match ready() {
            Ok(()) => response(200, "ok\n"),
            Err(why) => response(503, &format!("not ready: {why}\n")),
        },
        "/metrics" => typed_response(200, METRICS_CONTENT_TYPE, &metrics()),
        _ => response(404, "not found\n"),
    }
}

pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let listener = TcpListener::bind(addr).await?;
    info!(addr = %listener.local_addr()?, "diagnostics listening (/healthz, /readyz, /metrics)");
    Ok(listener)
}

pub async fn serve(
    listener: TcpListener,
    live: ReadyCheck,
    ready: ReadyCheck,
    metrics: MetricsText,
) {
    loop {
        // A failed accept concerns that one connection; the prober just tries again.
        let Ok((mut sock, peer)) = listener.accept().await else {
            continue;
        };
        let (live, ready, metrics) = (live.clone(), ready.clone(), metrics.clone());
        tokio::spawn(async move {
            // Read the whole request head: closing with unread bytes would reset the client.
            let mut buf = Vec::with_capacity(512);
            let mut chunk = [0u8; 1024];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 8192 {
                match sock.read(&mut chunk).await {
                    Ok(0) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    Err(e) => {
                        debug!(%peer, error = %e, "diagnostics read failed");
                        return;
                    }
                }
            }
            let text = String::from_utf8_lossy(&buf);
            let line = text.lines().next().unwrap_or_default();
            // A client that went away gets no answer; nothing else depends on it.
            let _ = sock
                .write_all(route(line, &live, &ready, &metrics).as_bytes())
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_metrics() -> MetricsText {
        Arc::new(String::new)
    }

    #[test]
    fn readyz_reports_why() {
        let not: ReadyCheck = Arc::new(|| Err("caches not synced".into()));
        let yes: ReadyCheck = Arc::new(|| Ok(()));
        let m = no_metrics();
        assert!(route("GET /readyz HTTP/1.1", &yes, &not, &m).starts_with("HTTP/1.1 503"));
        assert!(
            route("GET /readyz HTTP/1.1", &yes, &not, &m)
                .ends_with("not ready: caches not synced\n")
        );
        assert!(route("GET /readyz HTTP/1.1", &yes, &yes, &m).starts_with("HTTP/1.1 200"));
        // Alive while not ready; not alive when its liveness check fails, saying why.
        assert!(route("GET /healthz HTTP/1.1", &yes, &not, &m).starts_with("HTTP/1.1 200"));
        let dead: ReadyCheck = Arc::new(|| Err("CSI socket /x: refused".into()));
        let out = route("GET /healthz HTTP/1.1", &dead, &yes, &m);
        assert!(
            out.starts_with("HTTP/1.1 503") && out.ends_with("not live: CSI socket /x: refused\n")
        );
        assert!(route("GET /nope HTTP/1.1", &yes, &yes, &m).starts_with("HTTP/1.1 404"));
    }

    #[test]
    fn metrics_serves_the_encoded_registry() {
        use crate::telemetry::metrics::{Metrics, Process, exposition};
        let metrics = Metrics::new(Process::Operator);
        metrics.pass(&lvms_actors::PassReport {
            unit: "status",
            ok: true,
            reason: None,
            duration: std::time::Duration::from_millis(5),
            journaled: true,
            subject: None,
        });
        let not: ReadyCheck = Arc::new(|| Err("caches not synced".into()));
        // Served whether or not the process is ready: metrics matter most when it is not.
        let out = route("GET /metrics HTTP/1.1", &not, &not, &metrics.text());
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
        assert!(
            head.contains(
                "content-type: application/openmetrics-text; version=1.0.0; charset=utf-8"
            ),
            "{head}"
        );
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let e = exposition::parse(body).unwrap();
        assert_eq!(
            e.value("lvms_reconcile_total", &[("unit", "status")]),
            Some(1.0)
        );
        assert!(body.ends_with("# EOF\n"));
    }
}
