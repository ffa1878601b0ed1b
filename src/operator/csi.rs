//! The operator's CSI endpoint: Identity + Controller on one Unix socket, as LVMS serves them
//! from its operator process (the sidecars share the socket's directory).

use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::Store;
use lvms_actors::Readiness;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::{error, info};

use crate::csi::controller::ControllerService;
use crate::csi::identity::IdentityService;
use crate::csi::proto::controller_server::ControllerServer;
use crate::csi::proto::identity_server::IdentityServer;
use crate::csi::server::{SocketFile, bind, incoming};
use crate::csi::volumes::Volumes;
use crate::csi::writes::LvWrites;

pub struct CsiServer {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
    _socket: SocketFile,
}

impl CsiServer {
    /// Stop accepting calls and wait for the server (calls in flight are dropped: every RPC
    /// is retried by its sidecar, and its journaled writes are replayed).
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), &mut self.task).await;
        self.task.abort();
    }
}

pub fn serve(
    socket: &Path,
    writes: LvWrites,
    volumes: Arc<Volumes>,
    nodes: Store<Node>,
    supervision: Readiness,
) -> anyhow::Result<CsiServer> {
    let listener = bind(socket)?;
    let ready = {
        let volumes = volumes.clone();
        Arc::new(move || {
            supervision.check().map_err(|e| e.to_string())?;
            Ok(volumes.is_ready())
        })
    };
    let controller = Arc::new(ControllerService::new(writes, volumes, nodes));
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let result = tonic::transport::Server::builder()
            .add_service(IdentityServer::new(IdentityService { ready }))
            .add_service(ControllerServer::new(controller))
            .serve_with_incoming_shutdown(incoming(listener), async {
                let _ = rx.await;
            })
            .await;
        if let Err(e) = result {
            error!(error = %e, "CSI controller server stopped");
        }
    });
    info!(socket = %socket.display(), "CSI Identity + Controller serving");
    Ok(CsiServer {
        stop: Some(tx),
        task,
        _socket: SocketFile(socket.to_path_buf()),
    })
}
