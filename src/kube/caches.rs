//! The WatchHub: one reflector per watched kind feeding a shared cache, and a router that
//! turns every watch event into trigger bumps of the units that depend on that kind.

use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass};
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

/// Wakes the units a watch source matters to; the second argument is the W3C traceparent of
/// a change that starts a trace (a new LVMCluster generation).
pub type Router = Arc<dyn Fn(Kind, Option<&str>) + Send + Sync>;

#[derive(Clone)]
pub struct Caches {
    pub clusters: Store<LVMCluster>,
    pub nodes: Store<Node>,
    pub node_statuses: Store<LVMVolumeGroupNodeStatus>,
    pub volume_groups: Store<LVMVolumeGroup>,
    pub daemonsets: Store<DaemonSet>,
    pub storage_classes: Store<StorageClass>,
    pub csi_drivers: Store<CSIDriver>,
    pub csi_nodes: Store<CSINode>,
    pub snapshot_classes: Option<Store<DynamicObject>>,
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

pub(crate) fn spawn_typed<K>(
    api: Api<K>,
    cfg: watcher::Config,
    source: Kind,
    router: Router,
    strip: fn(&mut K),
    tasks: &mut Vec<JoinHandle<()>>,
) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let stream = watcher(api, cfg)
        .default_backoff()
        .modify(strip)
        .reflect(writer);
    tasks.push(tokio::spawn(route(stream, source, router)));
    store
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
    if first && text.contains("forbidden") {
        tracing::error!(?source, error = %text, "watch refused: the ServiceAccount lacks list/watch on this resource (see deploy/rbac)");
    } else {
        debug!(?source, error = %text, "watch error (retrying with backoff)");
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
                router(source, None)
            }
            Err(e) => watch_failed(source, &e),
        }
    }
}

/// Like [`route`], and each new generation of an object (a create or a spec edit) starts a
/// trace: a root span the woken passes continue, so one edit is one trace across units and
/// processes.
async fn route_generations<K: Resource<DynamicType = ()>, E: std::fmt::Display>(
    stream: impl futures::Stream<Item = Result<watcher::Event<K>, E>>,
    source: Kind,
    router: Router,
) {
    let mut seen: std::collections::HashMap<String, i64> = Default::default();
    futures::pin_mut!(stream);
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) => {
                watch_ok(source);
                let meta = obj.meta();
                // Trace naming only (the router is woken either way).
                let generation = meta.generation.unwrap_or_default();
                let uid = meta.uid.clone().unwrap_or_default();
                if seen.insert(uid, generation) == Some(generation) {
                    router(source, None);
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
                router(source, tp.as_deref());
            }
            Ok(_) => {
                watch_ok(source);
                router(source, None)
            }
            Err(e) => watch_failed(source, &e),
        }
    }
}

/// managedFields are never read; dropping them roughly halves the cache.
pub(crate) fn strip_meta<K: Resource>(obj: &mut K) {
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

/// Nodes: only name, labels and taints matter; their status (images, conditions) is big.
fn strip_node(node: &mut Node) {
    strip_meta(node);
    node.status = None;
    node.metadata.annotations = None;
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
        let mut tasks = Vec::new();
        let c = client.clone();
        let all = watcher::Config::default();
        let r = || router.clone();
        let caches = Caches {
            clusters: {
                let (store, writer) = reflector::store();
                let stream = watcher(Api::<LVMCluster>::all(c.clone()), all.clone())
                    .default_backoff()
                    .modify(strip_meta)
                    .reflect(writer);
                tasks.push(tokio::spawn(route_generations(
                    stream,
                    Kind::LvmCluster,
                    r(),
                )));
                store
            },
            // Small list pages: a page of 500 full Nodes (images, conditions) is decoded before
            // it is stripped, and the allocator keeps that peak; 50 keeps RSS flat at 1000 nodes.
            nodes: spawn_typed(
                Api::all(c.clone()),
                all.clone().page_size(50),
                Kind::Node,
                r(),
                strip_node,
                &mut tasks,
            ),
            node_statuses: spawn_typed(
                Api::namespaced(c.clone(), namespace),
                all.clone(),
                Kind::NodeStatus,
                r(),
                strip_meta,
                &mut tasks,
            ),
            volume_groups: spawn_typed(
                Api::namespaced(c.clone(), namespace),
                all.clone(),
                Kind::VolumeGroup,
                r(),
                strip_meta,
                &mut tasks,
            ),
            daemonsets: spawn_typed(
                Api::namespaced(c.clone(), namespace),
                all.clone().fields("metadata.name=vg-manager"),
                Kind::DaemonSet,
                r(),
                strip_meta,
                &mut tasks,
            ),
            storage_classes: spawn_typed(
                Api::all(c.clone()),
                all.clone(),
                Kind::StorageClass,
                r(),
                strip_meta,
                &mut tasks,
            ),
            csi_drivers: spawn_typed(
                Api::all(c.clone()),
                all.clone().fields("metadata.name=topolvm.io"),
                Kind::CsiDriver,
                r(),
                strip_meta,
                &mut tasks,
            ),
            csi_nodes: spawn_typed(
                Api::all(c.clone()),
                all.clone().page_size(100),
                Kind::CsiNode,
                r(),
                strip_csi_node,
                &mut tasks,
            ),
            snapshot_classes: caps.snapshots.then(|| {
                spawn_dynamic(
                    client,
                    Kind::SnapshotClass,
                    Kind::SnapshotClass,
                    r(),
                    &mut tasks,
                )
            }),
            sccs: caps
                .scc
                .then(|| spawn_dynamic(client, Kind::Scc, Kind::Scc, r(), &mut tasks)),
        };
        (WatchHub { tasks }, caches)
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
        if let Some(s) = &self.snapshot_classes {
            s.wait_until_ready().await?;
        }
        if let Some(s) = &self.sccs {
            s.wait_until_ready().await?;
        }
        Ok(())
    }
}
