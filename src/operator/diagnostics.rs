//! `/healthz` and `/readyz` on a tiny HTTP/1.1 server (no web framework for two routes).

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tracing::{debug, info};

/// Answers `/readyz`: `Ok` when ready, else why not.
pub type ReadyCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

fn response(code: u16, body: &str) -> String {
    let status = match code {
        200 => "OK",
        404 => "Not Found",
        _ => "Service Unavailable",
    };
    format!(
        "HTTP/1.1 {code} {status}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Route one request line (pure, so the routes are unit-tested).
pub fn route(request_line: &str, ready: &ReadyCheck) -> String {
    let path = request_line.split_whitespace().nth(1).unwrap_or("/");
    match path {
        "/healthz" => response(200, "ok\n"),
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

pub async fn serve(listener: TcpListener, ready: ReadyCheck) {
    loop {
        let Ok((mut sock, peer)) = listener.accept().await else {
            continue;
        };
        let ready = ready.clone();
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
            let _ = sock.write_all(route(line, &ready).as_bytes()).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readyz_reports_why() {
        let not: ReadyCheck = Arc::new(|| Err("caches not synced".into()));
        let yes: ReadyCheck = Arc::new(|| Ok(()));
        assert!(route("GET /readyz HTTP/1.1", &not).starts_with("HTTP/1.1 503"));
        assert!(route("GET /readyz HTTP/1.1", &not).ends_with("not ready: caches not synced\n"));
        assert!(route("GET /readyz HTTP/1.1", &yes).starts_with("HTTP/1.1 200"));
        assert!(route("GET /healthz HTTP/1.1", &not).starts_with("HTTP/1.1 200"));
        assert!(route("GET /nope HTTP/1.1", &yes).starts_with("HTTP/1.1 404"));
    }
}
