//! A real Kubernetes node: kubelet, kube-proxy and containerd 2 in a QEMU guest running Debian's
//! 6.12 cloud kernel (`deploy/dev/build-node.sh`), joined to a control plane started with
//! [`Options::real_nodes`](crate::dev::Options). lvms runs there only as Pods, from images
//! imported into the node's containerd (`deploy/dev/build-images.sh`): nothing of lvms is
//! started by a test directly.
//!
//! The node's root is a fresh ext4 disk made from the built root for each node, the images
//! imported into its containerd store on the host, and reused by a reboot, as a real node keeps
//! its disk; its configuration (credentials) is a tar on a second disk; its data disks have serials the LVMCluster names. The guest reaches the API
//! server through one forward (10.0.2.100:<port>, the address it is advertised at), and the
//! host reaches kubelet's read-only port through another.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Api;

use crate::dev::ControlPlane;
use crate::dev::control_plane::GUEST_HOST;
use crate::env::cached_build;

/// What `deploy/dev/build-node.sh` made: the kernel, the initramfs and the root directory.
#[derive(Clone, Debug)]
pub struct NodeImage {
    pub dir: PathBuf,
}

/// The node build (cached by its inputs; the first build takes a few minutes).
pub fn node_image() -> NodeImage {
    NodeImage {
        dir: cached_build("deploy/dev/build-node.sh", "the real node", &[]),
    }
}

/// The images `deploy/dev/build-images.sh` made for `lvms_bin`, in `out`: one OCI archive each
/// and `images.txt`; LVMS's own image too when its binary is built (the swap scenarios say so
/// loudly when it is not).
pub fn build_images(lvms_bin: &Path, out: &Path) -> PathBuf {
    let out_s = out.display().to_string();
    let bin_s = lvms_bin.display().to_string();
    let mut cmd = Command::new("bash");
    if let Ok(go) = crate::lvms_go::bin() {
        cmd.env("LVMS_GO_BIN", go)
            .env("LVMS_GO_TAG", crate::lvms_go::VERSION);
    }
    let status = cmd
        .arg(crate::env::repo().join("deploy/dev/build-images.sh"))
        .args([&bin_s, &out_s])
        .stdout(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("running build-images.sh: {e}"));
    assert!(
        status.success(),
        "deploy/dev/build-images.sh {bin_s} {out_s} failed"
    );
    out.to_path_buf()
}

/// One node to boot.
#[derive(Clone, Debug)]
pub struct NodeSpec {
    pub name: String,
    /// Data disks: (serial, MiB), at /dev/disk/by-id/virtio-<serial> on the node.
    pub disks: Vec<(String, u64)>,
    pub memory_mib: u64,
    pub cpus: u32,
    /// The root disk's size (sparse).
    pub root_gib: u64,
}

impl NodeSpec {
    pub fn new(name: &str, disks: &[(&str, u64)]) -> Self {
        NodeSpec {
            name: name.to_string(),
            disks: disks.iter().map(|(s, m)| (s.to_string(), *m)).collect(),
            memory_mib: 4096,
            cpus: 2,
            root_gib: 8,
        }
    }
}

/// A booted node (killed, with its QEMU, when dropped).
pub struct RealNode {
    pub spec: NodeSpec,
    pub work: PathBuf,
    image: NodeImage,
    api_port: u16,
    /// The host's port for kubelet's read-only port (10255): its metrics.
    pub kubelet_port: u16,
    qemu: Option<Child>,
    boots: u32,
    /// Boots that died of an emulator fault and were powered on again (see `emulation_fault`).
    pub emulation_faults: u32,
    pub booted_at: Instant,
}

/// How many times one wait for Ready powers a node on again after an emulator fault.
const EMULATION_FAULT_RETRIES: u32 = 2;

/// The Oops line when a boot's kernel died of what QEMU's multi-threaded TCG (7.2, no KVM on
/// this machine kind) does to a kernel patching its own text: an `int3` trap in kernel code
/// whose bytes are already the patched instruction (static keys flipped as kubelet makes its
/// first cgroups; seen in CI in `kmem_cache_alloc_noprof` and `secure_ipv4_port_ephemeral`).
/// Any other panic is not this and fails the test.
pub fn emulation_fault(console: &str) -> Option<&str> {
    if !console.contains("Kernel panic - not syncing") {
        return None;
    }
    console
        .lines()
        .find(|l| l.contains("Oops: int3:"))
        .map(str::trim)
}

fn sized(path: &Path, bytes: u64) {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    f.set_len(bytes).expect("set_len");
}

/// A kubeconfig with everything inline (the node has no file of the host's).
fn kubeconfig(server: &str, ca: &Path, crt: &Path, key: &Path) -> String {
    let b64 = |p: &Path| {
        let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        base64(&bytes)
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: lvms\n  cluster:\n    server: {server}\n    certificate-authority-data: {}\nusers:\n- name: node\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\ncontexts:\n- name: lvms\n  context: {{cluster: lvms, user: node}}\ncurrent-context: lvms\n",
        b64(ca),
        b64(crt),
        b64(key)
    )
}

fn base64(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The host's loop mount of the node's root while its images are imported. [`LoopMount::unmount`]
/// is the checked way out; dropping it (a preload step panicked) only tries.
struct LoopMount {
    mnt: PathBuf,
    img: PathBuf,
    done: bool,
}

impl LoopMount {
    /// Unmounts and proves the root is the node's alone again: not mounted here, no loop device
    /// on it, and its journal clean. A root QEMU boots while this host still has it mounted is
    /// written by two kernels at once (seen in CI: the node's ext4 "recovery complete" on a fresh
    /// disk, then kubelet's own new certificate read back empty, and no node).
    fn unmount(mut self) {
        let mut last = String::new();
        for _ in 0..240 {
            match Command::new("umount").arg(&self.mnt).output() {
                Ok(o) if o.status.success() => break,
                Ok(o) => last = String::from_utf8_lossy(&o.stderr).trim().to_string(),
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        self.done = true;
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        // As the kernel lists it (a symlink in the work path resolved).
        let mnt = std::fs::canonicalize(&self.mnt)
            .unwrap_or_else(|_| self.mnt.clone())
            .display()
            .to_string();
        assert!(
            !mounts
                .lines()
                .any(|l| l.split(' ').nth(1) == Some(mnt.as_str())),
            "the node's root is still mounted at {mnt} after a minute of umount ({last}); what holds it:\n{}",
            holders(&self.mnt)
        );
        let out = Command::new("losetup")
            .arg("-j")
            .arg(&self.img)
            .output()
            .expect("losetup (util-linux)");
        let attached = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !attached.is_empty() {
            // autoclear detaches it once the last user is gone; a stray one is detached here.
            for dev in attached.lines().filter_map(|l| l.split(':').next()) {
                let _ = Command::new("losetup").args(["-d", dev]).status();
            }
        }
        let out = Command::new("dumpe2fs")
            .arg("-h")
            .arg(&self.img)
            .output()
            .expect("dumpe2fs (e2fsprogs)");
        let head = String::from_utf8_lossy(&out.stdout);
        assert!(
            root_is_clean(&head),
            "the node's root {} is not clean after the image import's unmount:\n{head}",
            self.img.display()
        );
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        for _ in 0..20 {
            if Command::new("umount")
                .arg(&self.mnt)
                .status()
                .is_ok_and(|s| s.success())
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// Who has files open under `mnt` (fuser's answer, for a failure message).
fn holders(mnt: &Path) -> String {
    Command::new("fuser")
        .arg("-vm")
        .arg(mnt)
        .output()
        .map(|o| {
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        })
        .unwrap_or_else(|e| format!("fuser: {e}"))
}

/// Whether `dumpe2fs -h` shows a cleanly unmounted ext4: state clean, no journal to recover.
fn root_is_clean(dumpe2fs_head: &str) -> bool {
    let field = |name: &str| {
        dumpe2fs_head
            .lines()
            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
    };
    field("Filesystem state:").is_some_and(|s| s == "clean")
        && field("Filesystem features:")
            .is_some_and(|f| !f.split_whitespace().any(|x| x == "needs_recovery"))
}

/// Imports every image of `images` (its images.txt) into the containerd store on the node's
/// root disk, on the host: the root loop-mounted, the node's own (static) containerd serving a
/// private socket with its store there. Under emulation the node's own import took ~3.5 min of
/// its boot; here it takes seconds. The node's containerd finds the images and their unpacked
/// snapshots as its own.
fn preload_images(image: &NodeImage, root_img: &Path, images: &Path, work: &Path) {
    let bin = image.dir.join("root/usr/local/bin");
    let mnt = work.join("root-mnt");
    let state = work.join("preload-state");
    std::fs::create_dir_all(&mnt).expect("mount point");
    std::fs::create_dir_all(&state).expect("containerd state dir");
    let out = Command::new("mount")
        .arg("-o")
        .arg("loop")
        .arg(root_img)
        .arg(&mnt)
        .output()
        .expect("mount (util-linux)");
    assert!(
        out.status.success(),
        "loop-mounting the node's root to import its images: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mounted = LoopMount {
        mnt: mnt.clone(),
        img: root_img.to_path_buf(),
        done: false,
    };
    let sock = state.join("containerd.sock");
    let config = work.join("preload-containerd.toml");
    std::fs::write(
        &config,
        format!(
            "version = 3
root = \"{}\"
state = \"{}\"
[grpc]
  address = \"{}\"
",
            mnt.join("var/lib/containerd").display(),
            state.display(),
            sock.display()
        ),
    )
    .expect("containerd config");
    let mut cmd = Command::new(bin.join("containerd"));
    cmd.arg("-c").arg(&config);
    let mut containerd = crate::dev::process::spawn(
        cmd,
        &work.join("preload-containerd.log"),
        crate::dev::Lifetime::DieWithParent,
    )
    .expect("starting containerd for the image import");
    let started = Instant::now();
    while !sock.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "containerd for the image import did not start; see {}",
            work.join("preload-containerd.log").display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let list = std::fs::read_to_string(images.join("images.txt")).expect("images.txt");
    for line in list.lines().filter(|l| !l.trim().is_empty()) {
        let file = line
            .split_whitespace()
            .nth(1)
            .expect("images.txt: name file digest");
        let out = Command::new(bin.join("ctr"))
            .arg("--address")
            .arg(&sock)
            .args([
                "-n",
                "k8s.io",
                "images",
                "import",
                "--snapshotter",
                "overlayfs",
            ])
            .arg(images.join(file))
            .output()
            .expect("ctr");
        assert!(
            out.status.success(),
            "ctr images import {file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    crate::dev::process::terminate_child(&mut containerd, Duration::from_secs(10));
    mounted.unmount();
}

impl RealNode {
    /// Makes the node's disks and configuration in `work` and boots it. The node joins `cp`
    /// as `spec.name` (kubelet's client certificate is `system:node:<name>`).
    pub fn boot(cp: &ControlPlane, images: &Path, spec: NodeSpec, work: &Path) -> RealNode {
        let image = node_image();
        std::fs::create_dir_all(work).expect("node work dir");
        // The root: a fresh ext4 filesystem holding the built root (mke2fs -d, no mount).
        let root = work.join("root.img");
        let _ = std::fs::remove_file(&root);
        sized(&root, spec.root_gib << 30);
        let out = Command::new("mke2fs")
            .args(["-q", "-t", "ext4", "-L", "lvms-node", "-d"])
            .arg(image.dir.join("root"))
            .arg(&root)
            .output()
            .expect("mke2fs (e2fsprogs)");
        assert!(
            out.status.success(),
            "mke2fs -d of the node's root: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        preload_images(&image, &root, images, work);
        // The configuration: who the node is and how it reaches the API server.
        let cfg = work.join("config");
        let _ = std::fs::remove_dir_all(&cfg);
        std::fs::create_dir_all(cfg.join("etc/kubernetes")).expect("config dir");
        let server = format!("https://{GUEST_HOST}:{}", cp.api_port);
        let ca = cp.pki.serving_ca();
        let (crt, key) = cp
            .pki
            .client_cert(&format!("system:node:{}", spec.name), Some("system:nodes"))
            .expect("the node's client certificate");
        std::fs::write(
            cfg.join("etc/kubernetes/kubelet.kubeconfig"),
            kubeconfig(&server, &ca, &crt, &key),
        )
        .expect("kubelet.kubeconfig");
        let (crt, key) = cp
            .pki
            .client_cert("system:kube-proxy", None)
            .expect("kube-proxy's client certificate");
        std::fs::write(
            cfg.join("etc/kubernetes/kube-proxy.kubeconfig"),
            kubeconfig(&server, &ca, &crt, &key),
        )
        .expect("kube-proxy.kubeconfig");
        let (crt, key) = cp
            .pki
            .kubelet_serving(&spec.name, &[[10, 0, 2, 15].into()])
            .expect("kubelet's serving certificate");
        std::fs::copy(&crt, cfg.join("etc/kubernetes/kubelet-serving.crt"))
            .expect("kubelet-serving.crt");
        std::fs::copy(&key, cfg.join("etc/kubernetes/kubelet-serving.key"))
            .expect("kubelet-serving.key");
        std::fs::copy(&ca, cfg.join("etc/kubernetes/ca.crt")).expect("ca.crt");
        std::fs::write(cfg.join("node.env"), format!("NODE_NAME={}\n", spec.name))
            .expect("node.env");
        let tar = work.join("config.tar");
        let status = Command::new("tar")
            .arg("-chf")
            .arg(&tar)
            .arg("-C")
            .arg(&cfg)
            .arg(".")
            .status()
            .expect("tar");
        assert!(status.success(), "packing the node's configuration failed");
        let len = std::fs::metadata(&tar).expect("config.tar").len();
        sized(&tar, len.div_ceil(512) * 512);
        for (serial, mib) in &spec.disks {
            assert!(
                serial.len() <= 20,
                "disk serial {serial:?} is over 20 bytes"
            );
            sized(&work.join(format!("{serial}.img")), mib << 20);
        }
        let kubelet_port = crate::dev::process::free_port().expect("a free port");
        let mut node = RealNode {
            spec,
            work: work.to_path_buf(),
            image,
            api_port: cp.api_port,
            kubelet_port,
            qemu: None,
            boots: 0,
            emulation_faults: 0,
            booted_at: Instant::now(),
        };
        node.start();
        node
    }

    fn console_path(&self) -> PathBuf {
        self.work.join(format!("console-{}.log", self.boots))
    }

    fn start(&mut self) {
        self.boots += 1;
        let qemu = ["/usr/bin/qemu-system-x86_64", "/usr/local/bin/qemu-system-x86_64"]
            .into_iter()
            .find(|p| Path::new(p).is_file())
            .expect("qemu-system-x86_64 is missing: apt-get install -y --no-install-recommends qemu-system-x86 (make test-deps)");
        let w = &self.work;
        let mut cmd = Command::new(qemu);
        cmd.args(["-accel", &crate::guest::accel(), "-smp"])
            .arg(self.spec.cpus.to_string())
            .arg("-m")
            .arg(self.spec.memory_mib.to_string())
            .args(["-nographic", "-no-reboot", "-nodefaults"])
            .arg("-kernel")
            .arg(self.image.dir.join("vmlinuz"))
            .arg("-initrd")
            .arg(self.image.dir.join("initramfs.cpio"))
            .args(["-append", crate::guest::KERNEL_ARGS])
            .arg("-serial")
            .arg(format!("file:{}", self.console_path().display()));
        let mut drive = |path: PathBuf, serial: &str, ro: &str| {
            cmd.arg("-drive")
                .arg(format!(
                    "file={},if=none,id={serial},format=raw{ro}",
                    path.display()
                ))
                .arg("-device")
                .arg(format!("virtio-blk-pci,drive={serial},serial={serial}"));
        };
        drive(w.join("root.img"), "lvms-node-root", "");
        // Read-only, as the kernel then shows it: dynamic discovery (LVMS's, lvms's) skips it,
        // where a real node has no such disk.
        drive(w.join("config.tar"), "lvms-node-config", ",readonly=on");
        for (serial, _) in &self.spec.disks.clone() {
            drive(w.join(format!("{serial}.img")), serial, "");
        }
        // The host end of the API server's forward: one `nc` per connection (the node's static
        // busybox runs on the host too).
        let nc = self.image.dir.join("root/usr/bin/busybox");
        cmd.arg("-netdev")
            .arg(format!(
                "user,id=n0,restrict=on,guestfwd=tcp:{GUEST_HOST}:{p}-cmd:{nc} nc 127.0.0.1 {p},hostfwd=tcp:127.0.0.1:{k}-:10255",
                p = self.api_port,
                nc = nc.display(),
                k = self.kubelet_port
            ))
            .args(["-device", "virtio-net-pci,netdev=n0,romfile="]);
        self.booted_at = Instant::now();
        // QEMU dies with the test process, also a SIGKILLed one.
        let log = w.join(format!("qemu-{}.log", self.boots));
        self.qemu = Some(
            crate::dev::process::spawn(cmd, &log, crate::dev::Lifetime::DieWithParent)
                .expect("starting qemu-system-x86_64"),
        );
    }

    /// The console of the current boot.
    pub fn console(&self) -> String {
        std::fs::read_to_string(self.console_path()).unwrap_or_default()
    }

    /// The last `n` lines of the current boot's console.
    pub fn console_tail(&self, n: usize) -> String {
        crate::process::tail(&self.console(), n)
    }

    /// Whether QEMU still runs.
    pub fn running(&mut self) -> bool {
        self.qemu
            .as_mut()
            .is_some_and(|q| q.try_wait().ok().flatten().is_none())
    }

    /// Pulls the plug: QEMU is killed, as a node losing power (the disks keep what reached them).
    pub fn power_off(&mut self) {
        if let Some(mut q) = self.qemu.take() {
            let _ = q.kill();
            let _ = q.wait();
        }
    }

    /// Power off, then boot again from the same disks.
    pub fn reboot(&mut self) {
        self.power_off();
        self.start();
    }

    /// Waits until the Node is Ready, failing with the console when QEMU stops or `timeout`
    /// passes.
    pub async fn wait_ready(&mut self, client: &kube::Client, timeout: Duration) -> Duration {
        self.wait_ready_booted(client, timeout, None).await
    }

    /// Power-cycles the node and waits until kubelet of the new boot reports it Ready: the
    /// Node's `nodeInfo.bootID` must change first, or the old boot's Ready (the Node controller
    /// marks it NotReady only after its grace) would count as the new one's.
    pub async fn reboot_and_wait(&mut self, client: &kube::Client, timeout: Duration) -> Duration {
        let api: Api<Node> = Api::all(client.clone());
        let old = api
            .get(&self.spec.name)
            .await
            .ok()
            .and_then(|n| n.status?.node_info.map(|i| i.boot_id))
            .unwrap_or_else(|| {
                panic!("node {}: no nodeInfo.bootID to reboot from", self.spec.name)
            });
        let started = Instant::now();
        self.reboot();
        self.wait_ready_booted(client, timeout, Some(&old)).await;
        started.elapsed()
    }

    async fn wait_ready_booted(
        &mut self,
        client: &kube::Client,
        timeout: Duration,
        not_boot: Option<&str>,
    ) -> Duration {
        let api: Api<Node> = Api::all(client.clone());
        let started = Instant::now();
        let mut retries = 0;
        loop {
            if let Ok(Some(n)) = api.get_opt(&self.spec.name).await {
                let status = n.status.unwrap_or_default();
                let new_boot = not_boot.is_none_or(|old| {
                    status
                        .node_info
                        .as_ref()
                        .is_some_and(|i| !i.boot_id.is_empty() && i.boot_id != old)
                });
                let ready = status
                    .conditions
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True");
                if ready && new_boot {
                    return started.elapsed();
                }
            }
            if !self.running()
                && retries < EMULATION_FAULT_RETRIES
                && let Some(oops) = emulation_fault(&self.console()).map(str::to_string)
            {
                // The power-cycle is what a reboot is anyway: the disks keep what reached them,
                // and lvms must come up from that again.
                retries += 1;
                self.emulation_faults += 1;
                eprintln!(
                    "== node {}: boot {} died of an emulator fault ({oops}; docs/testing.md), \
                     powering it on again",
                    self.spec.name, self.boots
                );
                self.start();
                continue;
            }
            let console = self.console();
            assert!(
                kubelet_ends(&console) < KUBELET_ENDS_GIVEN_UP,
                "node {}'s kubelet ended {KUBELET_ENDS_GIVEN_UP} times before the node was \
                 Ready (its errors are on the console); console:\n{}",
                self.spec.name,
                crate::process::tail(&console, 60)
            );
            assert!(
                self.running(),
                "node {} stopped before it was Ready; console:\n{}",
                self.spec.name,
                self.console_tail(60)
            );
            assert!(
                started.elapsed() < timeout,
                "node {} not Ready within {timeout:?}; console:\n{}",
                self.spec.name,
                self.console_tail(60)
            );
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }

    /// kubelet's `/metrics` (its read-only port, forwarded to the host).
    pub fn kubelet_metrics(&self) -> Result<String, String> {
        kubelet_read_only_get(self.kubelet_port, "/metrics")
    }

    /// A file of the node's root disk, read with debugfs (kubelet's and containerd's logs).
    pub fn read_root_file(&self, path: &str) -> Option<String> {
        let out = Command::new("debugfs")
            .args(["-c", "-R", &format!("cat {path}")])
            .arg(self.work.join("root.img"))
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// How many ends of kubelet the node gives before a wait for Ready stops (node-init.sh restarts
/// it each time, as systemd would): a kubelet that cannot start does not start by waiting.
const KUBELET_ENDS_GIVEN_UP: usize = 3;

/// How many times kubelet ended in this boot's console (node-init.sh says each).
fn kubelet_ends(console: &str) -> usize {
    console
        .lines()
        .filter(|l| l.starts_with("LVMS-NODE kubelet exited"))
        .count()
}

/// A GET of `path` on kubelet's read-only port, forwarded to the host at `port`
/// ([`RealNode::kubelet_port`]): `/metrics`, `/stats/summary`. Blocking; the body of a 200.
pub fn kubelet_read_only_get(port: u16, path: &str) -> Result<String, String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))
        .map_err(|e| format!("kubelet's read-only port: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let mut body = String::new();
    s.read_to_string(&mut body).map_err(|e| e.to_string())?;
    match body.split_once("\r\n\r\n") {
        Some((head, rest))
            if head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200") =>
        {
            Ok(rest.to_string())
        }
        _ => Err(format!(
            "kubelet answered: {}",
            crate::process::tail(&body, 5)
        )),
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        self.power_off();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard_alphabet_and_padding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn only_a_clean_state_without_a_journal_to_recover_is_a_clean_root() {
        let head = |state: &str, features: &str| {
            format!(
                "Filesystem volume name:   lvms-node\nFilesystem features:      {features}\n\
                 Filesystem state:         {state}\nErrors behavior:          Continue\n"
            )
        };
        let ok = "has_journal ext_attr resize_inode dir_index filetype extent 64bit";
        assert!(root_is_clean(&head("clean", ok)));
        // Still mounted somewhere (or cut off mid-write): the journal wants replaying.
        assert!(!root_is_clean(&head(
            "clean",
            "has_journal ext_attr filetype needs_recovery extent"
        )));
        assert!(!root_is_clean(&head("not clean", ok)));
        assert!(!root_is_clean(&head("clean with errors", ok)));
        // dumpe2fs printed nothing we could read: not proven clean.
        assert!(!root_is_clean(""));
    }

    #[test]
    fn kubelet_ends_are_counted_from_node_inits_lines_only() {
        let console = "LVMS-NODE kubelet started\n\
            E1202 16:11:48.447392 275 run.go:72] \"command failed\" err=\"kubelet exited\"\n\
            LVMS-NODE kubelet exited (status 1), restarting in 5 s\n\
            [   30.1] random line\n\
            LVMS-NODE kubelet exited (status 1), restarting in 5 s\n";
        assert_eq!(kubelet_ends(console), 2);
        assert_eq!(kubelet_ends("LVMS-NODE kubelet started\n"), 0);
    }

    #[test]
    fn only_an_int3_oops_that_panicked_is_an_emulation_fault() {
        let oops = "[   16.215992] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI";
        let panic = "[   16.219835] Kernel panic - not syncing: Fatal exception in interrupt";
        let died = format!("LVMS-NODE kubelet started\n{oops}\nRIP: ...\n{panic}\n");
        assert_eq!(
            emulation_fault(&died),
            Some("[   16.215992] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI")
        );
        // An int3 oops the kernel survived: the boot did not die of it.
        assert_eq!(emulation_fault(&format!("{oops}\n")), None);
        // Any other panic fails the test.
        let bug = "BUG: kernel NULL pointer dereference\nOops: 0002 [#1]\n";
        assert_eq!(emulation_fault(&format!("{bug}{panic}\n")), None);
        assert_eq!(emulation_fault(""), None);
    }
}
