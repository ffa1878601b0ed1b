//! `lvms operator` as a child process, for tests, benchmarks and the demo: started against a
//! kubeconfig, killed with SIGKILL on demand (crash tests), reaped on drop.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use super::process::{Lifetime, spawn};

pub struct OperatorOptions {
    /// The `lvms` binary.
    pub bin: PathBuf,
    pub kubeconfig: PathBuf,
    pub namespace: String,
    pub journal_dir: PathBuf,
    pub log: PathBuf,
    pub env: Vec<(String, String)>,
    pub args: Vec<String>,
}

pub struct OperatorProcess {
    child: Child,
    pub diagnostics: u16,
    pub log: PathBuf,
    /// The CSI socket: the operator's controller socket, or vg-manager's node socket.
    pub csi_socket: PathBuf,
}

/// The port of the last `metrics listening ... addr=127.0.0.1:PORT` line of a log (text or
/// JSON format).
fn metrics_port_in(log: &str) -> Option<u16> {
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("metrics listening"))?;
    let at = line.rfind("127.0.0.1:")? + "127.0.0.1:".len();
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// A short socket path of its own per process started (a Unix socket path has 108 bytes at
/// most, too few for a test's scenario directory).
fn fresh_socket_path() -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::env::temp_dir().join(format!("lvms-csi-{}-{n}.sock", std::process::id()))
}

use super::process::free_port;

/// `lvms vg-manager` for one simulated node: its own journal, lvmd.yaml, lock and disks.
pub struct VgManagerOptions {
    pub bin: PathBuf,
    pub kubeconfig: PathBuf,
    pub namespace: String,
    pub node: String,
    /// Holds `journal/`, `lvmd.yaml`, `lock` and the log.
    pub dir: PathBuf,
    /// lvm2 `--config` (activation off where the kernel has no device-mapper).
    pub lvm_config: String,
    pub env: Vec<(String, String)>,
}

/// lvm2 settings for hosts without device-mapper or udev (CI, containers).
pub const NO_DM_LVM_CONFIG: &str = "global{activation=0} devices{use_devicesfile=0 obtain_device_list_from_udev=0} activation{udev_sync=0 udev_rules=0}";

impl OperatorProcess {
    pub fn start_vg_manager(opts: &VgManagerOptions) -> std::io::Result<Self> {
        let diagnostics = free_port()?;
        std::fs::create_dir_all(&opts.dir)?;
        let log = opts
            .dir
            .join(format!("vg-manager-{}.log", std::process::id()));
        let csi_socket = fresh_socket_path();
        let mut cmd = Command::new(&opts.bin);
        cmd.arg("vg-manager")
            .args(["--node-name", &opts.node, "--namespace", &opts.namespace])
            .args([
                "--host-command-prefix",
                "",
                "--lvm-config",
                &opts.lvm_config,
            ])
            .arg("--lvmd-config")
            .arg(opts.dir.join("lvmd.yaml"))
            .arg("--journal-dir")
            .arg(opts.dir.join("journal"))
            .arg("--lock-file")
            .arg(opts.dir.join("lock"))
            .arg("--diagnostics-addr")
            .arg(format!("127.0.0.1:{diagnostics}"))
            // The kernel picks the port (a second port chosen ahead, as the diagnostics one,
            // could be taken by then); `metrics_port` reads it from the log.
            .args(["--metrics-addr", "127.0.0.1:0"])
            .args(["--debounce-ms", "20"])
            .arg("--csi-node-socket")
            .arg(&csi_socket)
            .env("KUBECONFIG", &opts.kubeconfig)
            // No kubelet here: no registration unless a test sets LVMS_REGISTRATION_DIR (several
            // simulated nodes would otherwise share the host's plugins_registry socket).
            .env("LVMS_REGISTRATION_DIR", "off")
            .env("LVMS_KUBELET_NODE_SOCKET", &csi_socket)
            .env_remove("LVMS_CRASH_AT")
            .env_remove("LVMS_PANIC_IN");
        for (k, v) in &opts.env {
            cmd.env(k, v);
        }
        let child = spawn(cmd, &log, Lifetime::DieWithParent)?;
        Ok(OperatorProcess {
            child,
            diagnostics,
            log,
            csi_socket,
        })
    }

    pub fn start(opts: &OperatorOptions) -> std::io::Result<Self> {
        let diagnostics = free_port()?;
        let mut cmd = Command::new(&opts.bin);
        cmd.arg("operator")
            .arg("--namespace")
            .arg(&opts.namespace)
            .arg("--journal-dir")
            .arg(&opts.journal_dir)
            .arg("--diagnostics-addr")
            .arg(format!("127.0.0.1:{diagnostics}"))
            // The kernel picks the port (a second port chosen ahead, as the diagnostics one,
            // could be taken by then); `metrics_port` reads it from the log.
            .args(["--metrics-addr", "127.0.0.1:0"])
            .arg("--vg-manager-image")
            .arg("localhost/lvms:dev")
            .args(&opts.args)
            .env("KUBECONFIG", &opts.kubeconfig)
            .env_remove("LVMS_CRASH_AT")
            .env_remove("LVMS_PANIC_IN");
        for (k, v) in &opts.env {
            cmd.env(k, v);
        }
        let csi_socket = match opts.args.iter().position(|a| a == "--csi-socket") {
            Some(i) => PathBuf::from(opts.args.get(i + 1).cloned().unwrap_or_default()),
            None => {
                let p = fresh_socket_path();
                cmd.arg("--csi-socket").arg(&p);
                p
            }
        };
        let child = spawn(cmd, &opts.log, Lifetime::DieWithParent)?;
        Ok(OperatorProcess {
            child,
            diagnostics,
            log: opts.log.clone(),
            csi_socket,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Wait for the process to exit on its own (e.g. a crash point); None on timeout.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// True if it died of SIGKILL (the crash points kill themselves this way).
    pub fn killed_by_sigkill(status: &ExitStatus) -> bool {
        status.signal() == Some(libc::SIGKILL)
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and wait (graceful shutdown).
    pub fn terminate(&mut self, grace: Duration) -> Option<ExitStatus> {
        // SAFETY: signalling our own child by pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let status = self.wait_exit(grace);
        if status.is_none() {
            self.kill();
        }
        status
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// GET a diagnostics path; returns (status code, body).
    pub fn diagnostics_get(&self, path: &str) -> std::io::Result<(u16, String)> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.diagnostics))?;
        s.set_read_timeout(Some(Duration::from_secs(2)))?;
        // One write: a request split over segments could meet an early close.
        s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        let code = out
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = out.split("\r\n\r\n").nth(1).unwrap_or_default().to_string();
        Ok((code, body))
    }

    /// The port `/metrics` is served on, from the process's log line saying so (waited for up
    /// to 30 s: the server starts once the journal is open).
    pub fn metrics_port(&self) -> std::io::Result<u16> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(port) = metrics_port_in(&self.log_text()) {
                return Ok(port);
            }
            if Instant::now() > deadline {
                return Err(std::io::Error::other(format!(
                    "no `metrics listening` line in {}",
                    self.log.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `GET /metrics` over HTTPS with `token`, the certificate not verified (the process's
    /// own self-signed one unless its arguments named a directory): (status code, body).
    pub fn metrics_get(&self, token: &str) -> std::io::Result<(u16, String)> {
        crate::metrics::scrape(self.metrics_port()?, Some(token), None)
    }

    /// Resident set size in KiB (from /proc).
    pub fn rss_kib(&self) -> Option<u64> {
        proc_status_kib(self.child.id(), "VmRSS:")
    }

    /// User + system CPU time consumed so far, in clock ticks.
    pub fn cpu_ticks(&self) -> Option<u64> {
        cpu_ticks_of(self.child.id())
    }
}

/// User + system CPU time process `pid` has consumed so far, in clock ticks (None once gone).
pub fn cpu_ticks_of(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The `lvms` binary next to the running test/bench binary's target dir.
pub fn lvms_bin_near(exe: &Path) -> Option<PathBuf> {
    let mut dir = exe.parent()?;
    for _ in 0..3 {
        let cand = dir.join("lvms");
        if cand.is_file() {
            return Some(cand);
        }
        dir = dir.parent()?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::metrics_port_in;

    #[test]
    fn the_metrics_port_is_read_from_the_last_listening_line_in_either_format() {
        let text = "x\n2026 INFO lvms::runtime::metrics_server: metrics listening (https, TokenReview + SubjectAccessReview) addr=127.0.0.1:44425\n";
        assert_eq!(metrics_port_in(text), Some(44425));
        let json = r#"{"fields":{"message":"metrics listening (https)","addr":"127.0.0.1:39001"}}"#;
        assert_eq!(metrics_port_in(json), Some(39001));
        assert_eq!(
            metrics_port_in("diagnostics listening addr=127.0.0.1:1"),
            None
        );
    }
}
