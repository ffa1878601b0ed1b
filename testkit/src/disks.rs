//! Loop-device disks for one test, removed (VG, PV, loop device, symlink) on drop — also when
//! the test fails. Only devices this guard created are ever touched. And what lvm2 sees
//! (VGs, PV labels), with activation off (no device-mapper here).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::dev::operator::NO_DM_LVM_CONFIG;
use serde_json::Value;

pub struct Disk {
    pub loop_dev: String,
    /// `/dev/lvms-e2e-<pid>/<name>` → the loop device (paths must start with /dev/).
    pub link: String,
    image: PathBuf,
}

fn run(cmd: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(cmd)
        .args(args)
        .env("LVM_SUPPRESS_FD_WARNINGS", "1")
        .output()
        .unwrap_or_else(|e| {
            panic!("{cmd}: {e} (install util-linux and lvm2: apt-get install -y lvm2)")
        });
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// An lvm2 command with activation off (`--config NO_DM_LVM_CONFIG`): (success, stdout +
/// stderr).
pub fn lvm(cmd: &str, args: &[&str]) -> (bool, String) {
    let mut all = vec!["--config", NO_DM_LVM_CONFIG];
    all.extend_from_slice(args);
    run(cmd, &all)
}

/// What these tests need and this machine lacks (tools, loop devices), as the fix to apply;
/// `None` if nothing is missing.
pub fn missing_prerequisites(tools: &[&str]) -> Option<String> {
    for tool in tools {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).exists()))
            .unwrap_or(false)
            || Path::new("/usr/sbin").join(tool).exists();
        if !found {
            return Some(format!(
                "{tool} is missing: install lvm2 and util-linux (apt-get install -y lvm2)"
            ));
        }
    }
    (!Path::new("/dev/loop-control").exists()).then(|| {
        "/dev/loop-control is missing: these tests need loop devices (run as root on a host or privileged container)".to_string()
    })
}

/// Loud, never a skip: these tests need root, loop devices and lvm2.
pub fn require_prerequisites() {
    if let Some(missing) = missing_prerequisites(&["losetup", "vgcreate", "lsblk"]) {
        panic!("{missing}");
    }
}

impl Disk {
    pub fn new(dir: &Path, name: &str, size_mb: u64) -> Disk {
        Self::create(dir, name, size_mb, false)
    }

    /// A read-only loop device (`losetup -r`).
    pub fn read_only(dir: &Path, name: &str, size_mb: u64) -> Disk {
        Self::create(dir, name, size_mb, true)
    }

    /// A disk holding an MBR with one partition entry. Loop devices here have no partition
    /// scanning, so the kernel shows no partition: only the table tells the disk is in use.
    pub fn with_partition_table(dir: &Path, name: &str, size_mb: u64) -> Disk {
        Self::create_with(dir, name, size_mb, false, |f| {
            use std::io::{Seek, SeekFrom, Write};
            let mut mbr = [0u8; 512];
            mbr[440..444].copy_from_slice(&0x1234_5678u32.to_le_bytes());
            // status, CHS, type 0x83 (Linux), CHS, first LBA 2048, 4096 sectors
            mbr[446 + 4] = 0x83;
            mbr[446 + 8..446 + 12].copy_from_slice(&2048u32.to_le_bytes());
            mbr[446 + 12..446 + 16].copy_from_slice(&4096u32.to_le_bytes());
            mbr[510] = 0x55;
            mbr[511] = 0xAA;
            f.seek(SeekFrom::Start(0)).expect("seek");
            f.write_all(&mbr).expect("writing the MBR");
        })
    }

    fn create(dir: &Path, name: &str, size_mb: u64, read_only: bool) -> Disk {
        Self::create_with(dir, name, size_mb, read_only, |_| {})
    }

    fn create_with(
        dir: &Path,
        name: &str,
        size_mb: u64,
        read_only: bool,
        fill: impl FnOnce(&mut std::fs::File),
    ) -> Disk {
        std::fs::create_dir_all(dir).expect("disk dir");
        let image = dir.join(format!("{name}.img"));
        let mut f = std::fs::File::create(&image).expect("image file");
        f.set_len(size_mb << 20).expect("sizing the image");
        fill(&mut f);
        drop(f);
        let image_s = image.to_string_lossy().into_owned();
        let mut args = vec!["-f", "--show"];
        if read_only {
            args.push("-r");
        }
        args.push(&image_s);
        let (ok, out) = run("losetup", &args);
        assert!(ok, "losetup -f failed: {out}");
        let loop_dev = out.trim().to_string();
        let link_dir = PathBuf::from(format!("/dev/lvms-e2e-{}", std::process::id()));
        std::fs::create_dir_all(&link_dir).expect("/dev link dir");
        let link = link_dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&loop_dev, &link).expect("symlink");
        Disk {
            loop_dev,
            link: link.to_string_lossy().into_owned(),
            image,
        }
    }
}

impl Disk {
    /// The disk vanishes from the host (as a failed drive that reports no medium): its backing
    /// file is emptied and the loop device re-reads its size, 0. The device stays attached
    /// until [`Drop`]: a detached loop number goes to the next `losetup -f` of any test
    /// running alongside, and the path that named this disk then leads to that test's disk.
    pub fn vanish(&self) {
        let emptied = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.image)
            .and_then(|f| f.set_len(0));
        assert!(
            emptied.is_ok(),
            "emptying {}: {emptied:?}",
            self.image.display()
        );
        let (ok, out) = run("losetup", &["--set-capacity", &self.loop_dev]);
        assert!(ok, "losetup --set-capacity {}: {out}", self.loop_dev);
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        // Whatever VG this PV ended up in: remove it, then the PV label, then the device.
        let (_, vg) = lvm("pvs", &["--noheadings", "-o", "vg_name", &self.loop_dev]);
        let vg = vg.trim();
        if !vg.is_empty() && !vg.contains(' ') {
            lvm("vgremove", &["-f", vg]);
        }
        lvm("pvremove", &["-ff", "-y", &self.loop_dev]);
        run("losetup", &["-d", &self.loop_dev]);
        let _ = std::fs::remove_file(&self.link);
        let _ = std::fs::remove_file(&self.image);
        // The per-process link directory goes with its last disk (remove_dir fails while
        // other links remain).
        if let Some(dir) = Path::new(&self.link).parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// The VGs lvm2 sees (tagged or not).
pub fn vg_names() -> Vec<String> {
    let (_, out) = lvm("vgs", &["--noheadings", "-o", "vg_name"]);
    out.lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty() && !l.contains(' '))
        .collect()
}

/// Whether `dev` carries an LVM PV label (in a VG or not).
pub fn labelled(dev: &str) -> bool {
    let (ok, out) = lvm("pvs", &["--noheadings", "-o", "pv_name"]);
    assert!(ok, "pvs failed: {out}");
    out.lines().any(|l| l.trim() == dev)
}

/// The PVs of `vg`.
pub fn pvs_of(vg: &str) -> Vec<String> {
    let (_, out) = lvm("pvs", &["--noheadings", "-o", "pv_name,vg_name"]);
    out.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (pv, v) = (f.next()?, f.next()?);
            (v == vg).then(|| pv.to_string())
        })
        .collect()
}

/// Every PV label lvm2 sees: (device, VG name or "").
pub fn pvs() -> Vec<(String, String)> {
    let (ok, out) = lvm("pvs", &["--reportformat", "json", "-o", "pv_name,vg_name"]);
    assert!(ok, "pvs --reportformat json failed: {out}");
    let start = out.find('{').unwrap_or(0);
    let v: Value = serde_json::Deserializer::from_str(&out[start..])
        .into_iter::<Value>()
        .next()
        .and_then(Result::ok)
        .unwrap_or_else(|| panic!("pvs json: {out}"));
    v["report"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["pv"].as_array().cloned().unwrap_or_default())
        .map(|pv| {
            (
                pv["pv_name"].as_str().unwrap_or_default().to_string(),
                pv["vg_name"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}
