//! The CSI Node service of `lvms vg-manager`, on LVMS's node socket, with TopoLVM's model:
//! NodeGetInfo (the node id and TopoLVM's topology segment, which kubelet copies onto the
//! Node as the `topology.topolvm.io/node` label), NodeGetCapabilities, NodePublishVolume
//! (format a blank device, mount; or bind a block device), NodeUnpublishVolume,
//! NodeExpandVolume (grow the mounted filesystem) and NodeGetVolumeStats. No staging: as
//! TopoLVM, everything happens at publish. Calls are served one at a time (TopoLVM's global
//! lock): they act on one node's mount table. The decisions are in [`crate::csi::node::publish`]; the
//! node's side effects (journaled) are vg-manager's [`NodeVolumes`].

use std::sync::Arc;

use futures::future::BoxFuture;
use tonic::{Request, Response, Status};

use crate::csi::proto::node_service_capability::{Rpc, rpc::Type as NodeRpc};

use crate::csi::errors::CsiError;
use crate::csi::names::TOPOLOGY_NODE_KEY;
use crate::csi::node::publish::PublishSpec;
use crate::csi::node::publish::{host_path, volume_path};
use crate::csi::proto::node_server::Node;
use crate::csi::proto::*;

/// LVMS's node socket: `<kubelet>/plugins/topolvm.io/node/csi-topolvm.sock`.
pub const DEFAULT_NODE_SOCKET: &str = "/var/lib/kubelet/plugins/topolvm.io/node/csi-topolvm.sock";

/// The node's side of its volumes (vg-manager: lvm2 of the VGs in its lvmd.yaml, commands in
/// the host's mount namespace, each side effect a journaled step).
pub trait NodeVolumes: Send + Sync + 'static {
    /// The volume's LV `lv_attr`: `Ok(None)` when lvm2 was read and has no such LV, `Err` when
    /// it could not be read (never taken for "missing").
    fn lv_attr<'a>(&'a self, volume_id: &'a str) -> BoxFuture<'a, Result<Option<String>, String>>;

    fn publish<'a>(&'a self, spec: &'a PublishSpec) -> BoxFuture<'a, Result<(), CsiError>>;

    /// Ok when `path` is a mount of the volume (its filesystem, or its block device node);
    /// NOT_FOUND when it is not: stats never answer for a path that is not the volume's.
    fn published_at<'a>(
        &'a self,
        volume_id: &'a str,
        path: &'a str,
    ) -> BoxFuture<'a, Result<(), CsiError>>;

    /// Unmount and remove `target`; a target that is not there is success.
    fn unpublish<'a>(
        &'a self,
        volume_id: &'a str,
        target: &'a str,
    ) -> BoxFuture<'a, Result<(), CsiError>>;

    /// Grow the filesystem mounted at `path` to its LV; returns the LV's size in bytes.
    fn expand<'a>(
        &'a self,
        volume_id: &'a str,
        path: &'a str,
    ) -> BoxFuture<'a, Result<u64, CsiError>>;
}

/// The capabilities advertised: TopoLVM's (no STAGE_UNSTAGE_VOLUME).
pub const CAPABILITIES: [NodeRpc; 3] = [
    NodeRpc::GetVolumeStats,
    NodeRpc::ExpandVolume,
    NodeRpc::VolumeCondition,
];

pub struct NodeService {
    pub node_name: String,
    pub volumes: Arc<dyn NodeVolumes>,
    /// One call at a time (TopoLVM's global lock).
    pub lock: tokio::sync::Mutex<()>,
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

fn no_staging(rpc: &str) -> Status {
    Status::unimplemented(format!(
        "{rpc}: topolvm.io volumes are not staged (STAGE_UNSTAGE_VOLUME is not advertised); publish them directly"
    ))
}

#[tonic::async_trait]
impl Node for NodeService {
    async fn node_stage_volume(
        &self,
        _r: Request<NodeStageVolumeRequest>,
    ) -> Result<Response<NodeStageVolumeResponse>, Status> {
        Err(no_staging("NodeStageVolume"))
    }

    async fn node_unstage_volume(
        &self,
        _r: Request<NodeUnstageVolumeRequest>,
    ) -> Result<Response<NodeUnstageVolumeResponse>, Status> {
        Err(no_staging("NodeUnstageVolume"))
    }

    async fn node_publish_volume(
        &self,
        r: Request<NodePublishVolumeRequest>,
    ) -> Result<Response<NodePublishVolumeResponse>, Status> {
        let spec = crate::csi::node::publish::publish_spec(r.get_ref())?;
        let _one = self.lock.lock().await;
        self.volumes.publish(&spec).await?;
        Ok(Response::new(NodePublishVolumeResponse {}))
    }

    /// Idempotent, as CSI asks: a target that is not there is already unpublished.
    async fn node_unpublish_volume(
        &self,
        r: Request<NodeUnpublishVolumeRequest>,
    ) -> Result<Response<NodeUnpublishVolumeResponse>, Status> {
        let r = r.into_inner();
        if r.volume_id.is_empty() {
            return Err(Status::invalid_argument("volume_id is empty"));
        }
        host_path(&r.target_path, "target_path")?;
        let _one = self.lock.lock().await;
        self.volumes.unpublish(&r.volume_id, &r.target_path).await?;
        Ok(Response::new(NodeUnpublishVolumeResponse {}))
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
        volume_path(&r.volume_path)?;
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
        self.volumes
            .published_at(&r.volume_id, &r.volume_path)
            .await?;
        let at = |e: std::io::Error| Status::internal(format!("{}: {e}", path.display()));
        let usage = if meta.file_type().is_block_device() {
            crate::csi::node::stats::block_usage(
                crate::csi::node::stats::block_size(path).map_err(at)?,
            )
        } else {
            crate::csi::node::stats::fs_usage(&crate::csi::node::stats::statfs(path).map_err(at)?)
        };
        let attr =
            self.volumes.lv_attr(&r.volume_id).await.map_err(|e| {
                Status::unavailable(format!("reading lvm2 for {}: {e}", r.volume_id))
            })?;
        Ok(Response::new(NodeGetVolumeStatsResponse {
            usage,
            volume_condition: Some(crate::csi::node::stats::condition(
                &r.volume_id,
                attr.as_deref(),
            )),
        }))
    }

    /// TopoLVM's: a block volume has nothing to grow; a filesystem is grown online to its LV
    /// (which ControllerExpandVolume already grew).
    async fn node_expand_volume(
        &self,
        r: Request<NodeExpandVolumeRequest>,
    ) -> Result<Response<NodeExpandVolumeResponse>, Status> {
        let r = r.into_inner();
        if r.volume_id.is_empty() {
            return Err(Status::invalid_argument("volume_id is empty"));
        }
        volume_path(&r.volume_path)?;
        let block = r
            .volume_capability
            .as_ref()
            .and_then(|c| crate::csi::access::access_of(c).ok())
            .is_some_and(|a| a.is_block());
        if block {
            return Ok(Response::new(NodeExpandVolumeResponse {
                capacity_bytes: 0,
            }));
        }
        let _one = self.lock.lock().await;
        let bytes = self.volumes.expand(&r.volume_id, &r.volume_path).await?;
        Ok(Response::new(NodeExpandVolumeResponse {
            capacity_bytes: i64::try_from(bytes).unwrap_or(i64::MAX),
        }))
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
    ready: crate::csi::identity::ReadyFn,
    volumes: Arc<dyn NodeVolumes>,
) -> anyhow::Result<crate::csi::server::Serving> {
    let listener = crate::csi::server::bind(socket)?;
    let router = tonic::transport::Server::builder()
        .add_service(crate::csi::proto::identity_server::IdentityServer::new(
            crate::csi::identity::IdentityService { ready },
        ))
        .add_service(crate::csi::proto::node_server::NodeServer::new(
            NodeService {
                node_name: node_name.to_string(),
                volumes,
                lock: tokio::sync::Mutex::new(()),
            },
        ));
    Ok(crate::csi::server::serve(
        socket,
        listener,
        router,
        "Identity + Node",
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    /// Unpublishes slowly (an xfs unmount under emulation takes seconds), and says when done.
    struct SlowUnpublish {
        takes: Duration,
        done: Arc<AtomicBool>,
    }

    impl NodeVolumes for SlowUnpublish {
        fn lv_attr<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Option<String>, String>> {
            Box::pin(async { Ok(None) })
        }
        fn publish<'a>(&'a self, _: &'a PublishSpec) -> BoxFuture<'a, Result<(), CsiError>> {
            Box::pin(async { Ok(()) })
        }
        fn published_at<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
        ) -> BoxFuture<'a, Result<(), CsiError>> {
            Box::pin(async { Ok(()) })
        }
        fn unpublish<'a>(&'a self, _: &'a str, _: &'a str) -> BoxFuture<'a, Result<(), CsiError>> {
            Box::pin(async {
                tokio::time::sleep(self.takes).await;
                self.done.store(true, Ordering::SeqCst);
                Ok(())
            })
        }
        fn expand<'a>(&'a self, _: &'a str, _: &'a str) -> BoxFuture<'a, Result<u64, CsiError>> {
            Box::pin(async { Ok(0) })
        }
    }

    /// An uninstall stops vg-manager while kubelet's NodeUnpublishVolume runs; no retry will
    /// come, so the call must finish before the server ends (its gate goes with it).
    #[tokio::test]
    async fn a_stopping_server_finishes_the_unpublish_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("csi.sock");
        let done = Arc::new(AtomicBool::new(false));
        let serving = serve(
            &socket,
            "n1",
            Arc::new(|| Ok(true)),
            Arc::new(SlowUnpublish {
                takes: Duration::from_secs(4),
                done: done.clone(),
            }),
        )
        .unwrap();
        let channel = crate::csi::client::connect(&socket).await.unwrap();
        let mut client = crate::csi::proto::node_client::NodeClient::new(channel);
        let call = tokio::spawn(async move {
            client
                .node_unpublish_volume(NodeUnpublishVolumeRequest {
                    volume_id: "v1".into(),
                    target_path: "/var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/pv/mount"
                        .into(),
                })
                .await
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let stopping = std::time::Instant::now();
        serving.stop(crate::csi::server::DRAIN).await;
        assert!(
            done.load(Ordering::SeqCst),
            "the server ended before its call did"
        );
        assert!(stopping.elapsed() < crate::csi::server::DRAIN);
        call.await
            .unwrap()
            .expect("the caller got its answer, not a dropped stream");
    }

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
