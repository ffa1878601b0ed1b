//! The real-kernel tier: a QEMU guest running a stock Debian cloud kernel (device-mapper,
//! thin pools, snapshots, RAID, xfs) built by `deploy/dev/build-guest.sh`. A test hands the
//! guest a shell script and files, and scratch disks; the guest runs the script as root, and
//! the test gets its exit status, its console and the files it left in `$GUEST_OUT`.
//!
//! Facts behind the choices are in `shared/reference/vm-tier.md`: no 9p, so files travel as tar
//! archives on raw virtio disks (serials `lvms-in` / `lvms-out`); the serial console carries the
//! log and the exit marker; KVM is used only where the CPU exposes vmx/svm, software emulation
//! (TCG) otherwise.

use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::env::cached_build;

/// The address the guest dials for a forward to the host's loopback.
pub const GUEST_HOST: &str = "10.0.2.100";

/// The kernel and initramfs of one guest build.
#[derive(Debug, Clone)]
pub struct Image {
    pub dir: PathBuf,
}

impl Image {
    pub fn kernel(&self) -> PathBuf {
        self.dir.join("vmlinuz")
    }
    pub fn initramfs(&self) -> PathBuf {
        self.dir.join("initramfs.cpio")
    }
    /// The kernel release, from the cache directory's name (`guest-<release>`).
    pub fn release(&self) -> String {
        let name = self.dir.file_name().unwrap_or_default().to_string_lossy();
        name.strip_prefix("guest-").unwrap_or(&name).to_string()
    }
}

/// Builds (or finds cached) the guest for `LVMS_GUEST_KERNEL` (default: Debian's current cloud
/// kernel). A missing QEMU, apt or package is a loud failure naming the fix, never a skip.
pub fn image() -> &'static Image {
    static IMAGE: OnceLock<Image> = OnceLock::new();
    IMAGE.get_or_init(|| {
        assert!(
            qemu().is_some(),
            "qemu-system-x86_64 is missing: the real-kernel tests boot a guest; apt-get install -y --no-install-recommends qemu-system-x86 (deploy/dev/test-deps.sh does it as root)"
        );
        Image {
            dir: cached_build("deploy/dev/build-guest.sh", "the test guest"),
        }
    })
}

fn qemu() -> Option<PathBuf> {
    [
        "/usr/bin/qemu-system-x86_64",
        "/usr/local/bin/qemu-system-x86_64",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.is_file())
}

/// KVM when `/dev/kvm` opens and the CPU exposes hardware virtualisation; on this machine kind
/// it does not (KVM then hangs or aborts at boot), so TCG. `LVMS_GUEST_ACCEL` overrides.
fn accel() -> String {
    if let Ok(a) = std::env::var("LVMS_GUEST_ACCEL") {
        return a;
    }
    let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let hw = cpu
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"));
    let kvm = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok();
    if hw && kvm {
        "kvm".into()
    } else {
        "tcg,thread=multi".into()
    }
}

/// What one guest boot runs.
#[derive(Debug, Clone)]
pub struct Run {
    /// Shown in the console prefix and the work directory's name.
    pub name: String,
    /// Run by dash as root in /work, with `GUEST_OUT` naming the directory brought back.
    pub script: String,
    /// Extra files copied into /work (name in the guest, path on the host).
    pub files: Vec<(String, PathBuf)>,
    /// Executables copied into /work without their debug info (a dev-profile `lvms` is ~300
    /// MB, most of it DWARF the guest never reads).
    pub binaries: Vec<(String, PathBuf)>,
    /// Scratch disks: serial (appears as /dev/disk/by-id/virtio-SERIAL) and size in MiB.
    pub disks: Vec<(String, u64)>,
    /// Guest → host forwards: the guest's connections to 10.0.2.100:PORT reach the host's
    /// 127.0.0.1:HOST_PORT (QEMU user networking with `restrict=on`: nothing else is reachable).
    pub forwards: Vec<(u16, u16)>,
    pub timeout: Duration,
    pub memory_mib: u64,
    /// vCPUs. One by default: under multi-threaded TCG a 6.12 guest with two vCPUs panicked at
    /// boot once in CI (`int3` in `sched_clock_cpu` while the kernel patched its own text on the
    /// other vCPU), and the scenarios are serial lvm2 commands anyway.
    pub cpus: u32,
}

impl Run {
    pub fn new(name: &str, script: &str) -> Self {
        Self {
            name: name.into(),
            script: script.into(),
            files: Vec::new(),
            binaries: Vec::new(),
            disks: Vec::new(),
            forwards: Vec::new(),
            timeout: Duration::from_secs(300),
            memory_mib: 1024,
            cpus: 1,
        }
    }
    pub fn file(mut self, name: &str, host: impl Into<PathBuf>) -> Self {
        self.files.push((name.into(), host.into()));
        self
    }
    pub fn binary(mut self, name: &str, host: impl Into<PathBuf>) -> Self {
        self.binaries.push((name.into(), host.into()));
        self
    }
    pub fn forward(mut self, guest_port: u16, host_port: u16) -> Self {
        self.forwards.push((guest_port, host_port));
        self
    }
    pub fn disk(mut self, serial: &str, mib: u64) -> Self {
        self.disks.push((serial.into(), mib));
        self
    }
}

/// How a boot ended.
#[derive(Debug)]
pub struct Outcome {
    /// run.sh's exit status.
    pub status: i32,
    pub console: String,
    /// What the script left in `$GUEST_OUT`, unpacked (kept until `work` is dropped).
    pub out: PathBuf,
    pub elapsed: Duration,
    _work: tempfile::TempDir,
}

impl Outcome {
    /// The last `n` console lines, for failure messages.
    pub fn tail(&self, n: usize) -> String {
        tail(&self.console, n)
    }
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.out.join(name)).unwrap_or_else(|e| {
            panic!(
                "the guest left no {name} in $GUEST_OUT ({e}); console:\n{}",
                self.tail(40)
            )
        })
    }
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Boots the guest, runs the script, and returns how it ended. The console is streamed to the
/// test's output as it comes (prefixed with the run's name); a boot that does not finish within
/// the timeout is killed and fails the test with the console's last lines.
pub fn run(image: &Image, spec: &Run) -> Outcome {
    let work = tempfile::Builder::new()
        .prefix(&format!("lvms-guest-{}-", spec.name))
        .tempdir()
        .expect("guest work dir");
    let w = work.path();
    let input = w.join("in");
    std::fs::create_dir_all(&input).expect("mkdir in");
    std::fs::write(input.join("run.sh"), &spec.script).expect("write run.sh");
    for (name, host) in &spec.files {
        std::fs::copy(host, input.join(name))
            .unwrap_or_else(|e| panic!("copying {} into the guest input: {e}", host.display()));
    }
    for (name, host) in &spec.binaries {
        // binutils comes with the C toolchain cargo links with.
        let strip = Command::new("strip")
            .arg("--strip-debug")
            .arg("-o")
            .arg(input.join(name))
            .arg(host)
            .output()
            .expect("running strip (binutils, part of the C toolchain cargo links with)");
        assert!(
            strip.status.success(),
            "strip {}: {}",
            host.display(),
            String::from_utf8_lossy(&strip.stderr)
        );
    }
    let tar = w.join("in.tar");
    let status = Command::new("tar")
        .arg("-cf")
        .arg(&tar)
        .arg("-C")
        .arg(&input)
        .arg(".")
        .status()
        .expect("tar");
    assert!(status.success(), "packing the guest input failed");
    // A virtio disk is read in 512-byte sectors: pad the archive to a whole sector.
    let len = std::fs::metadata(&tar).expect("in.tar").len();
    sized(&tar, len.div_ceil(512) * 512);
    let out_img = w.join("out.img");
    sized(&out_img, 64 << 20);

    let console = w.join("console.log");
    let mut cmd = Command::new(qemu().expect("qemu-system-x86_64 (checked by image())"));
    cmd.args(["-accel", &accel(), "-smp"])
        .arg(spec.cpus.to_string())
        .arg("-m")
        .arg(spec.memory_mib.to_string())
        .args(["-nographic", "-no-reboot", "-nodefaults"])
        .arg("-kernel")
        .arg(image.kernel())
        .arg("-initrd")
        .arg(image.initramfs())
        .args(["-append", "console=ttyS0 quiet panic=-1"])
        .arg("-serial")
        .arg(format!("file:{}", console.display()));
    let mut drive = |path: &Path, serial: &str| {
        cmd.arg("-drive")
            .arg(format!(
                "file={},if=none,id={serial},format=raw",
                path.display()
            ))
            .arg("-device")
            .arg(format!("virtio-blk-pci,drive={serial},serial={serial}"));
    };
    drive(&tar, "lvms-in");
    drive(&out_img, "lvms-out");
    for (serial, mib) in &spec.disks {
        let path = w.join(format!("{serial}.img"));
        sized(&path, mib << 20);
        drive(&path, serial);
    }
    if !spec.forwards.is_empty() {
        let nc = image.dir.join("busybox");
        let fwd: Vec<String> = spec
            .forwards
            .iter()
            .map(|(g, h)| {
                format!(
                    "guestfwd=tcp:{GUEST_HOST}:{g}-cmd:{} nc 127.0.0.1 {h}",
                    nc.display()
                )
            })
            .collect();
        cmd.arg("-netdev")
            .arg(format!("user,id=n0,restrict=on,{}", fwd.join(",")))
            .args(["-device", "virtio-net-pci,netdev=n0"]);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().expect("starting qemu-system-x86_64");

    // Stream the console while the guest runs.
    let mut shown = 0u64;
    // Whole lines only: a line the guest is still writing waits for its newline.
    let show = |shown: &mut u64| {
        let Ok(mut f) = std::fs::File::open(&console) else {
            return;
        };
        let mut new = Vec::new();
        if f.seek(std::io::SeekFrom::Start(*shown)).is_err() || f.read_to_end(&mut new).is_err() {
            return;
        }
        let Some(end) = new.iter().rposition(|b| *b == b'\n') else {
            return;
        };
        *shown += end as u64 + 1;
        for line in String::from_utf8_lossy(&new[..end]).lines() {
            let clean: String = line.chars().filter(|c| !c.is_control()).collect();
            println!("[guest {}] {clean}", spec.name);
        }
    };
    let exit = loop {
        show(&mut shown);
        if let Some(exit) = child.try_wait().expect("waiting for qemu") {
            break exit;
        }
        if started.elapsed() > spec.timeout {
            let _ = child.kill();
            let _ = child.wait();
            let text = std::fs::read_to_string(&console).unwrap_or_default();
            panic!(
                "guest {} did not finish within {:?}; last console lines:\n{}",
                spec.name,
                spec.timeout,
                tail(&text, 40)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    show(&mut shown);
    let elapsed = started.elapsed();
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
    }
    let text = std::fs::read_to_string(&console).unwrap_or_default();
    let status = text
        .lines()
        .filter_map(|l| l.split("LVMS-GUEST-EXIT ").nth(1))
        .filter_map(|s| s.trim().parse::<i32>().ok())
        .next_back()
        .unwrap_or_else(|| {
            panic!(
                "guest {} stopped ({exit}) without an exit marker; qemu said: {stderr}\nlast console lines:\n{}",
                spec.name,
                tail(&text, 40)
            )
        });
    let out = w.join("out");
    std::fs::create_dir_all(&out).expect("mkdir out");
    let untar = Command::new("tar")
        .arg("-xf")
        .arg(&out_img)
        .arg("-C")
        .arg(&out)
        .output()
        .expect("tar -x");
    assert!(
        untar.status.success(),
        "reading the guest's output disk: {}",
        String::from_utf8_lossy(&untar.stderr)
    );
    Outcome {
        status,
        console: text,
        out,
        elapsed,
        _work: work,
    }
}

/// A sparse file of exactly `len` bytes.
fn sized(path: &Path, len: u64) {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    f.set_len(len)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// A kubeconfig for a process in the guest, from one the control plane wrote on the host: the
/// server becomes the forward `GUEST_HOST:guest_port`, verified under the serving certificate's
/// own name (`localhost`), and the certificate files travel into /work. Add the returned files
/// to the [`Run`].
pub fn guest_kubeconfig(host: &Path, guest_port: u16) -> (String, Vec<(String, PathBuf)>) {
    let text = std::fs::read_to_string(host)
        .unwrap_or_else(|e| panic!("kubeconfig {}: {e}", host.display()));
    let mut files = Vec::new();
    let mut out = String::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let file_key = [
            "certificate-authority: ",
            "client-certificate: ",
            "client-key: ",
        ]
        .into_iter()
        .find(|k| trimmed.starts_with(k));
        if trimmed.starts_with("server: ") {
            out.push_str(&format!(
                "{indent}server: https://{GUEST_HOST}:{guest_port}\n{indent}tls-server-name: localhost\n"
            ));
        } else if let Some(key) = file_key {
            let path = PathBuf::from(&trimmed[key.len()..]);
            let name = format!("kube-{}", key.trim_end_matches(": "));
            out.push_str(&format!("{indent}{key}/work/{name}\n"));
            files.push((name, path));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert_eq!(files.len(), 3, "unexpected kubeconfig shape:\n{text}");
    (out, files)
}
