//! `topolvm-node` (TopoLVM's Node reconciler): a Node being deleted that carries
//! `topolvm.io/node` has its claims on `topolvm.io` classes deleted and its LogicalVolumes
//! released and deleted (the node's vg-manager is gone with it, so nothing else would ever
//! let them go), then the finalizer removed. Each write is a journaled step on the object it
//! touches.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Api;
use kube::api::{DeleteParams, Preconditions};
use lvms_actors::{Action, Done, Pass, StepSpec, Steps, Unit, UnitError};
use lvms_journal::{Intent, ObjectRef, Replayed};

use crate::api::topolvm::NODE_FINALIZER;
use crate::api::{LOGICAL_VOLUME_FINALIZER, LogicalVolume};
use crate::csi::controller::volumes::Volumes;
use crate::kube::apply::{self, unit_error};
use crate::kube::kinds::Kind;
use crate::operator::context::{Ctx, object_ref};
use crate::operator::volumes::actions::VolumeHelperAction as A;
use crate::operator::volumes::node_cleanup::{CleanupStep, cleanup, driver_classes, finalizing};

pub const UNIT: &str = crate::operator::table::UnitId::TopolvmNodes.name();

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

impl TopolvmNodesUnit {
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

    async fn finish(
        &self,
        steps: &Steps,
        node: &k8s_openapi::api::core::v1::Node,
    ) -> Result<usize, UnitError> {
        let all: Vec<Arc<LogicalVolume>> = self.volumes.all().ok_or_else(|| {
            UnitError::retryable(
                "LogicalVolumesNotSynced",
                "the LogicalVolume index has not listed yet: a deleted node's volumes are not known",
            )
        })?;
        let classes = driver_classes(&self.ctx.caches.storage_classes.state());
        let claims = self.ctx.caches.pvcs.state();
        let plan = cleanup(node, &claims, &classes, &all);
        let client = &self.ctx.client;
        let node_name = node.metadata.name.clone().unwrap_or_default();
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
        Ok(plan.len())
    }
}

impl Unit for TopolvmNodesUnit {
    fn name(&self) -> &str {
        UNIT
    }

    async fn reconcile(&self, steps: &Steps) -> Result<Pass, UnitError> {
        super::begin_volume_helper_pass(steps, "Node");
        let (mut finished, mut applied) = (0usize, 0usize);
        for node in self.ctx.caches.nodes.state() {
            if !finalizing(&node) {
                continue;
            }
            applied += self.finish(steps, &node).await?;
            finished += 1;
        }
        Ok(Pass {
            summary: format!("{finished} deleted node(s) finalized, {applied} step(s)"),
            requeue_after: None,
        })
    }

    /// Every step is idempotent on what it names (a uid-guarded delete, finalizer edits that
    /// re-read): replay redoes it.
    async fn replay(&self, intent: &Intent, _steps: &Steps) -> Result<Done, UnitError> {
        let action = intent
            .action_as::<A>()
            .map_err(|e| UnitError::permanent("UnknownAction", e.to_string()))?;
        let client = &self.ctx.client;
        let o = &intent.object;
        let done = match action {
            A::DeleteClaim => delete_claim(client, o).await?,
            A::ReleaseLogicalVolume => release_volume(client, &o.name).await?,
            A::RemoveNodeFinalizer => remove_node_finalizer(client, &o.name).await?,
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
