//! One real control plane per test process (etcd + kube-apiserver + kube-controller-manager on
//! loopback, lvms CRDs installed), and one namespace per test. The processes die with the test
//! process (PR_SET_PDEATHSIG), also when a test panics or the binary is killed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use crate::dev::{ControlPlane, Lifetime, Options};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};

use crate::fixtures;

pub struct Env {
    pub cp: ControlPlane,
}

/// The repository root (this crate lives in `<repo>/testkit`).
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit/ has a parent")
}

/// Builds (or finds cached) control-plane binaries. A missing Go toolchain or a failed build is
/// a loud failure with the script's own explanation, never a skip.
pub fn binaries() -> PathBuf {
    if let Some(dir) = std::env::var_os("LVMS_TEST_BINS") {
        return PathBuf::from(dir);
    }
    cached_build(
        "deploy/dev/build-test-bins.sh",
        "the control-plane binaries",
        &[],
    )
}

/// Runs one of the repo's cached-build scripts and returns the directory it prints; a failure
/// is a loud panic with the script's own output (which names the fix). `envs` are the script's
/// inputs (e.g. which kernel).
pub(crate) fn cached_build(script: &str, what: &str, envs: &[(&str, &str)]) -> PathBuf {
    let out = Command::new("bash")
        .arg(repo().join(script))
        .envs(envs.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("running {script} (is bash installed?): {e}"));
    assert!(
        out.status.success(),
        "building {what} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Removes working directories of earlier processes that are gone (e.g. SIGKILLed): the
/// entries of `base` named by a pid that is no longer alive.
pub fn sweep_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let pid = e.file_name().to_string_lossy().parse::<i32>().ok();
        if pid.is_some_and(|p| !crate::dev::process::alive(p)) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

pub fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let bins = binaries();
        let base = std::env::temp_dir().join("lvms-acceptance");
        sweep_stale(&base);
        let dir = base.join(std::process::id().to_string());
        let _ = std::fs::remove_dir_all(&dir);
        // Started on a runtime of its own: the per-test runtimes come and go.
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let mut opts = Options::new(&dir, Lifetime::DieWithParent);
                opts.bin_dir = bins;
                let cp = ControlPlane::start(opts)
                    .await
                    .unwrap_or_else(|e| panic!("control plane: {e}"));
                eprintln!(
                    "control plane ready in {:?} at {}",
                    cp.started_in,
                    cp.server_url()
                );
                let client = cp.client().await.expect("admin client");
                crate::dev::crds::install_crds(&client, Duration::from_secs(60))
                    .await
                    .unwrap_or_else(|e| panic!("installing CRDs: {e}"));
                Env { cp }
            })
        })
        .join()
        .unwrap_or_else(|_| panic!("starting the control plane panicked (see above)"))
    })
}

/// A fresh admin client on the calling test's runtime.
pub async fn client() -> Client {
    env().cp.client().await.expect("admin client")
}

/// A namespace of its own for one test, deleted when the test ends (also on panic).
pub struct TestNs {
    pub name: String,
    pub client: Client,
}

impl TestNs {
    pub async fn new(prefix: &str) -> Self {
        static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self::named(&format!("{prefix}-{}-{n}", std::process::id())).await
    }

    /// A namespace of exactly this name (a name something else already uses, e.g. a process
    /// started before the scenario, that must be unique in the process and the cluster).
    pub async fn named(name: &str) -> Self {
        let client = client().await;
        let name = name.to_string();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &fixtures::namespace(&name))
            .await
            .expect("creating test namespace");
        Self { name, client }
    }
}

impl Drop for TestNs {
    fn drop(&mut self) {
        let name = self.name.clone();
        // Drop cannot await; a short-lived runtime on another thread does the delete.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async move {
                let client = env().cp.client().await.ok()?;
                Api::<Namespace>::all(client)
                    .delete(&name, &DeleteParams::default())
                    .await
                    .ok()
            })
        })
        .join();
    }
}
