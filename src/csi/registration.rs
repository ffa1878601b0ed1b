//! kubelet plugin registration, in-process as LVMS does it: vg-manager listens on
//! `topolvm.io-reg.sock` in kubelet's plugins_registry directory; kubelet finds the socket, asks
//! GetInfo (a CSI plugin named `topolvm.io`, its node service at the host path kubelet dials),
//! registers the driver (NodeGetInfo, the CSINode entry, the Node's topology label) and reports
//! the outcome with NotifyRegistrationStatus. The upstream node-driver-registrar would do the
//! same from a sidecar; it is not used because its module is not served by the Go module proxy
//! this project builds its peers from, and a sidecar is one more image per node for two RPCs.
//! kubelet's requests carry the socket path as `:authority`, so they reach the tonic service
//! through [`super::authority`].

use std::path::{Path, PathBuf};

use tokio::sync::watch;
use tonic::{Request, Response, Status};

use super::server::{Serving, bind};
use crate::api::topolvm::DRIVER_NAME;

/// The socket's name in the plugins_registry directory (`<driver>-reg.sock`, as kubelet's
/// plugin watcher README asks).
pub const REGISTRATION_SOCKET: &str = "topolvm.io-reg.sock";
/// kubelet's plugins_registry directory on the host.
pub const DEFAULT_REGISTRATION_DIR: &str = "/var/lib/kubelet/plugins_registry";
/// kubelet's plugin type for CSI drivers.
pub const CSI_PLUGIN: &str = "CSIPlugin";
/// The CSI versions advertised, as TopoLVM's registrar advertises them.
pub const SUPPORTED_VERSIONS: [&str; 1] = ["1.0.0"];

/// The generated types and services of `proto/pluginregistration.proto`.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod proto {
    tonic::include_proto!("pluginregistration");
}

use proto::registration_server::{Registration, RegistrationServer};
use proto::{InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse};

/// What kubelet last said about the registration (None: nothing yet).
pub type Registered = watch::Receiver<Option<RegistrationStatus>>;

pub struct RegistrationService {
    /// The node service socket as a path on the host (what kubelet dials).
    endpoint: String,
    status: watch::Sender<Option<RegistrationStatus>>,
}

impl RegistrationService {
    pub fn new(endpoint: &Path) -> (RegistrationService, Registered) {
        let (status, rx) = watch::channel(None);
        let svc = RegistrationService {
            endpoint: endpoint.display().to_string(),
            status,
        };
        (svc, rx)
    }
}

/// The answer to kubelet's GetInfo.
pub fn plugin_info(endpoint: &str) -> PluginInfo {
    PluginInfo {
        r#type: CSI_PLUGIN.into(),
        name: DRIVER_NAME.into(),
        endpoint: endpoint.into(),
        supported_versions: SUPPORTED_VERSIONS.iter().map(|v| v.to_string()).collect(),
    }
}

#[tonic::async_trait]
impl Registration for RegistrationService {
    async fn get_info(
        &self,
        _request: Request<InfoRequest>,
    ) -> Result<Response<PluginInfo>, Status> {
        Ok(Response::new(plugin_info(&self.endpoint)))
    }

    async fn notify_registration_status(
        &self,
        request: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        let status = request.into_inner();
        if status.plugin_registered {
            tracing::info!(
                driver = DRIVER_NAME,
                "kubelet registered the CSI node plugin"
            );
        } else {
            tracing::error!(driver = DRIVER_NAME, error = %status.error, "kubelet refused the CSI node plugin");
        }
        self.status.send_replace(Some(status));
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}

/// Serve the registration service on `<dir>/topolvm.io-reg.sock` (a stale socket replaced),
/// advertising `endpoint`. Each connection passes through the `:authority` shim.
pub fn serve(dir: &Path, endpoint: &Path) -> anyhow::Result<(Serving, Registered)> {
    let socket: PathBuf = dir.join(REGISTRATION_SOCKET);
    let listener = bind(&socket)?;
    let (svc, registered) = RegistrationService::new(endpoint);
    let router = tonic::transport::Server::builder().add_service(RegistrationServer::new(svc));
    let serving =
        super::server::serve(&socket, listener, router, "pluginregistration.Registration");
    Ok((serving, registered))
}
