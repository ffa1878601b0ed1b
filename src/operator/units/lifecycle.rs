//! The `lvmcluster` unit: which LVMCluster is reconciled (others are reported Failed), the
//! finalizer, and deletion: LVMS's gates (PVCs, Retain PVs), then ordered teardown, then the
//! finalizer comes off.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, ListParams, Patch, PatchParams};
use lvms_actors::{
    BatchStep, Done, EventNote, Pass, Replayed, StepSpec, Steps, Unit, UnitError, effect,
};
use lvms_journal::{Action, Body, Clock, Intent, ObjectRef, Record, Seq};
use serde_json::json;
use tracing::info;

use super::objects::{delete_object, our_finalizer, seen_finalizers};
use crate::api::topolvm::NODE_FINALIZER;
use crate::api::{
    CONDITION_RESOURCES_AVAILABLE, LOGICAL_VOLUME_FINALIZER, LVMCLUSTER_FINALIZER, LVMCluster,
    LVMStateType, LogicalVolume,
};
use crate::kube::apply;
use crate::kube::kinds::Kind;
use crate::operator::actions::ObjectAction;
use crate::operator::context::{Ctx, object_ref};
use crate::operator::desired::csi_driver::CSI_DRIVER_NAME;
use crate::operator::desired::daemonset::vg_manager_labels;
use crate::operator::node_removal::{gone_node_edits, node_finalizers_to_release, nodes_named};
use crate::operator::plan::{Step, plan_holding};
use crate::operator::singleton::Rejected;

pub const UNIT: &str = crate::operator::table::UnitId::Lifecycle.name();
pub const REASON_DELETION_PENDING: &str = "DeletionPending";

pub use crate::operator::table::TEARDOWN;

pub struct LifecycleUnit {
    pub ctx: Arc<Ctx>,
}

fn waiting(summary: String) -> Pass {
    Pass {
        summary,
        requeue_after: Some(Duration::from_secs(2)),
    }
}

fn rejected_status_applied(r: &Rejected) -> bool {
    r.cluster.status.as_ref().is_some_and(|s| {
        s.state == Some(LVMStateType::Failed)
            && s.conditions
                .iter()
                .any(|c| c.reason == r.reason && c.message == r.message)
    })
}

impl LifecycleUnit {
    async fn reject(&self, steps: &Steps, r: &Rejected) -> Result<(), UnitError> {
        let c = &r.cluster;
        let ns = c.metadata.namespace.clone().unwrap_or_default();
        let name = c.metadata.name.clone().unwrap_or_default();
        let spec =
            StepSpec::new(object_ref(c.as_ref()), ObjectAction::Reject).args(vec![r.reason.into()]);
        let condition = Condition {
            type_: CONDITION_RESOURCES_AVAILABLE.into(),
            status: "False".into(),
            reason: r.reason.into(),
            message: r.message.clone(),
            observed_generation: c.metadata.generation,
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
        };
        let patch =
            json!({"status": {"state": "Failed", "ready": false, "conditions": [condition]}});
        let api: Api<LVMCluster> = Api::namespaced(self.ctx.client.clone(), &ns);
        steps
            .run(spec, || async {
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(|e| {
                        apply::unit_error(&format!("status of LVMCluster {ns}/{name}"), e)
                    })?;
                Ok(Done::event(EventNote::warning(r.reason, r.message.clone())))
            })
            .await?;
        Ok(())
    }

    async fn edit_cluster_finalizer(
        &self,
        steps: &Steps,
        cluster: &LVMCluster,
        add: bool,
    ) -> Result<(), UnitError> {
        let ns = cluster.metadata.namespace.clone().unwrap_or_default();
        let name = cluster.metadata.name.clone().unwrap_or_default();
        let action = if add {
            ObjectAction::AddFinalizer
        } else {
            ObjectAction::RemoveFinalizer
        };
        let spec =
            StepSpec::new(object_ref(cluster), action).args(vec![LVMCLUSTER_FINALIZER.into()]);
        let client = &self.ctx.client;
        steps
            .run(spec, || {
                apply::edit_finalizers(client, Kind::LvmCluster, &ns, &name, |f| {
                    f.retain(|x| x != LVMCLUSTER_FINALIZER);
                    if add {
                        f.push(LVMCLUSTER_FINALIZER.into());
                    }
                })
            })
            .await?;
        Ok(())
    }

    /// LVMS's deletion gates: a PVC on an lvms StorageClass, or a PV on one that retains.
    async fn gates(&self, cluster: &LVMCluster) -> Result<Option<String>, UnitError> {
        let classes = &cluster.spec.storage.device_classes;
        let names: BTreeSet<String> = classes.iter().map(|c| c.storage_class_name()).collect();
        let retain: BTreeSet<String> = classes
            .iter()
            .filter(|c| {
                c.storage_class_options
                    .as_ref()
                    .and_then(|o| o.reclaim_policy.as_ref())
                    .is_some_and(|p| matches!(p, crate::api::ReclaimPolicy::Retain))
            })
            .map(|c| c.storage_class_name())
            .collect();
        let client = self.ctx.client.clone();
        let pvcs = Api::<PersistentVolumeClaim>::all(client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| apply::unit_error("list PersistentVolumeClaims", e))?;
        let blocking: Vec<String> = pvcs
            .items
            .iter()
            .filter(|p| {
                p.spec
                    .as_ref()
                    .and_then(|s| s.storage_class_name.as_ref())
                    .is_some_and(|sc| names.contains(sc))
            })
            .map(|p| {
                format!(
                    "{}/{}",
                    p.metadata.namespace.as_deref().unwrap_or_default(),
                    p.metadata.name.as_deref().unwrap_or_default()
                )
            })
            .collect();
        if !blocking.is_empty() {
            return Ok(Some(format!(
                "LVMCluster deletion is pending: {} PersistentVolumeClaim(s) still use lvms StorageClasses ({}); delete them first",
                blocking.len(),
                blocking.join(", ")
            )));
        }
        let pvs = Api::<PersistentVolume>::all(client)
            .list(&ListParams::default())
            .await
            .map_err(|e| apply::unit_error("list PersistentVolumes", e))?;
        let retained: Vec<String> = pvs
            .items
            .iter()
            .filter(|pv| {
                pv.spec.as_ref().is_some_and(|s| {
                    // A PV without a class is on none of ours (the list itself was read above).
                    let sc = s.storage_class_name.clone().unwrap_or_default();
                    names.contains(&sc)
                        && (retain.contains(&sc)
                            || s.persistent_volume_reclaim_policy.as_deref() == Some("Retain"))
                })
            })
            .filter_map(|pv| pv.metadata.name.clone())
            .collect();
        if !retained.is_empty() {
            return Ok(Some(format!(
                "LVMCluster deletion is pending: {} PersistentVolume(s) with reclaim policy Retain remain on lvms StorageClasses ({}); delete them and their logical volumes first",
                retained.len(),
                retained.join(", ")
            )));
        }
        Ok(None)
    }

    /// The Nodes the cache holds (synced before any unit runs).
    fn node_names(&self) -> BTreeSet<String> {
        self.ctx
            .caches
            .nodes
            .state()
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect()
    }

    /// LVMS's node-removal controller: a gone node's cleanup finalizer on an LVMVolumeGroup
    /// would block its deletion forever (a day-2 class removal as much as the teardown), and
    /// its wiped-devices annotation would keep a node re-created under its name from being
    /// wiped. Each edit is a step on the LVMVolumeGroup; nothing to do costs no API call.
    async fn release_gone_nodes(&self, steps: &Steps) -> Result<(), UnitError> {
        let vgs = self.ctx.caches.volume_groups.state();
        let mut nodes = self.node_names();
        let mut edits = gone_node_edits(vgs.iter().map(AsRef::as_ref), &nodes);
        if edits.is_empty() {
            return Ok(());
        }
        // Gone from the cache is not yet seen gone: the API server says so for each.
        let api: Api<Node> = Api::all(self.ctx.client.clone());
        for n in nodes_named(&edits) {
            let found = api
                .get_metadata_opt(&n)
                .await
                .map_err(|e| apply::unit_error(&format!("get Node {n}"), e))?;
            if found.is_some() {
                nodes.insert(n);
            }
        }
        edits = gone_node_edits(vgs.iter().map(AsRef::as_ref), &nodes);
        let client = &self.ctx.client;
        for e in edits {
            let (ns, name) = (&e.target.namespace, &e.target.name);
            if !e.finalizers.is_empty() {
                let stale = e.finalizers.clone();
                let spec = StepSpec::new(e.target.clone(), ObjectAction::RemoveFinalizer)
                    .args(stale.clone());
                steps
                    .run(spec, || {
                        apply::edit_finalizers(client, Kind::VolumeGroup, ns, name, |f| {
                            f.retain(|x| !stale.contains(x))
                        })
                    })
                    .await?;
            }
            if !e.annotations.is_empty() {
                let spec = StepSpec::new(e.target.clone(), ObjectAction::RemoveAnnotation)
                    .args(e.annotations.clone());
                steps
                    .run(spec, || {
                        apply::remove_annotations(
                            client,
                            Kind::VolumeGroup,
                            ns,
                            name,
                            &e.annotations,
                        )
                    })
                    .await?;
            }
        }
        Ok(())
    }

    /// Every LogicalVolume, read from the API server (teardown only: the operator caches none).
    async fn logical_volumes(&self) -> Result<Vec<LogicalVolume>, UnitError> {
        Api::<LogicalVolume>::all(self.ctx.client.clone())
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .map_err(|e| apply::unit_error("list LogicalVolumes", e))
    }

    /// TopoLVM's `topolvm.io/node` off the Nodes whose vg-manager is gone and that hold no
    /// LogicalVolume (a journaled step each): with lvms uninstalled nothing else would remove it.
    async fn release_node_finalizers(&self, steps: &Steps) -> Result<(), UnitError> {
        let volume_nodes: BTreeSet<String> = self
            .logical_volumes()
            .await?
            .into_iter()
            .map(|lv| lv.spec.node_name)
            .collect();
        let nodes = self.ctx.caches.nodes.state();
        let client = &self.ctx.client;
        for node in node_finalizers_to_release(nodes.iter().map(AsRef::as_ref), &volume_nodes) {
            let name = node.metadata.name.clone().unwrap_or_default();
            let spec = StepSpec::new(object_ref(node), ObjectAction::RemoveFinalizer)
                .args(vec![NODE_FINALIZER.into()]);
            steps
                .run(spec, || {
                    apply::edit_finalizers(client, Kind::Node, "", &name, |f| {
                        f.retain(|x| x != NODE_FINALIZER)
                    })
                })
                .await?;
        }
        Ok(())
    }

    /// What nodes that no longer exist hold: [`Self::release_gone_nodes`], and the
    /// LogicalVolumes' finalizers (at teardown only: it lists every LogicalVolume).
    async fn strip_gone_node_finalizers(&self, steps: &Steps) -> Result<(), UnitError> {
        self.release_gone_nodes(steps).await?;
        let nodes = self.node_names();
        // LVMS: `topolvm.io/logicalvolume` on LogicalVolumes of nodes that are gone (no
        // vg-manager there will ever remove it, and DeleteVolume would wait forever).
        for lv in self.logical_volumes().await? {
            let held = lv
                .metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == LOGICAL_VOLUME_FINALIZER);
            if !held || nodes.contains(&lv.spec.node_name) {
                continue;
            }
            let name = lv.metadata.name.clone().unwrap_or_default();
            let spec = StepSpec::new(object_ref(&lv), ObjectAction::RemoveFinalizer)
                .args(vec![LOGICAL_VOLUME_FINALIZER.into()]);
            let client = &self.ctx.client;
            steps
                .run(spec, || {
                    apply::edit_finalizers(client, Kind::LogicalVolume, "", &name, |f| {
                        f.retain(|x| x != LOGICAL_VOLUME_FINALIZER)
                    })
                })
                .await?;
        }
        Ok(())
    }

    async fn vg_manager_pods(&self) -> Result<usize, UnitError> {
        let selector = vg_manager_labels()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let pods: Api<Pod> = Api::namespaced(self.ctx.client.clone(), &self.ctx.settings.namespace);
        pods.list_metadata(&ListParams::default().labels(&selector))
            .await
            .map(|l| l.items.len())
            .map_err(|e| apply::unit_error("list vg-manager pods", e))
    }

    fn registered_csi_nodes(&self) -> Vec<String> {
        self.ctx
            .caches
            .csi_nodes
            .state()
            .iter()
            .filter(|n| n.spec.drivers.iter().any(|d| d.name == CSI_DRIVER_NAME))
            .filter_map(|n| n.metadata.name.clone())
            .collect()
    }

    /// Deletes every object of `kind` in `current` (plan against nothing desired): one durable
    /// append for all the intents, the deletes side by side. True when the API server removed
    /// each at once (or it was gone), false when any is only marked and waits for its holders.
    async fn delete_all(
        &self,
        steps: &Steps,
        kind: Kind,
        cluster: &LVMCluster,
        current: Vec<serde_json::Value>,
    ) -> Result<bool, UnitError> {
        let client = &self.ctx.client;
        let removed = AtomicBool::new(true);
        let removed = &removed;
        let mut seen = seen_finalizers(&current);
        let mut batch: Vec<BatchStep<'_>> = Vec::new();
        for step in plan_holding(Vec::new(), &current, our_finalizer(kind)) {
            let Step::Delete { namespace, name } = step else {
                continue;
            };
            let spec = StepSpec::new(
                ObjectRef {
                    kind: kind.kind(),
                    namespace: namespace.clone(),
                    name: name.clone(),
                    uid: String::new(),
                    generation: cluster.metadata.generation.unwrap_or_default(),
                },
                ObjectAction::Delete,
            );
            let seen = seen.remove(&name);
            batch.push((
                spec,
                effect(move || async move {
                    let (done, fate) = delete_object(client, kind, &namespace, &name, seen).await?;
                    if !matches!(fate, apply::Fate::Deleted | apply::Fate::Gone) {
                        removed.store(false, Ordering::Relaxed);
                    }
                    Ok(done)
                }),
            ));
        }
        // Not held while the deletes run: on a large cluster it is thousands of objects.
        drop(current);
        steps
            .run_all(batch, super::objects::WRITE_CONCURRENCY)
            .await?;
        Ok(removed.load(Ordering::Relaxed))
    }

    /// Waits (at most a second) until the cache no longer holds any `kind` of the cluster,
    /// looking again at each change the watches deliver: the removals arrive within
    /// milliseconds, and a later pass must not plan on them.
    async fn seen_gone(&self, kind: Kind, cluster: &LVMCluster) -> Result<bool, UnitError> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        loop {
            let next = self.ctx.caches.changes.next_change();
            tokio::pin!(next);
            next.as_mut().enable();
            if self.ctx.current(kind, cluster)?.is_empty() {
                return Ok(true);
            }
            if tokio::time::timeout_at(deadline, next).await.is_err() {
                return Ok(false);
            }
        }
    }

    async fn teardown(&self, steps: &Steps, cluster: &LVMCluster) -> Result<Pass, UnitError> {
        self.strip_gone_node_finalizers(steps).await?;
        if let Some(why) = self.gates(cluster).await? {
            return Err(UnitError::retryable(REASON_DELETION_PENDING, why)
                .with_retry_after(Duration::from_secs(10)));
        }
        for kind in TEARDOWN {
            let current = self.ctx.current(kind, cluster)?;
            if !current.is_empty() {
                let left = current.len();
                // Removed by the API server at once (no finalizer held any) and seen gone by
                // the cache: the next kind follows in this pass. A pass per kind cost a
                // cooldown each (most of a 10-node cluster's 0.5 s teardown).
                let removed = self.delete_all(steps, kind, cluster, current).await?;
                if !removed || !self.seen_gone(kind, cluster).await? {
                    info!(kind = %kind.kind(), left, "teardown: waiting for deletion");
                    return Ok(waiting(format!(
                        "teardown: waiting for {left} {}(s) to be deleted",
                        kind.kind()
                    )));
                }
            }
            if kind == Kind::DaemonSet {
                let pods = self.vg_manager_pods().await?;
                if pods > 0 {
                    return Ok(waiting(format!(
                        "teardown: waiting for {pods} vg-manager pod(s) to go away"
                    )));
                }
                self.release_node_finalizers(steps).await?;
            }
            if kind == Kind::CsiDriver {
                let registered = self.registered_csi_nodes();
                if !registered.is_empty() {
                    return Ok(waiting(format!(
                        "teardown: waiting for kubelet to unregister {CSI_DRIVER_NAME} on {} node(s): {}",
                        registered.len(),
                        registered.join(", ")
                    )));
                }
            }
        }
        let journal = steps.journal();
        let open = journal.open_intents().map_err(UnitError::journal)?;
        let busy = writes_in_flight(&open, journal.opened_at(), Clock::system().now_ms());
        if !busy.is_empty() {
            info!(writes = ?busy, "teardown: waiting for writes in flight");
            return Ok(Pass {
                summary: format!("teardown: waiting for {} write(s) in flight", busy.len()),
                requeue_after: Some(Duration::from_millis(250)),
            });
        }
        self.edit_cluster_finalizer(steps, cluster, false).await?;
        Ok(Pass {
            summary: "teardown complete; finalizer removed".into(),
            requeue_after: None,
        })
    }
}

/// How long another unit's open apply counts as a write in flight: a client's request ends
/// well before; one older is a unit that died mid-step, which its replay closes, and must not
/// hold a teardown for good.
const IN_FLIGHT_FOR: u64 = 60_000;

/// The applies other units began in this process's life (`since`: the journal's first seq of
/// it; earlier ones are replay's) that have no outcome yet, as `unit kind/namespace/name`.
/// Teardown ends only once there are none: a create still in flight when the LVMCluster's
/// finalizer came off would land after its owner, an object that nothing deletes (the garbage
/// collector marks it deleted; a node status keeps our finalizer).
fn writes_in_flight(open: &[Record], since: Seq, now_ms: u64) -> Vec<String> {
    open.iter()
        .filter(|r| r.seq >= since && now_ms.saturating_sub(r.at_ms) < IN_FLIGHT_FOR)
        .filter_map(|r| match &r.body {
            Body::Intent(i) if i.unit != UNIT && i.action == ObjectAction::Apply.name() => {
                Some(format!("{} {}", i.unit, i.object))
            }
            _ => None,
        })
        .collect()
}

impl Unit for LifecycleUnit {
    fn name(&self) -> &str {
        UNIT
    }

    async fn reconcile(&self, steps: &Steps) -> Result<Pass, UnitError> {
        let selection = self.ctx.selection();
        if let Some(p) = &selection.primary {
            steps.begin(object_ref(p.as_ref()));
        } else if let Some(r) = selection.rejected.first() {
            steps.begin(object_ref(r.cluster.as_ref()));
        }
        for r in &selection.rejected {
            if !rejected_status_applied(r) && r.cluster.metadata.deletion_timestamp.is_none() {
                self.reject(steps, r).await?;
            }
        }
        let Some(cluster) = selection.primary else {
            return Ok(Pass {
                summary: "no LVMCluster in the operator namespace".into(),
                requeue_after: None,
            });
        };
        let has_finalizer = cluster
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == LVMCLUSTER_FINALIZER);
        if cluster.metadata.deletion_timestamp.is_some() {
            if !has_finalizer {
                return Ok(Pass {
                    summary: "LVMCluster is going away".into(),
                    requeue_after: None,
                });
            }
            return self.teardown(steps, &cluster).await;
        }
        if !has_finalizer {
            self.edit_cluster_finalizer(steps, &cluster, true).await?;
        }
        self.release_gone_nodes(steps).await?;
        Ok(Pass {
            summary: format!("reconciling {}", object_ref(cluster.as_ref())),
            requeue_after: None,
        })
    }

    /// Finalizer edits and status patches are re-read and redone by the next pass anyway;
    /// replay only has to confirm what the world shows now.
    async fn replay(&self, intent: &Intent, _steps: &Steps) -> Result<Done, UnitError> {
        // Known actions only: an unknown one is reported on the intent.
        intent
            .action_as::<ObjectAction>()
            .map_err(|e| UnitError::permanent("UnknownAction", e.to_string()))?;
        Ok(Done::replayed(Replayed::Rechecked))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent(seq: Seq, at_ms: u64, unit: &str, action: ObjectAction) -> Record {
        Record {
            seq,
            at_ms,
            trace: Default::default(),
            body: Body::Intent(Intent {
                unit: unit.into(),
                object: ObjectRef {
                    kind: "LVMVolumeGroupNodeStatus".into(),
                    namespace: "lvms".into(),
                    name: "node-a".into(),
                    ..Default::default()
                },
                action: action.name().into(),
                args: Vec::new(),
                desired_digest: String::new(),
                idempotency_key: String::new(),
                lease_epoch: 0,
                regarding: Vec::new(),
            }),
        }
    }

    #[test]
    fn only_other_units_applies_of_this_life_and_recent_hold_a_teardown() {
        let now = 1_000_000;
        let open = vec![
            // Another unit's create still in flight: held.
            intent(12, now - 2_000, "lvmvgnodestatus", ObjectAction::Apply),
            // Written by an earlier process: its replay's, not a write in flight.
            intent(3, now - 2_000, "lvmvgnodestatus", ObjectAction::Apply),
            // The lifecycle unit's own step, and a delete: not a create that could land late.
            intent(13, now, UNIT, ObjectAction::Apply),
            intent(14, now, "lvmvgnodestatus", ObjectAction::Delete),
            // Open for longer than any request lasts: a dead unit's, left to its replay.
            intent(
                15,
                now - IN_FLIGHT_FOR,
                "topolvm-storageclass",
                ObjectAction::Apply,
            ),
        ];
        assert_eq!(
            writes_in_flight(&open, 10, now),
            vec!["lvmvgnodestatus LVMVolumeGroupNodeStatus/lvms/node-a".to_string()]
        );
        assert!(writes_in_flight(&open[1..], 10, now).is_empty());
    }
}
