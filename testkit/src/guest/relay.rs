//! A loopback TCP port relayed to a Unix socket named later: the guest reaches a host Unix
//! socket (the operator's CSI controller socket, whose path a scenario learns only when it
//! starts the operator) through one loopback forward fixed at boot.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, UnixStream};

pub struct UnixRelay {
    port: u16,
    target: Arc<Mutex<Option<PathBuf>>>,
    task: tokio::task::JoinHandle<()>,
}

impl UnixRelay {
    /// Listens on 127.0.0.1 (a free port); connections before [`Self::point_at`] are closed.
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port for the relay");
        let port = listener.local_addr().expect("relay address").port();
        let target: Arc<Mutex<Option<PathBuf>>> = Arc::default();
        let to = target.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                let path = to.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let Some(path) = path else { continue };
                tokio::spawn(async move {
                    if let Ok(mut unix) = UnixStream::connect(&path).await {
                        let _ = tokio::io::copy_bidirectional(&mut tcp, &mut unix).await;
                    }
                });
            }
        });
        UnixRelay { port, target, task }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Relay new connections to `socket`.
    pub fn point_at(&self, socket: &Path) {
        *self.target.lock().unwrap_or_else(|e| e.into_inner()) = Some(socket.to_path_buf());
    }
}

impl Drop for UnixRelay {
    fn drop(&mut self) {
        self.task.abort();
    }
}
