//! What a boot carries in besides scripts and disks: files and executables for /work, and the
//! loopback forwards to the host. Shared by [`super::Run`] and [`super::GroupSpec`].

use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// Copied into /work (name in the guest, path on the host).
    pub files: Vec<(String, PathBuf)>,
    /// Copied into /work without their debug info (a dev-profile `lvms` is ~300 MB, most of it
    /// DWARF the guest never reads).
    pub binaries: Vec<(String, PathBuf)>,
    /// Guest → host: the guest's connections to 10.0.2.100:PORT reach the host's
    /// 127.0.0.1:HOST_PORT (QEMU user networking with `restrict=on`: nothing else is reachable).
    pub forwards: Vec<(u16, u16)>,
}

impl Inputs {
    /// Puts the files and stripped executables into `dir` (the guest's /work).
    pub(crate) fn stage(&self, dir: &Path) -> Result<(), String> {
        for (name, host) in &self.files {
            std::fs::copy(host, dir.join(name))
                .map_err(|e| format!("copying {} into the guest input: {e}", host.display()))?;
        }
        for (name, host) in &self.binaries {
            // binutils comes with the C toolchain cargo links with.
            let strip = Command::new("strip")
                .arg("--strip-debug")
                .arg("-o")
                .arg(dir.join(name))
                .arg(host)
                .output()
                .map_err(|e| {
                    format!(
                        "running strip (binutils, part of the C toolchain cargo links with): {e}"
                    )
                })?;
            if !strip.status.success() {
                return Err(format!(
                    "strip {}: {}",
                    host.display(),
                    String::from_utf8_lossy(&strip.stderr)
                ));
            }
        }
        Ok(())
    }
}

/// Builder methods for whatever carries [`Inputs`].
pub trait WithInputs: Sized {
    fn inputs_mut(&mut self) -> &mut Inputs;

    fn file(mut self, name: &str, host: impl Into<PathBuf>) -> Self {
        self.inputs_mut().files.push((name.into(), host.into()));
        self
    }
    fn binary(mut self, name: &str, host: impl Into<PathBuf>) -> Self {
        self.inputs_mut().binaries.push((name.into(), host.into()));
        self
    }
    fn forward(mut self, guest_port: u16, host_port: u16) -> Self {
        self.inputs_mut().forwards.push((guest_port, host_port));
        self
    }
}
