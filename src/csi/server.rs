//! Serving CSI services on a Unix socket (a stale socket from an earlier run is removed
//! first; the socket is removed again when serving stops).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use tokio::net::UnixListener;

/// Bind `path`: parent directories made, a leftover socket removed (never another file).
pub fn bind(path: &Path) -> anyhow::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the socket directory {}", dir.display()))?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) => {
            use std::os::unix::fs::FileTypeExt;
            if !m.file_type().is_socket() {
                anyhow::bail!(
                    "{} exists and is not a socket; remove it or choose another --csi-socket",
                    path.display()
                );
            }
            std::fs::remove_file(path)
                .with_context(|| format!("removing the stale socket {}", path.display()))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("checking {}", path.display())),
    }
    UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))
}

/// Removes the socket file when dropped.
pub struct SocketFile(pub PathBuf);

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A CSI endpoint being served; its socket file is removed when it is dropped.
pub struct Serving {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    /// The accept loop: it holds the listener, so it stops with the server.
    accepting: tokio::task::JoinHandle<()>,
    _socket: SocketFile,
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// How long a stopping server lets its calls in flight finish: inside the 30 s a Pod is given
/// to stop by default, with time left to stop the units and flush the journal. A call cut short
/// is retried by its caller, but not when the caller's driver is going away for good (an
/// uninstall): kubelet's NodeUnpublishVolume must then finish here, or its gate stays.
pub const DRAIN: Duration = Duration::from_secs(20);

/// The drain of a server whose calls another answers (a replica that lost its lease) or that
/// are instant (kubelet's plugin registration).
pub const BRIEF_DRAIN: Duration = Duration::from_secs(2);

impl Serving {
    /// Stop accepting calls, let those in flight finish for up to `drain` (tonic's graceful
    /// shutdown: GOAWAY, then each open stream to its end), then end the server. A call still
    /// running after that is dropped: its caller retries it and its journaled steps replay.
    pub async fn stop(mut self, drain: Duration) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if tokio::time::timeout(drain, &mut self.task).await.is_err() {
            tracing::warn!(
                drain_secs = drain.as_secs(),
                "CSI calls still in flight after the drain: dropped (their callers retry them)"
            );
        }
        self.task.abort();
    }
}

/// Serve `router` (`what`: its services, for the log) on `listener`, bound at `socket`. Every
/// connection passes through the `:authority` shim ([`super::authority`]): any gRPC client
/// (grpc-go with a bare path as target as kubelet dials, grpc-core's defaults) is served,
/// where h2 alone resets every stream whose authority is not a valid one.
pub fn serve(
    socket: &Path,
    listener: UnixListener,
    router: tonic::transport::server::Router,
    what: &'static str,
) -> Serving {
    let (conn_tx, conn_rx) = tokio::sync::mpsc::channel(16);
    let accepting = tokio::spawn(accept(listener, conn_tx, what));
    let connections = tokio_stream::wrappers::ReceiverStream::new(conn_rx);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let result = router
            .serve_with_incoming_shutdown(connections, async {
                let _ = rx.await;
            })
            .await;
        if let Err(e) = result {
            tracing::error!(error = %e, services = what, "CSI server stopped");
        }
    });
    tracing::info!(socket = %socket.display(), services = what, "CSI serving");
    Serving {
        stop: Some(tx),
        task,
        accepting,
        _socket: SocketFile(socket.to_path_buf()),
    }
}

/// Each accepted connection: an in-memory pipe to the tonic server, the client's frames
/// through the shim, the server's straight back. Ends when the server side is gone.
async fn accept(
    listener: UnixListener,
    tx: tokio::sync::mpsc::Sender<std::io::Result<tokio::io::DuplexStream>>,
    what: &'static str,
) {
    loop {
        let client = match listener.accept().await {
            Ok((c, _)) => c,
            Err(e) => {
                // Out of descriptors, most likely: pause instead of spinning on the error.
                tracing::warn!(error = %e, services = what, "CSI socket: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        if tx.send(Ok(theirs)).await.is_err() {
            return;
        }
        let (client_r, mut client_w) = client.into_split();
        let (ours_r, ours_w) = tokio::io::split(ours);
        tokio::spawn(async move {
            if let Err(e) = super::authority::pump_client(client_r, ours_w).await {
                tracing::debug!(error = %e, services = what, "CSI connection closed");
            }
        });
        tokio::spawn(async move {
            let mut ours_r = ours_r;
            let _ = tokio::io::copy(&mut ours_r, &mut client_w).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stale_socket_is_replaced_and_a_plain_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("sub/csi.sock");
        let first = bind(&sock).unwrap();
        drop(first);
        assert!(
            sock.exists(),
            "the socket file stays after the listener is gone"
        );
        let _second = bind(&sock).expect("a stale socket is removed");
        let file = dir.path().join("plain");
        std::fs::write(&file, "x").unwrap();
        let e = bind(&file).unwrap_err().to_string();
        assert!(e.contains("not a socket"), "{e}");
        assert!(file.exists());
    }
}
