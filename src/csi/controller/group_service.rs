//! CSI's GroupController (volume group snapshots), served with the Controller in
//! `lvms operator`. A group is one snapshot LogicalVolume per member, each annotated with the
//! group (its name is also the group snapshot id) and every member's name; the node takes
//! them at one instant ([`crate::vgmanager::group_snapshot`]) and reports each as a snapshot
//! is reported. The members are checked here first ([`crate::csi::controller::group::check_members`]): thin
//! volumes of one device class on one node.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use tonic::{Code, Request, Response, Status};
use tracing::info;

use crate::api::LogicalVolume;
use crate::csi::controller::group::{Member, check_members};
use crate::csi::controller::service::{ControllerService, Deleting, Wanted, traced, wait_budget};
use crate::csi::controller::volumes::current_bytes;
use crate::csi::errors::CsiError;
use crate::csi::names::{GROUP_MEMBERS_ANNOTATION, GROUP_SNAPSHOT_ANNOTATION};
use crate::csi::object_name::object_name;
use crate::csi::proto::group_controller_server::GroupController;
use crate::csi::proto::group_controller_service_capability::{Rpc, rpc::Type as RpcType};
use crate::csi::proto::*;

/// csi-snapshotter's `--extra-create-metadata` parameters of a group snapshot.
pub const VGS_NAME_PARAM: &str = "csi.storage.k8s.io/volumegroupsnapshot/name";
pub const VGS_NAMESPACE_PARAM: &str = "csi.storage.k8s.io/volumegroupsnapshot/namespace";

/// The LogicalVolume name of the member of `group` taken from volume `source_id`.
pub fn member_name(group: &str, source_id: &str) -> String {
    format!("{group}-{source_id}")
}

fn group_of(lv: &LogicalVolume) -> Option<&str> {
    lv.metadata
        .annotations
        .as_ref()?
        .get(GROUP_SNAPSHOT_ANNOTATION)
        .map(String::as_str)
}

fn volume_id(lv: &LogicalVolume) -> Option<&str> {
    lv.status
        .as_ref()?
        .volume_id
        .as_deref()
        .filter(|id| !id.is_empty())
}

fn timestamp(lv: &LogicalVolume) -> prost_types::Timestamp {
    let t = lv
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
        .unwrap_or_default();
    prost_types::Timestamp {
        seconds: t,
        nanos: 0,
    }
}

/// csi-snapshotter's `--extra-create-metadata` parameters name the VolumeGroupSnapshot; its
/// uid is the group's name after `groupsnapshot-` (external-snapshotter's naming).
fn volume_group_snapshot(
    parameters: &std::collections::HashMap<String, String>,
    group: &str,
) -> Option<lvms_journal::ObjectRef> {
    let name = parameters.get(VGS_NAME_PARAM)?;
    let namespace = parameters.get(VGS_NAMESPACE_PARAM)?;
    Some(lvms_journal::ObjectRef {
        kind: "VolumeGroupSnapshot".into(),
        namespace: namespace.clone(),
        name: name.clone(),
        uid: group
            .strip_prefix("groupsnapshot-")
            .unwrap_or_default()
            .to_string(),
        generation: 0,
    })
}

impl ControllerService {
    /// Whether `class` (empty: the default class) is thin, from the LVMClusters; a class no
    /// LVMCluster names is left to the node to refuse.
    fn thin(&self, class: &str) -> bool {
        let Some(clusters) = &self.clusters else {
            return true;
        };
        clusters
            .state()
            .iter()
            .flat_map(|c| c.spec.storage.device_classes.iter())
            .find(|d| {
                if class.is_empty() {
                    d.default
                } else {
                    d.name == class
                }
            })
            .is_none_or(|d| d.is_thin())
    }

    /// The group's member LogicalVolumes, by name.
    fn members_of(&self, group: &str) -> Result<Vec<Arc<LogicalVolume>>, CsiError> {
        let all = self.volumes.all().ok_or_else(|| {
            CsiError::unavailable("the LogicalVolume cache has not synced yet; retry")
        })?;
        let mut members: Vec<_> = all
            .into_iter()
            .filter(|lv| group_of(lv) == Some(group))
            .collect();
        members.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        Ok(members)
    }

    fn snapshot_of(&self, group: &str, lv: &LogicalVolume) -> Option<Snapshot> {
        let source = lv.spec.source.as_deref()?;
        let source_id = self
            .volumes
            .get(source)
            .and_then(|s| volume_id(&s).map(String::from))?;
        Some(Snapshot {
            size_bytes: current_bytes(lv).unwrap_or(0),
            snapshot_id: volume_id(lv)?.to_string(),
            source_volume_id: source_id,
            creation_time: Some(timestamp(lv)),
            ready_to_use: true,
            group_snapshot_id: group.to_string(),
        })
    }

    async fn create_group(
        &self,
        req: &CreateVolumeGroupSnapshotRequest,
        budget: Duration,
    ) -> Result<CreateVolumeGroupSnapshotResponse, CsiError> {
        let group = object_name("name", &req.name)?;
        self.ready()?;
        let _lock = self.by_name.lock(&group).await;
        let mut sources = BTreeMap::new();
        for id in &req.source_volume_ids {
            let lv = self.find_volume(id).await?;
            sources.insert(id.clone(), lv);
        }
        let found = sources
            .iter()
            .map(|(id, lv)| {
                let member = lv.as_ref().map(|lv| {
                    let class = lv.spec.device_class.clone().unwrap_or_default();
                    Member {
                        node: lv.spec.node_name.clone(),
                        thin: self.thin(&class),
                        device_class: class,
                    }
                });
                (id.clone(), member)
            })
            .collect();
        let placement = check_members(&req.source_volume_ids, &found)?;
        let mut ids: Vec<&String> = req.source_volume_ids.iter().collect();
        ids.sort();
        // Each member's object is named after the group and its source: both must fit.
        let names = ids
            .iter()
            .map(|id| {
                object_name(
                    "name (with a member's source volume id)",
                    &member_name(&group, id),
                )
            })
            .collect::<Result<Vec<String>, CsiError>>()?;
        // A retry with other members is another group under a used name.
        let existing = self.members_of(&group)?;
        if let Some(other) = existing
            .iter()
            .find(|lv| !names.iter().any(|n| Some(n) == lv.metadata.name.as_ref()))
        {
            return Err(CsiError::new(
                Code::AlreadyExists,
                format!(
                    "group snapshot {group} exists with other members ({} is not among the requested volumes)",
                    other.metadata.name.as_deref().unwrap_or_default()
                ),
            ));
        }
        let trace = crate::telemetry::otel::current_traceparent();
        let wanted: Vec<Wanted> = ids
            .iter()
            .zip(&names)
            .map(|(id, name)| {
                let src = sources.get(*id).cloned().flatten();
                let src = src.as_deref();
                let mut annotations = vec![
                    (GROUP_SNAPSHOT_ANNOTATION, group.clone()),
                    (GROUP_MEMBERS_ANNOTATION, names.join(",")),
                ];
                if let Some(tp) = &trace {
                    annotations.push((crate::telemetry::otel::TRACEPARENT_ANNOTATION, tp.clone()));
                }
                Wanted {
                    name: name.clone(),
                    node: placement.node.clone(),
                    device_class: placement.device_class.clone(),
                    option_class: String::new(),
                    bytes: src.and_then(current_bytes).unwrap_or(0),
                    source: src.map(|s| s.spec.name.clone()),
                    access_type: Some("ro"),
                    pvc: None,
                    annotations,
                }
            })
            .collect();
        // Every member is written before any is waited for: the node takes them together.
        let results = join_all(wanted.iter().map(|w| self.provision(w, Vec::new(), budget))).await;
        let mut snapshots = Vec::new();
        for ((id, w), r) in ids.iter().zip(&wanted).zip(results) {
            let (snapshot_id, size_bytes) = r?;
            let created = self.volumes.get(&w.name);
            snapshots.push(Snapshot {
                size_bytes,
                snapshot_id,
                source_volume_id: (*id).clone(),
                creation_time: created.as_deref().map(timestamp),
                ready_to_use: true,
                group_snapshot_id: group.clone(),
            });
        }
        info!(%group, node = %placement.node, members = snapshots.len(), "group snapshot ready");
        if let Some(regarding) = volume_group_snapshot(&req.parameters, &group) {
            let members: Vec<String> = snapshots
                .iter()
                .map(|s| format!("{} of {}", s.snapshot_id, s.source_volume_id))
                .collect();
            let note = format!(
                "{} volumes snapshotted at one instant on node {} (group {group}): {}",
                members.len(),
                placement.node,
                members.join(", ")
            );
            self.writes.report_group(regarding, &group, note).await?;
        }
        Ok(CreateVolumeGroupSnapshotResponse {
            group_snapshot: Some(VolumeGroupSnapshot {
                group_snapshot_id: group,
                creation_time: snapshots.first().and_then(|s| s.creation_time),
                snapshots,
                ready_to_use: true,
            }),
        })
    }

    async fn get_group(
        &self,
        req: &GetVolumeGroupSnapshotRequest,
    ) -> Result<GetVolumeGroupSnapshotResponse, CsiError> {
        if req.group_snapshot_id.is_empty() {
            return Err(CsiError::invalid("group_snapshot_id is empty"));
        }
        self.ready()?;
        let group = &req.group_snapshot_id;
        let members = self.members_of(group)?;
        if members.is_empty() {
            return Err(CsiError::not_found(format!(
                "group snapshot {group} does not exist"
            )));
        }
        let snapshots: Vec<Snapshot> = members
            .iter()
            .filter_map(|lv| self.snapshot_of(group, lv))
            .collect();
        let ready = snapshots.len() == members.len();
        Ok(GetVolumeGroupSnapshotResponse {
            group_snapshot: Some(VolumeGroupSnapshot {
                group_snapshot_id: group.clone(),
                creation_time: members.first().map(|lv| timestamp(lv)),
                snapshots,
                ready_to_use: ready,
            }),
        })
    }

    async fn delete_group(
        &self,
        req: &DeleteVolumeGroupSnapshotRequest,
        budget: Duration,
    ) -> Result<DeleteVolumeGroupSnapshotResponse, CsiError> {
        if req.group_snapshot_id.is_empty() {
            return Err(CsiError::invalid("group_snapshot_id is empty"));
        }
        self.ready()?;
        let group = &req.group_snapshot_id;
        let members = self.members_of(group)?;
        // Only the group's own members are deleted below; an id that is none of them but names
        // a volume is the mismatch the spec asks to refuse (one already gone is a retried
        // delete). The index answers: it has synced (ready above).
        let strangers: Vec<&String> = req
            .snapshot_ids
            .iter()
            .filter(|id| !members.iter().any(|m| volume_id(m) == Some(id.as_str())))
            .filter(|id| self.volumes.by_volume_id(id).is_some())
            .collect();
        if !strangers.is_empty() {
            return Err(CsiError::new(
                Code::FailedPrecondition,
                format!(
                    "snapshot_ids {strangers:?} are not snapshots of group {group}: nothing was deleted; name only the group's own snapshots"
                ),
            ));
        }
        let mut ids: Vec<String> = Vec::new();
        for lv in members {
            match volume_id(&lv) {
                Some(id) => ids.push(id.to_string()),
                // Not taken yet (a create still in flight, or abandoned): its object goes.
                None => {
                    let name = lv.metadata.name.clone().unwrap_or_default();
                    let uid = lv.metadata.uid.clone().unwrap_or_default();
                    self.writes.delete(&name, &uid, "", Vec::new()).await?;
                }
            }
        }
        ids.sort();
        ids.dedup();
        for id in &ids {
            self.delete_by_id(id, Deleting::Snapshot, budget).await?;
        }
        info!(%group, snapshots = ids.len(), "group snapshot deleted");
        Ok(DeleteVolumeGroupSnapshotResponse {})
    }
}

#[tonic::async_trait]
impl GroupController for Arc<ControllerService> {
    async fn group_controller_get_capabilities(
        &self,
        _r: Request<GroupControllerGetCapabilitiesRequest>,
    ) -> Result<Response<GroupControllerGetCapabilitiesResponse>, Status> {
        Ok(Response::new(GroupControllerGetCapabilitiesResponse {
            capabilities: vec![GroupControllerServiceCapability {
                r#type: Some(group_controller_service_capability::Type::Rpc(Rpc {
                    r#type: RpcType::CreateDeleteGetVolumeGroupSnapshot as i32,
                })),
            }],
        }))
    }

    async fn create_volume_group_snapshot(
        &self,
        request: Request<CreateVolumeGroupSnapshotRequest>,
    ) -> Result<Response<CreateVolumeGroupSnapshotResponse>, Status> {
        let budget = wait_budget(&request);
        let req = request.into_inner();
        traced(
            "CreateVolumeGroupSnapshot",
            self.as_ref().create_group(&req, budget),
        )
        .await
    }

    async fn delete_volume_group_snapshot(
        &self,
        request: Request<DeleteVolumeGroupSnapshotRequest>,
    ) -> Result<Response<DeleteVolumeGroupSnapshotResponse>, Status> {
        let budget = wait_budget(&request);
        let req = request.into_inner();
        traced(
            "DeleteVolumeGroupSnapshot",
            self.as_ref().delete_group(&req, budget),
        )
        .await
    }

    async fn get_volume_group_snapshot(
        &self,
        request: Request<GetVolumeGroupSnapshotRequest>,
    ) -> Result<Response<GetVolumeGroupSnapshotResponse>, Status> {
        let req = request.into_inner();
        traced("GetVolumeGroupSnapshot", self.as_ref().get_group(&req)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_names_are_stable_per_group_and_source() {
        assert_eq!(member_name("groupsnapshot-1", "u2"), "groupsnapshot-1-u2");
    }

    #[test]
    fn the_event_regards_the_volume_group_snapshot_the_sidecar_names() {
        let params = [
            (VGS_NAME_PARAM.to_string(), "db".to_string()),
            (VGS_NAMESPACE_PARAM.to_string(), "prod".to_string()),
        ]
        .into();
        let r = volume_group_snapshot(&params, "groupsnapshot-0f1e").unwrap();
        assert_eq!(
            (
                r.kind.as_str(),
                r.namespace.as_str(),
                r.name.as_str(),
                r.uid.as_str()
            ),
            ("VolumeGroupSnapshot", "prod", "db", "0f1e")
        );
        assert!(volume_group_snapshot(&Default::default(), "g").is_none());
    }
}
