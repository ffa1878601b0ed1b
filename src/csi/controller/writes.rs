//! The controller's only side effects: LogicalVolume writes, each one a journaled step (intent
//! flushed before the API call, outcome after). Replay of an interrupted write belongs to
//! [`crate::csi::controller::replay::CsiControllerUnit`].

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Client, Error};
use lvms_actors::{Done, Reason, StepSpec, Steps, UnitError};
use lvms_journal::{Journal, ObjectRef};
use serde_json::json;

use crate::api::LogicalVolume;
use crate::api::quantity::format_binary;
use crate::csi::controller::actions::CsiStep;
use crate::csi::errors::CsiError;
use crate::csi::names::RESIZE_REQUESTED_AT;

/// The journal unit of the controller's writes (and of their replay).
pub const UNIT: &str = "csi-controller";

/// A LogicalVolume as the journal names it (cluster-scoped).
pub fn lv_ref(name: &str, uid: &str) -> ObjectRef {
    ObjectRef {
        kind: "LogicalVolume".into(),
        namespace: String::new(),
        name: name.into(),
        uid: uid.into(),
        generation: 0,
    }
}

/// The PVC a request is for, when csi-provisioner passed it (`--extra-create-metadata`).
pub fn pvc_ref(namespace: &str, name: &str) -> ObjectRef {
    ObjectRef {
        kind: "PersistentVolumeClaim".into(),
        namespace: namespace.into(),
        name: name.into(),
        uid: String::new(),
        generation: 0,
    }
}

fn unit_error(what: &str, err: Error) -> UnitError {
    crate::kube::apply::unit_error(what, err)
}

/// A failed write as the RPC reports it: the API server being unreachable is Unavailable (the
/// sidecar retries), anything else Internal.
pub fn csi_error(e: UnitError) -> CsiError {
    if e.is(Reason::ApiUnavailable) || e.is(Reason::JournalWriteFailed) {
        CsiError::unavailable(e.to_string())
    } else {
        CsiError::internal(e.to_string())
    }
}

pub struct LvWrites {
    pub client: Client,
    pub journal: Arc<Journal>,
    pub epoch: Arc<AtomicU64>,
}

/// The reason of the Event a group snapshot's VolumeGroupSnapshot gets once it is taken.
pub const REASON_GROUP_SNAPSHOT_TAKEN: &str = "GroupSnapshotTaken";

pub fn group_snapshot_event(note: &str) -> lvms_journal::EventNote {
    lvms_journal::EventNote::normal(REASON_GROUP_SNAPSHOT_TAKEN, note)
}

/// The journaled step `s` about `object`.
fn step(object: ObjectRef, s: &CsiStep) -> StepSpec {
    StepSpec::new(object, s.action()).args(s.args())
}

/// What a create found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    New,
    /// Another request (or an earlier try of this one) made it first.
    AlreadyThere,
}

impl LvWrites {
    fn api(&self) -> Api<LogicalVolume> {
        Api::all(self.client.clone())
    }

    fn steps(&self, regarding: Vec<ObjectRef>) -> Steps {
        let steps = Steps::request(
            self.journal.clone(),
            UNIT,
            self.epoch.clone(),
            Some(crate::telemetry::otel::hooks()),
        );
        steps.regard(regarding);
        steps
    }

    /// Create `lv` (by name); one that exists already is not an error here: the caller
    /// compares it with what it wanted.
    pub async fn create(
        &self,
        lv: &LogicalVolume,
        regarding: Vec<ObjectRef>,
    ) -> Result<Created, CsiError> {
        let name = lv.metadata.name.clone().unwrap_or_default();
        let spec = &lv.spec;
        let create = CsiStep::Create {
            node: spec.node_name.clone(),
            device_class: spec.device_class.clone().unwrap_or_default(),
            size: spec.size.0.clone(),
            source: spec.source.clone().unwrap_or_default(),
            access_type: spec.access_type.clone().unwrap_or_default(),
        };
        let digest = crate::objects::digest(&serde_json::to_value(spec).unwrap_or_default());
        let step = step(lv_ref(&name, ""), &create).digest(digest);
        let api = self.api();
        let (_, created) = self
            .steps(regarding)
            .run_with(step, || async move {
                match api.create(&PostParams::default(), lv).await {
                    Ok(made) => Ok((
                        Done::resource_version(made.metadata.resource_version)
                            .with_fact("uid", made.metadata.uid.unwrap_or_default()),
                        Created::New,
                    )),
                    Err(Error::Api(s)) if s.code == 409 => Ok((
                        Done::default().with_fact("existing", "true"),
                        Created::AlreadyThere,
                    )),
                    Err(e) => Err(unit_error(&format!("creating LogicalVolume {name}"), e)),
                }
            })
            .await
            .map_err(csi_error)?;
        Ok(created)
    }

    /// Delete the LogicalVolume `name` with `uid` (a newer object of that name is left alone);
    /// one already gone is success.
    pub async fn delete(
        &self,
        name: &str,
        uid: &str,
        volume_id: &str,
        regarding: Vec<ObjectRef>,
    ) -> Result<(), CsiError> {
        let step = step(
            lv_ref(name, uid),
            &CsiStep::Delete {
                volume_id: volume_id.to_string(),
            },
        );
        let api = self.api();
        self.steps(regarding)
            .run(step, || async move { delete_lv(&api, name, uid).await })
            .await
            .map(|_| ())
            .map_err(csi_error)
    }

    /// The Event on `regarding` (the VolumeGroupSnapshot) saying group `group` was taken:
    /// journaled once per group, however often the CO asks again.
    pub async fn report_group(
        &self,
        regarding: ObjectRef,
        group: &str,
        note: String,
    ) -> Result<(), CsiError> {
        let step = step(
            regarding,
            &CsiStep::ReportGroupSnapshot {
                group: group.to_string(),
                note: note.clone(),
            },
        );
        self.steps(Vec::new())
            .run_once(step, || async move {
                Ok(Done::default().with_event(group_snapshot_event(&note)))
            })
            .await
            .map(drop)
            .map_err(csi_error)
    }

    /// Raise `spec.size` of `name` to `bytes` and stamp TopoLVM's resize annotation.
    pub async fn resize(
        &self,
        name: &str,
        uid: &str,
        bytes: i64,
        regarding: Vec<ObjectRef>,
    ) -> Result<(), CsiError> {
        let size = format_binary(u64::try_from(bytes).unwrap_or(0));
        let step = step(lv_ref(name, uid), &CsiStep::Resize { size: size.clone() });
        let api = self.api();
        self.steps(regarding)
            .run(step, || async move {
                let now = k8s_openapi::jiff::Timestamp::now().to_string();
                let patch = json!({
                    "metadata": {"uid": uid, "annotations": {RESIZE_REQUESTED_AT: now}},
                    "spec": {"size": size},
                });
                api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(|lv| Done::resource_version(lv.metadata.resource_version))
                    .map_err(|e| unit_error(&format!("resizing LogicalVolume {name}"), e))
            })
            .await
            .map(|_| ())
            .map_err(csi_error)
    }
}

/// Delete with a uid precondition: gone (404) or replaced (409) both mean ours is gone.
pub async fn delete_lv(api: &Api<LogicalVolume>, name: &str, uid: &str) -> Result<Done, UnitError> {
    let params = DeleteParams {
        preconditions: (!uid.is_empty()).then(|| Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(Done::default()),
        Err(Error::Api(s)) if s.code == 404 || s.code == 409 => {
            Ok(Done::default().with_fact("gone", "already"))
        }
        Err(e) => Err(unit_error(&format!("deleting LogicalVolume {name}"), e)),
    }
}
