//! One QEMU boot: the input directory packed onto the `lvms-in` disk, scratch disks, loopback
//! forwards, the console streamed line by line, and the `lvms-out` disk unpacked at the end.

use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{GUEST_HOST, Image, accel, qemu, tail};

/// What one boot needs; `input` already holds `run.sh` and everything else for /work.
pub(crate) struct Boot<'a> {
    pub name: &'a str,
    pub work: &'a Path,
    pub input: &'a Path,
    pub disks: &'a [(String, u64)],
    pub forwards: &'a [(u16, u16)],
    pub timeout: Duration,
    pub memory_mib: u64,
    pub cpus: u32,
}

/// How the boot ended: guest-init's exit marker, the console, and `$GUEST_OUT` unpacked.
pub(crate) struct Booted {
    pub status: i32,
    pub console: String,
    pub out: PathBuf,
    pub elapsed: Duration,
}

/// Boots the guest and waits for it to power off; `on_line` sees each whole console line as it
/// comes. A boot past its timeout is killed and is an error carrying the console's last lines.
pub(crate) fn boot(
    image: &Image,
    b: &Boot<'_>,
    on_line: &mut dyn FnMut(&str),
) -> Result<Booted, String> {
    let w = b.work;
    let tar = w.join("in.tar");
    let status = Command::new("tar")
        .arg("-cf")
        .arg(&tar)
        .arg("-C")
        .arg(b.input)
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
    let mut cmd = Command::new(qemu().expect("qemu-system-x86_64 (checked by image_for())"));
    cmd.args(["-accel", &accel(), "-smp"])
        .arg(b.cpus.to_string())
        .arg("-m")
        .arg(b.memory_mib.to_string())
        .args(["-nographic", "-no-reboot", "-nodefaults"])
        .arg("-kernel")
        .arg(image.kernel())
        .arg("-initrd")
        .arg(image.initramfs())
        .args(["-append", &format!("{} quiet", super::KERNEL_ARGS)])
        .arg("-serial")
        .arg(format!("file:{}", console.display()));
    // The root PCI bus has ~30 free slots and a group's jobs bring more disks than that (each
    // job an output disk and its scratch disks): all but the input and output disks sit on PCI
    // bridges, BRIDGE_SLOTS each (disks are found by serial, so where they sit does not matter).
    const BRIDGE_SLOTS: usize = 30;
    let mut on_bridges = 0usize;
    let mut drive = |path: &Path, serial: &str, bridged: bool| {
        cmd.arg("-drive").arg(format!(
            "file={},if=none,id={serial},format=raw",
            path.display()
        ));
        let mut device = format!("virtio-blk-pci,drive={serial},serial={serial}");
        if bridged {
            let (bridge, slot) = (on_bridges / BRIDGE_SLOTS, on_bridges % BRIDGE_SLOTS + 1);
            if slot == 1 {
                cmd.arg("-device").arg(format!(
                    "pci-bridge,id=br{bridge},chassis_nr={}",
                    bridge + 1
                ));
            }
            device.push_str(&format!(",bus=br{bridge},addr={slot:#x}"));
            on_bridges += 1;
        }
        cmd.arg("-device").arg(device);
    };
    drive(&tar, "lvms-in", false);
    drive(&out_img, "lvms-out", false);
    for (serial, mib) in b.disks {
        // virtio-blk serials are 20 bytes at most; a longer one would be cut and never found.
        assert!(
            serial.len() <= 20,
            "disk serial {serial:?} is over 20 bytes"
        );
        let path = w.join(format!("{serial}.img"));
        sized(&path, mib << 20);
        drive(&path, serial, true);
    }
    if !b.forwards.is_empty() {
        let nc = image.dir.join("busybox");
        let fwd: Vec<String> = b
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
            // No option ROM: iPXE would only slow the boot down.
            .args(["-device", "virtio-net-pci,netdev=n0,romfile="]);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().expect("starting qemu-system-x86_64");

    let mut shown = 0u64;
    // Whole lines only: a line the guest is still writing waits for its newline.
    let mut show = |shown: &mut u64| {
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
            on_line(&clean);
        }
    };
    let exit = loop {
        show(&mut shown);
        if let Some(exit) = child.try_wait().expect("waiting for qemu") {
            break exit;
        }
        if started.elapsed() > b.timeout {
            let _ = child.kill();
            let _ = child.wait();
            let text = std::fs::read_to_string(&console).unwrap_or_default();
            return Err(format!(
                "guest {} did not finish within {:?}; last console lines:\n{}",
                b.name,
                b.timeout,
                tail(&text, 40)
            ));
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
    let Some(status) = text
        .lines()
        .filter_map(|l| l.split("LVMS-GUEST-EXIT ").nth(1))
        .filter_map(|s| s.trim().parse::<i32>().ok())
        .next_back()
    else {
        return Err(format!(
            "guest {} stopped ({exit}) without an exit marker; qemu said: {stderr}\nlast console lines:\n{}",
            b.name,
            tail(&text, 40)
        ));
    };
    let out = w.join("out");
    std::fs::create_dir_all(&out).expect("mkdir out");
    let untar = Command::new("tar")
        .arg("-xf")
        .arg(&out_img)
        .arg("-C")
        .arg(&out)
        .output()
        .expect("tar -x");
    if !untar.status.success() {
        return Err(format!(
            "reading the guest's output disk: {}",
            String::from_utf8_lossy(&untar.stderr)
        ));
    }
    Ok(Booted {
        status,
        console: text,
        out,
        elapsed,
    })
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
