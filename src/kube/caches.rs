//! The WatchHub: one reflector per watched kind feeding a shared cache, and a router that
//! turns every watch event into trigger bumps of the units that depend on that kind.

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    Node, NodeCondition, NodeStatus, PersistentVolume, PersistentVolumeClaim,
};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tracing::debug;

use super::kinds::Kind;
use crate::api::{LVMCluster, LVMVolumeGroup, LVMVolumeGroupNodeStatus};
use crate::kube::discovery::Capabilities;

/// What changed in a watched object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Anything (created, deleted, its metadata edited, or a source that does not tell).
    Object,
    /// Only what another writer reports into it (a node status's spec, written by
    /// vg-manager; an LVMCluster's status, written by the status unit): its metadata (and
    /// generation) are as before.
    Report,
}

/// Wakes the units a watch source matters to; the last argument is the W3C traceparent of a
/// change that starts a trace (a new LVMCluster generation).
pub type Router = Arc<dyn Fn(Kind, Change, Option<&str>) + Send + Sync>;

/// How often each kind's cache changed other than by a report (created, deleted, metadata
/// edited, relisted). A unit that planned from a kind's metadata and finds its count as it
/// was knows that input is unchanged without reading every object again.
#[derive(Default)]
pub struct ObjectChanges {
    counts: [AtomicU64; KINDS],
    changed: tokio::sync::Notify,
}

/// One counter per [`Kind`] variant (`PersistentVolumeClaim` is the last).
const KINDS: usize = Kind::PersistentVolumeClaim as usize + 1;

impl ObjectChanges {
    pub fn get(&self, kind: Kind) -> u64 {
        self.counts[kind as usize].load(Ordering::Acquire)
    }

    /// Resolves at the next object change of any kind, once the cache holds it. Enable it
    /// before looking at the cache, so a change landing meanwhile is not missed.
    pub fn next_change(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    fn bump(&self, kind: Kind) {
        self.counts[kind as usize].fetch_add(1, Ordering::AcqRel);
        self.changed.notify_waiters();
    }
}

/// The router, counting object changes first: a pass woken by a change reads its count.
fn counting(changes: Arc<ObjectChanges>, router: Router) -> Router {
    Arc::new(move |kind, change, traceparent| {
        if change == Change::Object {
            changes.bump(kind);
        }
        router(kind, change, traceparent)
    })
}

#[derive(Clone)]
pub struct Caches {
    /// Object changes per kind, counted as the watches route them.
    pub changes: Arc<ObjectChanges>,
    pub clusters: Store<LVMCluster>,
    pub nodes: Store<Node>,
    pub node_statuses: Store<LVMVolumeGroupNodeStatus>,
    pub volume_groups: Store<LVMVolumeGroup>,
    pub daemonsets: Store<DaemonSet>,
    pub storage_classes: Store<StorageClass>,
    pub csi_drivers: Store<CSIDriver>,
    pub csi_nodes: Store<CSINode>,
    /// Every PV and PVC (LVMS's PV/PVC helpers, TopoLVM's Node cleanup pick theirs out).
    pub pvs: Store<PersistentVolume>,
    pub pvcs: Store<PersistentVolumeClaim>,
    pub snapshot_classes: Option<Store<DynamicObject>>,
    pub group_snapshot_classes: Option<Store<DynamicObject>>,
    pub sccs: Option<Store<DynamicObject>>,
}

/// The running watches; dropping it stops them.
pub struct WatchHub {
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for WatchHub {
    fn drop(&mut self) {
        self.tasks.iter().for_each(JoinHandle::abort);
    }
}

/// One watch, as data: the kind (its API scope: the cluster, or the given namespace for a
/// namespaced kind, unless `everywhere`), the field selector that narrows it, and its list page
/// size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchSpec {
    pub kind: Kind,
    pub fields: Option<String>,
    pub page_size: Option<u32>,
    /// A namespaced kind watched in every namespace (users' claims live in theirs).
    pub everywhere: bool,
}

impl WatchSpec {
    pub const fn of(kind: Kind) -> Self {
        WatchSpec {
            kind,
            fields: None,
            page_size: None,
            everywhere: false,
        }
    }

    /// Every namespace, not only the operator's.
    pub const fn everywhere(mut self) -> Self {
        self.everywhere = true;
        self
    }

    /// Only the object with this name.
    pub fn named(self, name: &str) -> Self {
        self.fields(format!("metadata.name={name}"))
    }

    pub fn fields(mut self, selector: String) -> Self {
        self.fields = Some(selector);
        self
    }

    pub const fn page_size(mut self, n: u32) -> Self {
        self.page_size = Some(n);
        self
    }

    fn config(&self) -> watcher::Config {
        let mut cfg = watcher::Config::default();
        if let Some(f) = &self.fields {
            cfg = cfg.fields(f);
        }
        if let Some(n) = self.page_size {
            cfg = cfg.page_size(n);
        }
        cfg
    }
}

/// How to reach every object of a type: in the given namespace for a namespaced type, the
/// whole cluster otherwise (the type's own scope decides, as it does for `kubectl get`).
pub trait ScopedApi<K> {
    fn api(client: Client, namespace: &str) -> Api<K>;
}

impl<K> ScopedApi<K> for k8s_openapi::NamespaceResourceScope
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    fn api(client: Client, namespace: &str) -> Api<K> {
        Api::namespaced(client, namespace)
    }
}

impl<K> ScopedApi<K> for k8s_openapi::ClusterResourceScope
where
    K: Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>,
{
    fn api(client: Client, _namespace: &str) -> Api<K> {
        Api::all(client)
    }
}

/// Starts watches from [`WatchSpec`]s, each feeding a typed cache and the router.
pub struct Watches {
    client: Client,
    namespace: String,
    router: Router,
    tasks: Vec<JoinHandle<()>>,
}

impl Watches {
    pub fn new(client: &Client, namespace: &str, router: Router) -> Self {
        Watches {
            client: client.clone(),
            namespace: namespace.to_string(),
            router,
            tasks: Vec::new(),
        }
    }

    /// The cache of one typed watch; `strip` drops what no reader needs before it is kept.
    pub fn typed<K>(&mut self, spec: &WatchSpec, strip: fn(&mut K)) -> Store<K>
    where
        K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
        K::Scope: ScopedApi<K>,
    {
        let api = if spec.everywhere {
            Api::all(self.client.clone())
        } else {
            <K::Scope as ScopedApi<K>>::api(self.client.clone(), &self.namespace)
        };
        let (store, writer) = reflector::store();
        let stream = watcher(api, spec.config())
            .default_backoff()
            .modify(strip)
            .reflect(writer);
        let (kind, router) = (spec.kind, self.router.clone());
        // A node status's spec is vg-manager's report: say so, for the units that do not
        // read it.
        self.tasks.push(if kind == Kind::NodeStatus {
            tokio::spawn(route_reports(stream, kind, router))
        } else {
            tokio::spawn(route(stream, kind, router))
        });
        store
    }

    /// The cache of a kind served only by some clusters (snapshot classes, SCCs).
    pub fn dynamic(&mut self, kind: Kind) -> Store<DynamicObject> {
        spawn_dynamic(
            &self.client,
            kind,
            kind,
            self.router.clone(),
            &mut self.tasks,
        )
    }

    /// The running watches, as a hub that stops them when dropped.
    pub fn hub(self) -> WatchHub {
        WatchHub { tasks: self.tasks }
    }
}

fn spawn_dynamic(
    client: &Client,
    kind: Kind,
    source: Kind,
    router: Router,
    tasks: &mut Vec<JoinHandle<()>>,
) -> Store<DynamicObject> {
    let ar = kind.api_resource();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let writer = reflector::store::Writer::new(ar);
    let store = writer.as_reader();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(strip_meta)
        .reflect(writer);
    tasks.push(tokio::spawn(route(stream, source, router)));
    store
}

/// The last error of each watch that is failing right now (cleared by its next event), for
/// `/readyz`: a watch the ServiceAccount may not list would otherwise only show as "caches not
/// synced".
pub fn watch_errors() -> &'static std::sync::Mutex<std::collections::BTreeMap<String, String>> {
    static ERRORS: std::sync::OnceLock<
        std::sync::Mutex<std::collections::BTreeMap<String, String>>,
    > = std::sync::OnceLock::new();
    ERRORS.get_or_init(Default::default)
}

// The watch-error map only explains a failing /readyz; a poisoned one just explains less.
fn watch_ok(source: Kind) {
    if let Ok(mut m) = watch_errors().lock()
        && !m.is_empty()
    {
        m.remove(&format!("{source:?}"));
    }
}

fn watch_failed(source: Kind, e: &dyn std::fmt::Display) {
    let text = e.to_string();
    let first = watch_errors()
        .lock()
        .map(|mut m| m.insert(format!("{source:?}"), text.clone()).is_none())
        .unwrap_or(false);
    // Said once per failing spell (a watch that recovers and fails again says it again); the
    // retries are debug. A cache that never syncs must not be silent in the log.
    match (first, watch_hint(&text)) {
        (true, WatchHint::Rbac) => {
            tracing::error!(?source, error = %text, "watch refused: the ServiceAccount lacks list/watch on this resource (see deploy/rbac)")
        }
        (true, WatchHint::OldCrd) => {
            tracing::error!(?source, error = %text, "watch refused: this resource's CRD predates lvms (no selectable field; Helm does not upgrade CRDs): apply deploy/helm/lvms/crds (docs/migrate-from-lvms.md)")
        }
        (true, WatchHint::Other) => {
            tracing::warn!(?source, error = %text, "watch failing (retrying with backoff); the caches do not sync until it works")
        }
        (false, _) => debug!(?source, error = %text, "watch error (retrying with backoff)"),
    }
}

/// What a failing watch's error points at (pure; tested).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WatchHint {
    /// The ServiceAccount may not list or watch it.
    Rbac,
    /// A field selector the stored CRD does not declare selectable (an older CRD left in place).
    OldCrd,
    Other,
}

fn watch_hint(error: &str) -> WatchHint {
    if error.contains("forbidden") {
        WatchHint::Rbac
    } else if error.contains("field label not supported") {
        WatchHint::OldCrd
    } else {
        WatchHint::Other
    }
}

/// Drive a reflector stream: every event (or error, retried with backoff) wakes the router.
async fn route<T, E: std::fmt::Display>(
    stream: impl futures::Stream<Item = Result<T, E>>,
    source: Kind,
    router: Router,
) {
    futures::pin_mut!(stream);
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(_) => {
                watch_ok(source);
                router(source, Change::Object, None)
            }
            Err(e) => watch_failed(source, &e),
        }
    }
}

/// The parts of an object's metadata its owner writes (not resourceVersion, generation or
/// managedFields), hashed: equal before and after an update means only a report changed.
fn owned_metadata_hash(meta: &ObjectMeta) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    meta.labels.hash(&mut h);
    meta.annotations.hash(&mut h);
    meta.finalizers.hash(&mut h);
    meta.deletion_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
        .hash(&mut h);
    for o in meta.owner_references.iter().flatten() {
        (&o.api_version, &o.kind, &o.name, &o.uid, o.controller).hash(&mut h);
    }
    h.finish()
}

/// What a router remembers of each object (by uid) to tell a report from any other change.
struct Seen<Key>(std::collections::HashMap<String, Key>);

impl<Key: PartialEq + Copy> Seen<Key> {
    fn new() -> Self {
        Seen(Default::default())
    }

    /// Remembers `key` for the object and says what changed: a [`Change::Report`] when an
    /// update (not a relist) left it as it was. Also returns the key seen before.
    fn note(&mut self, meta: &ObjectMeta, key: Key, initial: bool) -> (Change, Option<Key>) {
        let before = self.0.insert(meta.uid.clone().unwrap_or_default(), key);
        let change = match before {
            Some(b) if b == key && !initial => Change::Report,
            _ => Change::Object,
        };
        (change, before)
    }

    fn forget(&mut self, meta: &ObjectMeta) {
        self.0.remove(meta.uid.as_deref().unwrap_or_default());
    }
}

/// Like [`route`], telling a [`Change::Report`] (an update that left the owned metadata as it
/// was) from any other change.
async fn route_reports<K: Resource<DynamicType = ()>, E: std::fmt::Display>(
    stream: impl futures::Stream<Item = Result<watcher::Event<K>, E>>,
    source: Kind,
    router: Router,
) {
    let mut seen = Seen::new();
    futures::pin_mut!(stream);
    while let Some(ev) = stream.next().await {
        let change = match ev {
            Ok(watcher::Event::Apply(obj)) => {
                seen.note(obj.meta(), owned_metadata_hash(obj.meta()), false)
                    .0
            }
            Ok(watcher::Event::InitApply(obj)) => {
                seen.note(obj.meta(), owned_metadata_hash(obj.meta()), true)
                    .0
            }
            Ok(watcher::Event::Delete(obj)) => {
                seen.forget(obj.meta());
                Change::Object
            }
            Ok(_) => Change::Object,
            Err(e) => {
                watch_failed(source, &e);
                continue;
            }
        };
        watch_ok(source);
        router(source, change, None);
    }
}

/// Like [`route`], and each new generation of an object (a create or a spec edit) starts a
/// trace: a root span the woken passes continue, so one edit is one trace across units and
/// processes. An update that leaves the generation and the owned metadata as they were
/// changed only the status (the operator's own status writes, at 1000 nodes several per
/// second of reports): a [`Change::Report`], which wakes only the units that read the status.
async fn route_generations<K: Resource<DynamicType = ()>, E: std::fmt::Display>(
    stream: impl futures::Stream<Item = Result<watcher::Event<K>, E>>,
    source: Kind,
    router: Router,
) {
    let mut seen = Seen::new();
    futures::pin_mut!(stream);
    while let Some(ev) = stream.next().await {
        let (obj, initial) = match ev {
            Ok(watcher::Event::Apply(obj)) => (obj, false),
            Ok(watcher::Event::InitApply(obj)) => (obj, true),
            Ok(other) => {
                if let watcher::Event::Delete(obj) = &other {
                    seen.forget(obj.meta());
                }
                watch_ok(source);
                router(source, Change::Object, None);
                continue;
            }
            Err(e) => {
                watch_failed(source, &e);
                continue;
            }
        };
        watch_ok(source);
        let meta = obj.meta();
        let generation = meta.generation.unwrap_or_default();
        let (change, before) = seen.note(meta, (generation, owned_metadata_hash(meta)), initial);
        // A report, or other metadata of the same generation (a finalizer, a deletion): no
        // new trace.
        if change == Change::Report || before.is_some_and(|(g, _)| g == generation) {
            router(source, change, None);
            continue;
        }
        let kind = K::kind(&());
        let name = meta.name.clone().unwrap_or_default();
        let span = tracing::info_span!(
            parent: None,
            "change",
            otel.name = format!("{kind} {name} generation {generation}"),
            kind = %kind,
            name = %name,
            generation,
        );
        let tp = span.in_scope(crate::telemetry::otel::current_traceparent);
        router(source, Change::Object, tp.as_deref());
    }
}

/// managedFields are never read; dropping them roughly halves the cache.
pub fn strip_meta<K: Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

/// CSINodes: only the driver names matter.
fn strip_csi_node(n: &mut CSINode) {
    strip_meta(n);
    n.metadata.annotations = None;
    n.metadata.labels = None;
    n.metadata.owner_references = None;
    for d in &mut n.spec.drivers {
        d.topology_keys = None;
        d.allocatable = None;
    }
}

/// PersistentVolumeClaims, of every namespace: any user can write large annotations and
/// labels on as many claims as they like, and the operator keeps them all. The helpers read
/// only the selected-node annotation, finalizers, spec and status; the rest is dropped before
/// it is stored, so a namespace cannot fill the operator's memory through its claims.
pub fn strip_pvc(pvc: &mut PersistentVolumeClaim) {
    strip_meta(pvc);
    pvc.metadata.labels = None;
    pvc.metadata.owner_references = None;
    keep_annotations(&mut pvc.metadata, |k| {
        k == crate::api::topolvm::SELECTED_NODE_ANNOTATION
    });
}

/// Only the annotations `keep` names stay; none left is no map at all.
fn keep_annotations(meta: &mut ObjectMeta, keep: impl Fn(&str) -> bool) {
    if let Some(a) = meta.annotations.as_mut() {
        a.retain(|k, _| keep(k));
    }
    if meta.annotations.as_ref().is_some_and(|a| a.is_empty()) {
        meta.annotations = None;
    }
}

/// Nodes: only name, labels, taints, the capacity annotations vg-manager publishes (the CSI
/// controller places volumes by them), the written-off record and the Ready condition's
/// status and time (a dead node's volumes are written off by them); the rest of the status
/// (images, other conditions, heartbeats) is big.
fn strip_node(node: &mut Node) {
    strip_meta(node);
    let ready = node
        .status
        .take()
        .and_then(|s| s.conditions)
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .map(|c| NodeCondition {
            type_: c.type_,
            status: c.status,
            last_transition_time: c.last_transition_time,
            ..NodeCondition::default()
        });
    node.status = ready.map(|c| NodeStatus {
        conditions: Some(vec![c]),
        ..NodeStatus::default()
    });
    keep_annotations(&mut node.metadata, |k| {
        crate::api::topolvm::is_node_capacity_key(k)
            || k == crate::api::topolvm::WRITTEN_OFF_ANNOTATION
    });
}

impl WatchHub {
    /// Start every watch. `namespace` scopes the namespaced kinds the operator owns;
    /// LVMClusters are watched cluster-wide so misplaced ones can be reported.
    pub fn start(
        client: &Client,
        namespace: &str,
        caps: Capabilities,
        router: Router,
    ) -> (WatchHub, Caches) {
        let changes = Arc::new(ObjectChanges::default());
        let router = counting(changes.clone(), router);
        let mut w = Watches::new(client, namespace, router.clone());
        let clusters = {
            let (store, writer) = reflector::store();
            let stream = watcher(Api::<LVMCluster>::all(client.clone()), Default::default())
                .default_backoff()
                .modify(strip_meta)
                .reflect(writer);
            w.tasks.push(tokio::spawn(route_generations(
                stream,
                Kind::LvmCluster,
                router,
            )));
            store
        };
        use Kind::*;
        let caches = Caches {
            changes,
            clusters,
            // Small list pages: a page of 500 full Nodes (images, conditions) is decoded before
            // it is stripped, and the allocator keeps that peak; 50 keeps RSS flat at 1000 nodes.
            nodes: w.typed(&WatchSpec::of(Node).page_size(50), strip_node),
            node_statuses: w.typed(&WatchSpec::of(NodeStatus), strip_meta),
            volume_groups: w.typed(&WatchSpec::of(VolumeGroup), strip_meta),
            daemonsets: w.typed(&WatchSpec::of(DaemonSet).named("vg-manager"), strip_meta),
            storage_classes: w.typed(&WatchSpec::of(StorageClass), strip_meta),
            csi_drivers: w.typed(&WatchSpec::of(CsiDriver).named("topolvm.io"), strip_meta),
            csi_nodes: w.typed(&WatchSpec::of(CsiNode).page_size(100), strip_csi_node),
            pvs: w.typed(&WatchSpec::of(PersistentVolume).page_size(100), strip_meta),
            // Users' claims, in their namespaces: LVMS's and TopoLVM's claim helpers act on
            // them wherever they are (the real node tier found this watch scoped to the
            // operator's namespace, where no user claim lives).
            pvcs: w.typed(
                &WatchSpec::of(PersistentVolumeClaim)
                    .everywhere()
                    .page_size(100),
                strip_pvc,
            ),
            snapshot_classes: caps.snapshots.then(|| w.dynamic(SnapshotClass)),
            group_snapshot_classes: caps.group_snapshots.then(|| w.dynamic(GroupSnapshotClass)),
            sccs: caps.scc.then(|| w.dynamic(Scc)),
        };
        (w.hub(), caches)
    }
}

impl Caches {
    /// Wait until every cache has its first full list (units must not plan on a partial view).
    pub async fn wait_ready(&self) -> Result<(), reflector::store::WriterDropped> {
        self.clusters.wait_until_ready().await?;
        self.nodes.wait_until_ready().await?;
        self.node_statuses.wait_until_ready().await?;
        self.volume_groups.wait_until_ready().await?;
        self.daemonsets.wait_until_ready().await?;
        self.storage_classes.wait_until_ready().await?;
        self.csi_drivers.wait_until_ready().await?;
        self.csi_nodes.wait_until_ready().await?;
        self.pvs.wait_until_ready().await?;
        self.pvcs.wait_until_ready().await?;
        if let Some(s) = &self.snapshot_classes {
            s.wait_until_ready().await?;
        }
        if let Some(s) = &self.group_snapshot_classes {
            s.wait_until_ready().await?;
        }
        if let Some(s) = &self.sccs {
            s.wait_until_ready().await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_failing_watch_names_its_cause() {
        use super::{WatchHint, watch_hint};
        // The API server's words for a field selector an old CRD does not declare (seen when
        // lvms's vg-manager met LVMS 4.20's logicalvolumes.topolvm.io CRD after a swap).
        assert_eq!(
            watch_hint(
                "failed to perform initial object list: ApiError: field label not supported: spec.nodeName: BadRequest"
            ),
            WatchHint::OldCrd
        );
        assert_eq!(
            watch_hint(
                "ApiError: logicalvolumes.topolvm.io is forbidden: User \"system:serviceaccount:x:vg-manager\" cannot list"
            ),
            WatchHint::Rbac
        );
        assert_eq!(
            watch_hint("error trying to connect: connection refused"),
            WatchHint::Other
        );
    }

    #[test]
    fn a_claim_keeps_only_what_the_helpers_read() {
        use k8s_openapi::api::core::v1::PersistentVolumeClaim;
        let big = "x".repeat(256 * 1024);
        let mut pvc: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c", "namespace": "apps",
                "annotations": {"volume.kubernetes.io/selected-node": "n1", "big": big},
                "labels": {"app": big},
                "finalizers": ["kubernetes.io/pvc-protection"]},
            "spec": {"storageClassName": "lvms-vg1"},
            "status": {"phase": "Pending"}
        }))
        .unwrap();
        super::strip_pvc(&mut pvc);
        let kept = serde_json::to_string(&pvc).unwrap();
        assert!(kept.len() < 1024, "{} bytes kept", kept.len());
        let a = pvc.metadata.annotations.unwrap();
        assert_eq!(a.len(), 1);
        assert_eq!(a["volume.kubernetes.io/selected-node"], "n1");
        assert_eq!(pvc.metadata.finalizers.unwrap().len(), 1);
        assert_eq!(pvc.status.unwrap().phase.as_deref(), Some("Pending"));
    }

    #[test]
    fn a_node_keeps_its_taints_ready_condition_and_lvms_annotations_only() {
        let mut node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "w1", "annotations": {
                "capacity.topolvm.io/vg1": "1024", "lvms.topolvm.io/written-off": "{}",
                "other": "x".repeat(4096)}},
            "spec": {"taints": [{"key": "node.kubernetes.io/out-of-service", "effect": "NoExecute"}]},
            "status": {
                "conditions": [
                    {"type": "MemoryPressure", "status": "False"},
                    {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                     "message": "Kubelet stopped posting node status.",
                     "lastHeartbeatTime": "2026-11-29T11:00:00Z",
                     "lastTransitionTime": "2026-11-29T11:00:40Z"},
                ],
                "images": [{"names": ["x".repeat(4096)]}],
            }
        }))
        .unwrap();
        super::strip_node(&mut node);
        let a = node.metadata.annotations.as_ref().unwrap();
        assert_eq!(
            a.keys().collect::<Vec<_>>(),
            ["capacity.topolvm.io/vg1", "lvms.topolvm.io/written-off"]
        );
        assert_eq!(
            node.spec.as_ref().unwrap().taints.as_ref().unwrap().len(),
            1
        );
        let status = node.status.unwrap();
        assert!(status.images.is_none());
        let c = status.conditions.unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(
            (c[0].type_.as_str(), c[0].status.as_str()),
            ("Ready", "Unknown")
        );
        assert_eq!(
            c[0].last_transition_time.as_ref().unwrap().0.to_string(),
            "2026-11-29T11:00:40Z"
        );
        // A heartbeat alone leaves nothing new in the cache.
        assert!(c[0].last_heartbeat_time.is_none() && c[0].message.is_none());
    }

    use super::*;
    use crate::api::{LVMVolumeGroupNodeStatusSpec, VGStatus};

    fn status(uid: &str, finalizers: &[&str], vgs: &[&str]) -> LVMVolumeGroupNodeStatus {
        let mut s = LVMVolumeGroupNodeStatus::new(
            "n1",
            LVMVolumeGroupNodeStatusSpec {
                lvm_vg_status: vgs
                    .iter()
                    .map(|v| VGStatus {
                        name: v.to_string(),
                        ..Default::default()
                    })
                    .collect(),
            },
        );
        s.metadata.uid = Some(uid.into());
        s.metadata.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
        s
    }

    #[tokio::test]
    async fn a_spec_only_update_is_a_report_and_anything_else_is_not() {
        use watcher::Event::*;
        let seen: Arc<std::sync::Mutex<Vec<Change>>> = Arc::default();
        let router: Router = {
            let seen = seen.clone();
            Arc::new(move |_, change, _| seen.lock().unwrap().push(change))
        };
        let mut versioned = status("u1", &["f"], &["vg1"]);
        versioned.metadata.resource_version = Some("9".into());
        versioned.metadata.generation = Some(4);
        let events: Vec<Result<watcher::Event<LVMVolumeGroupNodeStatus>, String>> = vec![
            Ok(Init),
            Ok(InitApply(status("u1", &["f"], &[]))),
            Ok(InitDone),
            // vg-manager reports a VG; resourceVersion and generation move: a report.
            Ok(Apply(versioned)),
            // The finalizer is dropped: the owner's business.
            Ok(Apply(status("u1", &[], &["vg1"]))),
            // A new object under a known name (new uid): not a report.
            Ok(Apply(status("u2", &[], &["vg1"]))),
            Ok(Apply(status("u2", &[], &["vg1", "vg2"]))),
            Ok(Delete(status("u2", &[], &["vg1", "vg2"]))),
            Err("watch failed".into()),
        ];
        route_reports(futures::stream::iter(events), Kind::NodeStatus, router).await;
        use Change::*;
        assert_eq!(
            *seen.lock().unwrap(),
            [
                Object, Object, Object, Report, Object, Object, Report, Object
            ]
        );
    }

    #[test]
    fn only_object_changes_are_counted_and_before_the_units_wake() {
        let changes = Arc::new(ObjectChanges::default());
        let seen: Arc<std::sync::Mutex<Vec<u64>>> = Arc::default();
        let inner: Router = {
            let (seen, changes) = (seen.clone(), changes.clone());
            Arc::new(move |kind, _, _| seen.lock().unwrap().push(changes.get(kind)))
        };
        let router = counting(changes.clone(), inner);
        router(Kind::NodeStatus, Change::Object, None);
        router(Kind::NodeStatus, Change::Report, None);
        router(Kind::Node, Change::Object, None);
        router(Kind::NodeStatus, Change::Object, None);
        assert_eq!(changes.get(Kind::NodeStatus), 2);
        assert_eq!(changes.get(Kind::Node), 1);
        assert_eq!(changes.get(Kind::PersistentVolumeClaim), 0);
        assert_eq!(*seen.lock().unwrap(), [1, 1, 1, 2]);
    }

    fn cluster(generation: i64, finalizers: &[&str], state: &str) -> LVMCluster {
        let mut c: LVMCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "lvm.topolvm.io/v1alpha1",
            "kind": "LVMCluster",
            "metadata": {"name": "c", "namespace": "ns", "uid": "u1", "generation": generation},
            "spec": {"storage": {"deviceClasses": []}},
            "status": {"state": state},
        }))
        .unwrap();
        c.metadata.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
        c
    }

    #[tokio::test]
    async fn a_cluster_status_write_is_a_report_and_anything_else_is_not() {
        use watcher::Event::*;
        let seen: Arc<std::sync::Mutex<Vec<Change>>> = Arc::default();
        let router: Router = {
            let seen = seen.clone();
            Arc::new(move |_, change, _| seen.lock().unwrap().push(change))
        };
        let events: Vec<Result<watcher::Event<LVMCluster>, String>> = vec![
            Ok(InitApply(cluster(1, &[], "Progressing"))),
            // A relist after a restart of the watch: never a report, the units re-read.
            Ok(InitApply(cluster(1, &[], "Progressing"))),
            // The lifecycle adds its finalizer: metadata, same generation.
            Ok(Apply(cluster(1, &["f"], "Progressing"))),
            // The status unit writes the status: a report.
            Ok(Apply(cluster(1, &["f"], "Ready"))),
            // A spec edit: a new generation.
            Ok(Apply(cluster(2, &["f"], "Ready"))),
            Ok(Apply(cluster(2, &["f"], "Failed"))),
        ];
        route_generations(futures::stream::iter(events), Kind::LvmCluster, router).await;
        use Change::*;
        assert_eq!(
            *seen.lock().unwrap(),
            [Object, Object, Object, Report, Object, Report]
        );
    }
}
