//! The CSI Node service of `lvms vg-manager`, on LVMS's node socket. What it answers today:
//! NodeGetInfo (the node id and TopoLVM's topology segment, which kubelet copies onto the
//! Node as the `topology.topolvm.io/node` label), NodeGetCapabilities, and NodeGetVolumeStats
//! (bytes, inodes and the LV's condition, as TopoLVM). Mounting and expansion (issue 17) are
//! not advertised, and their RPCs say so.

use std::sync::Arc;

use futures::future::BoxFuture;
use tonic::{Request, Response, Status};

use super::proto::node_service_capability::{Rpc, rpc::Type as NodeRpc};

use super::names::TOPOLOGY_NODE_KEY;
use super::proto::node_server::Node;
use super::proto::*;

/// LVMS's node socket: `<kubelet>/plugins/topolvm.io/node/csi-topolvm.sock`.
pub const DEFAULT_NODE_SOCKET: &str = "/var/lib/kubelet/plugins/topolvm.io/node/csi-topolvm.sock";

/// What lvm2 says of a volume's LV, for the node service (vg-manager answers with its host's
/// `lvs` over the VGs of its lvmd.yaml): its `lv_attr`, `Ok(None)` when lvm2 was read and has
/// no such LV, `Err` when it could not be read (never taken for "missing").
pub trait VolumeLookup: Send + Sync + 'static {
    fn lv_attr<'a>(&'a self, volume_id: &'a str) -> BoxFuture<'a, Result<Option<String>, String>>;
}

/// The capabilities advertised: what is implemented, nothing more.
pub const CAPABILITIES: [NodeRpc; 2] = [NodeRpc::GetVolumeStats, NodeRpc::VolumeCondition];

pub struct NodeService {
    pub node_name: String,
    pub lookup: Arc<dyn VolumeLookup>,
}

/// NodeGetInfo's answer for `node` (pure).
pub fn node_info(node: &str) -> NodeGetInfoResponse {
    NodeGetInfoResponse {
        node_id: node.to_string(),
        max_volumes_per_node: 0,
        accessible_topology: Some(Topology {
            segments: [(TOPOLOGY_NODE_KEY.to_string(), node.to_string())].into(),
        }),
    }
}

fn not_yet(rpc: &str) -> Status {
    Status::unimplemented(format!(
        "{rpc}: this lvms node service does not publish volumes yet (not advertised in NodeGetCapabilities)"
    ))
}

#[tonic::async_trait]
impl Node for NodeService {
    async fn node_stage_volume(
        &self,
        _r: Request<NodeStageVolumeRequest>,
    ) -> Result<Response<NodeStageVolumeResponse>, Status> {
        Err(not_yet("NodeStageVolume"))
    }

    async fn node_unstage_volume(
        &self,
        _r: Request<NodeUnstageVolumeRequest>,
    ) -> Result<Response<NodeUnstageVolumeResponse>, Status> {
        Err(not_yet("NodeUnstageVolume"))
    }

    async fn node_publish_volume(
        &self,
        _r: Request<NodePublishVolumeRequest>,
    ) -> Result<Response<NodePublishVolumeResponse>, Status> {
        Err(not_yet("NodePublishVolume"))
    }

    /// Idempotent, as CSI asks: a target that is not there is already unpublished. This node
    /// never mounts anything yet, so a target that is a mount point was not made by it and is
    /// left alone.
    async fn node_unpublish_volume(
        &self,
        r: Request<NodeUnpublishVolumeRequest>,
    ) -> Result<Response<NodeUnpublishVolumeResponse>, Status> {
        let r = r.into_inner();
        if r.volume_id.is_empty() {
            return Err(Status::invalid_argument("volume_id is empty"));
        }
        if r.target_path.is_empty() {
            return Err(Status::invalid_argument("target_path is empty"));
        }
        let target = std::path::Path::new(&r.target_path);
        match std::fs::symlink_metadata(target) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok(Response::new(NodeUnpublishVolumeResponse {}))
            }
            Err(e) => Err(Status::internal(format!("{}: {e}", target.display()))),
            Ok(_) => Err(Status::failed_precondition(format!(
                "{} exists, and this lvms node service does not publish volumes yet",
                target.display()
            ))),
        }
    }

    /// TopoLVM's: a path that is not there is NOT_FOUND; a block device reports its size, a
    /// directory its filesystem's bytes and inodes; the condition is lvm2's view of the LV.
    async fn node_get_volume_stats(
        &self,
        r: Request<NodeGetVolumeStatsRequest>,
    ) -> Result<Response<NodeGetVolumeStatsResponse>, Status> {
        use std::os::unix::fs::FileTypeExt;
        let r = r.into_inner();
        if r.volume_id.is_empty() {
            return Err(Status::invalid_argument("volume_id is empty"));
        }
        if r.volume_path.is_empty() {
            return Err(Status::invalid_argument("volume_path is empty"));
        }
        let path = std::path::Path::new(&r.volume_path);
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Status::not_found(format!(
                    "{}: no such path",
                    path.display()
                )));
            }
            Err(e) => return Err(Status::internal(format!("{}: {e}", path.display()))),
        };
        let at = |e: std::io::Error| Status::internal(format!("{}: {e}", path.display()));
        let usage = if meta.file_type().is_block_device() {
            super::stats::block_usage(super::stats::block_size(path).map_err(at)?)
        } else {
            super::stats::fs_usage(&super::stats::statfs(path).map_err(at)?)
        };
        let attr =
            self.lookup.lv_attr(&r.volume_id).await.map_err(|e| {
                Status::unavailable(format!("reading lvm2 for {}: {e}", r.volume_id))
            })?;
        Ok(Response::new(NodeGetVolumeStatsResponse {
            usage,
            volume_condition: Some(super::stats::condition(&r.volume_id, attr.as_deref())),
        }))
    }

    async fn node_expand_volume(
        &self,
        _r: Request<NodeExpandVolumeRequest>,
    ) -> Result<Response<NodeExpandVolumeResponse>, Status> {
        Err(not_yet("NodeExpandVolume"))
    }

    async fn node_get_capabilities(
        &self,
        _r: Request<NodeGetCapabilitiesRequest>,
    ) -> Result<Response<NodeGetCapabilitiesResponse>, Status> {
        Ok(Response::new(NodeGetCapabilitiesResponse {
            capabilities: CAPABILITIES
                .iter()
                .map(|t| NodeServiceCapability {
                    r#type: Some(node_service_capability::Type::Rpc(Rpc {
                        r#type: *t as i32,
                    })),
                })
                .collect(),
        }))
    }

    async fn node_get_info(
        &self,
        _r: Request<NodeGetInfoRequest>,
    ) -> Result<Response<NodeGetInfoResponse>, Status> {
        Ok(Response::new(node_info(&self.node_name)))
    }
}

/// Identity + Node on `socket` for `node_name` (vg-manager's endpoint).
pub fn serve(
    socket: &std::path::Path,
    node_name: &str,
    ready: super::identity::ReadyFn,
    lookup: Arc<dyn VolumeLookup>,
) -> anyhow::Result<super::server::Serving> {
    let listener = super::server::bind(socket)?;
    let router = tonic::transport::Server::builder()
        .add_service(super::proto::identity_server::IdentityServer::new(
            super::identity::IdentityService { ready },
        ))
        .add_service(super::proto::node_server::NodeServer::new(NodeService {
            node_name: node_name.to_string(),
            lookup,
        }));
    Ok(super::server::serve(
        socket,
        listener,
        router,
        "Identity + Node",
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_node_reports_topolvms_topology_segment() {
        let info = super::node_info("worker-1");
        assert_eq!(info.node_id, "worker-1");
        assert_eq!(
            info.accessible_topology.unwrap().segments["topology.topolvm.io/node"],
            "worker-1"
        );
    }
}
