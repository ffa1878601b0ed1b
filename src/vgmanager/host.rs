//! The host seam: every lvm2/lsblk/wipefs/dmsetup call and every file vg-manager reads or
//! writes goes through [`HostOps`]. [`Host`] is the real one, so the same code runs on a real
//! node (`nsenter -m -u -i -n -p -t 1 <cmd>`, the host's lvm2) and in tests (no prefix, loop
//! devices, `--config` with activation off); unit tests answer from lvm2-format fixtures.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tokio::process::Command;
use tracing::{Instrument, debug};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostOutput {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("`{argv}` could not start: {source}")]
    Spawn {
        argv: String,
        source: std::io::Error,
    },
    #[error("`{argv}` exited {code}: {stderr}")]
    Failed {
        argv: String,
        code: i32,
        stderr: String,
    },
    /// Killed at its deadline (`--host-command-timeout`): a hung lvm2 or dmsetup must not
    /// hold a unit, a CSI call or a group's suspended gates forever.
    #[error(
        "`{argv}` did not finish within {after:?} and was killed (--host-command-timeout); look for a hung device on the node"
    )]
    TimedOut { argv: String, after: Duration },
}

impl HostError {
    pub fn code(&self) -> Option<i32> {
        match self {
            HostError::Failed { code, .. } => Some(*code),
            HostError::Spawn { .. } | HostError::TimedOut { .. } => None,
        }
    }
}

/// The file name of the program an argv runs (`/usr/sbin/vgcreate` → `vgcreate`).
pub fn program_name(argv: &[String]) -> Option<String> {
    argv.first()
        .and_then(|p| Path::new(p).file_name())
        .map(|p| p.to_string_lossy().into_owned())
}

/// What the volume-group actors do to their node, and nothing else.
pub trait HostOps: Send + Sync + 'static {
    /// Run `cmd` and require exit 0 (`ok_codes` lists other acceptable exit codes).
    fn run<'a>(
        &'a self,
        cmd: &'a [String],
        ok_codes: &'a [i32],
    ) -> BoxFuture<'a, Result<HostOutput, HostError>>;

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf>;

    /// The entry names of a directory (sysfs `holders`).
    fn read_dir_names(&self, dir: &Path) -> io::Result<Vec<String>>;

    fn read_to_string(&self, path: &Path) -> io::Result<String>;

    /// Temp file + rename, with `mode`: a crash never leaves a half-written file.
    fn write_atomic(&self, path: &Path, text: &str, mode: u32) -> io::Result<()>;

    /// Remove a file; one that is not there is not an error.
    fn remove_file(&self, path: &Path) -> io::Result<()>;

    /// The mount table (`mountinfo`) of the mount namespace commands run in.
    fn mount_table(&self) -> io::Result<String>;

    /// `major:minor` of the block device node at `path`, in the mount namespace commands run in
    /// (what `lsblk -d` prints, without running it); None when `path` is not a block device.
    fn block_device_number(&self, path: &Path) -> io::Result<Option<String>>;

    /// A publish target: a directory (`mkdir -p`), or for a block volume an empty file in its
    /// parent directory. One already there is kept. Kubelet's paths are mounted into
    /// vg-manager's container at the same paths, with bidirectional propagation (LVMS's).
    fn make_target(&self, path: &Path, dir: bool) -> io::Result<()>;

    /// Remove an unmounted target (an empty directory or a file); `false` when it was not there.
    fn remove_target(&self, path: &Path) -> io::Result<bool>;

    fn set_mode(&self, path: &Path, mode: u32) -> io::Result<()>;
}

#[derive(Debug, Clone, Default)]
pub struct Host {
    /// e.g. `["nsenter", "-m", "-u", "-i", "-n", "-p", "-t", "1"]`; empty runs locally.
    pub prefix: Vec<String>,
    /// lvm2 `--config` string (tests: `global{activation=0} ...`).
    pub lvm_config: Option<String>,
    /// How long one command may run before it is killed; None: no limit.
    pub deadline: Option<Duration>,
}

impl Host {
    /// The full argv that runs (pure; tested).
    pub fn argv(&self, cmd: &[String]) -> Vec<String> {
        let mut out = self.prefix.clone();
        match &self.lvm_config {
            Some(cfg) => out.extend(crate::node::commands::with_lvm_config(cmd, cfg)),
            None => out.extend(cmd.iter().cloned()),
        }
        out
    }

    /// Run and require exit 0 (`ok_codes` lists other acceptable exit codes, e.g. lvmdevices 5).
    pub async fn run_command(
        &self,
        cmd: &[String],
        ok_codes: &[i32],
    ) -> Result<HostOutput, HostError> {
        let program = program_name(cmd).unwrap_or_else(|| "command".into());
        let span = tracing::info_span!(
            "host.command",
            otel.name = format!("host {program}"),
            argv = %cmd.join(" "),
            exit_code = tracing::field::Empty,
            duration_ms = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
            error.message = tracing::field::Empty,
        );
        let result = self.run_inner(cmd, ok_codes).instrument(span.clone()).await;
        match &result {
            Ok(out) => {
                span.record("exit_code", out.code);
                span.record("duration_ms", out.took.as_secs_f64() * 1000.0);
            }
            Err(e) => {
                if let HostError::Failed { code, .. } = e {
                    span.record("exit_code", *code);
                }
                lvms_actors::record_span_error(&span, e);
            }
        }
        result
    }

    async fn run_inner(&self, cmd: &[String], ok_codes: &[i32]) -> Result<HostOutput, HostError> {
        let argv = self.argv(cmd);
        let Some(program) = argv.first() else {
            return Err(HostError::Spawn {
                argv: String::new(),
                source: std::io::Error::other("empty command"),
            });
        };
        let shown = argv.join(" ");
        let started = Instant::now();
        // kill_on_drop: a command past its deadline is killed when its future is dropped.
        let running = Command::new(program)
            .args(&argv[1..])
            .env("LVM_SUPPRESS_FD_WARNINGS", "1")
            .kill_on_drop(true)
            .output();
        let out = match self.deadline {
            Some(after) => {
                tokio::time::timeout(after, running)
                    .await
                    .map_err(|_| HostError::TimedOut {
                        argv: shown.clone(),
                        after,
                    })?
            }
            None => running.await,
        }
        .map_err(|source| HostError::Spawn {
            argv: shown.clone(),
            source,
        })?;
        // Killed by a signal: -1, which no caller accepts, so it is a failure.
        let code = out.status.code().unwrap_or(-1);
        let result = HostOutput {
            code,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            took: started.elapsed(),
        };
        debug!(argv = %shown, code, took_ms = result.took.as_millis() as u64, "host command");
        if code == 0 || ok_codes.contains(&code) {
            Ok(result)
        } else {
            Err(HostError::Failed {
                argv: shown,
                code,
                stderr: result.stderr.trim().to_string(),
            })
        }
    }
}

impl HostOps for Host {
    fn run<'a>(
        &'a self,
        cmd: &'a [String],
        ok_codes: &'a [i32],
    ) -> BoxFuture<'a, Result<HostOutput, HostError>> {
        Box::pin(self.run_command(cmd, ok_codes))
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        std::fs::canonicalize(path)
    }

    fn read_dir_names(&self, dir: &Path) -> io::Result<Vec<String>> {
        std::fs::read_dir(dir)?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect()
    }

    fn read_to_string(&self, path: &Path) -> io::Result<String> {
        std::fs::read_to_string(path)
    }

    fn write_atomic(&self, path: &Path, text: &str, mode: u32) -> io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        std::fs::write(&tmp, text)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))?;
        std::fs::rename(&tmp, path)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    fn make_target(&self, path: &Path, dir: bool) -> io::Result<()> {
        if dir {
            return std::fs::create_dir_all(path);
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map(drop)
    }

    fn remove_target(&self, path: &Path) -> io::Result<bool> {
        let removed = match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
            Ok(m) if m.is_dir() => std::fs::remove_dir(path),
            // What publish makes for a block volume: an empty file. Anything else at a target
            // is not ours to delete (a request naming a file of the host).
            Ok(m) if m.is_file() && m.len() == 0 => std::fs::remove_file(path),
            Ok(_) => {
                return Err(io::Error::other(
                    "not an empty directory or an empty file, so not a target publish made; left in place",
                ));
            }
        };
        match removed {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            other => other.map(|()| true),
        }
    }

    fn set_mode(&self, path: &Path, mode: u32) -> io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    }

    /// Through `/proc/1/root` with a prefix (the host's init's root, as for its mount table).
    fn block_device_number(&self, path: &Path) -> io::Result<Option<String>> {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let seen = if self.prefix.is_empty() {
            path.to_path_buf()
        } else {
            Path::new("/proc/1/root").join(path.strip_prefix("/").unwrap_or(path))
        };
        let meta = std::fs::metadata(seen)?;
        Ok(meta.file_type().is_block_device().then(|| {
            let (major, minor) = device_numbers(meta.rdev());
            format!("{major}:{minor}")
        }))
    }

    /// With a prefix (nsenter into the host's namespaces, hostPID), the host's table is its
    /// init's; without, this process's.
    fn mount_table(&self) -> io::Result<String> {
        let table = if self.prefix.is_empty() {
            "/proc/self/mountinfo"
        } else {
            "/proc/1/mountinfo"
        };
        std::fs::read_to_string(table)
    }
}

/// A `dev_t`'s major and minor numbers (Linux's encoding, as glibc's `major()`/`minor()`).
pub fn device_numbers(dev: u64) -> (u64, u64) {
    let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0fff);
    let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0x00ff);
    (major, minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_decode_as_the_kernel_encodes_them() {
        // new_encode_dev: minor's low byte, major, then minor's upper bits.
        let encode = |major: u64, minor: u64| {
            (minor & 0xff)
                | ((major & 0xfff) << 8)
                | ((minor & !0xff) << 12)
                | ((major & !0xfff) << 32)
        };
        for (major, minor) in [
            (253, 3),
            (7, 0),
            (259, 262_144),
            (4095, 255),
            (4096, 1 << 19),
        ] {
            assert_eq!(device_numbers(encode(major, minor)), (major, minor));
        }
    }

    #[test]
    fn a_block_device_node_gives_its_number_and_anything_else_none() {
        let h = Host::default();
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            h.block_device_number(dir.path()).unwrap(),
            None,
            "a directory"
        );
        assert!(h.block_device_number(&dir.path().join("gone")).is_err());
        // A loop device's node, where this machine has one: its number as sysfs says.
        if let Ok(dev) = std::fs::read_to_string("/sys/block/loop0/dev")
            && Path::new("/dev/loop0").exists()
        {
            let n = h.block_device_number(Path::new("/dev/loop0")).unwrap();
            assert_eq!(n.as_deref(), Some(dev.trim()));
        }
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[tokio::test]
    async fn a_command_past_its_deadline_is_killed_and_named() {
        let h = Host {
            deadline: Some(Duration::from_millis(300)),
            ..Host::default()
        };
        let started = Instant::now();
        let e = h.run_command(&s(&["sleep", "30"]), &[]).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5), "{e}");
        assert!(matches!(e, HostError::TimedOut { .. }), "{e}");
        assert!(e.to_string().contains("`sleep 30`"), "{e}");
        assert!(h.run_command(&s(&["true"]), &[]).await.is_ok());
    }

    #[test]
    fn only_what_publish_makes_is_removed_as_a_target() {
        let dir = tempfile::tempdir().unwrap();
        let h = Host::default();
        let empty_dir = dir.path().join("mount");
        std::fs::create_dir(&empty_dir).unwrap();
        let empty_file = dir.path().join("block");
        std::fs::write(&empty_file, "").unwrap();
        assert!(h.remove_target(&empty_dir).unwrap());
        assert!(h.remove_target(&empty_file).unwrap());
        assert!(!h.remove_target(&empty_file).unwrap(), "already gone");
        // A host file named as a target (NodeUnpublishVolume of /etc/passwd) stays.
        let data = dir.path().join("passwd");
        std::fs::write(&data, "root:x:0:0").unwrap();
        assert!(h.remove_target(&data).is_err());
        assert!(data.exists());
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&data, &link).unwrap();
        assert!(h.remove_target(&link).is_err());
        assert!(link.exists());
    }

    #[test]
    fn lvm_verbs_get_the_config_after_the_verb_and_everything_gets_the_prefix() {
        let h = Host {
            prefix: s(&["nsenter", "-t", "1"]),
            lvm_config: Some("global{activation=0}".into()),
            deadline: None,
        };
        assert_eq!(
            h.argv(&s(&["/usr/sbin/vgcreate", "vg1", "/dev/loop0"])),
            s(&[
                "nsenter",
                "-t",
                "1",
                "/usr/sbin/vgcreate",
                "--config",
                "global{activation=0}",
                "vg1",
                "/dev/loop0"
            ])
        );
        assert_eq!(
            h.argv(&s(&["/usr/bin/lsblk", "--json"])),
            s(&["nsenter", "-t", "1", "/usr/bin/lsblk", "--json"])
        );
    }

    #[tokio::test]
    async fn failures_keep_stderr_and_exit_code() {
        let h = Host::default();
        let err = h
            .run_command(&s(&["sh", "-c", "echo boom >&2; exit 3"]), &[])
            .await
            .unwrap_err();
        assert_eq!(err.code(), Some(3));
        assert!(err.to_string().contains("boom"));
        assert!(
            h.run_command(&s(&["sh", "-c", "exit 5"]), &[5])
                .await
                .is_ok()
        );
    }
}
