//! The real-kernel tier: a QEMU guest running a stock Debian cloud kernel (device-mapper,
//! thin pools, snapshots, RAID, xfs) built by `deploy/dev/build-guest.sh`. A test hands the
//! guest a shell script and files, and scratch disks; the guest runs the script as root, and
//! the test gets its exit status, its console and the files it left in `$GUEST_OUT`.
//!
//! - [`run`]: one boot, one script ([`Run`]);
//! - [`Group`]: one boot for a whole test group, each scenario a [`Job`] with its own scratch
//!   disks, run side by side with the others (the reference's cost model: boot once, then
//!   seconds per scenario).
//!
//! Facts behind the choices are in `shared/reference/vm-tier.md`: no 9p, so files travel as tar
//! archives on raw virtio disks (serials `lvms-in` / `lvms-out`); the serial console carries the
//! log and the exit markers; KVM is used only where the CPU exposes vmx/svm, software emulation
//! (TCG) otherwise.

mod boot;
mod group;
mod inputs;
mod kubeconfig;
mod relay;
mod run;
mod test_args;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

pub use group::{Group, GroupSpec, Job, JobHandle, Member};
pub use inputs::{Inputs, WithInputs};
pub use kubeconfig::{guest_kubeconfig, host_api_port};
pub use relay::UnixRelay;
pub use run::{Outcome, Run, run};
pub use test_args::{TestArgs, report, with_needs};

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
    /// A short DNS-label-safe tag of the release (`k6-1`, `k6-12`), for names that must differ
    /// between kernels running side by side (Nodes are cluster-scoped).
    pub fn tag(&self) -> String {
        let release = self.release();
        let mm: Vec<&str> = release
            .split(|c: char| !c.is_ascii_digit())
            .take(2)
            .collect();
        format!("k{}", mm.join("-"))
    }
}

/// The guest for `LVMS_GUEST_KERNEL` (default: Debian's current cloud kernel).
pub fn image() -> &'static Image {
    static IMAGE: OnceLock<Image> = OnceLock::new();
    IMAGE.get_or_init(|| image_for(&std::env::var("LVMS_GUEST_KERNEL").unwrap_or_default()).clone())
}

/// Builds (or finds cached) the guest for `kernel` (what `LVMS_GUEST_KERNEL` takes: a package
/// name, a version prefix such as `6.12`, or empty for Debian's current cloud kernel). A missing
/// QEMU, apt or package is a loud failure naming the fix, never a skip.
pub fn image_for(kernel: &str) -> Image {
    static IMAGES: OnceLock<Mutex<BTreeMap<String, Image>>> = OnceLock::new();
    let images = IMAGES.get_or_init(Mutex::default);
    // Held across the build: two tests asking for one kernel build it once.
    let mut built = images.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = built.get(kernel) {
        return i.clone();
    }
    assert!(
        qemu().is_some(),
        "qemu-system-x86_64 is missing: the real-kernel tests boot a guest; apt-get install -y --no-install-recommends qemu-system-x86 (deploy/dev/test-deps.sh does it as root)"
    );
    let image = Image {
        dir: cached_build(
            "deploy/dev/build-guest.sh",
            &format!("the test guest (LVMS_GUEST_KERNEL={kernel:?})"),
            &[("LVMS_GUEST_KERNEL", kernel)],
        ),
    };
    built.insert(kernel.to_string(), image.clone());
    image
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

/// The guests' kernel command line: fewer static keys flipped while the guest runs, since QEMU
/// 7.2's multi-threaded TCG can run a vCPU on kernel text another vCPU is patching (an `int3`
/// oops; see `realnode::emulation_fault`). `tsc=reliable`: under TCG the clocksource watchdog
/// finds the emulated TSC skewed and flips sched_clock's key mid-run (an oops in
/// `sched_clock_cpu` once). `kfence.sample_interval=0`: KFENCE flips its allocation gate every
/// sample interval from a kworker (a slab oops in a kworker on 6.12 once). `cgroup.memory=nokmem`:
/// no kernel-memory accounting, whose key flips when the first memory cgroup comes online,
/// i.e. as containerd and kubelet start (an oops in `kmem_cache_alloc_noprof` at the node's
/// reboot). Keys flipped once by networking (`secure_ipv4_port_ephemeral`) remain.
pub(crate) const KERNEL_ARGS: &str =
    "console=ttyS0 panic=-1 tsc=reliable kfence.sample_interval=0 cgroup.memory=nokmem";

/// KVM when `/dev/kvm` opens and the CPU exposes hardware virtualisation; on this machine kind
/// it does not (KVM then hangs or aborts at boot), so TCG. `LVMS_GUEST_ACCEL` overrides.
pub(crate) fn accel() -> String {
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

/// The last `n` lines of `text`, for failure messages.
pub(crate) fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_name_major_and_minor() {
        let tag = |r: &str| {
            Image {
                dir: PathBuf::from(format!("/c/guest-{r}")),
            }
            .tag()
        };
        assert_eq!(tag("6.1.0-56-cloud-amd64"), "k6-1");
        assert_eq!(tag("6.12.117+deb12-cloud-amd64"), "k6-12");
    }
}
