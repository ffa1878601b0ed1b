//! What the benchmarks share: the `cargo bench` entry, env knobs, the `lvms` binary, the
//! target directory for reports, a bare control plane, and waiting for a process's `/readyz`.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::dev::operator::OperatorProcess;
use crate::dev::{ControlPlane, Lifetime, Options};
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, PostParams};

use crate::fixtures;
use crate::process::tail;

pub mod phases;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T> = std::result::Result<T, BoxError>;

/// Runs `bench` on a current-thread runtime under `cargo bench`; returns at once otherwise
/// (`cargo test --all-targets` builds and runs bench targets too).
pub fn main_with<F: Future<Output = Result<()>>>(name: &str, bench: impl FnOnce() -> F) {
    if !std::env::args().any(|a| a == "--bench") {
        println!("benches/{name}: skipped (not run under `cargo bench`)");
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Err(e) = rt.block_on(bench()) {
        eprintln!("benches/{name} failed: {e}");
        std::process::exit(1);
    }
}

/// A comma-separated list of numbers from the environment, else `default`.
pub fn env_list(name: &str, default: &[usize]) -> Vec<usize> {
    match std::env::var(name) {
        Ok(v) => v
            .split(',')
            .map(|s| {
                s.trim()
                    .parse()
                    .unwrap_or_else(|e| panic!("{name}={v:?}: {e}"))
            })
            .collect(),
        Err(_) => default.to_vec(),
    }
}

/// `$LVMS_BIN`, else the `lvms` built for this bench ([`crate::process::lvms_bin`]).
pub fn lvms_bin() -> PathBuf {
    std::env::var_os("LVMS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(crate::process::lvms_bin)
}

/// The cargo target directory this bench was built in (`<target>/release/deps/<bench>-*`).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("target"))
}

/// Prints a benchmark's report and writes it to `<target>/bench-<name>.md`.
pub fn publish(name: &str, report: &str) -> Result<()> {
    println!("\n{report}");
    let out = target_dir().join(format!("bench-{name}.md"));
    std::fs::write(&out, report)?;
    println!("written to {}", out.display());
    Ok(())
}

/// etcd + kube-apiserver in `dir` (no kube-controller-manager: nothing but the processes
/// measured and the bench talk to the API server), lvms CRDs installed, `namespace` created.
pub async fn control_plane(
    dir: &Path,
    bins: &Path,
    namespace: &str,
) -> Result<(ControlPlane, Client)> {
    let mut opts = Options::new(dir, Lifetime::DieWithParent);
    opts.bin_dir = bins.to_path_buf();
    opts.controller_manager = false;
    let cp = ControlPlane::start(opts).await?;
    let client = cp.client().await?;
    crate::dev::crds::install_crds(&client, Duration::from_secs(60)).await?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &fixtures::namespace(namespace))
        .await?;
    Ok((cp, client))
}

/// Polls `/readyz` every `poll` until 200, the process exits, or `timeout`.
pub async fn wait_ready(p: &OperatorProcess, poll: Duration, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if matches!(p.diagnostics_get("/readyz"), Ok((200, _))) {
            return Ok(());
        }
        if p.rss_kib().is_none() || Instant::now() > deadline {
            return Err(format!(
                "not ready; log {}:\n{}",
                p.log.display(),
                tail(&p.log_text(), 20)
            )
            .into());
        }
        tokio::time::sleep(poll).await;
    }
}
