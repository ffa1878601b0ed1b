//! Serving CSI services on a Unix socket (a stale socket from an earlier run is removed
//! first; the socket is removed again when serving stops).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;

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
    _socket: SocketFile,
}

impl Serving {
    /// Stop accepting calls and wait for the server (calls in flight are dropped: every RPC
    /// is retried by its caller, and its journaled writes are replayed).
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), &mut self.task).await;
        self.task.abort();
    }
}

/// Serve `router` (`what`: its services, for the log) on `listener`, bound at `socket`.
pub fn serve(
    socket: &Path,
    listener: UnixListener,
    router: tonic::transport::server::Router,
    what: &'static str,
) -> Serving {
    serve_stream(socket, incoming(listener), router, what)
}

/// [`serve`] from a stream of connections (the registration socket hands over piped ones).
pub fn serve_stream<S, IO>(
    socket: &Path,
    connections: S,
    router: tonic::transport::server::Router,
    what: &'static str,
) -> Serving
where
    S: futures::Stream<Item = std::io::Result<IO>> + Send + 'static,
    IO: tokio::io::AsyncRead
        + tokio::io::AsyncWrite
        + tonic::transport::server::Connected
        + Unpin
        + Send
        + 'static,
{
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
        _socket: SocketFile(socket.to_path_buf()),
    }
}

/// The listener as the stream tonic serves from.
pub fn incoming(listener: UnixListener) -> UnixListenerStream {
    UnixListenerStream::new(listener)
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
