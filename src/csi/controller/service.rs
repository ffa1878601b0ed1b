//! The CSI Controller service (in `lvms operator`), with TopoLVM's semantics: a volume is a
//! LogicalVolume the controller creates and the node's vg-manager realises; every RPC is
//! idempotent on its name or id and serialised per name (creates) or id (the rest).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::Store;
use lvms_journal::ObjectRef;
use tonic::{Code, Request, Response, Status};
use tracing::{Instrument, info, info_span};

use crate::api::quantity::format_binary;
use crate::api::{LogicalVolume, LogicalVolumeSpec};
use crate::csi::access::{Access, accesses};
use crate::csi::controller::capacity::{NodeCapacity, for_topology, total};
use crate::csi::controller::locks::KeyedLocks;
use crate::csi::controller::placement::choose_node;
use crate::csi::controller::sizing::{MinimumAllocations, requested_bytes};
use crate::csi::controller::volumes::{
    Provisioning, Volumes, compatible, current_bytes, provisioning,
};
use crate::csi::controller::writes::{Created, LvWrites, pvc_ref};
use crate::csi::errors::CsiError;
use crate::csi::names::{
    DEVICE_CLASS_PARAM, LVCREATE_OPTION_CLASS_PARAM, PVC_ANNOTATION, PVC_NAME_PARAM,
    PVC_NAMESPACE_PARAM, TOPOLOGY_NODE_KEY,
};
use crate::csi::object_name::object_name;
use crate::csi::proto::controller_server::Controller as ControllerApi;
use crate::csi::proto::controller_service_capability::{Rpc, rpc::Type as RpcType};
use crate::csi::proto::volume_content_source::{SnapshotSource, Type as SourceType, VolumeSource};
use crate::csi::proto::*;

/// How long an RPC waits for the node when the caller set no deadline.
const DEFAULT_WAIT: Duration = Duration::from_secs(300);
/// The longest a controller RPC waits for the node, whatever deadline the caller gave.
const MAX_WAIT: Duration = Duration::from_secs(3600);

pub struct ControllerService {
    pub writes: LvWrites,
    pub volumes: Arc<Volumes>,
    pub nodes: Store<Node>,
    pub minimums: MinimumAllocations,
    pub(super) by_name: KeyedLocks,
    pub(super) by_id: KeyedLocks,
    /// The LVMClusters (which device classes are thin); None in tests without one.
    pub clusters: Option<Store<crate::api::LVMCluster>>,
}

/// The capabilities TopoLVM's controller advertises.
pub const CAPABILITIES: [RpcType; 5] = [
    RpcType::CreateDeleteVolume,
    RpcType::CloneVolume,
    RpcType::GetCapacity,
    RpcType::ExpandVolume,
    RpcType::CreateDeleteSnapshot,
];

/// The deadline the caller gave (`grpc-timeout`), else [`DEFAULT_WAIT`].
pub(super) fn wait_budget<T>(req: &Request<T>) -> Duration {
    req.metadata()
        .get("grpc-timeout")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_grpc_timeout)
        .unwrap_or(DEFAULT_WAIT)
}

/// `grpc-timeout` header value: at most 8 digits and a unit (H, M, S, m, u, n), as gRPC over
/// HTTP/2 defines it; anything else is no deadline of the caller's (the default applies). The
/// result is capped at [`MAX_WAIT`]: a wait ends at `now + budget`, which must not overflow.
pub fn parse_grpc_timeout(v: &str) -> Option<Duration> {
    // ASCII only: the unit is the last byte (found by tests/props.rs: a multi-byte last
    // character panicked the split).
    if !v.is_ascii() {
        return None;
    }
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    let d = match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    };
    Some(d.min(MAX_WAIT))
}

/// What a delete RPC was asked to remove: DeleteSnapshot must never remove a volume (a
/// pre-provisioned VolumeSnapshotContent naming a volume's id, with `deletionPolicy: Delete`,
/// would delete the volume's data), nor DeleteVolume a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleting {
    Volume,
    Snapshot,
}

impl Deleting {
    fn field(self) -> &'static str {
        match self {
            Deleting::Volume => "volume_id",
            Deleting::Snapshot => "snapshot_id",
        }
    }

    /// The LogicalVolume `id` found is of the kind asked for (a snapshot is a read-only
    /// volume made from a source, as TopoLVM writes it).
    pub fn check(self, id: &str, lv: &LogicalVolume) -> Result<(), CsiError> {
        let snapshot = is_snapshot(lv);
        let (asked, found, rpc) = match (self, snapshot) {
            (Deleting::Volume, false) | (Deleting::Snapshot, true) => return Ok(()),
            (Deleting::Volume, true) => ("volume", "snapshot", "DeleteSnapshot"),
            (Deleting::Snapshot, false) => ("snapshot", "volume", "DeleteVolume"),
        };
        Err(CsiError::invalid(format!(
            "{} {id} is a {found} (LogicalVolume {}), not a {asked}: nothing was deleted; {rpc} deletes {found}s",
            self.field(),
            lv.metadata.name.as_deref().unwrap_or_default()
        )))
    }
}

/// Whether `lv` is the volume `id`: its status says so and the id is its own uid (the node
/// names the LV after the object's uid, as TopoLVM does). A status pointing at another
/// object's id (written by a node that was not this volume's) is not followed.
pub fn holds_id(lv: &LogicalVolume, id: &str) -> bool {
    lv.status.as_ref().and_then(|s| s.volume_id.as_deref()) == Some(id)
        && lv.metadata.uid.as_deref() == Some(id)
}

/// A snapshot's LogicalVolume: made from a source, read-only (a clone or restore is `rw`).
pub fn is_snapshot(lv: &LogicalVolume) -> bool {
    lv.spec.source.is_some() && lv.spec.access_type.as_deref() == Some("ro")
}

fn regarding(params: &std::collections::HashMap<String, String>) -> Vec<ObjectRef> {
    match (params.get(PVC_NAMESPACE_PARAM), params.get(PVC_NAME_PARAM)) {
        (Some(ns), Some(name)) => vec![pvc_ref(ns, name)],
        _ => Vec::new(),
    }
}

fn node_segment(node: &str) -> Topology {
    Topology {
        segments: [(TOPOLOGY_NODE_KEY.to_string(), node.to_string())].into(),
    }
}

/// The LogicalVolume a CreateVolume or CreateSnapshot asks for (pure).
pub struct Wanted {
    pub name: String,
    pub node: String,
    pub device_class: String,
    pub option_class: String,
    pub bytes: i64,
    pub source: Option<String>,
    pub access_type: Option<&'static str>,
    pub pvc: Option<String>,
    /// More annotations (a group snapshot member's group and members, the trace).
    pub annotations: Vec<(&'static str, String)>,
}

impl Wanted {
    pub fn object(&self) -> LogicalVolume {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
        let mut lv = LogicalVolume::new(
            &self.name,
            LogicalVolumeSpec {
                name: self.name.clone(),
                node_name: self.node.clone(),
                size: Quantity(format_binary(u64::try_from(self.bytes).unwrap_or(0))),
                device_class: some(&self.device_class),
                lvcreate_option_class: some(&self.option_class),
                source: self.source.clone(),
                access_type: self.access_type.map(String::from),
            },
        );
        let annotations: std::collections::BTreeMap<String, String> = self
            .pvc
            .iter()
            .map(|pvc| (PVC_ANNOTATION.to_string(), pvc.clone()))
            .chain(
                self.annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.clone())),
            )
            .collect();
        if !annotations.is_empty() {
            lv.metadata.annotations = Some(annotations);
        }
        lv
    }
}

impl ControllerService {
    pub fn new(writes: LvWrites, volumes: Arc<Volumes>, nodes: Store<Node>) -> Self {
        ControllerService {
            writes,
            volumes,
            nodes,
            minimums: MinimumAllocations::default(),
            by_name: KeyedLocks::default(),
            by_id: KeyedLocks::default(),
            clusters: None,
        }
    }

    pub(super) fn ready(&self) -> Result<(), CsiError> {
        if self.volumes.is_ready() {
            Ok(())
        } else {
            Err(CsiError::unavailable(
                "the LogicalVolume cache has not synced yet; retry",
            ))
        }
    }

    fn node_capacities(&self) -> Vec<NodeCapacity> {
        self.nodes
            .state()
            .iter()
            .map(|n| {
                NodeCapacity::from_meta(
                    n.metadata.name.as_deref().unwrap_or_default(),
                    n.metadata.labels.as_ref(),
                    n.metadata.annotations.as_ref(),
                )
            })
            .collect()
    }

    /// A LogicalVolume by volume id: the index, then (a miss may be a volume the watch has
    /// not delivered yet) a list from the API server, as TopoLVM does.
    pub(super) async fn find_volume(
        &self,
        id: &str,
    ) -> Result<Option<Arc<LogicalVolume>>, CsiError> {
        if let Some(lv) = self.volumes.by_volume_id(id).filter(|lv| holds_id(lv, id)) {
            return Ok(Some(lv));
        }
        let api: Api<LogicalVolume> = Api::all(self.writes.client.clone());
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| CsiError::unavailable(format!("listing LogicalVolumes: {e}")))?;
        let mut found = list.items.into_iter().filter(|lv| holds_id(lv, id));
        let first = found.next();
        if found.next().is_some() {
            return Err(CsiError::internal(format!(
                "more than one LogicalVolume has volume id {id}"
            )));
        }
        Ok(first.map(Arc::new))
    }

    /// Create (or find) the LogicalVolume and wait for the node to report it.
    pub(super) async fn provision(
        &self,
        wanted: &Wanted,
        regarding: Vec<ObjectRef>,
        budget: Duration,
    ) -> Result<(String, i64), CsiError> {
        let lv = wanted.object();
        match self.volumes.get(&wanted.name) {
            Some(existing) if !compatible(&existing, &lv) => {
                return Err(CsiError::new(
                    Code::AlreadyExists,
                    format!(
                        "a volume named {} already exists with another size or source",
                        wanted.name
                    ),
                ));
            }
            Some(_) => {}
            None => {
                if self.writes.create(&lv, regarding.clone()).await? == Created::AlreadyThere {
                    // Made meanwhile (the cache had not seen it): compare once it shows up.
                    let existing = self
                        .volumes
                        .wait_for(budget, |v| v.get(&wanted.name))
                        .await
                        .ok_or_else(|| {
                            CsiError::new(Code::DeadlineExceeded, "waiting for the LogicalVolume")
                        })?;
                    if !compatible(&existing, &lv) {
                        return Err(CsiError::new(
                            Code::AlreadyExists,
                            format!(
                                "a volume named {} already exists with another size or source",
                                wanted.name
                            ),
                        ));
                    }
                }
            }
        }
        let state = self
            .volumes
            .wait_for(budget, |v| {
                v.get(&wanted.name)
                    .map(|lv| (provisioning(&lv), lv))
                    .filter(|(p, _)| *p != Provisioning::Pending)
            })
            .await;
        match state {
            Some((Provisioning::Ready { volume_id, bytes }, _)) => Ok((volume_id, bytes)),
            Some((Provisioning::Failed { code, message }, lv)) => {
                // TopoLVM deletes a LogicalVolume the node refused: the retry starts afresh.
                let uid = lv.metadata.uid.clone().unwrap_or_default();
                self.writes
                    .delete(&wanted.name, &uid, "", regarding)
                    .await?;
                Err(CsiError::new(code, message))
            }
            Some((Provisioning::Pending, _)) | None => Err(CsiError::new(
                Code::DeadlineExceeded,
                format!(
                    "LogicalVolume {} is not ready yet on node {}; the call is retried",
                    wanted.name, wanted.node
                ),
            )),
        }
    }

    async fn create_volume(
        &self,
        req: &CreateVolumeRequest,
        budget: Duration,
    ) -> Result<CreateVolumeResponse, CsiError> {
        let name = object_name("name", &req.name)?;
        let access = accesses(&req.volume_capabilities)?;
        let params = &req.parameters;
        let mut device_class = params.get(DEVICE_CLASS_PARAM).cloned().unwrap_or_default();
        let option_class = params
            .get(LVCREATE_OPTION_CLASS_PARAM)
            .cloned()
            .unwrap_or_default();
        let range = req.capacity_range.unwrap_or_default();
        let bytes = requested_bytes(
            range.required_bytes,
            range.limit_bytes,
            self.minimums.minimum(&access),
        )?;
        self.ready()?;
        let (source, source_node) = match req
            .volume_content_source
            .as_ref()
            .and_then(|s| s.r#type.as_ref())
        {
            None => (None, None),
            Some(src) => {
                let (id, what) = match src {
                    SourceType::Snapshot(SnapshotSource { snapshot_id }) => {
                        (snapshot_id, "snapshot")
                    }
                    SourceType::Volume(VolumeSource { volume_id }) => (volume_id, "volume"),
                };
                if id.is_empty() {
                    return Err(CsiError::not_found(format!(
                        "the source {what} id is empty"
                    )));
                }
                let src_lv = self.find_volume(id).await?.ok_or_else(|| {
                    CsiError::not_found(format!("source {what} {id} does not exist"))
                })?;
                let src_bytes = current_bytes(&src_lv).unwrap_or(0);
                if bytes < src_bytes {
                    return Err(CsiError::new(
                        Code::OutOfRange,
                        format!(
                            "requested {bytes} bytes is smaller than the source {what} ({src_bytes} bytes)"
                        ),
                    ));
                }
                let src_class = src_lv.spec.device_class.clone().unwrap_or_default();
                if src_class != device_class {
                    return Err(CsiError::invalid(format!(
                        "device class {device_class:?} differs from the source {what}'s {src_class:?}; a clone or restore uses its source's device class"
                    )));
                }
                device_class = src_class;
                (
                    Some(src_lv.spec.name.clone()),
                    Some(src_lv.spec.node_name.clone()),
                )
            }
        };
        let node = choose_node(
            req.accessibility_requirements.as_ref(),
            source_node.as_deref(),
            &self.node_capacities(),
            &device_class,
            bytes,
        )?;
        let _lock = self.by_name.lock(&name).await;
        let regarding = regarding(params);
        let wanted = Wanted {
            name,
            node: node.clone(),
            device_class,
            option_class,
            bytes,
            access_type: source.as_ref().map(|_| "rw"),
            source,
            pvc: regarding
                .first()
                .map(|p| format!("{}/{}", p.namespace, p.name)),
            annotations: Vec::new(),
        };
        let (volume_id, capacity_bytes) = self.provision(&wanted, regarding, budget).await?;
        info!(volume = %wanted.name, %volume_id, node = %node, bytes = capacity_bytes, block = access.iter().any(Access::is_block), "volume ready");
        Ok(CreateVolumeResponse {
            volume: Some(Volume {
                capacity_bytes,
                volume_id,
                volume_context: Default::default(),
                content_source: req.volume_content_source.clone(),
                accessible_topology: vec![node_segment(&node)],
            }),
        })
    }

    /// Delete the LogicalVolume with `id` and wait until the node has removed it.
    pub(super) async fn delete_by_id(
        &self,
        id: &str,
        what: Deleting,
        budget: Duration,
    ) -> Result<(), CsiError> {
        if id.is_empty() {
            return Err(CsiError::invalid(format!("{} is empty", what.field())));
        }
        self.ready()?;
        let _lock = self.by_id.lock(id).await;
        let Some(lv) = self.find_volume(id).await? else {
            return Ok(());
        };
        what.check(id, &lv)?;
        let name = lv.metadata.name.clone().unwrap_or_default();
        let uid = lv.metadata.uid.clone().unwrap_or_default();
        let regarding = lv
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(PVC_ANNOTATION))
            .and_then(|p| p.split_once('/'))
            .map(|(ns, n)| vec![pvc_ref(ns, n)])
            .unwrap_or_default();
        self.writes.delete(&name, &uid, id, regarding).await?;
        let gone = self
            .volumes
            .wait_for(budget, |v| {
                v.get(&name)
                    .is_none_or(|l| l.metadata.uid.as_deref() != Some(uid.as_str()))
                    .then_some(())
            })
            .await;
        gone.ok_or_else(|| {
            CsiError::new(
                Code::DeadlineExceeded,
                format!(
                    "LogicalVolume {name} is still being removed by node {}",
                    lv.spec.node_name
                ),
            )
        })
    }

    async fn expand(
        &self,
        req: &ControllerExpandVolumeRequest,
        budget: Duration,
    ) -> Result<ControllerExpandVolumeResponse, CsiError> {
        let id = req.volume_id.as_str();
        if id.is_empty() {
            return Err(CsiError::invalid("volume_id is empty"));
        }
        self.ready()?;
        let _lock = self.by_id.lock(id).await;
        let lv = self
            .find_volume(id)
            .await?
            .ok_or_else(|| CsiError::not_found(format!("volume {id} does not exist")))?;
        let range = req.capacity_range.unwrap_or_default();
        let bytes = requested_bytes(range.required_bytes, range.limit_bytes, 0)?;
        // TopoLVM: only a block volume needs no node step; without a capability (older
        // resizers send none) the filesystem may need growing.
        let node_expansion_required = !matches!(
            req.volume_capability
                .as_ref()
                .and_then(|c| c.access_type.as_ref()),
            Some(volume_capability::AccessType::Block(_))
        );
        let current = current_bytes(&lv).unwrap_or(0);
        if bytes <= current {
            return Ok(ControllerExpandVolumeResponse {
                capacity_bytes: current,
                node_expansion_required,
            });
        }
        let class = lv.spec.device_class.clone().unwrap_or_default();
        let node = self
            .node_capacities()
            .into_iter()
            .find(|n| n.name == lv.spec.node_name);
        let free = node.as_ref().and_then(|n| n.free(&class)).unwrap_or(0);
        if free < bytes - current {
            return Err(CsiError::new(
                Code::ResourceExhausted,
                format!(
                    "node {} has {free} bytes free in {}; growing by {} bytes does not fit{}",
                    lv.spec.node_name,
                    if class.is_empty() {
                        "the default device class"
                    } else {
                        &class
                    },
                    bytes - current,
                    node.map(|n| n.short_because(&class)).unwrap_or_default()
                ),
            ));
        }
        let name = lv.metadata.name.clone().unwrap_or_default();
        let uid = lv.metadata.uid.clone().unwrap_or_default();
        self.writes.resize(&name, &uid, bytes, Vec::new()).await?;
        let done = self
            .volumes
            .wait_for(budget, |v| {
                let l = v.get(&name)?;
                match provisioning(&l) {
                    Provisioning::Failed { code, message } => {
                        Some(Err(CsiError::new(code, message)))
                    }
                    _ => {
                        let status_size = l
                            .status
                            .as_ref()
                            .and_then(|s| s.current_size.as_ref())
                            .and_then(|q| crate::api::quantity::parse_quantity_bytes(&q.0).ok())
                            .and_then(|b| i64::try_from(b).ok());
                        let code = l.status.as_ref().and_then(|s| s.code).unwrap_or(0);
                        if code != 0 {
                            let message = l
                                .status
                                .as_ref()
                                .and_then(|s| s.message.clone())
                                .unwrap_or_default();
                            return Some(Err(CsiError::new(Code::from_i32(code), message)));
                        }
                        status_size.filter(|s| *s >= bytes).map(Ok)
                    }
                }
            })
            .await;
        match done {
            Some(Ok(size)) => Ok(ControllerExpandVolumeResponse {
                capacity_bytes: size,
                node_expansion_required,
            }),
            Some(Err(e)) => Err(e),
            None => Err(CsiError::new(
                Code::DeadlineExceeded,
                format!(
                    "volume {id} is still being resized on node {}",
                    lv.spec.node_name
                ),
            )),
        }
    }

    async fn create_snapshot(
        &self,
        req: &CreateSnapshotRequest,
        budget: Duration,
    ) -> Result<CreateSnapshotResponse, CsiError> {
        if req.source_volume_id.is_empty() {
            return Err(CsiError::invalid("source_volume_id is empty"));
        }
        let name = object_name("name", &req.name)?;
        self.ready()?;
        let _lock = self.by_name.lock(&name).await;
        let src = self
            .find_volume(&req.source_volume_id)
            .await?
            .ok_or_else(|| {
                CsiError::not_found(format!(
                    "source volume {} does not exist",
                    req.source_volume_id
                ))
            })?;
        let wanted = Wanted {
            name,
            node: src.spec.node_name.clone(),
            device_class: src.spec.device_class.clone().unwrap_or_default(),
            option_class: String::new(),
            bytes: current_bytes(&src).unwrap_or(0),
            source: Some(src.spec.name.clone()),
            access_type: Some("ro"),
            pvc: None,
            annotations: Vec::new(),
        };
        let (snapshot_id, size_bytes) = self.provision(&wanted, Vec::new(), budget).await?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Ok(CreateSnapshotResponse {
            snapshot: Some(Snapshot {
                size_bytes,
                snapshot_id,
                source_volume_id: req.source_volume_id.clone(),
                creation_time: Some(prost_types::Timestamp {
                    seconds: i64::try_from(now.as_secs()).unwrap_or(0),
                    nanos: 0,
                }),
                ready_to_use: true,
                group_snapshot_id: String::new(),
            }),
        })
    }
}

fn span(rpc: &'static str) -> tracing::Span {
    info_span!(
        parent: None,
        "csi",
        otel.name = format!("csi {rpc}"),
        rpc,
        otel.status_code = tracing::field::Empty,
        error.message = tracing::field::Empty,
    )
}

/// Runs an RPC in its own root span, recording a failure on it.
pub(super) async fn traced<T>(
    rpc: &'static str,
    fut: impl std::future::Future<Output = Result<T, CsiError>>,
) -> Result<Response<T>, Status> {
    let span = span(rpc);
    let result = fut.instrument(span.clone()).await;
    match result {
        Ok(r) => Ok(Response::new(r)),
        Err(e) => {
            span.record("otel.status_code", "ERROR");
            span.record("error.message", e.message.as_str());
            tracing::warn!(parent: &span, rpc, code = ?e.code, error = %e.message, "rpc failed");
            Err(e.into())
        }
    }
}

#[tonic::async_trait]
impl ControllerApi for Arc<ControllerService> {
    async fn create_volume(
        &self,
        request: Request<CreateVolumeRequest>,
    ) -> Result<Response<CreateVolumeResponse>, Status> {
        let budget = wait_budget(&request);
        let req = request.into_inner();
        traced("CreateVolume", self.as_ref().create_volume(&req, budget)).await
    }

    async fn delete_volume(
        &self,
        request: Request<DeleteVolumeRequest>,
    ) -> Result<Response<DeleteVolumeResponse>, Status> {
        let budget = wait_budget(&request);
        let req = request.into_inner();
        traced("DeleteVolume", async {
            self.delete_by_id(&req.volume_id, Deleting::Volume, budget)
                .await?;
            Ok(DeleteVolumeResponse {})
        })
        .await
    }

    async fn controller_publish_volume(
        &self,
        _r: Request<ControllerPublishVolumeRequest>,
    ) -> Result<Response<ControllerPublishVolumeResponse>, Status> {
        Err(Status::unimplemented("topolvm.io volumes need no attach"))
    }

    async fn controller_unpublish_volume(
        &self,
        _r: Request<ControllerUnpublishVolumeRequest>,
    ) -> Result<Response<ControllerUnpublishVolumeResponse>, Status> {
        Err(Status::unimplemented("topolvm.io volumes need no detach"))
    }

    async fn validate_volume_capabilities(
        &self,
        request: Request<ValidateVolumeCapabilitiesRequest>,
    ) -> Result<Response<ValidateVolumeCapabilitiesResponse>, Status> {
        let req = request.into_inner();
        traced("ValidateVolumeCapabilities", async {
            if req.volume_id.is_empty() {
                return Err(CsiError::invalid("volume_id is empty"));
            }
            if req.volume_capabilities.is_empty() {
                return Err(CsiError::invalid("volume_capabilities is empty"));
            }
            self.ready()?;
            if self.find_volume(&req.volume_id).await?.is_none() {
                return Err(CsiError::not_found(format!(
                    "volume {} does not exist",
                    req.volume_id
                )));
            }
            // Any existing volume serves what it was created for (TopoLVM's answer).
            Ok(ValidateVolumeCapabilitiesResponse {
                confirmed: Some(validate_volume_capabilities_response::Confirmed {
                    volume_context: req.volume_context.clone(),
                    volume_capabilities: req.volume_capabilities.clone(),
                    parameters: req.parameters.clone(),
                    mutable_parameters: Default::default(),
                }),
                message: String::new(),
            })
        })
        .await
    }

    async fn list_volumes(
        &self,
        _r: Request<ListVolumesRequest>,
    ) -> Result<Response<ListVolumesResponse>, Status> {
        Err(Status::unimplemented(
            "ListVolumes is not offered (as TopoLVM)",
        ))
    }

    async fn get_capacity(
        &self,
        request: Request<GetCapacityRequest>,
    ) -> Result<Response<GetCapacityResponse>, Status> {
        let req = request.into_inner();
        let class = req
            .parameters
            .get(DEVICE_CLASS_PARAM)
            .cloned()
            .unwrap_or_default();
        let nodes = self.node_capacities();
        let available = match &req.accessible_topology {
            None => total(&nodes, &class),
            Some(t) => match t.segments.get(TOPOLOGY_NODE_KEY) {
                Some(node) => for_topology(&nodes, node, &class),
                None => 0,
            },
        };
        Ok(Response::new(GetCapacityResponse {
            available_capacity: available,
            maximum_volume_size: None,
            minimum_volume_size: None,
        }))
    }

    async fn controller_get_capabilities(
        &self,
        _r: Request<ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<ControllerGetCapabilitiesResponse>, Status> {
        Ok(Response::new(ControllerGetCapabilitiesResponse {
            capabilities: CAPABILITIES
                .iter()
                .map(|t| ControllerServiceCapability {
                    r#type: Some(controller_service_capability::Type::Rpc(Rpc {
                        r#type: *t as i32,
                    })),
                })
                .collect(),
        }))
    }

    async fn create_snapshot(
        &self,
        request: Request<CreateSnapshotRequest>,
    ) -> Result<Response<CreateSnapshotResponse>, Status> {
        let budget = wait_budget(&request);
        let req = request.into_inner();
        traced(
            "CreateSnapshot",
            self.as_ref().create_snapshot(&req, budget),
        )
        .await
    }

    async fn delete_snapshot(
        &self,
        request: Request<DeleteSnapshotRequest>,
    ) -> Result<Response<DeleteSnapshotResponse>, Status> {
        let budget = wait_budget(&request);
        let req = request.into_inner();
        traced("DeleteSnapshot", async {
            self.delete_by_id(&req.snapshot_id, Deleting::Snapshot, budget)
                .await?;
            Ok(DeleteSnapshotResponse {})
        })
        .await
    }

    async fn list_snapshots(
        &self,
        _r: Request<ListSnapshotsRequest>,
    ) -> Result<Response<ListSnapshotsResponse>, Status> {
        Err(Status::unimplemented(
            "ListSnapshots is not offered (as TopoLVM)",
        ))
    }

    async fn get_snapshot(
        &self,
        _r: Request<GetSnapshotRequest>,
    ) -> Result<Response<GetSnapshotResponse>, Status> {
        Err(Status::unimplemented(
            "GetSnapshot is not offered (as TopoLVM)",
        ))
    }

    async fn controller_expand_volume(
        &self,
        request: Request<ControllerExpandVolumeRequest>,
    ) -> Result<Response<ControllerExpandVolumeResponse>, Status> {
        let budget = wait_budget(&request);
        let req = request.into_inner();
        traced("ControllerExpandVolume", self.as_ref().expand(&req, budget)).await
    }

    async fn controller_get_volume(
        &self,
        _r: Request<ControllerGetVolumeRequest>,
    ) -> Result<Response<ControllerGetVolumeResponse>, Status> {
        Err(Status::unimplemented(
            "ControllerGetVolume is not offered (as TopoLVM)",
        ))
    }

    async fn controller_modify_volume(
        &self,
        _r: Request<ControllerModifyVolumeRequest>,
    ) -> Result<Response<ControllerModifyVolumeResponse>, Status> {
        Err(Status::unimplemented(
            "ControllerModifyVolume is not offered (as TopoLVM)",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_volume_id_is_followed_only_to_the_object_whose_uid_it_is() {
        let lv = |uid: &str, id: &str| -> LogicalVolume {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "v", "uid": uid},
                "spec": {"name": "v", "nodeName": "n", "size": "1Gi"},
                "status": {"volumeID": id}
            }))
            .unwrap()
        };
        assert!(holds_id(&lv("u1", "u1"), "u1"));
        // Another node's object re-pointed at u1 is not volume u1.
        assert!(!holds_id(&lv("u2", "u1"), "u1"));
        assert!(!holds_id(&lv("u1", "u1"), "u2"));
    }

    #[test]
    fn grpc_timeouts_parse() {
        assert_eq!(parse_grpc_timeout("10S"), Some(Duration::from_secs(10)));
        assert_eq!(parse_grpc_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse_grpc_timeout("2M"), Some(Duration::from_secs(120)));
        assert_eq!(parse_grpc_timeout("x"), None);
        assert_eq!(parse_grpc_timeout(""), None);
        assert_eq!(parse_grpc_timeout("S"), None);
        assert_eq!(parse_grpc_timeout("+5S"), None);
        // More than 8 digits is not a gRPC timeout (it panicked the server, adding to now).
        assert_eq!(parse_grpc_timeout("123456789S"), None);
        assert_eq!(parse_grpc_timeout("99999999H"), Some(MAX_WAIT));
        assert_eq!(parse_grpc_timeout("C=\u{10c9d9}"), None);
    }

    #[test]
    fn a_wanted_volume_is_written_as_topolvm_writes_it() {
        let w = Wanted {
            name: "pvc-1".into(),
            node: "n1".into(),
            device_class: String::new(),
            option_class: String::new(),
            bytes: 1 << 30,
            source: None,
            access_type: None,
            pvc: Some("ns/claim".into()),
            annotations: Vec::new(),
        };
        let v = serde_json::to_value(w.object()).unwrap();
        assert_eq!(
            v["spec"],
            serde_json::json!({"name": "pvc-1", "nodeName": "n1", "size": "1Gi"})
        );
        assert_eq!(v["metadata"]["annotations"][PVC_ANNOTATION], "ns/claim");
        assert_eq!(v["apiVersion"], "topolvm.io/v1");
    }
}
