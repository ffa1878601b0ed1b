//! `topolvm-node` (TopoLVM's Node reconciler, and what lvms adds for a node that died): a node
//! written off ([`crate::operator::volumes::dead_node`]: deleted, or tainted out-of-service,
//! and not Ready for `--dead-node-grace`) has what it held recorded on the Node (a Warning
//! names it), its claims on `topolvm.io` classes deleted and its LogicalVolumes released and
//! deleted (its vg-manager is gone, so nothing else would ever let them go), then, if deleted,
//! the finalizer removed. A node that comes back has its record removed and its vg-manager
//! asked for an audit, which reports what is left on its disks. Each write is a journaled
//! step on the object it touches.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use lvms_actors::{Action, Done, Pass, StepSpec, Steps, Unit, UnitError};
use lvms_journal::{EventNote, Intent, ObjectRef, Replayed};
use serde_json::json;
use tracing::info;

use crate::api::topolvm::NODE_FINALIZER;
use crate::api::{LOGICAL_VOLUME_FINALIZER, LVMVolumeGroupNodeStatus, LogicalVolume};
use crate::csi::controller::volumes::Volumes;
use crate::kube::apply::{self, unit_error};
use crate::kube::kinds::Kind;
use crate::operator::context::{Ctx, object_ref};
use crate::operator::volumes::actions::VolumeHelperAction as A;
use crate::operator::volumes::dead_node::{
    Trigger, Verdict, WRITTEN_OFF_ANNOTATION, WrittenOff, grace_text, merged, new_volumes, record,
    verdict, volumes_digest, volumes_of, written_off_note,
};
use crate::operator::volumes::node_cleanup::{CleanupStep, cleanup, driver_classes};
use crate::vgmanager::audit_unit::{audit_request_token, request_audit};

pub const UNIT: &str = crate::operator::table::UnitId::TopolvmNodes.name();

pub const REASON_WRITTEN_OFF: &str = "VolumesWrittenOff";
pub const REASON_STILL_READY: &str = "NodeStillReady";
pub const REASON_BACK: &str = "WrittenOffVolumesOnDisk";

pub struct TopolvmNodesUnit {
    pub ctx: Arc<Ctx>,
    /// The CSI controller's LogicalVolume index (one watch serves both).
    pub volumes: Arc<Volumes>,
}

/// Delete a claim, only the one the step saw (uid precondition): a new claim of the same name
/// is not the deleted node's.
async fn delete_claim(client: &kube::Client, o: &ObjectRef) -> Result<Done, UnitError> {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &o.namespace);
    let dp = DeleteParams {
        preconditions: (!o.uid.is_empty()).then(|| Preconditions {
            uid: Some(o.uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&o.name, &dp).await {
        Ok(_) => Ok(Done::default().with_fact("deleted", "true")),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Done::default().with_fact("gone", "true")),
        // The uid precondition failed: another claim now has the name.
        Err(kube::Error::Api(s)) if s.code == 409 => {
            Ok(Done::default().with_fact("superseded", "true"))
        }
        Err(e) => Err(unit_error(
            &format!("delete PersistentVolumeClaim {}/{}", o.namespace, o.name),
            e,
        )),
    }
}

/// TopoLVM's `cleanupLogicalVolume`: the finalizer off, then the object deleted.
async fn release_volume(client: &kube::Client, name: &str) -> Result<Done, UnitError> {
    apply::edit_finalizers(client, Kind::LogicalVolume, "", name, |f| {
        f.retain(|x| x != LOGICAL_VOLUME_FINALIZER)
    })
    .await?;
    apply::delete(client, Kind::LogicalVolume, "", name)
        .await
        .map(|(done, _)| done)
}

async fn remove_node_finalizer(client: &kube::Client, node: &str) -> Result<Done, UnitError> {
    apply::edit_finalizers(client, Kind::Node, "", node, |f| {
        f.retain(|x| x != NODE_FINALIZER)
    })
    .await
}

/// The record on the Node (a merge patch of one annotation: idempotent). A Node already gone
/// needs none.
async fn write_record(
    client: &kube::Client,
    node: &str,
    record: &WrittenOff,
) -> Result<Done, UnitError> {
    let text = serde_json::to_string(record)
        .map_err(|e| UnitError::permanent("RecordUnencodable", e.to_string()))?;
    let patch = Patch::Merge(json!({"metadata": {"annotations": {WRITTEN_OFF_ANNOTATION: text}}}));
    match Api::<Node>::all(client.clone())
        .patch_metadata(node, &PatchParams::default(), &patch)
        .await
    {
        Ok(_) => Ok(Done::default().with_fact("recorded", record.count.to_string())),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Done::default().with_fact("gone", "true")),
        Err(e) => Err(unit_error(&format!("annotate Node {node}"), e)),
    }
}

impl TopolvmNodesUnit {
    fn all_volumes(&self) -> Result<Vec<Arc<LogicalVolume>>, UnitError> {
        self.volumes.all().ok_or_else(|| {
            UnitError::retryable(
                "LogicalVolumesNotSynced",
                "the LogicalVolume index has not listed yet: a written-off node's volumes are not known",
            )
        })
    }

    fn node(&self, name: &str) -> Option<Arc<Node>> {
        self.ctx
            .caches
            .nodes
            .state()
            .into_iter()
            .find(|n| n.metadata.name.as_deref() == Some(name))
    }

    /// Records the node's volumes not yet recorded, with the Warning `note` (the Event is
    /// published even when a kill came after the write: the step's replay).
    async fn record(&self, node: &Node, trigger: Trigger, note: String) -> Result<Done, UnitError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let vols = volumes_of(&name, &self.all_volumes()?);
        let earlier = record(node).and_then(Result::ok);
        let done = match merged(earlier.as_ref(), &vols, trigger, Timestamp::now()) {
            Some(rec) => write_record(&self.ctx.client, &name, &rec).await?,
            None => Done::default().with_fact("recorded", "already"),
        };
        Ok(done.with_event(EventNote::warning(REASON_WRITTEN_OFF, note)))
    }

    fn volume_object(&self, name: &str) -> ObjectRef {
        self.volumes
            .get(name)
            .map(|lv| object_ref(lv.as_ref()))
            .unwrap_or_else(|| ObjectRef {
                kind: "LogicalVolume".into(),
                name: name.into(),
                ..ObjectRef::default()
            })
    }

    /// A node written off: record, claims, volumes, finalizer.
    async fn write_off(
        &self,
        steps: &Steps,
        node: &Node,
        trigger: Trigger,
    ) -> Result<usize, UnitError> {
        let all = self.all_volumes()?;
        let classes = driver_classes(&self.ctx.caches.storage_classes.state());
        let claims = self.ctx.caches.pvcs.state();
        let plan = cleanup(node, trigger, &claims, &classes, &all);
        let client = &self.ctx.client;
        let node_name = node.metadata.name.clone().unwrap_or_default();
        let earlier = record(node).and_then(Result::ok);
        let new = new_volumes(earlier.as_ref(), &volumes_of(&node_name, &all));
        let mut applied = 0;
        if !new.is_empty() {
            let note = written_off_note(&node_name, &new, trigger);
            // Once per set of volumes: replay may have recorded them before the Node cache
            // shows it.
            let spec = StepSpec::new(object_ref(node), A::RecordWrittenOff)
                .args(vec![trigger.as_str().into(), note.clone()])
                .digest(volumes_digest(&new));
            if steps
                .run_once(spec, || self.record(node, trigger, note))
                .await?
                .is_some()
            {
                applied += 1;
            }
        }
        for step in &plan {
            match step {
                CleanupStep::DeleteClaim { namespace, name } => {
                    let object = claims
                        .iter()
                        .find(|c| {
                            c.metadata.namespace.as_deref() == Some(namespace.as_str())
                                && c.metadata.name.as_deref() == Some(name.as_str())
                        })
                        .map(|c| object_ref(c.as_ref()))
                        .unwrap_or_default();
                    let spec = StepSpec::new(object.clone(), A::DeleteClaim)
                        .args(vec![format!("selected-node={node_name}")]);
                    steps.run(spec, || delete_claim(client, &object)).await?;
                }
                CleanupStep::ReleaseLogicalVolume { name } => {
                    let spec = StepSpec::new(self.volume_object(name), A::ReleaseLogicalVolume)
                        .args(vec![format!("nodeName={node_name}")]);
                    steps.run(spec, || release_volume(client, name)).await?;
                }
                CleanupStep::RemoveFinalizer => {
                    let spec = StepSpec::new(object_ref(node), A::RemoveNodeFinalizer)
                        .args(vec![NODE_FINALIZER.into()]);
                    steps
                        .run(spec, || remove_node_finalizer(client, &node_name))
                        .await?;
                }
            }
        }
        Ok(applied + plan.len())
    }

    /// A node back: the record off, and its vg-manager asked for an audit now (a node that
    /// comes back without a restart would otherwise report its leftovers only at its next
    /// interval).
    async fn forget(&self, node: &str) -> Result<Done, UnitError> {
        let done = apply::remove_annotations(
            &self.ctx.client,
            Kind::Node,
            "",
            node,
            &[WRITTEN_OFF_ANNOTATION.to_string()],
        )
        .await?;
        let token = audit_request_token();
        let api: Api<LVMVolumeGroupNodeStatus> =
            Api::namespaced(self.ctx.client.clone(), &self.ctx.settings.namespace);
        match request_audit(&api, node, &token).await {
            Ok(()) => Ok(done.with_fact("audit-requested", token)),
            // No node status (no LVMCluster selects it any more): no audit to ask for.
            Err(kube::Error::Api(s)) if s.code == 404 => {
                Ok(done.with_fact("audit-requested", "no node status"))
            }
            Err(e) => Err(unit_error(&format!("ask node {node} for an audit"), e)),
        }
    }
}

fn back_note(node: &Node) -> String {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    match record(node) {
        Some(Ok(r)) => format!(
            "node {name} is Ready again: the {} volume(s) written off at {} are still on its disks until removed; its vg-manager's audit (asked for now) reports each LV as leaked-lv (`lvms audit`), and `--audit-repair leaked` removes them",
            r.count, r.at
        ),
        _ => format!(
            "node {name} is Ready again with a written-off record that does not parse; its vg-manager's audit (asked for now) reports what is left on its disks (`lvms audit`)"
        ),
    }
}

fn still_ready_note(node: &str, trigger: Trigger, grace: Duration) -> String {
    format!(
        "node {node} is {} but its kubelet reports Ready: lvms keeps its claims and volumes until it has not been Ready for {} (--dead-node-grace); TopoLVM would delete its claims now",
        trigger.describe(),
        grace_text(grace)
    )
}

impl Unit for TopolvmNodesUnit {
    fn name(&self) -> &str {
        UNIT
    }

    async fn reconcile(&self, steps: &Steps) -> Result<Pass, UnitError> {
        super::begin_volume_helper_pass(steps, "Node");
        let grace = self.ctx.settings.dead_node_grace;
        let now = Timestamp::now();
        let (mut written_off, mut applied, mut held, mut back) = (0usize, 0usize, 0usize, 0usize);
        let mut requeue: Option<Duration> = None;
        for node in self.ctx.caches.nodes.state() {
            let name = node.metadata.name.clone().unwrap_or_default();
            match verdict(&node, now, grace) {
                Verdict::Alive => {}
                Verdict::WriteOff(trigger) => {
                    applied += self.write_off(steps, &node, trigger).await?;
                    written_off += 1;
                }
                Verdict::Wait { trigger, after } => {
                    info!(node = %name, ?trigger, wait_s = after.as_secs(), "not Ready for less than --dead-node-grace");
                    // A second more: the condition's time has second precision.
                    let after = after.saturating_add(Duration::from_secs(1));
                    requeue = Some(requeue.map_or(after, |r| r.min(after)));
                }
                Verdict::StillReady(trigger) => {
                    held += 1;
                    let note = still_ready_note(&name, trigger, grace);
                    // Once per Node and trigger: a node deleted again later is news.
                    let spec = StepSpec::new(object_ref(node.as_ref()), A::ReportNodeStillReady)
                        .args(vec![trigger.as_str().into()]);
                    steps
                        .run_once(spec, || async {
                            Ok(Done::event(EventNote::warning(REASON_STILL_READY, note)))
                        })
                        .await?;
                }
                Verdict::Back => {
                    let note = back_note(&node);
                    let spec = StepSpec::new(object_ref(node.as_ref()), A::ForgetWrittenOff)
                        .args(vec![note.clone()]);
                    // Once per record (the note names it): the next pass may come before the
                    // Node cache shows the record gone.
                    if steps
                        .run_once(spec, || async {
                            Ok(self
                                .forget(&name)
                                .await?
                                .with_event(EventNote::warning(REASON_BACK, note)))
                        })
                        .await?
                        .is_some()
                    {
                        back += 1;
                    }
                }
            }
        }
        Ok(Pass {
            summary: format!(
                "{written_off} node(s) written off, {applied} step(s); {held} held while Ready; {back} back"
            ),
            requeue_after: requeue,
        })
    }

    /// Every write is idempotent on what it names (a uid-guarded delete, finalizer and
    /// annotation edits): replay redoes it, and publishes the step's Event a kill kept from its
    /// outcome.
    async fn replay(&self, intent: &Intent, _steps: &Steps) -> Result<Done, UnitError> {
        let action = intent
            .action_as::<A>()
            .map_err(|e| UnitError::permanent("UnknownAction", e.to_string()))?;
        let client = &self.ctx.client;
        let o = &intent.object;
        let arg = |i: usize| intent.args.get(i).cloned().unwrap_or_default();
        let done = match action {
            A::DeleteClaim => delete_claim(client, o).await?,
            A::ReleaseLogicalVolume => release_volume(client, &o.name).await?,
            A::RemoveNodeFinalizer => remove_node_finalizer(client, &o.name).await?,
            A::RecordWrittenOff => {
                let trigger = Trigger::parse(&arg(0)).ok_or_else(|| {
                    UnitError::permanent(
                        "BadArgs",
                        format!("record-written-off: {:?} is not a trigger", arg(0)),
                    )
                })?;
                match self.node(&o.name) {
                    Some(node) => self.record(&node, trigger, arg(1)).await?,
                    // The Node went (its finalizer came off after the record): the Warning
                    // still tells what was written off.
                    None => Done::event(EventNote::warning(REASON_WRITTEN_OFF, arg(1))),
                }
            }
            A::ReportNodeStillReady => {
                // The moment may have passed: published only if the Node is still held.
                let grace = self.ctx.settings.dead_node_grace;
                match self
                    .node(&o.name)
                    .map(|n| verdict(&n, Timestamp::now(), grace))
                {
                    Some(Verdict::StillReady(t)) => Done::event(EventNote::warning(
                        REASON_STILL_READY,
                        still_ready_note(&o.name, t, grace),
                    )),
                    _ => return Ok(Done::replayed(Replayed::Superseded)),
                }
            }
            A::ForgetWrittenOff => self
                .forget(&o.name)
                .await?
                .with_event(EventNote::warning(REASON_BACK, arg(0))),
            other => {
                return Err(UnitError::permanent(
                    "UnknownAction",
                    format!("{} is not a step of {UNIT}", other.name()),
                ));
            }
        };
        Ok(Done {
            replay: Some(Replayed::Redone),
            ..done
        })
    }
}
