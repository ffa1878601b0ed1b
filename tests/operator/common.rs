//! Shared scenario plumbing: a serial lock, nodes and CSINodes, the operator process, and
//! assertions on Events and the journal.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use lvms::api::{LVMCluster, LVMStateType, LVMVolumeGroupNodeStatus};
use lvms::dev::operator::{OperatorOptions, OperatorProcess};
use serde_json::{Value, json};

use crate::support::{TestNs, client, env, eventually};

/// Scenarios share cluster-scoped singletons; they run one at a time. (An async mutex: the
/// guard lives across awaits, on whichever runtime the test runs; it is not poisoned by a
/// failed scenario.)
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

pub struct Scenario {
    pub ns: TestNs,
    pub client: Client,
    pub journal_dir: PathBuf,
    pub dir: PathBuf,
    _guard: tokio::sync::MutexGuard<'static, ()>,
}

impl Scenario {
    pub async fn new(prefix: &str) -> Self {
        let guard = serial().await;
        let client = client().await;
        clean_cluster_scoped(&client).await;
        let prefix: String = prefix
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let ns = TestNs::new(&prefix).await;
        let dir = env().cp.dir.join("scenarios").join(&ns.name);
        std::fs::create_dir_all(&dir).expect("scenario dir");
        Scenario {
            journal_dir: dir.join("journal"),
            dir,
            client,
            ns,
            _guard: guard,
        }
    }

    /// `lvms vg-manager` for `node` on this machine's lvm2 (activation off), authenticated by
    /// `kubeconfig`; its journal, lvmd.yaml, lock and log under `<scenario>/<node>/`.
    // Used by the vgmanager, tracing and deploy tests, not by the operator's own.
    #[allow(dead_code)]
    pub fn vg_manager_as(
        &self,
        node: &str,
        kubeconfig: &std::path::Path,
        env: &[(&str, &str)],
    ) -> OperatorProcess {
        OperatorProcess::start_vg_manager(&lvms::dev::operator::VgManagerOptions {
            bin: env!("CARGO_BIN_EXE_lvms").into(),
            kubeconfig: kubeconfig.to_path_buf(),
            namespace: self.ns.name.clone(),
            node: node.into(),
            dir: self.dir.join(node),
            lvm_config: lvms::dev::operator::NO_DM_LVM_CONFIG.into(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        })
        .expect("starting vg-manager")
    }

    pub fn operator(&self, env: &[(&str, &str)], args: &[&str]) -> OperatorProcess {
        self.operator_with_journal(&self.journal_dir, env, args)
    }

    pub fn operator_with_journal(
        &self,
        journal_dir: &std::path::Path,
        env: &[(&str, &str)],
        args: &[&str],
    ) -> OperatorProcess {
        let n = std::fs::read_dir(&self.dir).map(|d| d.count()).unwrap_or(0);
        let opts = OperatorOptions {
            bin: PathBuf::from(env!("CARGO_BIN_EXE_lvms")),
            kubeconfig: crate::support::env().cp.kubeconfig.clone(),
            namespace: self.ns.name.clone(),
            journal_dir: journal_dir.to_path_buf(),
            log: self.dir.join(format!("operator-{n}.log")),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            args: args
                .iter()
                .map(|a| a.to_string())
                .chain(["--debounce".into(), "20ms".into()])
                .collect(),
        };
        OperatorProcess::start(&opts).expect("starting lvms operator")
    }

    pub fn clusters(&self) -> Api<LVMCluster> {
        Api::namespaced(self.client.clone(), &self.ns.name)
    }

    pub async fn create_cluster(&self, yaml_or_json: Value) -> LVMCluster {
        let c: LVMCluster = serde_json::from_value(yaml_or_json).expect("LVMCluster");
        self.clusters()
            .create(&PostParams::default(), &c)
            .await
            .expect("creating LVMCluster")
    }

    pub async fn cluster(&self, name: &str) -> Option<LVMCluster> {
        self.clusters().get_opt(name).await.expect("get LVMCluster")
    }

    pub async fn wait_state(
        &self,
        name: &str,
        state: LVMStateType,
        timeout: Duration,
    ) -> LVMCluster {
        let got = eventually(timeout, || async {
            self.cluster(name)
                .await
                .filter(|c| c.status.as_ref().and_then(|s| s.state) == Some(state))
        })
        .await;
        match got {
            Some(c) => c,
            None => {
                let last = self.cluster(name).await.and_then(|c| c.status);
                panic!("LVMCluster {name} never reached {state:?}; last status: {last:#?}")
            }
        }
    }

    pub async fn events(&self) -> Vec<Event> {
        Api::<Event>::namespaced(self.client.clone(), &self.ns.name)
            .list(&ListParams::default())
            .await
            .expect("events")
            .items
    }

    /// Write this node's VGStatus entries (what vg-manager would do).
    pub async fn set_node_status(&self, node: &str, entries: Value) {
        let api: Api<LVMVolumeGroupNodeStatus> =
            Api::namespaced(self.client.clone(), &self.ns.name);
        let body = json!({
            "apiVersion": "lvm.topolvm.io/v1alpha1", "kind": "LVMVolumeGroupNodeStatus",
            "metadata": {"name": node, "namespace": self.ns.name},
            "spec": {"nodeStatus": entries},
        });
        api.patch(
            node,
            &PatchParams::apply("test-vg-manager").force(),
            &Patch::Apply(&body),
        )
        .await
        .expect("writing node status");
    }
}

/// Two sample clusters: the README's two-class sample, in the scenario namespace.
pub fn two_classes(name: &str) -> Value {
    json!({
        "apiVersion": "lvm.topolvm.io/v1alpha1", "kind": "LVMCluster",
        "metadata": {"name": name},
        "spec": {"storage": {"deviceClasses": [
            {"name": "fast", "default": true,
             "deviceSelector": {"paths": ["/dev/loop10"]},
             "thinPoolConfig": {"name": "thin-pool-1", "overprovisionRatio": 5},
             "storageClassOptions": {"additionalLabels": {"tier": "fast"}}},
            {"name": "bulk",
             "deviceSelector": {"paths": ["/dev/loop11"], "optionalPaths": ["/dev/loop12"]},
             "storageClassOptions": {"reclaimPolicy": "Retain", "volumeBindingMode": "Immediate"}}
        ]}}
    })
}

pub fn thin(name: &str) -> Value {
    json!({
        "apiVersion": "lvm.topolvm.io/v1alpha1", "kind": "LVMCluster",
        "metadata": {"name": name},
        "spec": {"storage": {"deviceClasses": [
            {"name": "vg1", "default": true,
             "deviceSelector": {"paths": ["/dev/loop10"]},
             "thinPoolConfig": {"name": "thin-pool-1", "overprovisionRatio": 10}}
        ]}}
    })
}

/// Nodes (cluster-scoped): `taint` adds an untolerated NoSchedule taint.
pub async fn create_node(client: &Client, name: &str, taint: bool) {
    let mut node = json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}});
    if taint {
        node["spec"] =
            json!({"taints": [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]});
    }
    let taints = node["spec"]["taints"].clone();
    let node: Node = serde_json::from_value(node).expect("node");
    let api = Api::<Node>::all(client.clone());
    api.create(&PostParams::default(), &node)
        .await
        .expect("creating node");
    // The TaintNodesByCondition admission plugin marks a new node not-ready; kubelet would
    // clear that once the node is up. There is no kubelet here, so do it for it.
    let clear = json!({"spec": {"taints": if taints.is_null() { json!([]) } else { taints }}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&clear))
        .await
        .expect("clearing the not-ready taint");
}

/// What kubelet does when vg-manager's node plugin registers (or unregisters).
pub async fn register_csi_node(client: &Client, node: &str, registered: bool) {
    let drivers = if registered {
        json!([{"name": "topolvm.io", "nodeID": node}])
    } else {
        json!([])
    };
    let body = json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
        "metadata": {"name": node}, "spec": {"drivers": drivers}});
    Api::<CSINode>::all(client.clone())
        .patch(
            node,
            &PatchParams::apply("test-kubelet").force(),
            &Patch::Apply(&body),
        )
        .await
        .expect("CSINode");
}

async fn strip_and_delete<K>(api: Api<K>)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let lp = ListParams::default();
    let unfinalize = json!({"metadata": {"finalizers": null}});
    for o in api.list_metadata(&lp).await.expect("list").items {
        let ns = o.namespace().unwrap_or_default();
        let api: Api<K> = Api::namespaced(api.clone().into_client(), &ns);
        let _ = api
            .patch(
                &o.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&unfinalize),
            )
            .await;
        let _ = api.delete(&o.name_any(), &DeleteParams::default()).await;
    }
}

/// Leftovers of an earlier scenario (finalizers stripped so nothing hangs, and no stray
/// LVMCluster elsewhere for the next operator to report).
pub async fn clean_cluster_scoped(client: &Client) {
    let dp = DeleteParams::default();
    let lp = ListParams::default();
    strip_and_delete(Api::<LVMCluster>::all(client.clone())).await;
    strip_and_delete(Api::<lvms::api::LVMVolumeGroup>::all(client.clone())).await;
    strip_and_delete(Api::<LVMVolumeGroupNodeStatus>::all(client.clone())).await;
    for n in Api::<Node>::all(client.clone())
        .list_metadata(&lp)
        .await
        .expect("nodes")
        .items
    {
        let _ = Api::<Node>::all(client.clone())
            .delete(&n.name_any(), &dp)
            .await;
    }
    for n in Api::<CSINode>::all(client.clone())
        .list_metadata(&lp)
        .await
        .expect("csinodes")
        .items
    {
        let _ = Api::<CSINode>::all(client.clone())
            .delete(&n.name_any(), &dp)
            .await;
    }
    for sc in Api::<StorageClass>::all(client.clone())
        .list_metadata(&lp)
        .await
        .expect("scs")
        .items
    {
        let _ = Api::<StorageClass>::all(client.clone())
            .delete(&sc.name_any(), &dp)
            .await;
    }
    let _ = Api::<CSIDriver>::all(client.clone())
        .delete("topolvm.io", &dp)
        .await;
}

/// No two Event objects for the same (object, reason, note): repeats are a series.
pub fn assert_no_duplicate_events(events: &[Event]) {
    let mut seen: BTreeMap<(String, String, String), String> = BTreeMap::new();
    for e in events {
        let key = (
            e.regarding
                .as_ref()
                .and_then(|r| r.uid.clone())
                .unwrap_or_default(),
            e.reason.clone().unwrap_or_default(),
            e.note.clone().unwrap_or_default(),
        );
        if let Some(other) = seen.insert(key.clone(), e.name_any()) {
            panic!("duplicate Events {other} and {} for {key:?}", e.name_any());
        }
    }
}

pub fn open_intents(journal_dir: &std::path::Path) -> usize {
    let j = lvms_journal::Journal::open_copy(journal_dir.join("operator")).expect("journal copy");
    j.open_intents().expect("open intents").len()
}
