//! The object units (csi-driver, vg-manager, lvm-volume-groups, node-statuses,
//! storage-classes, volume-snapshot-classes, openshift-scc): desired → plan → one journaled
//! server-side apply or delete per step.

use std::sync::Arc;

use lvms_actors::{BatchStep, Done, Pass, Replayed, StepSpec, Steps, Unit, UnitError, effect};
use lvms_journal::{Intent, ObjectRef};
use serde_json::Value;
use tracing::info;

use super::desired_values::desired_values;
use crate::api::{LVMCluster, NODE_STATUS_FINALIZER};
use crate::kube::apply;
use crate::kube::kinds::Kind;
use crate::operator::actions::ObjectAction;
use crate::operator::context::{Ctx, object_ref};
use crate::operator::desired::daemonset::daemonset_ready;
use crate::operator::desired::node_statuses;
use crate::operator::nodes::valid_nodes_for_any_class;
use crate::operator::plan::{Step, plan_holding};

/// The node-status unit's error when a node is left out for a not-ready taint.
pub const REASON_NODE_SELECTION: &str = "NodeSelectionFailed";

pub struct ObjectsUnit {
    name: &'static str,
    kind: Kind,
    ctx: Arc<Ctx>,
    /// Node statuses only (the one kind with an object per node): the last pass that found
    /// everything in place and wrote nothing.
    settled: std::sync::Mutex<Option<Settled>>,
}

/// A node-status pass that wrote nothing: its inputs key, its selection key (see
/// `node_statuses::selection_key`) and its summary.
#[derive(Clone)]
struct Settled {
    inputs: u64,
    selection: u64,
    summary: String,
}

/// Hands this step's trace to vg-manager: the LVMVolumeGroup it is about to change carries
/// the W3C traceparent (outside the desired digest, so it never causes an apply itself).
fn with_traceparent(object: &mut serde_json::Value) {
    if let Some(tp) = crate::telemetry::otel::current_traceparent()
        && let Some(meta) = object.get_mut("metadata").and_then(|m| m.as_object_mut())
    {
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| serde_json::json!({}));
        if let Some(a) = annotations.as_object_mut() {
            a.insert(
                crate::telemetry::otel::TRACEPARENT_ANNOTATION.into(),
                serde_json::Value::String(tp),
            );
        }
    }
}

fn target(kind: Kind, namespace: &str, name: &str, cluster: &LVMCluster) -> ObjectRef {
    ObjectRef {
        kind: kind.kind(),
        namespace: namespace.to_string(),
        name: name.to_string(),
        uid: String::new(),
        generation: cluster.metadata.generation.unwrap_or_default(),
    }
}

/// Delete an object the operator owns. A node status keeps a delete-protection finalizer that
/// the operator itself must drop first; `seen` is its finalizers as the cache last saw them, if
/// at hand, so that needs no read first.
/// The finalizer of ours a kind's objects carry, which only we take off (a node status's
/// delete protection): [`delete_object`] drops it, and a plan lets an object that someone else
/// marked deleted go with it.
pub fn our_finalizer(kind: Kind) -> Option<&'static str> {
    (kind == Kind::NodeStatus).then_some(NODE_STATUS_FINALIZER)
}

pub async fn delete_object(
    client: &kube::Client,
    kind: Kind,
    namespace: &str,
    name: &str,
    seen: Option<Vec<String>>,
) -> Result<(Done, apply::Fate), UnitError> {
    if let Some(ours) = our_finalizer(kind) {
        let edited =
            apply::edit_finalizers_seen(client, kind, namespace, name, seen.as_deref(), |f| {
                f.retain(|x| x != ours)
            })
            .await?;
        // Already marked deleted (by someone else): dropping the finalizer finished it.
        if matches!(edited.1, apply::Fate::Deleting | apply::Fate::Gone) {
            return Ok(edited);
        }
    }
    apply::delete(client, kind, namespace, name).await
}

/// The finalizers of the objects in `current` (cache JSON), by name.
pub fn seen_finalizers(current: &[Value]) -> std::collections::HashMap<String, Vec<String>> {
    current
        .iter()
        .filter_map(|v| {
            let meta = v.get("metadata")?;
            let finalizers = meta
                .get("finalizers")
                .and_then(Value::as_array)
                .map(|f| {
                    f.iter()
                        .filter_map(|x| Some(x.as_str()?.to_owned()))
                        .collect()
                })
                .unwrap_or_default();
            Some((meta.get("name")?.as_str()?.to_owned(), finalizers))
        })
        .collect()
}

/// Object writes a unit keeps in flight at once (client-go's default QPS is 5 with bursts of
/// 10; the API server's max-in-flight is 400: 8 keeps a pass quick without crowding others).
pub(crate) const WRITE_CONCURRENCY: usize = 16;

/// The node-status unit's keys for one pass (all `None` for the other kinds: a handful of
/// objects each, planned in microseconds), over one snapshot of the Nodes and the node
/// statuses' change count taken before the pass reads anything else.
struct PassKeys<'a> {
    cluster: &'a LVMCluster,
    namespace: &'a str,
    nodes: Vec<Arc<k8s_openapi::api::core::v1::Node>>,
    statuses_changed: u64,
    inputs: Option<u64>,
    selection: std::sync::OnceLock<u64>,
}

impl<'a> PassKeys<'a> {
    fn new(unit: &'a ObjectsUnit, cluster: &'a LVMCluster) -> Self {
        let node_statuses = unit.kind == Kind::NodeStatus;
        let statuses_changed = unit.ctx.caches.changes.get(Kind::NodeStatus);
        let nodes = if node_statuses {
            unit.ctx.caches.nodes.state()
        } else {
            Vec::new()
        };
        let namespace = unit.ctx.settings.namespace.as_str();
        let inputs = node_statuses
            .then(|| node_statuses::inputs_key(cluster, namespace, &nodes, statuses_changed))
            .flatten();
        PassKeys {
            cluster,
            namespace,
            nodes,
            statuses_changed,
            inputs,
            selection: std::sync::OnceLock::new(),
        }
    }

    /// The selection key, computed once and only when needed (it selects over every Node).
    fn selection(&self) -> Option<u64> {
        self.inputs?;
        Some(*self.selection.get_or_init(|| {
            node_statuses::selection_key(
                self.cluster,
                self.namespace,
                &valid_nodes_for_any_class(self.cluster, &self.nodes),
                self.statuses_changed,
            )
        }))
    }
}

impl ObjectsUnit {
    pub fn new(name: &'static str, kind: Kind, ctx: Arc<Ctx>) -> Self {
        ObjectsUnit {
            name,
            kind,
            ctx,
            settled: std::sync::Mutex::new(None),
        }
    }

    /// The settled summary if this pass's plan equals the last settled one's: the same inputs,
    /// or (inputs moved) the same selection, in which case the new inputs key settles too.
    /// Both keys are computed from one snapshot of the Nodes.
    fn settled_summary(&self, keys: &PassKeys<'_>) -> Option<String> {
        let last = self.settled.lock().ok()?.clone()?;
        if last.inputs == keys.inputs? {
            return Some(last.summary);
        }
        if last.selection != keys.selection()? {
            return None;
        }
        if let Ok(mut settled) = self.settled.lock() {
            *settled = Some(Settled {
                inputs: keys.inputs?,
                ..last.clone()
            });
        }
        Some(last.summary)
    }

    async fn delete(
        &self,
        namespace: &str,
        name: &str,
        seen: Option<Vec<String>>,
    ) -> Result<Done, UnitError> {
        delete_object(&self.ctx.client, self.kind, namespace, name, seen)
            .await
            .map(|(done, _)| done)
    }

    /// Wait conditions that are not errors of the unit itself but keep it from being done.
    fn readiness(&self, cluster: &LVMCluster) -> Result<(), UnitError> {
        // As LVMS's node-status unit: the valid nodes got their statuses, and a node left out
        // for an untolerated not-ready taint (or a selector that does not parse) fails the
        // unit, so ResourcesAvailable says which node holds the cluster back.
        if self.kind == Kind::NodeStatus {
            let world = self.ctx.world();
            let errors = valid_nodes_for_any_class(cluster, &world.nodes).errors;
            if !errors.is_empty() {
                return Err(UnitError::retryable(
                    REASON_NODE_SELECTION,
                    errors.join("; "),
                ));
            }
        }
        if self.kind == Kind::DaemonSet {
            let ready = self
                .ctx
                .caches
                .daemonsets
                .state()
                .iter()
                .all(|ds| daemonset_ready(ds));
            if !ready {
                return Err(UnitError::retryable(
                    "VGManagerNotReady",
                    "DaemonSet vg-manager is not ready yet: not every scheduled pod is updated and ready",
                ));
            }
        }
        Ok(())
    }
}

impl Unit for ObjectsUnit {
    fn name(&self) -> &str {
        self.name
    }

    async fn reconcile(&self, steps: &Steps) -> Result<Pass, UnitError> {
        let Some(cluster) = self.ctx.primary() else {
            return Ok(Pass {
                summary: "no LVMCluster to reconcile".into(),
                requeue_after: None,
            });
        };
        if cluster.metadata.deletion_timestamp.is_some() {
            return Ok(Pass {
                summary: "LVMCluster is being deleted".into(),
                requeue_after: None,
            });
        }
        steps.begin(object_ref(cluster.as_ref()));
        // Read before the caches the pass plans from, so a change that lands meanwhile makes
        // the keys stale, never the plan.
        let keys = PassKeys::new(self, &cluster);
        if let Some(summary) = self.settled_summary(&keys) {
            return Ok(Pass {
                summary,
                requeue_after: None,
            });
        }
        let world = self.ctx.world();
        let desired = desired_values(self.kind, &cluster, &world)
            .map_err(|m| UnitError::permanent("InvalidDesiredState", m))?;
        let wanted = desired.len();
        let current = self.ctx.current(self.kind, &cluster)?;
        // The objects of one kind are independent: their intents go to the journal in one
        // durable append and the writes run side by side (a few at a time, as a client
        // should), instead of one fsync and one round trip after another.
        let mut seen = seen_finalizers(&current);
        let mut batch: Vec<BatchStep<'_>> = Vec::new();
        for step in plan_holding(desired, &current, our_finalizer(self.kind)) {
            match step {
                Step::Apply {
                    namespace,
                    name,
                    object,
                    digest,
                    why,
                } => {
                    info!(unit = self.name, %name, why, "apply");
                    let spec = StepSpec::new(
                        target(self.kind, &namespace, &name, &cluster),
                        ObjectAction::Apply,
                    )
                    .digest(digest);
                    let client = &self.ctx.client;
                    let kind = self.kind;
                    batch.push((
                        spec,
                        effect(move || async move {
                            let mut object = object;
                            if kind == Kind::VolumeGroup {
                                with_traceparent(&mut object);
                            }
                            // Node statuses: one per node, a fixed set of owned fields.
                            if kind == Kind::NodeStatus && why == "create" {
                                apply::create_or_apply(client, kind, &object).await
                            } else {
                                apply::apply(client, kind, &object).await
                            }
                        }),
                    ));
                }
                Step::Delete { namespace, name } => {
                    info!(unit = self.name, %name, "delete (no longer desired)");
                    let spec = StepSpec::new(
                        target(self.kind, &namespace, &name, &cluster),
                        ObjectAction::Delete,
                    );
                    let seen = seen.remove(&name);
                    batch.push((
                        spec,
                        effect(move || async move { self.delete(&namespace, &name, seen).await }),
                    ));
                }
            }
        }
        // Not held while the writes run: on a large cluster it is thousands of objects.
        drop(current);
        let wrote = !batch.is_empty();
        steps.run_all(batch, WRITE_CONCURRENCY).await?;
        self.readiness(&cluster)?;
        // Stable text: a pass that changes nothing must not look like news to the journal.
        let summary = format!("{wanted} {} in sync", self.kind.kind());
        // Only a pass that wrote nothing settles: its writes' own watch events are yet to come.
        if !wrote
            && let (Some(inputs), Some(selection)) = (keys.inputs, keys.selection())
            && let Ok(mut settled) = self.settled.lock()
        {
            *settled = Some(Settled {
                inputs,
                selection,
                summary: summary.clone(),
            });
        }
        Ok(Pass {
            summary,
            requeue_after: None,
        })
    }

    /// An open apply is re-applied only if it is still desired and not yet in place; an open
    /// delete is finished only if the object still exists and is still undesired.
    async fn replay(&self, intent: &Intent, _steps: &Steps) -> Result<Done, UnitError> {
        let action = intent
            .action_as::<ObjectAction>()
            .map_err(|e| UnitError::permanent("UnknownAction", e.to_string()))?;
        let o = &intent.object;
        let current = apply::get(&self.ctx.client, self.kind, &o.namespace, &o.name).await?;
        // Desired objects that cannot be computed are an error, never "not desired": that
        // would finish an open delete of an object that is still wanted.
        let desired = match self.ctx.primary() {
            Some(c) => {
                let world = self.ctx.world();
                let mut objs = desired_values(self.kind, &c, &world)
                    .map_err(|m| UnitError::permanent("InvalidDesiredState", m))?;
                objs.retain(|v| v["metadata"]["name"].as_str() == Some(o.name.as_str()));
                objs.pop()
            }
            None => None,
        };
        let note = Done::replayed;
        match (action, desired, current) {
            (ObjectAction::Apply, Some(mut want), cur) => {
                let digest = crate::operator::plan::stamp(&mut want);
                let in_place = cur.as_ref().is_some_and(|c| {
                    serde_json::to_value(c).is_ok_and(|cv| {
                        crate::operator::plan::contains(&cv, &want)
                            && cv["metadata"]["annotations"]
                                [crate::operator::plan::DIGEST_ANNOTATION]
                                == Value::String(digest.clone())
                    })
                });
                if in_place {
                    Ok(note(Replayed::AlreadyDone))
                } else {
                    apply::apply(&self.ctx.client, self.kind, &want).await?;
                    Ok(note(Replayed::Redone))
                }
            }
            (ObjectAction::Apply, None, _) => Ok(note(Replayed::Superseded)),
            (ObjectAction::Delete, Some(_), _) => Ok(note(Replayed::Superseded)),
            (ObjectAction::Delete, None, None) => Ok(note(Replayed::AlreadyDone)),
            (ObjectAction::Delete, None, Some(_)) => {
                self.delete(&o.namespace, &o.name, None).await?;
                Ok(note(Replayed::Redone))
            }
            (other, _, _) => Err(UnitError::permanent(
                "UnknownAction",
                format!("unit {} never journals {other:?}", self.name),
            )),
        }
    }
}
