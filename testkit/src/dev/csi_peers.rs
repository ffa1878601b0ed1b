//! The upstream CSI peers lvms is tested with (csi-provisioner, csi-resizer, csi-snapshotter,
//! snapshot-controller, csi-sanity), built from their Go modules by
//! `deploy/dev/build-test-bins.sh`, and run as processes next to `lvms operator`, as the
//! sidecars run in its Deployment.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use super::process::{Lifetime, spawn, terminate_child};

pub const PROVISIONER_VERSION: &str = "v6.4.0";
pub const RESIZER_VERSION: &str = "v2.3.0";
pub const SNAPSHOTTER_VERSION: &str = "v8.6.0";
pub const CSI_SANITY_VERSION: &str = "v5.4.0";

/// The cache folder of these peers (one per version set), as the build script names it.
pub fn csi_peers_dir() -> PathBuf {
    super::control_plane::test_bins_cache().join(format!(
        "csi-provisioner-{PROVISIONER_VERSION}-resizer-{RESIZER_VERSION}-snapshotter-{SNAPSHOTTER_VERSION}-sanity-{CSI_SANITY_VERSION}"
    ))
}

/// A peer binary, or the fix when it was never built.
pub fn peer_bin(name: &str) -> Result<PathBuf, String> {
    let p = csi_peers_dir().join("bin").join(name);
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!(
            "no {}: run deploy/dev/build-test-bins.sh (builds the CSI sidecars and csi-sanity from the Go module proxy)",
            p.display()
        ))
    }
}

/// The snapshot CRDs external-snapshotter ships (volumesnapshots, contents, classes, groups).
pub fn snapshot_crds_dir() -> PathBuf {
    csi_peers_dir().join("crds")
}

/// One sidecar process; stopped when dropped.
pub struct Sidecar {
    pub name: String,
    child: Child,
    pub log: PathBuf,
}

impl Sidecar {
    /// `name` (a peer binary) with `args` and `env`, talking to the API server through
    /// `kubeconfig`; its output in `log`.
    pub fn start(
        name: &str,
        args: &[String],
        env: &[(&str, &str)],
        kubeconfig: &Path,
        log: &Path,
    ) -> Result<Sidecar, String> {
        let bin = peer_bin(name)?;
        let mut cmd = Command::new(&bin);
        cmd.args(args)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .envs(env.iter().copied());
        let child = spawn(cmd, log, Lifetime::DieWithParent)
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        Ok(Sidecar {
            name: name.to_string(),
            child,
            log: log.to_path_buf(),
        })
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        terminate_child(&mut self.child, Duration::from_secs(2));
    }
}
