//! The operator's CSI endpoint: Identity + Controller on one Unix socket, as LVMS serves them
//! from its operator process (the sidecars share the socket's directory).

use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::Store;
use lvms_actors::Readiness;

use crate::csi::controller::service::ControllerService;
use crate::csi::controller::volumes::Volumes;
use crate::csi::controller::writes::LvWrites;
use crate::csi::identity::IdentityService;
use crate::csi::proto::controller_server::ControllerServer;
use crate::csi::proto::group_controller_server::GroupControllerServer;
use crate::csi::proto::identity_server::IdentityServer;
use crate::csi::server::bind;

pub use crate::csi::server::Serving as CsiServer;

pub fn serve(
    socket: &Path,
    writes: LvWrites,
    volumes: Arc<Volumes>,
    nodes: Store<Node>,
    clusters: Store<crate::api::LVMCluster>,
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
    let mut controller = ControllerService::new(writes, volumes, nodes);
    controller.clusters = Some(clusters);
    let controller = Arc::new(controller);
    let router = tonic::transport::Server::builder()
        .add_service(IdentityServer::new(IdentityService { ready }))
        .add_service(ControllerServer::new(controller.clone()))
        .add_service(GroupControllerServer::new(controller));
    Ok(crate::csi::server::serve(
        socket,
        listener,
        router,
        "Identity + Controller + GroupController",
    ))
}
