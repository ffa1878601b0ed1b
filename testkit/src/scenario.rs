//! One scenario at a time (they share cluster-scoped singletons such as CSIDriver
//! topolvm.io): its namespace and directory, its `lvms operator` / `lvms vg-manager`
//! processes and journals, and the LVMCluster it works on.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::dev::operator::{NO_DM_LVM_CONFIG, OperatorOptions, OperatorProcess, VgManagerOptions};
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use lvms::api::{
    LVMCluster, LVMStateType, LVMVolumeGroup, LVMVolumeGroupNodeStatus, VGStatus, VGStatusType,
};
use serde_json::Value;

use crate::cleanup::clean_cluster_scoped;
use crate::env::{TestNs, client, env};
use crate::fixtures;
use crate::process::lvms_bin;
use crate::wait::eventually;

/// Scenarios share cluster-scoped singletons; they run one at a time. (An async mutex: the
/// guard lives across awaits, on whichever runtime the test runs; it is not poisoned by a
/// failed scenario.)
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
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
        let prefix: String = prefix
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        Self::start(TestNs::new(&prefix)).await
    }

    /// A scenario in the namespace `ns`, named before the scenario's turn came (e.g. by a guest
    /// process already waiting for it).
    pub async fn named(ns: &str) -> Self {
        Self::start(TestNs::named(ns)).await
    }

    async fn start(ns: impl std::future::Future<Output = TestNs>) -> Self {
        let guard = serial().await;
        let client = client().await;
        clean_cluster_scoped(&client).await;
        let ns = ns.await;
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
    pub fn vg_manager_as(
        &self,
        node: &str,
        kubeconfig: &Path,
        env: &[(&str, &str)],
    ) -> OperatorProcess {
        OperatorProcess::start_vg_manager(&VgManagerOptions {
            bin: lvms_bin(),
            kubeconfig: kubeconfig.to_path_buf(),
            namespace: self.ns.name.clone(),
            node: node.into(),
            dir: self.dir.join(node),
            lvm_config: NO_DM_LVM_CONFIG.into(),
            env: owned(env),
        })
        .expect("starting vg-manager")
    }

    /// A bearer token that may read `/metrics` (a ServiceAccount of the scenario bound to
    /// `lvms-metrics-reader`), as a Prometheus would hold.
    pub async fn metrics_token(&self) -> String {
        crate::metrics::token(
            &self.client,
            &self.ns.name,
            "metrics-scraper",
            Some(crate::metrics::READER_ROLE),
        )
        .await
    }

    /// [`Scenario::vg_manager_as`] with the control plane's admin kubeconfig.
    pub fn vg_manager(&self, node: &str, env: &[(&str, &str)]) -> OperatorProcess {
        self.vg_manager_as(node, &crate::env::env().cp.kubeconfig, env)
    }

    /// The journal directory of `node`'s vg-manager.
    pub fn vg_manager_journal(&self, node: &str) -> PathBuf {
        self.dir.join(node).join("journal").join("vg-manager")
    }

    /// The operator's journal directory (the default one, under `journal_dir`).
    pub fn operator_journal(&self) -> PathBuf {
        self.journal_dir.join("operator")
    }

    /// The lvmd.yaml `node`'s vg-manager writes.
    pub fn lvmd_path(&self, node: &str) -> PathBuf {
        self.dir.join(node).join("lvmd.yaml")
    }

    pub fn operator(&self, env: &[(&str, &str)], args: &[&str]) -> OperatorProcess {
        self.operator_with_journal(&self.journal_dir, env, args)
    }

    pub fn operator_with_journal(
        &self,
        journal_dir: &Path,
        env: &[(&str, &str)],
        args: &[&str],
    ) -> OperatorProcess {
        let n = std::fs::read_dir(&self.dir).map(|d| d.count()).unwrap_or(0);
        let opts = OperatorOptions {
            bin: lvms_bin(),
            kubeconfig: crate::env::env().cp.kubeconfig.clone(),
            namespace: self.ns.name.clone(),
            journal_dir: journal_dir.to_path_buf(),
            log: self.dir.join(format!("operator-{n}.log")),
            env: owned(env),
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

    /// Merge-patches the LVMCluster `name` (a deviceClasses edit replaces the whole list).
    pub async fn patch_cluster(&self, name: &str, patch: &Value) {
        self.clusters()
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("editing the LVMCluster");
    }

    /// `node`'s status entry for volume group `vg`, if written yet.
    pub async fn vg_entry(&self, node: &str, vg: &str) -> Option<VGStatus> {
        let api: Api<LVMVolumeGroupNodeStatus> =
            Api::namespaced(self.client.clone(), &self.ns.name);
        let ns = api.get_opt(node).await.ok()??;
        ns.spec.lvm_vg_status.into_iter().find(|e| e.name == vg)
    }

    /// Waits until `node`'s entry for `vg` is Ready and `pred` holds; panics with the last
    /// entry seen when it never is.
    pub async fn ready_vg_entry(
        &self,
        node: &str,
        vg: &str,
        timeout: Duration,
        pred: impl Fn(&VGStatus) -> bool,
    ) -> VGStatus {
        let got = eventually(timeout, || async {
            self.vg_entry(node, vg)
                .await
                .filter(|e| e.status == Some(VGStatusType::Ready) && pred(e))
        })
        .await;
        match got {
            Some(e) => e,
            None => panic!(
                "{node}/{vg} never Ready as expected; last: {:#?}",
                self.vg_entry(node, vg).await
            ),
        }
    }

    /// What a failed wait prints: the LVMClusters and LVMVolumeGroups as the API shows them
    /// (finalizers, deletion, state) and the last lines of every process log of the scenario,
    /// so a failure seen only in CI names what held it.
    pub async fn diagnosis(&self) -> String {
        let mut out = described(self.clusters(), "LVMCluster", |c| {
            format!(", state {:?}", c.status.as_ref().and_then(|s| s.state))
        })
        .await;
        let groups: Api<LVMVolumeGroup> = Api::namespaced(self.client.clone(), &self.ns.name);
        out.push_str(&described(groups, "LVMVolumeGroup", |_| String::new()).await);
        let statuses: Api<LVMVolumeGroupNodeStatus> =
            Api::namespaced(self.client.clone(), &self.ns.name);
        out.push_str(
            &described(statuses, "LVMVolumeGroupNodeStatus", |n| {
                format!(", uid {:?}", n.metadata.uid.as_deref().unwrap_or_default())
            })
            .await,
        );
        for log in logs_under(&self.dir) {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(40)..];
            out.push_str(&format!(
                "--- last {} lines of {}\n{}\n",
                tail.len(),
                log.display(),
                tail.join("\n")
            ));
        }
        out
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
        let body = fixtures::node_status(&self.ns.name, node, entries);
        api.patch(
            node,
            &PatchParams::apply("test-vg-manager").force(),
            &Patch::Apply(&body),
        )
        .await
        .expect("writing node status");
    }
}

/// A line per object of `api`: its name, finalizers, whether it is being deleted, and `extra`.
async fn described<K>(api: Api<K>, kind: &str, extra: impl Fn(&K) -> String) -> String
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.list(&ListParams::default()).await {
        Ok(l) => l
            .items
            .iter()
            .map(|o| {
                let m = o.meta();
                format!(
                    "{kind} {}: finalizers {:?}, deleting {}{}\n",
                    m.name.as_deref().unwrap_or_default(),
                    m.finalizers.clone().unwrap_or_default(),
                    m.deletion_timestamp.is_some(),
                    extra(o)
                )
            })
            .collect(),
        Err(e) => format!("{kind}s not listed: {e}\n"),
    }
}

/// The `*.log` files in `dir` and one level below (the operator's beside the node directories
/// that hold each vg-manager's).
fn logs_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    if let Ok(entries) = std::fs::read_dir(dir) {
        dirs.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
    }
    for d in dirs {
        if let Ok(entries) = std::fs::read_dir(&d) {
            out.extend(
                entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "log")),
            );
        }
    }
    out.sort();
    out
}
