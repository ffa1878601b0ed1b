//! The LogicalVolume actor of this node (TopoLVM's node-side LogicalVolume reconciler and
//! lvmd, as one unit): every LogicalVolume whose `spec.nodeName` is this node is driven to
//! its plan's `Done` one journaled step at a time (finalizer, lvcreate / lvcreate -s /
//! lvresize / lvchange / lvremove, status), and the node's capacity annotations follow what
//! lvm2 reports. lvm2 commands of one node run one at a time anyway, so one actor serves all
//! of the node's volumes; each step's journal object is its LogicalVolume, so
//! `lvms journal inspect --object` tells one volume's story.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::Store;
use lvms_actors::{Action, Done, Pass, StepSpec, Steps, Unit, UnitError};
use lvms_journal::{Intent, ObjectRef};
use serde_json::{Value, json};
use tracing::warn;

use super::context::{NodeCtx, cmd_err, host_err};
use crate::api::quantity::format_binary;
use crate::api::topolvm::{CREATED_BY_LABEL, NODE_FINALIZER, node_capacity_annotations};
use crate::api::{LOGICAL_VOLUME_FINALIZER, LogicalVolume};
use crate::kube::apply::unit_error;
use crate::node::lvmd_config::{LvmdConfig, LvmdDeviceClass};
use crate::node::report::{parse_lvs, parse_vgs};
use crate::node::volume::actions::VolumeAction as A;
use crate::node::volume::anticipate::anticipate;
use crate::node::volume::capacity::{self as volume_capacity, ClassObservation};
use crate::node::volume::commands as cmd;
use crate::node::volume::plan::{HostView, Plan, StatusWrite, VolumeView, plan, resolve_class};
use crate::node::volume::replay as volume_replay;
use crate::node::volume::view::{source_volume_id, view_of};
use crate::objects::object_ref;

pub const UNIT: &str = "volumes";

/// Steps one LogicalVolume may take in one pass (finalizer, create, grow, access, status):
/// more means the plan is not converging, and the next pass tries again.
const MAX_STEPS_PER_VOLUME: usize = 8;

/// Host steps a round runs back to back before the VG is read and the volumes that stepped
/// are finished: enough to make the read a small share (two commands per sixteen), few enough
/// that the first claims of a storm of hundreds are answered within the sidecars' 10 s
/// CreateVolume timeout rather than all at the end.
const MAX_HOST_STEPS_PER_ROUND: usize = 16;

/// Rounds during which volumes written after the pass began join it (32 × 16 host steps):
/// past that, they wait for the next pass, so a pass under an endless stream still ends and
/// publishes the node's capacity.
const JOINING_ROUNDS: usize = 32;

pub struct VolumesUnit {
    pub ctx: Arc<NodeCtx>,
    /// This node's LogicalVolumes (watched with `spec.nodeName=<node>`).
    pub volumes: Store<LogicalVolume>,
    /// This node's Node (its capacity annotations).
    pub nodes: Store<Node>,
    /// Host command time within the current pass (the benchmark's lvm2 vs lvms split).
    pub host_clock: super::context::HostClock,
    /// Whether this process has looked for gates a crash left suspended (once; after that
    /// only a group's pass can hold one, and it always releases).
    pub holds_checked: std::sync::atomic::AtomicBool,
}

impl VolumesUnit {
    pub fn new(ctx: Arc<NodeCtx>, volumes: Store<LogicalVolume>, nodes: Store<Node>) -> Self {
        VolumesUnit {
            ctx,
            volumes,
            nodes,
            host_clock: Default::default(),
            holds_checked: Default::default(),
        }
    }
}

/// What the planner sees of the node for `view`: its class's VG as observed and its source's
/// volume id. A VG that could not be read decides nothing (an error); an unknown class has
/// nothing on disk to look at (the planner refuses it).
pub(super) fn host_view<'a>(
    config: &'a LvmdConfig,
    observed: &'a Observed,
    view: &VolumeView,
    all: &[Arc<LogicalVolume>],
) -> Result<HostView<'a>, UnitError> {
    let class = resolve_class(config, &view.device_class).ok();
    let (lvs, vg_free): (&[_], u64) = match class.map(|c| observed.get(&c.name)) {
        Some(Some(Ok(o))) => (&o.lvs, o.vg_free),
        Some(Some(Err(e))) => return Err(e.unit_error()),
        _ => (&[], 0),
    };
    Ok(HostView {
        config: Cow::Borrowed(config),
        lvs: Cow::Borrowed(lvs),
        vg_free,
        source_volume_id: view
            .source
            .as_deref()
            .map(|s| source_volume_id(s, all.iter().map(Arc::as_ref))),
    })
}

/// Each class's observation, or why it could not be read (never "no LVs").
pub(super) type Observed = BTreeMap<String, Result<ClassObservation, VgUnreadable>>;

/// Why a class's VG could not be read: the read's error, whose message it shows.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", .0.message)]
pub(super) struct VgUnreadable(UnitError);

impl VgUnreadable {
    /// As a pass that needs the VG reports it: retryable, `VolumeGroupUnreadable`, with the
    /// read's message.
    pub(super) fn unit_error(&self) -> UnitError {
        UnitError::retryable("VolumeGroupUnreadable", self.0.message.clone())
    }
}

/// Where a volume's round ended.
enum Advanced {
    /// At its plan's end (or out of steps); `lost`: its LV is missing from disk.
    Finished { lost: bool },
    /// After a host step: its next decision waits for the VG to be read (the object as last
    /// written).
    Waiting(Box<LogicalVolume>),
}

/// One round of a pass: each class as observed, or as anticipated since its host steps
/// (`stale`: the classes to read again before any volume that stepped decides again).
struct Round {
    observed: Observed,
    stale: BTreeSet<String>,
}

/// The volumes of `all` not yet taken into this pass, appended to `pending` with a full budget.
fn join_new(
    all: &[Arc<LogicalVolume>],
    taken: &mut BTreeSet<String>,
    pending: &mut Vec<(LogicalVolume, usize)>,
) {
    for lv in all {
        let key = lv
            .metadata
            .uid
            .clone()
            .or_else(|| lv.metadata.name.clone())
            .unwrap_or_default();
        if taken.insert(key) {
            pending.push((lv.as_ref().clone(), MAX_STEPS_PER_VOLUME));
        }
    }
}

impl Round {
    /// A host step on `class` succeeded: later plans of the round see what it did.
    fn changed(
        &mut self,
        class: &LvmdDeviceClass,
        action: A,
        view: &VolumeView,
        source: Option<&str>,
    ) {
        if let Some(Ok(obs)) = self.observed.get_mut(&class.name) {
            anticipate(obs, class, action, view, source);
        }
        self.stale.insert(class.name.clone());
    }
}

impl VolumesUnit {
    fn api(&self) -> Api<LogicalVolume> {
        Api::all(self.ctx.client.clone())
    }

    /// Every host command of this actor goes through here (timed for the pass figures).
    pub(super) async fn exec(
        &self,
        argv: &[String],
    ) -> Result<super::host::HostOutput, super::host::HostError> {
        let started = std::time::Instant::now();
        let out = self.ctx.host.run(argv, &[]).await;
        self.host_clock.add(started.elapsed());
        out
    }

    async fn run_host(&self, argv: &[String]) -> Result<String, UnitError> {
        self.exec(argv).await.map(|o| o.stdout).map_err(host_err(
            argv.first().map(String::as_str).unwrap_or("command"),
        ))
    }

    /// `lvs` and `vgs` of one VG. A VG that is not there (not built yet) or a report that
    /// does not parse is an error for this class, never an empty VG.
    async fn observe_vg(&self, vg: &str) -> Result<ClassObservation, UnitError> {
        let lvs = parse_lvs(
            &self
                .run_host(&crate::node::commands::lvs(vg).map_err(cmd_err)?)
                .await?,
        )
        .map_err(|e| UnitError::retryable("LvsFailed", e.to_string()))?;
        let vgs = parse_vgs(&self.run_host(&cmd::vgs_free(vg).map_err(cmd_err)?).await?)
            .map_err(|e| UnitError::retryable("VgsFailed", e.to_string()))?;
        let vg_free = vgs
            .iter()
            .find(|r| r.vg_name == vg)
            .and_then(|r| r.vg_free)
            .ok_or_else(|| {
                UnitError::retryable("VgsFailed", format!("vgs reported no free bytes for {vg}"))
            })?;
        Ok(ClassObservation {
            vg_free,
            lvs: lvs.all().cloned().collect(),
        })
    }

    /// The class's VG read again (after a command changed it).
    pub(super) async fn refresh(&self, observed: &mut Observed, class: &str, vg: &str) {
        let fresh = self.observe_vg(vg).await.map_err(VgUnreadable);
        observed.insert(class.to_string(), fresh);
    }

    async fn observe(&self, config: &LvmdConfig) -> Observed {
        let mut out = BTreeMap::new();
        for class in &config.device_classes {
            let obs = self
                .observe_vg(&class.volume_group)
                .await
                .map_err(VgUnreadable);
            out.insert(class.name.clone(), obs);
        }
        out
    }

    fn node(&self) -> Option<Arc<Node>> {
        self.nodes
            .state()
            .into_iter()
            .find(|n| n.metadata.name.as_deref() == Some(self.ctx.node.as_str()))
    }

    pub(super) fn node_object(&self) -> ObjectRef {
        self.node()
            .map(|n| object_ref(n.as_ref()))
            .unwrap_or(ObjectRef {
                kind: "Node".into(),
                name: self.ctx.node.clone(),
                ..ObjectRef::default()
            })
    }

    /// This node's LogicalVolumes, oldest first (the watch is filtered server-side; the check here
    /// keeps a volume of another node out even if the filter were dropped).
    pub(super) fn volumes(&self) -> Vec<Arc<LogicalVolume>> {
        let mut v: Vec<_> = self
            .volumes
            .state()
            .into_iter()
            .filter(|l| l.spec.node_name == self.ctx.node)
            .collect();
        // Oldest first: in a storm the claims asked first are answered first.
        v.sort_by(|a, b| {
            let created = |l: &LogicalVolume| l.metadata.creation_timestamp.clone();
            created(a)
                .cmp(&created(b))
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        });
        v
    }

    /// One LogicalVolume as far as this round takes it: its API steps (finalizer, status) run
    /// on, its first host step ends its round (the VG is read once after every volume's step:
    /// the next round plans from that). `budget`: the steps it may still take this pass.
    async fn advance(
        &self,
        steps: &Steps,
        config: &LvmdConfig,
        round: &mut Round,
        all: &[Arc<LogicalVolume>],
        mut lv: LogicalVolume,
        budget: &mut usize,
    ) -> Result<Advanced, UnitError> {
        while *budget > 0 {
            *budget -= 1;
            let view = view_of(&lv);
            let class = resolve_class(config, &view.device_class).ok();
            let host = host_view(config, &round.observed, &view, all)?;
            let object = object_ref(&lv);
            let next = plan(&view, &host);
            let source = match host.source_volume_id {
                Some(Ok(id)) => Some(id),
                _ => None,
            };
            match next {
                Plan::Done => return Ok(Advanced::Finished { lost: false }),
                Plan::Missing(message) => {
                    warn!(volume = %view.name, %message, "volume lost from disk");
                    return Ok(Advanced::Finished { lost: true });
                }
                Plan::AddFinalizer => lv = self.add_finalizer(steps, object, &lv).await?,
                Plan::RemoveFinalizer => {
                    self.remove_finalizer(steps, object, &lv).await?;
                    return Ok(Advanced::Finished { lost: false });
                }
                Plan::Status(write) => lv = self.write_status(steps, object, &lv, write).await?,
                Plan::Host { action, argv } => {
                    let ran = self.host_step(steps, object.clone(), action, argv).await;
                    let Some(c) = class else {
                        ran?;
                        return Ok(Advanced::Waiting(Box::new(lv)));
                    };
                    let Err(e) = ran else {
                        // The other volumes of the class plan from what this step did; this
                        // one waits for the VG as lvm2 reports it.
                        round.changed(c, action, &view, source.as_deref());
                        return Ok(Advanced::Waiting(Box::new(lv)));
                    };
                    // A failure is read at once: the repair decides from lvm2's own view.
                    self.refresh(&mut round.observed, &c.name, &c.volume_group)
                        .await;
                    round.stale.remove(&c.name);
                    let handed_out = view.volume_id.is_some();
                    if !self
                        .repair_thin(
                            steps,
                            &object,
                            c,
                            &mut round.observed,
                            action,
                            &view.uid,
                            handed_out,
                            &e,
                        )
                        .await?
                    {
                        return Err(e);
                    }
                }
            }
        }
        Ok(Advanced::Finished { lost: false })
    }

    /// Every volume of the node in rounds: each round takes every unfinished volume up to its
    /// next host step, then reads each VG those steps changed once. Returns (volumes in sync,
    /// missing from disk) or the first volume's failure (the others went on).
    async fn drive_all(
        &self,
        steps: &Steps,
        config: &LvmdConfig,
        observed: Observed,
    ) -> (Observed, usize, usize, Option<UnitError>) {
        let mut all = self.volumes();
        let mut round = Round {
            observed,
            stale: BTreeSet::new(),
        };
        let (mut ok, mut missing, mut first_err) = (0usize, 0usize, None);
        let mut taken: BTreeSet<String> = BTreeSet::new();
        let mut pending: Vec<(LogicalVolume, usize)> = Vec::new();
        join_new(&all, &mut taken, &mut pending);
        let mut rounds = 0;
        while !pending.is_empty() {
            rounds += 1;
            let mut waiting = Vec::new();
            let mut steps_taken = 0;
            let mut rest = pending.into_iter();
            for (lv, mut budget) in rest.by_ref() {
                let name = lv.metadata.name.clone();
                match self
                    .advance(steps, config, &mut round, &all, lv, &mut budget)
                    .await
                {
                    Ok(Advanced::Finished { lost }) => {
                        ok += 1;
                        missing += usize::from(lost);
                    }
                    // Out of steps: the next pass tries again (the plan is not converging).
                    Ok(Advanced::Waiting(_)) if budget == 0 => ok += 1,
                    Ok(Advanced::Waiting(lv)) => {
                        waiting.push((*lv, budget));
                        steps_taken += 1;
                    }
                    // One volume's failure does not hold the others back; the pass reports it.
                    Err(e) => {
                        warn!(volume = ?name, error = %e.message, "volume step failed");
                        first_err.get_or_insert(e);
                    }
                }
                if steps_taken >= MAX_HOST_STEPS_PER_ROUND {
                    break;
                }
            }
            // The volumes that stepped go first next round (their statuses), then the rest.
            waiting.extend(rest);
            self.read_changed(config, &mut round).await;
            pending = waiting;
            // Volumes written since the pass began join it (a storm's later claims wait one
            // round, not a whole pass), for a bounded number of rounds so a pass always ends.
            if rounds < JOINING_ROUNDS {
                all = self.volumes();
                join_new(&all, &mut taken, &mut pending);
            }
        }
        (round.observed, ok, missing, first_err)
    }

    /// Each VG this round's steps changed, read once.
    async fn read_changed(&self, config: &LvmdConfig, round: &mut Round) {
        for name in std::mem::take(&mut round.stale) {
            if let Some(c) = config.device_class(&name) {
                self.refresh(&mut round.observed, &c.name, &c.volume_group)
                    .await;
            }
        }
    }

    pub(super) async fn host_step(
        &self,
        steps: &Steps,
        object: ObjectRef,
        action: A,
        argv: Vec<String>,
    ) -> Result<(), UnitError> {
        let spec = StepSpec::new(object, action).args(argv.clone());
        steps
            .run(spec, || async {
                let out = self.exec(&argv).await.map_err(host_err(action.name()))?;
                Ok(Done::default().with_fact("host_ms", out.took.as_millis().to_string()))
            })
            .await?;
        Ok(())
    }

    /// TopoLVM's finalizer, then its created-by label, in one patch guarded by the
    /// resourceVersion the cache saw (a conflict is retried by the next pass).
    async fn add_finalizer(
        &self,
        steps: &Steps,
        object: ObjectRef,
        lv: &LogicalVolume,
    ) -> Result<LogicalVolume, UnitError> {
        let name = lv.metadata.name.clone().unwrap_or_default();
        let mut finalizers = lv.metadata.finalizers.clone().unwrap_or_default();
        if !finalizers.iter().any(|f| f == LOGICAL_VOLUME_FINALIZER) {
            finalizers.push(LOGICAL_VOLUME_FINALIZER.into());
        }
        let patch = json!({"metadata": {
            "finalizers": finalizers,
            "labels": {CREATED_BY_LABEL.0: CREATED_BY_LABEL.1},
            "resourceVersion": lv.metadata.resource_version,
        }});
        let spec =
            StepSpec::new(object, A::AddFinalizer).args(vec![LOGICAL_VOLUME_FINALIZER.into()]);
        self.patch_step(steps, spec, &name, patch, false).await
    }

    async fn remove_finalizer(
        &self,
        steps: &Steps,
        object: ObjectRef,
        lv: &LogicalVolume,
    ) -> Result<(), UnitError> {
        let name = lv.metadata.name.clone().unwrap_or_default();
        let spec =
            StepSpec::new(object, A::RemoveFinalizer).args(vec![LOGICAL_VOLUME_FINALIZER.into()]);
        let client = self.ctx.client.clone();
        // The cache's finalizers guard the edit, so a delete costs one request, as TopoLVM's
        // Update from its cache does (a stale view costs the failed guard and a re-read).
        let seen = lv.metadata.finalizers.clone();
        steps
            .run(spec, || async {
                crate::kube::apply::edit_finalizers_seen(
                    &client,
                    crate::kube::kinds::Kind::LogicalVolume,
                    "",
                    &name,
                    seen.as_deref(),
                    |f| f.retain(|x| x != LOGICAL_VOLUME_FINALIZER),
                )
                .await
                .map(|(done, _)| done)
            })
            .await?;
        Ok(())
    }

    pub(super) async fn write_status(
        &self,
        steps: &Steps,
        object: ObjectRef,
        lv: &LogicalVolume,
        write: StatusWrite,
    ) -> Result<LogicalVolume, UnitError> {
        let name = lv.metadata.name.clone().unwrap_or_default();
        let (status, args) = match &write {
            StatusWrite::Ready {
                volume_id,
                current_size,
            } => (
                json!({"volumeID": volume_id, "currentSize": format_binary(*current_size), "code": null, "message": null}),
                vec![format!("ready {volume_id} {current_size}")],
            ),
            StatusWrite::Refused { code, message } => {
                // The claim's own Events say it too, but an operator reading this node's log
                // should see why its lvm2 made nothing.
                tracing::warn!(logical_volume = %name, ?code, %message, "volume refused");
                (
                    json!({"code": *code as i32, "message": message}),
                    vec![format!("refused {code:?}: {message}")],
                )
            }
        };
        let spec = StepSpec::new(object, A::WriteStatus).args(args);
        self.patch_step(steps, spec, &name, json!({ "status": status }), true)
            .await
    }

    async fn patch_step(
        &self,
        steps: &Steps,
        spec: StepSpec,
        name: &str,
        patch: Value,
        status: bool,
    ) -> Result<LogicalVolume, UnitError> {
        let api = self.api();
        let what = format!("LogicalVolume {name}");
        let written = std::sync::Mutex::new(None);
        steps
            .run(spec, || async {
                let params = PatchParams::default();
                let p = Patch::Merge(&patch);
                let obj = if status {
                    api.patch_status(name, &params, &p).await
                } else {
                    api.patch(name, &params, &p).await
                }
                .map_err(|e| unit_error(&what, e))?;
                let done = Done::resource_version(obj.metadata.resource_version.clone());
                if let Ok(mut w) = written.lock() {
                    *w = Some(obj);
                }
                Ok(done)
            })
            .await?;
        written.into_inner().ok().flatten().ok_or_else(|| {
            UnitError::retryable(
                lvms_actors::Reason::Internal,
                format!("{what}: patch returned nothing"),
            )
        })
    }

    /// The Node's capacity annotations brought to what was observed. A class whose VG could
    /// not be read keeps what the Node says for it: an unread VG is not an empty one.
    async fn publish_capacity(
        &self,
        steps: &Steps,
        config: &LvmdConfig,
        observed: &Observed,
    ) -> Result<bool, UnitError> {
        let Some(node) = self.node() else {
            return Ok(false);
        };
        // As TopoLVM's exporter: a Node being deleted is the operator's to finish, untouched.
        if node.metadata.deletion_timestamp.is_some() {
            return Ok(false);
        }
        let current = node_capacity_annotations(node.metadata.annotations.as_ref());
        let seen: BTreeMap<String, ClassObservation> = observed
            .iter()
            .filter_map(|(c, o)| o.as_ref().ok().map(|o| (c.clone(), o.clone())))
            .collect();
        // The classes whose LVMVolumeGroup asks for capacity that follows the pool's real use.
        let follow_usage: BTreeSet<String> = self
            .ctx
            .volume_groups
            .state()
            .iter()
            .filter(|vg| {
                vg.spec
                    .thin_pool_config
                    .as_ref()
                    .and_then(|t| t.capacity_follows_usage)
                    .unwrap_or(false)
            })
            .filter_map(|vg| vg.metadata.name.clone())
            .collect();
        let mut desired = volume_capacity::annotations(config, &seen, &follow_usage);
        let unread: BTreeSet<String> = config
            .device_classes
            .iter()
            .filter(|c| !seen.contains_key(&c.name))
            .flat_map(|c| {
                let names = std::iter::once(c.name.as_str()).chain(c.default.then_some(""));
                names.flat_map(|n| {
                    [
                        crate::api::topolvm::capacity_annotation(n),
                        crate::api::topolvm::pool_usage_annotation(n),
                    ]
                })
            })
            .collect();
        for k in &unread {
            if let Some(v) = current.get(k) {
                desired.insert(k.clone(), v.clone());
            }
        }
        let finalizers = node.metadata.finalizers.clone().unwrap_or_default();
        let Some(patch) = volume_capacity::with_node_finalizer(
            volume_capacity::patch(&current, &desired),
            &finalizers,
            node.metadata.resource_version.as_deref(),
        ) else {
            return Ok(false);
        };
        let mut args: Vec<String> = desired.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if !finalizers.iter().any(|f| f == NODE_FINALIZER) {
            args.push(format!("finalizer {NODE_FINALIZER}"));
        }
        self.patch_node(steps, &node, args, &patch).await?;
        Ok(true)
    }

    /// Removes this Node's capacity and pool-usage annotations (a journaled step), when it has
    /// any. The node finalizer stays: it is the operator's to take off a deleted Node.
    async fn clear_capacity(&self, steps: &Steps) -> Result<(), UnitError> {
        let Some(node) = self.node() else {
            return Ok(());
        };
        if node.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let current = node_capacity_annotations(node.metadata.annotations.as_ref());
        let Some(patch) = volume_capacity::patch(&current, &BTreeMap::new()) else {
            return Ok(());
        };
        let args: Vec<String> = current.keys().map(|k| format!("{k} removed")).collect();
        self.patch_node(steps, &node, args, &patch).await
    }

    /// At a stop, once the units are down: with no device class left here (no lvmd.yaml), the
    /// Node's capacity annotations go now. A pass does the same, but an uninstall can stop
    /// vg-manager between the last class's removal and that pass.
    pub async fn clear_capacity_without_class(&self, steps: &Steps) -> Result<(), UnitError> {
        if self.ctx.read_lvmd()?.is_some() {
            return Ok(());
        }
        self.clear_capacity(steps).await
    }

    /// The Node's capacity patch, as a journaled `annotate-capacity` step saying `args`.
    async fn patch_node(
        &self,
        steps: &Steps,
        node: &Node,
        args: Vec<String>,
        patch: &serde_json::Value,
    ) -> Result<(), UnitError> {
        let spec = StepSpec::new(object_ref(node), A::AnnotateCapacity).args(args);
        let api: Api<Node> = Api::all(self.ctx.client.clone());
        let name = self.ctx.node.clone();
        steps
            .run(spec, || async {
                api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .map(|n| Done::resource_version(n.metadata.resource_version))
                    .map_err(|e| unit_error(&format!("capacity annotations of Node {name}"), e))
            })
            .await?;
        Ok(())
    }

    /// One pass: every volume of this node to its plan's end, then the capacity annotations.
    async fn pass(&self, steps: &Steps) -> Result<Pass, UnitError> {
        steps.begin(self.node_object());
        // Volume steps carry their own story; a pass is not news.
        steps.quiet();
        let requeue = Some(self.ctx.reconcile_interval);
        let Some(config) = self.ctx.read_lvmd()? else {
            // No class here (none yet, or the last one was removed): the Node says no
            // capacity either, or a controller would still place volumes on a VG now gone.
            self.clear_capacity(steps).await?;
            return Ok(Pass {
                summary: "no lvmd.yaml: no device class on this node".into(),
                requeue_after: requeue,
            });
        };
        self.thaw_once(steps, &config).await?;
        let mut observed = self.observe(&config).await;
        let mut first_err = None;
        // Volume group snapshots first (their members wait for them), then every volume: the
        // members of a group just taken are finished (access, status) in this pass too.
        if let Err(e) = self.groups(steps, &config, &mut observed).await {
            first_err.get_or_insert(e);
        }
        let (observed, ok, missing, failed) = self.drive_all(steps, &config, observed).await;
        if let Some(e) = failed {
            first_err.get_or_insert(e);
        }
        self.publish_capacity(steps, &config, &observed).await?;
        if let Some(e) = first_err {
            return Err(e);
        }
        Ok(Pass {
            summary: format!("{ok} logical volumes in sync, {missing} missing from disk"),
            requeue_after: requeue,
        })
    }
}

impl Unit for VolumesUnit {
    fn name(&self) -> &str {
        UNIT
    }

    async fn reconcile(&self, steps: &Steps) -> Result<Pass, UnitError> {
        self.host_clock.reset();
        let started = std::time::Instant::now();
        let result = self.pass(steps).await;
        let took = started.elapsed();
        let (host, commands) = self.host_clock.read();
        // The split the CSI benchmark reports: lvm2 vs lvms itself (journal, API, decisions).
        tracing::debug!(
            took_us = took.as_micros() as u64,
            host_us = host.as_micros() as u64,
            lvms_us = took.saturating_sub(host).as_micros() as u64,
            host_commands = commands,
            ok = result.is_ok(),
            "volumes pass"
        );
        result
    }

    /// lvm2 first: an lvcreate that happened is adopted by the next pass, never repeated.
    async fn replay(&self, intent: &Intent, _steps: &Steps) -> Result<Done, UnitError> {
        let action = intent
            .action_as::<A>()
            .map_err(|e| UnitError::permanent("UnknownAction", e.to_string()))?;
        let host_step = matches!(
            action,
            A::Lvcreate | A::LvcreateSnapshot | A::Lvresize | A::Lvremove
        );
        if !host_step {
            return Ok(Done::replayed(volume_replay::verdict(action, &[], "", &[])));
        }
        let vg = volume_replay::vg_of(&intent.args).ok_or_else(|| {
            UnitError::permanent(
                "UnreadableIntent",
                format!("no volume group in {:?}", intent.args),
            )
        })?;
        // A hold a crash left (thawed by the first pass, after replay) would make an lvm2 scan
        // wait on the suspended gates: this one skips them.
        let argv = crate::node::volume::group_plan::under_hold(
            crate::node::commands::lvs(vg).map_err(cmd_err)?,
        );
        let lvs = parse_lvs(&self.run_host(&argv).await?)
            .map_err(|e| UnitError::retryable("LvsFailed", e.to_string()))?;
        let lvs: Vec<_> = lvs.all().cloned().collect();
        let verdict = volume_replay::verdict(action, &intent.args, &intent.object.uid, &lvs);
        Ok(Done::replayed(verdict))
    }
}
