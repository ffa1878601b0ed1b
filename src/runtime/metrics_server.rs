//! `/metrics` over TLS to clients the API server vouches for: a bearer token that TokenReview
//! accepts, of a user SubjectAccessReview allows `get` on `/metrics` (`metrics_auth`). LVMS's
//! port (8443) and check; the probes stay plain HTTP on the diagnostics port.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

use super::diagnostics::{Limits, read_head, serve_connections, typed_response};
use super::metrics_auth::{AuthError, Authorizer, Verdict, bearer};
use super::serving_cert::{Resolver, server_config};
use crate::telemetry::metrics::{CONTENT_TYPE, MetricsText};

/// Where and with what certificate metrics are served.
#[derive(Debug, Clone)]
pub struct MetricsServing {
    /// `None`: not served (`--metrics-addr off`).
    pub addr: Option<SocketAddr>,
    /// `tls.crt` and `tls.key`; none there: self-signed.
    pub cert_dir: PathBuf,
}

/// `--metrics-addr`: an address, or `off`.
pub fn parse_addr(s: &str) -> Result<Option<SocketAddr>, String> {
    if s == "off" {
        return Ok(None);
    }
    s.parse()
        .map(Some)
        .map_err(|e| format!("{s:?}: {e}; an address such as 0.0.0.0:8443, or off"))
}

/// Whether the request line asks for the metrics (pure): else the 404 to send.
pub fn route(request_line: &str) -> Result<(), String> {
    let mut parts = request_line.split_whitespace();
    match (parts.next(), parts.next()) {
        (Some("GET"), Some("/metrics")) => Ok(()),
        (_, Some("/metrics")) => Err(typed_response(404, "text/plain", "only GET /metrics\n")),
        _ => Err(typed_response(404, "text/plain", "not found\n")),
    }
}

/// The answer to `GET /metrics` given the check's word (pure).
pub fn answer(verdict: &Result<Verdict, AuthError>, metrics: &MetricsText) -> String {
    match verdict {
        Ok(Verdict::Allowed) => typed_response(200, CONTENT_TYPE, &metrics()),
        Ok(Verdict::Unauthenticated(why)) => typed_response(401, "text/plain", &format!("{why}\n")),
        Ok(Verdict::Forbidden(why)) => typed_response(403, "text/plain", &format!("{why}\n")),
        Err(e) => typed_response(503, "text/plain", &format!("{e}\n")),
    }
}

/// Binds and serves until the handle is aborted; `Ok(None)` when metrics are off.
pub async fn start(
    serving: &MetricsServing,
    client: kube::Client,
    metrics: MetricsText,
) -> anyhow::Result<Option<JoinHandle<()>>> {
    let Some(addr) = serving.addr else {
        info!("metrics not served (--metrics-addr off)");
        return Ok(None);
    };
    // The names a self-signed certificate carries: scrapers of a self-signed endpoint skip
    // verification anyway; these make it readable.
    let mut names = vec!["localhost".to_string()];
    if let Ok(host) = std::env::var("HOSTNAME") {
        names.push(host);
    }
    let resolver = Resolver::new(&serving.cert_dir, &names)
        .with_context(|| format!("--metrics-cert-dir {}", serving.cert_dir.display()))?;
    let tls = server_config(Arc::new(resolver)).context("the metrics TLS configuration")?;
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("--metrics-addr {addr}"))?;
    info!(addr = %listener.local_addr()?, "metrics listening (https, TokenReview + SubjectAccessReview)");
    let authorizer = Arc::new(Authorizer::new(client, "/metrics"));
    Ok(Some(tokio::spawn(serve(
        listener,
        TlsAcceptor::from(Arc::new(tls)),
        authorizer,
        metrics,
        Limits::default(),
    ))))
}

async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    authorizer: Arc<Authorizer>,
    metrics: MetricsText,
    limits: Limits,
) {
    serve_connections(listener, limits, "metrics", |sock, peer| {
        let (acceptor, authorizer, metrics) =
            (acceptor.clone(), authorizer.clone(), metrics.clone());
        async move {
            let mut tls =
                match tokio::time::timeout(limits.read_timeout, acceptor.accept(sock)).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        // Once per connection: a scraper with the wrong TLS settings learns why
                        // here (busybox's wget: no signature_algorithms), not from a reset.
                        info!(%peer, error = %e, "metrics TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        debug!(%peer, "metrics TLS handshake not done in time; closed");
                        return;
                    }
                };
            let Some(buf) = read_head(&mut tls, limits, peer).await else {
                return;
            };
            let head = String::from_utf8_lossy(&buf);
            let line = head.lines().next().unwrap_or_default();
            let response = match route(line) {
                Err(not_found) => not_found,
                Ok(()) => {
                    let verdict = authorizer.check(bearer(&head)).await;
                    match &verdict {
                        Ok(Verdict::Allowed) => {}
                        Ok(denied) => debug!(%peer, ?denied, "metrics request refused"),
                        Err(e) => warn!(%peer, error = %e, "metrics request not checked"),
                    }
                    answer(&verdict, &metrics)
                }
            };
            let _ = tokio::time::timeout(limits.read_timeout, async {
                tls.write_all(response.as_bytes()).await?;
                tls.shutdown().await
            })
            .await;
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> MetricsText {
        use crate::telemetry::metrics::{Metrics, Process};
        let metrics = Metrics::new(Process::Operator);
        metrics.pass(&lvms_actors::PassReport {
            unit: "status",
            ok: true,
            reason: None,
            duration: std::time::Duration::from_millis(5),
            journaled: true,
            subject: None,
        });
        metrics.text()
    }

    #[test]
    fn only_get_metrics_is_routed_to_the_check() {
        assert!(route("GET /metrics HTTP/1.1").is_ok());
        for line in [
            "GET /healthz HTTP/1.1",
            "POST /metrics HTTP/1.1",
            "GET / HTTP/1.1",
            "",
        ] {
            let r = route(line).unwrap_err();
            assert!(r.starts_with("HTTP/1.1 404"), "{line}: {r}");
        }
    }

    #[test]
    fn the_registry_goes_to_allowed_clients_only() {
        use crate::telemetry::metrics::exposition;
        let m = registry();
        let ok = answer(&Ok(Verdict::Allowed), &m);
        let (head, body) = ok.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
        assert!(head.contains(CONTENT_TYPE), "{head}");
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let e = exposition::parse(body).unwrap();
        assert_eq!(
            e.value("lvms_reconcile_total", &[("unit", "status")]),
            Some(1.0)
        );
        let cases = [
            (
                Ok(Verdict::Unauthenticated("no bearer token".into())),
                "HTTP/1.1 401 Unauthorized",
            ),
            (
                Ok(Verdict::Forbidden("u may not".into())),
                "HTTP/1.1 403 Forbidden",
            ),
            (Err(AuthError::new("TokenReview: refused")), "HTTP/1.1 503"),
        ];
        for (verdict, status) in cases {
            let out = answer(&verdict, &m);
            assert!(out.starts_with(status), "{out}");
            assert!(!out.contains("lvms_reconcile"), "{out}");
        }
    }

    #[test]
    fn metrics_addr_is_an_address_or_off() {
        assert_eq!(parse_addr("off"), Ok(None));
        assert_eq!(
            parse_addr("127.0.0.1:8443"),
            Ok(Some("127.0.0.1:8443".parse().unwrap()))
        );
        let e = parse_addr(":8443").unwrap_err();
        assert!(e.contains("0.0.0.0:8443, or off"), "{e}");
    }
}
