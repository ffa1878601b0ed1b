//! `/healthz` and `/readyz` on a tiny plain HTTP/1.1 server (no web framework for two routes),
//! as kubelet's probes need them. `/metrics` is served apart, over TLS to authorized clients
//! only (`metrics_server`).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, info};

/// Answers `/readyz` (or `/healthz`): `Ok` when ready (alive), else why not.
pub type ReadyCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

fn response(code: u16, body: &str) -> String {
    typed_response(code, "text/plain", body)
}

pub(crate) fn typed_response(code: u16, content_type: &str, body: &str) -> String {
    let status = match code {
        200 => "OK",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        _ => "Service Unavailable",
    };
    format!(
        "HTTP/1.1 {code} {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Route one request line (pure, so the routes are unit-tested).
pub fn route(request_line: &str, live: &ReadyCheck, ready: &ReadyCheck) -> String {
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
        _ => response(404, "not found\n"),
    }
}

pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let listener = TcpListener::bind(addr).await?;
    info!(addr = %listener.local_addr()?, "diagnostics listening (/healthz, /readyz)");
    Ok(listener)
}

/// What one client may hold of the diagnostics server: the probes and a scraper need a few
/// connections for milliseconds each; a client that opens many, or sends nothing, must not
/// starve kubelet's probes (which would restart the Pod).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The whole request head must arrive within this.
    pub read_timeout: Duration,
    /// Connections served at once; more are closed at once.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            read_timeout: Duration::from_secs(5),
            max_connections: 64,
        }
    }
}

pub async fn serve(listener: TcpListener, live: ReadyCheck, ready: ReadyCheck) {
    serve_with(listener, live, ready, Limits::default()).await
}

/// The whole request head (up to 8 KiB), within `limits.read_timeout`: closing with unread
/// bytes would reset the client. `None` when it fails or is not sent in time (logged).
pub(crate) async fn read_head<S: AsyncRead + Unpin>(
    sock: &mut S,
    limits: Limits,
    peer: SocketAddr,
) -> Option<Vec<u8>> {
    let head = tokio::time::timeout(limits.read_timeout, async {
        let mut buf = Vec::with_capacity(512);
        let mut chunk = [0u8; 1024];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 8192 {
            match sock.read(&mut chunk).await {
                Ok(0) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(e),
            }
        }
        Ok(buf)
    })
    .await;
    match head {
        Ok(Ok(buf)) => Some(buf),
        Ok(Err(e)) => {
            debug!(%peer, error = %e, "request read failed");
            None
        }
        Err(_) => {
            debug!(%peer, "request head not sent in time; closed");
            None
        }
    }
}

/// Accepts connections until aborted, each handled by `handle` in a task of its own, at most
/// `limits.max_connections` at once (more are closed at once, unanswered), so a client that
/// opens many cannot starve the others. Shared by the diagnostics and the metrics servers.
pub(crate) async fn serve_connections<F, Fut>(
    listener: TcpListener,
    limits: Limits,
    what: &'static str,
    handle: F,
) where
    F: Fn(TcpStream, SocketAddr) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    loop {
        let (sock, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of descriptors, most likely: pause instead of spinning on the error.
                debug!(error = %e, "{what} accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            debug!(%peer, "{what} connection refused: too many open");
            continue;
        };
        let served = handle(sock, peer);
        tokio::spawn(async move {
            let _slot = slot;
            served.await;
        });
    }
}

pub async fn serve_with(
    listener: TcpListener,
    live: ReadyCheck,
    ready: ReadyCheck,
    limits: Limits,
) {
    serve_connections(listener, limits, "diagnostics", |mut sock, peer| {
        let (live, ready) = (live.clone(), ready.clone());
        async move {
            let Some(buf) = read_head(&mut sock, limits, peer).await else {
                return;
            };
            let text = String::from_utf8_lossy(&buf);
            let line = text.lines().next().unwrap_or_default();
            // A client that went away gets no answer; nothing else depends on it.
            let _ = tokio::time::timeout(
                limits.read_timeout,
                sock.write_all(route(line, &live, &ready).as_bytes()),
            )
            .await;
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn silent_and_excess_clients_cannot_starve_the_probes() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let ok: ReadyCheck = Arc::new(|| Ok(()));
        let limits = Limits {
            read_timeout: Duration::from_millis(300),
            max_connections: 2,
        };
        tokio::spawn(serve_with(listener, ok.clone(), ok, limits));
        let get = || async move {
            let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
            c.write_all(b"GET /healthz HTTP/1.1\r\n\r\n").await.unwrap();
            let mut out = String::new();
            c.read_to_string(&mut out).await.map(|_| out)
        };
        // Two clients that send nothing hold both slots...
        let mut idle = Vec::new();
        for _ in 0..2 {
            idle.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        // ...so a third is closed at once, unanswered.
        let refused = get().await.unwrap_or_default();
        assert!(refused.is_empty(), "{refused}");
        // The silent ones are closed at the read deadline, and the probe is served again.
        for mut c in idle {
            let mut b = [0u8; 1];
            let n = tokio::time::timeout(Duration::from_secs(3), c.read(&mut b))
                .await
                .expect("closed by the server within the deadline")
                .unwrap_or(0);
            assert_eq!(n, 0);
        }
        let served = get().await.unwrap();
        assert!(served.starts_with("HTTP/1.1 200"), "{served}");
    }

    #[test]
    fn readyz_reports_why() {
        let not: ReadyCheck = Arc::new(|| Err("caches not synced".into()));
        let yes: ReadyCheck = Arc::new(|| Ok(()));
        assert!(route("GET /readyz HTTP/1.1", &yes, &not).starts_with("HTTP/1.1 503"));
        assert!(
            route("GET /readyz HTTP/1.1", &yes, &not).ends_with("not ready: caches not synced\n")
        );
        assert!(route("GET /readyz HTTP/1.1", &yes, &yes).starts_with("HTTP/1.1 200"));
        // Alive while not ready; not alive when its liveness check fails, saying why.
        assert!(route("GET /healthz HTTP/1.1", &yes, &not).starts_with("HTTP/1.1 200"));
        let dead: ReadyCheck = Arc::new(|| Err("CSI socket /x: refused".into()));
        let out = route("GET /healthz HTTP/1.1", &dead, &yes);
        assert!(
            out.starts_with("HTTP/1.1 503") && out.ends_with("not live: CSI socket /x: refused\n")
        );
        assert!(route("GET /nope HTTP/1.1", &yes, &yes).starts_with("HTTP/1.1 404"));
        // Never the metrics in the clear: those are on the TLS port, to authorized clients.
        assert!(route("GET /metrics HTTP/1.1", &yes, &yes).starts_with("HTTP/1.1 404"));
    }
}
