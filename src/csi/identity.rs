//! The CSI Identity service, on both sockets (controller and node), as TopoLVM advertises it.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::names::DRIVER_NAME;
use super::proto::identity_server::Identity;
use super::proto::plugin_capability::{
    Service, Type as CapType, VolumeExpansion, service, volume_expansion,
};
use super::proto::*;

/// Whether the plugin can serve now (Probe): Err is a failure (FAILED_PRECONDITION), Ok(false)
/// not ready yet.
pub type ReadyFn = Arc<dyn Fn() -> Result<bool, String> + Send + Sync>;

pub struct IdentityService {
    pub ready: ReadyFn,
}

fn service(t: service::Type) -> PluginCapability {
    PluginCapability {
        r#type: Some(CapType::Service(Service { r#type: t as i32 })),
    }
}

fn expansion(t: volume_expansion::Type) -> PluginCapability {
    PluginCapability {
        r#type: Some(CapType::VolumeExpansion(VolumeExpansion {
            r#type: t as i32,
        })),
    }
}

/// TopoLVM's plugin capabilities: a controller, topology, online and offline expansion; and
/// lvms's volume group snapshots (the GroupController).
pub fn capabilities() -> Vec<PluginCapability> {
    vec![
        service(service::Type::ControllerService),
        service(service::Type::GroupControllerService),
        service(service::Type::VolumeAccessibilityConstraints),
        expansion(volume_expansion::Type::Online),
        expansion(volume_expansion::Type::Offline),
    ]
}

#[tonic::async_trait]
impl Identity for IdentityService {
    async fn get_plugin_info(
        &self,
        _r: Request<GetPluginInfoRequest>,
    ) -> Result<Response<GetPluginInfoResponse>, Status> {
        Ok(Response::new(GetPluginInfoResponse {
            name: DRIVER_NAME.into(),
            vendor_version: env!("CARGO_PKG_VERSION").into(),
            manifest: Default::default(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _r: Request<GetPluginCapabilitiesRequest>,
    ) -> Result<Response<GetPluginCapabilitiesResponse>, Status> {
        Ok(Response::new(GetPluginCapabilitiesResponse {
            capabilities: capabilities(),
        }))
    }

    async fn probe(&self, _r: Request<ProbeRequest>) -> Result<Response<ProbeResponse>, Status> {
        match (self.ready)() {
            Ok(ready) => Ok(Response::new(ProbeResponse { ready: Some(ready) })),
            Err(e) => Err(Status::failed_precondition(e)),
        }
    }
}
