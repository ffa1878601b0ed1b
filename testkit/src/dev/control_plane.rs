//! A real Kubernetes control plane on loopback: etcd, kube-apiserver and (for garbage
//! collection and namespace deletion) kube-controller-manager, built from their Go modules by
//! `deploy/dev/build-test-bins.sh`. Used by the tests, the demo and `lvms dev control-plane`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};
use thiserror::Error;

use super::pki::{Pki, PkiError};
use super::process::{self, Lifetime};

/// Where a QEMU guest reaches the host (its user network's guestfwd address): real nodes reach
/// the API server there, at the API server's own port.
pub const GUEST_HOST: &str = "10.0.2.100";

/// Versions the build script builds by default; keep in step with deploy/dev/build-test-bins.sh.
pub const K8S_VERSION: &str = "v1.36.3";
pub const ETCD_VERSION: &str = "v3.6.16";
const BINARIES: [&str; 3] = ["etcd", "kube-apiserver", "kube-controller-manager"];

#[derive(Debug, Error)]
pub enum ControlPlaneError {
    #[error(
        "the control-plane binaries are missing from {dir}: {missing}. Build them with deploy/dev/build-test-bins.sh (needs Go >= 1.26 and the Go module proxy), or point LVMS_TEST_BINS at a directory holding etcd, kube-apiserver and kube-controller-manager"
    )]
    MissingBinaries { dir: PathBuf, missing: String },
    #[error("no free loopback port: {0}")]
    Port(std::io::Error),
    #[error(transparent)]
    Pki(#[from] PkiError),
    #[error("{what} at {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{name} exited during start-up ({status}); last lines of {log}:\n{tail}")]
    Exited {
        name: String,
        status: String,
        log: PathBuf,
        tail: String,
    },
    #[error("kube-apiserver was not ready after {0:?}; logs are in {1}")]
    NotReady(Duration, PathBuf),
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
}

/// Where the binaries are: `$LVMS_TEST_BINS`, else the build script's default cache directory.
/// Where deploy/dev/build-test-bins.sh keeps every Go-built test peer, one folder per version:
/// `$LVMS_TEST_BINS_CACHE`, else `~/.cache/lvms-test-bins`.
pub fn test_bins_cache() -> PathBuf {
    std::env::var_os("LVMS_TEST_BINS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
                .join(".cache/lvms-test-bins")
        })
}

pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("LVMS_TEST_BINS") {
        return PathBuf::from(dir);
    }
    test_bins_cache()
        .join(format!("k8s-{K8S_VERSION}-etcd-{ETCD_VERSION}"))
        .join("bin")
}

fn check_binaries(dir: &Path) -> Result<(), ControlPlaneError> {
    let missing: Vec<&str> = BINARIES
        .iter()
        .copied()
        .filter(|b| !dir.join(b).is_file())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(ControlPlaneError::MissingBinaries {
            dir: dir.to_path_buf(),
            missing: missing.join(", "),
        })
    }
}

fn free_port() -> Result<u16, ControlPlaneError> {
    process::free_port().map_err(ControlPlaneError::Port)
}

#[derive(Clone, Debug)]
pub struct Options {
    pub bin_dir: PathBuf,
    /// Working directory (certs, etcd data, logs, kubeconfigs); created if missing.
    pub dir: PathBuf,
    pub lifetime: Lifetime,
    pub controller_manager: bool,
    pub ready_timeout: Duration,
    /// A control plane real nodes join (`testkit::node`): the API server advertised at the
    /// address a QEMU guest reaches the host by, the Node authorizer and NodeRestriction,
    /// service accounts and their tokens for Pods, kube-scheduler, and the controllers a node's
    /// workloads need (Deployments, DaemonSets, endpoints, node lifecycle, attach/detach,
    /// ephemeral volumes).
    pub real_nodes: bool,
    /// More kube-controller-manager flags (a benchmark's `--kube-api-qps`).
    pub controller_manager_args: Vec<String>,
}

impl Options {
    pub fn new(dir: impl Into<PathBuf>, lifetime: Lifetime) -> Self {
        Self {
            bin_dir: bin_dir(),
            dir: dir.into(),
            lifetime,
            controller_manager: true,
            ready_timeout: Duration::from_secs(120),
            real_nodes: false,
            controller_manager_args: Vec::new(),
        }
    }
}

pub struct ControlPlane {
    pub dir: PathBuf,
    pub api_port: u16,
    pub pki: Pki,
    /// Admin (system:masters) kubeconfig.
    pub kubeconfig: PathBuf,
    children: Vec<(String, Child)>,
    lifetime: Lifetime,
    pub started_in: Duration,
}

impl ControlPlane {
    pub async fn start(opts: Options) -> Result<Self, ControlPlaneError> {
        let t0 = Instant::now();
        check_binaries(&opts.bin_dir)?;
        let io = |what, path: &Path| {
            let path = path.to_path_buf();
            move |source| ControlPlaneError::Io { what, path, source }
        };
        std::fs::create_dir_all(&opts.dir)
            .map_err(io("creating the control-plane directory", &opts.dir))?;
        let pki = Pki::create(&opts.dir.join("pki"))?;
        let (etcd_port, peer_port, api_port) = (free_port()?, free_port()?, free_port()?);

        let mut cp = Self {
            dir: opts.dir.clone(),
            api_port,
            pki,
            kubeconfig: opts.dir.join("admin.kubeconfig"),
            children: Vec::new(),
            lifetime: opts.lifetime,
            started_in: Duration::ZERO,
        };
        cp.write_kubeconfig_for("admin", Some("system:masters"), &cp.kubeconfig.clone())?;

        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let mut etcd = Command::new(opts.bin_dir.join("etcd"));
        etcd.args([
            "--name=default".to_string(),
            format!("--data-dir={}", opts.dir.join("etcd").display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=default={peer_url}"),
            "--unsafe-no-fsync=true".to_string(),
            "--log-level=warn".to_string(),
        ]);
        cp.spawn("etcd", etcd)?;

        let pki = cp.pki.clone();
        let mut api = Command::new(opts.bin_dir.join("kube-apiserver"));
        api.args([
            format!("--etcd-servers={etcd_url}"),
            format!("--cert-dir={}", pki.dir.display()),
            format!("--tls-cert-file={}", pki.serving_cert().display()),
            format!("--tls-private-key-file={}", pki.serving_key().display()),
            format!("--client-ca-file={}", pki.client_ca().display()),
            format!("--secure-port={api_port}"),
            "--bind-address=127.0.0.1".to_string(),
            "--service-cluster-ip-range=10.0.0.0/24".to_string(),
            "--allow-privileged=true".to_string(),
            format!("--service-account-issuer=https://127.0.0.1:{api_port}/"),
            format!("--service-account-key-file={}", pki.sa_pub().display()),
            format!(
                "--service-account-signing-key-file={}",
                pki.sa_key().display()
            ),
        ]);
        if opts.real_nodes {
            api.args([
                // The `kubernetes` Service's endpoint: what kube-proxy on a node sends it to.
                format!("--advertise-address={GUEST_HOST}"),
                "--authorization-mode=Node,RBAC".to_string(),
                "--enable-admission-plugins=NodeRestriction".to_string(),
            ]);
        } else {
            api.args([
                "--advertise-address=127.0.0.1",
                "--authorization-mode=RBAC",
                "--disable-admission-plugins=ServiceAccount",
            ]);
        }
        cp.spawn("kube-apiserver", api)?;

        if opts.controller_manager {
            let kcm_config = opts.dir.join("kube-controller-manager.kubeconfig");
            cp.write_kubeconfig_for(
                "system:kube-controller-manager",
                Some("system:masters"),
                &kcm_config,
            )?;
            // PVs bind to claims, grow and go as on a cluster (the CSI tests need all of it);
            // with real nodes, what their workloads need too.
            let mut controllers = vec![
                "garbage-collector-controller",
                "namespace-controller",
                "persistentvolume-binder-controller",
                "persistentvolume-expander-controller",
                "persistentvolumeclaim-protection-controller",
                "persistentvolume-protection-controller",
                // A terminating Pod on a Node tainted out-of-service and not Ready is
                // force-deleted (what lets a dead node's claims go). Not the taint eviction
                // controller: it needs the node lifecycle controller's Pod index, and that
                // controller would mark every kubelet-less Node of this tier NotReady (with
                // real nodes both run, below).
                "pod-garbage-collector-controller",
            ];
            if opts.real_nodes {
                controllers.extend([
                    "deployment-controller",
                    "replicaset-controller",
                    "daemonset-controller",
                    "statefulset-controller",
                    "serviceaccount-controller",
                    "root-ca-certificate-publisher-controller",
                    "endpoints-controller",
                    "endpointslice-controller",
                    "node-lifecycle-controller",
                    // NoExecute taints evict: a node tainted out-of-service loses its Pods,
                    // which Pod GC then force-deletes (tests/node dead-node). Not-ready and
                    // unreachable are tolerated for 300 s (DefaultTolerationSeconds), longer
                    // than a reboot scenario's outage.
                    "taint-eviction-controller",
                    "persistentvolume-attach-detach-controller",
                    "ephemeral-volume-controller",
                ]);
            }
            let mut kcm = Command::new(opts.bin_dir.join("kube-controller-manager"));
            kcm.args([
                format!("--kubeconfig={}", kcm_config.display()),
                "--leader-elect=false".to_string(),
                "--secure-port=0".to_string(),
                format!("--controllers={}", controllers.join(",")),
                "--use-service-account-credentials=false".to_string(),
            ]);
            if opts.real_nodes {
                kcm.args([
                    // kube-root-ca.crt in every namespace: what Pods verify the API server by.
                    format!("--root-ca-file={}", pki.serving_ca().display()),
                    format!(
                        "--service-account-private-key-file={}",
                        pki.sa_key().display()
                    ),
                ]);
            }
            kcm.args(&opts.controller_manager_args);
            cp.spawn("kube-controller-manager", kcm)?;
        }
        if opts.real_nodes {
            let sched_config = opts.dir.join("kube-scheduler.kubeconfig");
            cp.write_kubeconfig_for("system:kube-scheduler", None, &sched_config)?;
            let mut sched = Command::new(opts.bin_dir.join("kube-scheduler"));
            sched.args([
                format!("--kubeconfig={}", sched_config.display()),
                "--leader-elect=false".to_string(),
                "--secure-port=0".to_string(),
            ]);
            cp.spawn("kube-scheduler", sched)?;
        }
        if cp.lifetime == Lifetime::Detached {
            let pids: String = cp
                .children
                .iter()
                .map(|(n, c)| format!("{} {n}\n", c.id()))
                .collect();
            let path = cp.dir.join("pids");
            std::fs::write(&path, pids).map_err(io("writing pid file", &path))?;
        }
        cp.wait_ready(opts.ready_timeout).await?;
        cp.started_in = t0.elapsed();
        Ok(cp)
    }

    fn spawn(&mut self, name: &str, cmd: Command) -> Result<(), ControlPlaneError> {
        let log = self.log_path(name);
        let child =
            process::spawn(cmd, &log, self.lifetime).map_err(|source| ControlPlaneError::Io {
                what: "starting",
                path: log.clone(),
                source,
            })?;
        self.children.push((name.to_string(), child));
        Ok(())
    }

    /// (name, pid) of every process this handle owns.
    pub fn pids(&self) -> Vec<(String, u32)> {
        self.children
            .iter()
            .map(|(n, c)| (n.clone(), c.id()))
            .collect()
    }

    pub fn log_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }

    pub fn server_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.api_port)
    }

    /// Writes a kubeconfig authenticating as `user` (client certificate from the harness CA).
    pub fn write_kubeconfig_for(
        &self,
        user: &str,
        group: Option<&str>,
        path: &Path,
    ) -> Result<(), ControlPlaneError> {
        let (crt, key) = self.pki.client_cert(user, group)?;
        let yaml = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: lvms-dev\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\nusers:\n- name: {user:?}\n  user:\n    client-certificate: {crt}\n    client-key: {key}\ncontexts:\n- name: lvms-dev\n  context:\n    cluster: lvms-dev\n    user: {user:?}\ncurrent-context: lvms-dev\n",
            server = self.server_url(),
            ca = self.pki.serving_ca().display(),
            crt = crt.display(),
            key = key.display(),
        );
        std::fs::write(path, yaml).map_err(|source| ControlPlaneError::Io {
            what: "writing kubeconfig",
            path: path.to_path_buf(),
            source,
        })
    }

    /// A client from any kubeconfig file this control plane wrote.
    pub async fn client_from(path: &Path) -> Result<kube::Client, ControlPlaneError> {
        let kc = Kubeconfig::read_from(path)
            .map_err(|e| ControlPlaneError::Kubeconfig(e.to_string()))?;
        let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .map_err(|e| ControlPlaneError::Kubeconfig(e.to_string()))?;
        kube::Client::try_from(config).map_err(|e| ControlPlaneError::Kubeconfig(e.to_string()))
    }

    /// An admin client.
    pub async fn client(&self) -> Result<kube::Client, ControlPlaneError> {
        Self::client_from(&self.kubeconfig).await
    }

    async fn wait_ready(&mut self, timeout: Duration) -> Result<(), ControlPlaneError> {
        let client = self.client().await?;
        let deadline = Instant::now() + timeout;
        loop {
            self.check_children()?;
            let req = http::Request::get("/readyz")
                .body(Vec::new())
                .map_err(|e| ControlPlaneError::Kubeconfig(e.to_string()))?;
            if let Ok(body) = client.request_text(req).await
                && body.trim() == "ok"
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(ControlPlaneError::NotReady(timeout, self.dir.clone()));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn check_children(&mut self) -> Result<(), ControlPlaneError> {
        for (name, child) in &mut self.children {
            if let Ok(Some(status)) = child.try_wait() {
                let log = self.dir.join(format!("{name}.log"));
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(15).collect();
                let tail = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
                return Err(ControlPlaneError::Exited {
                    name: name.clone(),
                    status: status.to_string(),
                    log,
                    tail,
                });
            }
        }
        Ok(())
    }

    /// Stops every process (reverse start order) and reaps it.
    pub fn stop(&mut self) {
        while let Some((_, mut child)) = self.children.pop() {
            process::terminate_child(&mut child, Duration::from_secs(5));
        }
    }

    /// Leaves the processes running (detached mode) when this handle goes away.
    pub fn detach(mut self) {
        self.children.clear();
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Stops a detached control plane started in `dir` and removes the directory.
pub fn down(dir: &Path) -> Result<(), ControlPlaneError> {
    let pids = dir.join("pids");
    if let Ok(text) = std::fs::read_to_string(&pids) {
        for line in text.lines().rev() {
            if let Some(pid) = line
                .split_whitespace()
                .next()
                .and_then(|p| p.parse::<i32>().ok())
            {
                process::terminate(pid, Duration::from_secs(5));
            }
        }
    }
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(ControlPlaneError::Io {
            what: "removing",
            path: dir.to_path_buf(),
            source,
        }),
    }
}
