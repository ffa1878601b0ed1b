//! The phases an operator benchmark drives against a real API server, for any operator that
//! speaks LVMS's API (lvms's own, or LVMS's Go operator side by side): the Nodes as kubelets
//! register them, one LVMCluster, its convergence, additionalLabels edits, every vg-manager's
//! report, and the teardown with the kubelets' part. The driver acts for every absent peer
//! (kubelets, vg-managers); what the operator under test does is only observed.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ObjectList, PartialObjectMeta};
use kube::runtime::wait::await_condition;
use kube::{Client, ResourceExt};
use lvms::api::{
    CONDITION_RESOURCES_AVAILABLE, LVMCLUSTER_FINALIZER, LVMCluster, LVMStateType, LVMVolumeGroup,
    LVMVolumeGroupNodeStatus,
};
use serde_json::{Value, json};

use super::{BoxError, Result};
use crate::fixtures::{self, csi_node, lvm_cluster, node_status, volume_group, with_topology_keys};

/// The LVMCluster every phase works on.
pub const CLUSTER: &str = "bench";
/// How long any one phase may take before it is reported as not converging.
pub const TIMEOUT: Duration = Duration::from_secs(300);
/// Polling interval where a phase polls (small objects only).
const POLL: Duration = Duration::from_millis(20);
/// Writes in flight at once while this driver acts as many kubelets or vg-managers.
const CONCURRENCY: usize = 32;

/// What a phase needs of the process it measures: whether it still runs (a phase stops
/// waiting once it has died).
pub trait Measured {
    fn running(&self) -> bool;
}

impl Measured for crate::dev::operator::OperatorProcess {
    fn running(&self) -> bool {
        self.rss_kib().is_some()
    }
}

/// `classes` device classes vg1..vgN on their own loop devices; vg1 is the default.
pub fn cluster(classes: usize) -> Value {
    let device_classes: Vec<Value> = (1..=classes)
        .map(|k| {
            json!({
                "name": format!("vg{k}"),
                "default": k == 1,
                "deviceSelector": {"paths": [format!("/dev/loop{}", 9 + k)]},
                "thinPoolConfig": {"name": "thin-pool-1", "overprovisionRatio": 10},
            })
        })
        .collect();
    lvm_cluster(CLUSTER, Value::from(device_classes))
}

/// Creates the LVMCluster with `classes` thin classes ([`cluster`]).
pub async fn create_cluster(client: &Client, ns: &str, classes: usize) -> Result<()> {
    Api::<LVMCluster>::namespaced(client.clone(), ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(cluster(classes))?,
        )
        .await?;
    Ok(())
}

/// The API server's first write of a custom resource kind costs ~2 s (done once per API
/// server process, long before an operator runs in a real cluster). A dry-run create of each
/// kind written here pays it before anything is timed.
pub async fn warm_up(client: &Client, ns: &str, classes: usize) -> Result<Duration> {
    let dry = PostParams {
        dry_run: true,
        field_manager: None,
    };
    let t = Instant::now();
    Api::<LVMCluster>::namespaced(client.clone(), ns)
        .create(&dry, &serde_json::from_value(cluster(classes))?)
        .await?;
    Api::<LVMVolumeGroup>::namespaced(client.clone(), ns)
        .create(
            &dry,
            &serde_json::from_value(volume_group(
                "warm-up",
                json!({"deviceSelector": {"paths": ["/dev/loop10"]}}),
            ))?,
        )
        .await?;
    Api::<LVMVolumeGroupNodeStatus>::namespaced(client.clone(), ns)
        .create(
            &dry,
            &serde_json::from_value(node_status(ns, "warm-up", json!([])))?,
        )
        .await?;
    Ok(t.elapsed())
}

/// Node `node-<i>`: as a kubelet registers it (~7 KB as served), or with a name and one label
/// only under `LVMS_BENCH_BARE_NODES=1`.
fn node(i: usize) -> Node {
    if std::env::var("LVMS_BENCH_BARE_NODES").is_ok_and(|v| v == "1") {
        return fixtures::node(&format!("node-{i}"));
    }
    fixtures::kubelet_node(i)
}

/// Creates `node-0..n` and their CSINodes listing topolvm.io, as their kubelets would.
pub async fn create_nodes(client: &Client, n: usize) -> Result<()> {
    let nodes = Api::<Node>::all(client.clone());
    let csi_nodes = Api::<CSINode>::all(client.clone());
    futures::stream::iter(0..n)
        .map(|i| {
            let (nodes, csi_nodes) = (nodes.clone(), csi_nodes.clone());
            async move {
                let node = node(i);
                let name = node.name_any();
                nodes.create(&PostParams::default(), &node).await?;
                // Admission (TaintNodesByCondition) taints every new Node not-ready; the node
                // lifecycle controller lifts it once kubelet reports Ready. Do its part.
                let ready = json!({"spec": {"taints": []}});
                nodes
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&ready))
                    .await?;
                let csi = with_topology_keys(csi_node(&name, true));
                csi_nodes.create(&PostParams::default(), &csi).await?;
                Ok::<_, BoxError>(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<()>()
        .await
}

/// The milestones [`converge`] waits for, in the order it reports them.
pub const MILESTONES: [&str; 7] = [
    "finalizer",
    "CSIDriver",
    "DaemonSet",
    "LVMVolumeGroups",
    "StorageClasses",
    "NodeStatuses",
    "ResourcesAvailable",
];

/// Polls until every object exists and ResourcesAvailable=True; returns when each of
/// [`MILESTONES`] was first seen, relative to `t0`. A satisfied milestone is not polled again.
pub async fn converge(
    client: &Client,
    ns: &str,
    op: &dyn Measured,
    classes: usize,
    nodes: usize,
    t0: Instant,
) -> Result<Vec<(&'static str, Duration)>> {
    let lp = ListParams::default();
    let clusters = Api::<LVMCluster>::namespaced(client.clone(), ns);
    let drivers = Api::<CSIDriver>::all(client.clone());
    let daemonsets = Api::<DaemonSet>::namespaced(client.clone(), ns);
    let vgs = Api::<LVMVolumeGroup>::namespaced(client.clone(), ns);
    let statuses = Api::<LVMVolumeGroupNodeStatus>::namespaced(client.clone(), ns);
    let scs = Api::<StorageClass>::all(client.clone());
    let want_vgs: BTreeSet<String> = (1..=classes).map(|k| format!("vg{k}")).collect();
    let want_scs: BTreeSet<String> = want_vgs.iter().map(|v| format!("lvms-{v}")).collect();
    let want_nodes: BTreeSet<String> = (0..nodes).map(|i| format!("node-{i}")).collect();

    let mut seen: [Option<Duration>; 7] = [None; 7];
    loop {
        let now = t0.elapsed();
        if (seen[0].is_none() || seen[6].is_none())
            && let Some(c) = clusters.get_opt(CLUSTER).await?
        {
            if seen[0].is_none() && c.finalizers().iter().any(|f| f == LVMCLUSTER_FINALIZER) {
                seen[0] = Some(now);
            }
            let available = c.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|k| k.type_ == CONDITION_RESOURCES_AVAILABLE && k.status == "True")
            });
            if seen[6].is_none() && available {
                seen[6] = Some(now);
            }
        }
        if seen[1].is_none() && drivers.get_metadata_opt("topolvm.io").await?.is_some() {
            seen[1] = Some(now);
        }
        if seen[2].is_none() && daemonsets.get_metadata_opt("vg-manager").await?.is_some() {
            seen[2] = Some(now);
        }
        if seen[3].is_none() && want_vgs.is_subset(&names(vgs.list_metadata(&lp).await?)) {
            seen[3] = Some(now);
        }
        if seen[4].is_none() && want_scs.is_subset(&names(scs.list_metadata(&lp).await?)) {
            seen[4] = Some(now);
        }
        if seen[5].is_none() {
            // One item and the remaining count first: listing 1000 names every 20 ms would
            // load the API server the operator is being measured against.
            let page = statuses
                .list_metadata(&ListParams::default().limit(1))
                .await?;
            let count =
                page.items.len() as u64 + page.metadata.remaining_item_count.unwrap_or(0) as u64;
            if count >= nodes as u64
                && want_nodes.is_subset(&names(statuses.list_metadata(&lp).await?))
            {
                seen[5] = Some(now);
            }
        }
        if seen.iter().all(Option::is_some) {
            return Ok(MILESTONES
                .iter()
                .zip(seen)
                .map(|(n, d)| (*n, d.unwrap_or_default()))
                .collect());
        }
        if !op.running() || t0.elapsed() > TIMEOUT {
            let pending: Vec<&str> = MILESTONES
                .iter()
                .zip(seen)
                .filter(|(_, s)| s.is_none())
                .map(|(n, _)| *n)
                .collect();
            let status = clusters
                .get_opt(CLUSTER)
                .await?
                .and_then(|c| c.status)
                .map(|s| format!("{:?}", s.conditions))
                .unwrap_or_default();
            return Err(format!(
                "no convergence after {:?}; pending {pending:?}; conditions {status}",
                t0.elapsed()
            )
            .into());
        }
        tokio::time::sleep(POLL).await;
    }
}

fn names<K: kube::Resource + Clone>(list: ObjectList<PartialObjectMeta<K>>) -> BTreeSet<String> {
    list.items.iter().map(|o| o.name_any()).collect()
}

/// A single-change edit of the LVMCluster and the object it must reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edit {
    /// The first class's `storageClassOptions.additionalLabels` → its StorageClass's labels
    /// (a field LVMS 4.20 does not have).
    StorageClassLabels,
    /// `spec.tolerations` → the vg-manager DaemonSet's pod template (LVMS and lvms both).
    Tolerations,
}

/// Timed edits: each until its object carried the new value, and how much of that was the
/// edit's own PATCH round trip (the part no operator can shorten).
#[derive(Debug, Default, Clone)]
pub struct EditTimes {
    pub reached: Vec<Duration>,
    pub patch: Vec<Duration>,
}

/// The time from `edit` until its object carries the new value (polled every 2 ms), `count`
/// times with 1 s of quiet before each. `tag` makes the values unique across calls.
pub async fn edit_latency(
    client: &Client,
    ns: &str,
    edit: Edit,
    tag: &str,
    count: usize,
) -> Result<EditTimes> {
    let clusters = Api::<LVMCluster>::namespaced(client.clone(), ns);
    let scs = Api::<StorageClass>::all(client.clone());
    let daemonsets = Api::<DaemonSet>::namespaced(client.clone(), ns);
    let mut out = EditTimes::default();
    for n in 1..=count {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let value = format!("{tag}{n}");
        let patch = match edit {
            Edit::StorageClassLabels => {
                // A merge patch replaces the whole list: read it first, outside the timed part.
                let mut dcs = serde_json::to_value(clusters.get(CLUSTER).await?)?["spec"]
                    ["storage"]["deviceClasses"]
                    .take();
                dcs[0]["storageClassOptions"]["additionalLabels"] = json!({"bench-edit": value});
                json!({"spec": {"storage": {"deviceClasses": dcs}}})
            }
            Edit::Tolerations => json!({"spec": {"tolerations": [{
                "key": "bench-edit", "operator": "Equal", "value": value, "effect": "NoSchedule",
            }]}}),
        };
        let t = Instant::now();
        clusters
            .patch(CLUSTER, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        out.patch.push(t.elapsed());
        loop {
            let reached = match edit {
                Edit::StorageClassLabels => {
                    scs.get("lvms-vg1").await?.labels().get("bench-edit") == Some(&value)
                }
                Edit::Tolerations => daemonsets
                    .get("vg-manager")
                    .await?
                    .spec
                    .and_then(|s| s.template.spec)
                    .and_then(|s| s.tolerations)
                    .is_some_and(|ts| {
                        ts.iter().any(|t| {
                            t.key.as_deref() == Some("bench-edit")
                                && t.value.as_deref() == Some(value.as_str())
                        })
                    }),
            };
            if reached {
                break;
            }
            if t.elapsed() > TIMEOUT {
                return Err(format!("{edit:?} edit {value} never reached its object").into());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        out.reached.push(t.elapsed());
    }
    Ok(out)
}

/// Acts as vg-manager on every node: each writes a Ready VGStatus per class into its node
/// status. Returns how long the writes took and when the LVMCluster was Ready with every
/// node listed per class (None if not within [`TIMEOUT`]), both from the first write.
pub async fn report_ready(
    client: &Client,
    ns: &str,
    classes: usize,
    nodes: usize,
) -> Result<(Duration, Option<Duration>)> {
    let statuses = Api::<LVMVolumeGroupNodeStatus>::namespaced(client.clone(), ns);
    let clusters = Api::<LVMCluster>::namespaced(client.clone(), ns);
    let entries: Vec<Value> = (1..=classes)
        .map(|k| {
            json!({"name": format!("vg{k}"), "status": "Ready",
                   "devices": [format!("/dev/loop{}", 9 + k)],
                   "deviceDiscoveryPolicy": "Preconfigured"})
        })
        .collect();
    let t = Instant::now();
    futures::stream::iter(0..nodes)
        .map(|i| {
            let (statuses, entries) = (statuses.clone(), &entries);
            async move {
                let name = format!("node-{i}");
                let body = node_status(ns, &name, Value::from(entries.clone()));
                statuses
                    .patch(
                        &name,
                        &PatchParams::apply("vg-manager"),
                        &Patch::Apply(&body),
                    )
                    .await?;
                Ok::<_, BoxError>(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<()>()
        .await?;
    let writes = t.elapsed();
    let ready = |c: Option<&LVMCluster>| {
        c.and_then(|c| c.status.as_ref()).is_some_and(|s| {
            s.state == Some(LVMStateType::Ready)
                && s.device_class_statuses
                    .iter()
                    .map(|c| c.node_status.len())
                    .sum::<usize>()
                    == classes * nodes
        })
    };
    let ready = watch_until(clusters, ready).await?.then(|| t.elapsed());
    Ok((writes, ready))
}

/// Watches the LVMCluster until `cond` holds (true) or [`TIMEOUT`] passes (false). Its status
/// lists every node (~0.5 MB at 1000 nodes × 3 classes): a watch gets each change once, where
/// polling made the API server encode the whole object again at every read.
pub async fn watch_until(
    clusters: Api<LVMCluster>,
    cond: impl Fn(Option<&LVMCluster>) -> bool,
) -> Result<bool> {
    match tokio::time::timeout(TIMEOUT, await_condition(clusters, CLUSTER, cond)).await {
        Ok(done) => done.map(|_| true).map_err(Into::into),
        Err(_) => Ok(false),
    }
}

/// How long deleting the LVMCluster took until it was gone.
pub struct Teardown {
    pub total: Duration,
    /// Of `total`: this driver acting as every node's kubelet (unregistering the plugin).
    pub kubelets: Duration,
}

/// Deletes the LVMCluster and waits until the operator has torn everything down and dropped
/// the finalizer (None if it is still there after the timeout). The operator waits for kubelet
/// to unregister topolvm.io once vg-manager is gone, so this driver does that for every node
/// when the DaemonSet disappears.
pub async fn teardown(client: &Client, ns: &str, nodes: usize) -> Result<Option<Teardown>> {
    teardown_within(client, ns, nodes, TIMEOUT).await
}

/// [`teardown`], giving up after `limit`.
pub async fn teardown_within(
    client: &Client,
    ns: &str,
    nodes: usize,
    limit: Duration,
) -> Result<Option<Teardown>> {
    let clusters = Api::<LVMCluster>::namespaced(client.clone(), ns);
    let daemonsets = Api::<DaemonSet>::namespaced(client.clone(), ns);
    let t = Instant::now();
    clusters.delete(CLUSTER, &DeleteParams::default()).await?;
    // Watched, not polled: the observer's reads must not cost the API server what it measures.
    let kubelets = async {
        await_condition(daemonsets, "vg-manager", |d: Option<&DaemonSet>| {
            d.is_none()
        })
        .await?;
        let k = Instant::now();
        unregister_plugins(client, nodes).await?;
        Ok::<_, BoxError>(k.elapsed())
    };
    let gone = async {
        await_condition(clusters, CLUSTER, |c: Option<&LVMCluster>| c.is_none()).await?;
        Ok::<_, BoxError>(t.elapsed())
    };
    match tokio::time::timeout(limit, futures::future::try_join(kubelets, gone)).await {
        Ok(done) => {
            let (kubelets, total) = done?;
            Ok(Some(Teardown { total, kubelets }))
        }
        Err(_) => Ok(None),
    }
}

async fn unregister_plugins(client: &Client, n: usize) -> Result<()> {
    let csi_nodes = Api::<CSINode>::all(client.clone());
    let none = json!({"spec": {"drivers": []}});
    futures::stream::iter(0..n)
        .map(|i| {
            let (csi_nodes, none) = (csi_nodes.clone(), &none);
            async move {
                csi_nodes
                    .patch(
                        &format!("node-{i}"),
                        &PatchParams::default(),
                        &Patch::Merge(none),
                    )
                    .await?;
                Ok::<_, BoxError>(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<()>()
        .await
}

/// A field of `/proc/<pid>/status` in KiB (`VmRSS:`, `VmHWM:`, `RssAnon:`…).
pub fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}
