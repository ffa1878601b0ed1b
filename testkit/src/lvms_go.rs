//! LVMS's own operator (openshift/lvm-operator, Go) as a plain process against a dev control
//! plane, for side-by-side benchmarks (`benches/versus.rs`). Built from its Go module by
//! `deploy/dev/build-lvms-go.sh` into the test-binaries cache; never part of the product.
//!
//! Outside a cluster it needs what its Deployment would give it: `NAMESPACE`, a Pod named by
//! `NAME` whose container `manager` names the image (it copies it into the vg-manager
//! DaemonSet), webhook serving certificates under `$TMPDIR/k8s-webhook-server/serving-certs`,
//! and its CSI socket directory `/run/topolvm`. Its probe, pprof (9099), webhook (9443) ports
//! and the socket path are fixed by LVMS, so one runs at a time.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::dev::Lifetime;
use crate::dev::pki::Pki;
use crate::dev::process::{free_port, spawn, terminate_child};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::bench::Result;
use crate::bench::phases::{Measured, proc_status_kib};
use crate::process::tail;

/// The LVMS release built and compared against.
pub const VERSION: &str = "v4.20.0";
/// The Pod LVMS reads its own image from.
const POD: &str = "lvms-operator";
/// LVMS's CSI controller socket (a constant in LVMS, not a flag).
const CSI_SOCKET_DIR: &str = "/run/topolvm";

/// `$LVMS_GO_BIN`, else `<test-bins cache>/lvms-go-<VERSION>/bin/lvms`; an error saying how to
/// build it when it is missing.
pub fn bin() -> Result<PathBuf> {
    let path = std::env::var_os("LVMS_GO_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            crate::dev::control_plane::test_bins_cache()
                .join(format!("lvms-go-{VERSION}"))
                .join("bin")
                .join("lvms")
        });
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "LVMS's operator is missing at {}: build it with deploy/dev/build-lvms-go.sh (Go >= 1.24 and the Go module proxy; ~3 min), or point LVMS_GO_BIN at an `lvms` binary of openshift/lvm-operator {VERSION}",
            path.display()
        )
        .into())
    }
}

/// LVMS's install tree (its `config/`, kept beside the binary by build-lvms-go.sh).
pub fn config_dir() -> Result<PathBuf> {
    let bin = bin()?;
    let dir = bin
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("config"))
        .unwrap_or_default();
    if dir.join("default").is_dir() {
        Ok(dir)
    } else {
        Err(format!(
            "LVMS's install tree is missing at {}: deploy/dev/build-lvms-go.sh keeps it beside the binary (remove {} to rebuild it)",
            dir.display(),
            bin.display()
        )
        .into())
    }
}

/// LVMS's image on the real node (deploy/dev/build-images.sh with `LVMS_GO_BIN`).
pub fn image() -> String {
    format!("localhost/lvms-go:{VERSION}")
}

/// A running LVMS operator.
pub struct LvmsGo {
    child: Child,
    pub log: PathBuf,
    probe: u16,
}

impl LvmsGo {
    /// Creates its Pod object and certificates in `dir`, then starts `bin operator` watching
    /// `ns`. Returns once the process runs (not once it is ready: see [`LvmsGo::ready`]).
    pub async fn start(
        client: &Client,
        bin: &Path,
        kubeconfig: &Path,
        ns: &str,
        dir: &Path,
    ) -> Result<Self> {
        owned_pod(client, ns).await?;

        let tmp = dir.join("tmp");
        let certs = tmp.join("k8s-webhook-server").join("serving-certs");
        let pki = Pki::create(&dir.join("pki"))?;
        std::fs::create_dir_all(&certs)?;
        std::fs::copy(pki.serving_cert(), certs.join("tls.crt"))?;
        std::fs::copy(pki.serving_key(), certs.join("tls.key"))?;
        std::fs::create_dir_all(CSI_SOCKET_DIR).map_err(|e| {
            format!("LVMS needs {CSI_SOCKET_DIR} for its CSI socket (run as root): {e}")
        })?;

        let probe = free_port()?;
        let diagnostics = free_port()?;
        let mut cmd = Command::new(bin);
        cmd.arg("operator")
            .arg(format!("--health-probe-bind-address=127.0.0.1:{probe}"))
            .arg(format!("--diagnostics-address=127.0.0.1:{diagnostics}"))
            .env("KUBECONFIG", kubeconfig)
            .env("NAMESPACE", ns)
            .env("NAME", POD)
            .env("TMPDIR", &tmp);
        let log = dir.join("lvms-go.log");
        let child = spawn(cmd, &log, Lifetime::DieWithParent)?;
        Ok(LvmsGo { child, log, probe })
    }

    /// Polls its `/readyz` every `poll` until 200; an error with its log's tail if it exits
    /// or `timeout` passes first.
    pub async fn wait_ready(&self, poll: Duration, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if matches!(
                crate::dev::jaeger::http_get(self.probe, "/readyz"),
                Ok((200, _))
            ) {
                return Ok(());
            }
            if !self.running() || Instant::now() > deadline {
                return Err(format!("LVMS not ready; {}", self.log_tail()).into());
            }
            tokio::time::sleep(poll).await;
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn rss_kib(&self) -> Option<u64> {
        proc_status_kib(self.child.id(), "VmRSS:")
    }

    /// "LVMS log PATH:" and its last 30 lines, for a failure message.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        format!("LVMS log {}:\n{}", self.log.display(), tail(&text, 30))
    }
}

/// Pod `POD` owned by a ReplicaSet owned by a Deployment, as its Deployment makes it: LVMS
/// reads its image from the Pod and walks two owners up to own its CSIStorageCapacity objects.
/// No controller runs for them (no kube-controller-manager): they are only read.
async fn owned_pod(client: &Client, ns: &str) -> Result<()> {
    let labels = json!({"app": POD});
    let template = json!({
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "manager", "image": "localhost/lvms-go:bench"}]},
    });
    let owner = |kind: &str, uid: Option<String>| {
        json!([{"apiVersion": "apps/v1", "kind": kind, "name": POD, "uid": uid,
                "controller": true, "blockOwnerDeletion": true}])
    };
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": POD, "namespace": ns},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": template},
    }))?;
    let deployment = Api::<Deployment>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &deployment)
        .await?;
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": POD, "namespace": ns,
                     "ownerReferences": owner("Deployment", deployment.metadata.uid)},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": template},
    }))?;
    let rs = Api::<ReplicaSet>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &rs)
        .await?;
    let mut pod = template;
    pod["metadata"]["name"] = json!(POD);
    pod["metadata"]["ownerReferences"] = owner("ReplicaSet", rs.metadata.uid);
    let pod: Pod = serde_json::from_value(pod)?;
    Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await?;
    Ok(())
}

impl Measured for LvmsGo {
    fn running(&self) -> bool {
        self.rss_kib().is_some()
    }
}

impl Drop for LvmsGo {
    fn drop(&mut self) {
        terminate_child(&mut self.child, Duration::from_secs(5));
    }
}
