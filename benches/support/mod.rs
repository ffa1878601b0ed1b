//! What the benchmarks share: the `cargo bench` entry, env knobs, the `lvms` binary, the
//! target directory for reports, and waiting for a process's `/readyz`.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use lvms::dev::operator::{OperatorProcess, lvms_bin_near};

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

/// `$LVMS_BIN`, else the `lvms` built for this bench (cargo builds the package's binaries
/// for benches), else one next to this executable.
pub fn lvms_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("LVMS_BIN") {
        return PathBuf::from(p);
    }
    let built = PathBuf::from(env!("CARGO_BIN_EXE_lvms"));
    if built.is_file() {
        return built;
    }
    let exe = std::env::current_exe().expect("current_exe");
    lvms_bin_near(&exe).unwrap_or_else(|| {
        panic!(
            "no `lvms` binary at {} nor near {}: run `cargo build --release --bin lvms` (or set LVMS_BIN)",
            built.display(),
            exe.display()
        )
    })
}

/// The cargo target directory this bench was built in (`<target>/release/deps/<bench>-*`).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("target"))
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
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
