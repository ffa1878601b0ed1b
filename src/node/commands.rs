//! Host command lines, exactly as LVMS builds them (`lvm/lvm.go`, `lsblk/lsblk.go`,
//! `wipefs/wipefs.go`, `dmsetup/dmsetup.go`). argv[0] is the program's absolute path on the
//! host, as in LVMS. The executor adds the `nsenter -m -u -i -n -p -t 1` prefix and, for lvm
//! programs (`is_lvm_program`), lvm's `--config` (see `with_lvm_config`).

use thiserror::Error;

use super::lsblk::LSBLK_COLUMNS;
use super::report::LVMS_TAG;

pub const LSBLK: &str = "/usr/bin/lsblk";
pub const LOSETUP: &str = "/usr/sbin/losetup";
pub const BLKID: &str = "/usr/sbin/blkid";
pub const WIPEFS: &str = "/usr/sbin/wipefs";
pub const DMSETUP: &str = "/usr/sbin/dmsetup";
pub const PVS: &str = "/usr/sbin/pvs";
pub const VGS: &str = "/usr/sbin/vgs";
pub const LVS: &str = "/usr/sbin/lvs";
pub const VGCREATE: &str = "/usr/sbin/vgcreate";
pub const VGCHANGE: &str = "/usr/sbin/vgchange";
pub const VGEXTEND: &str = "/usr/sbin/vgextend";
pub const VGREDUCE: &str = "/usr/sbin/vgreduce";
pub const VGREMOVE: &str = "/usr/sbin/vgremove";
pub const PVREMOVE: &str = "/usr/sbin/pvremove";
pub const LVCREATE: &str = "/usr/sbin/lvcreate";
pub const LVEXTEND: &str = "/usr/sbin/lvextend";
pub const LVREMOVE: &str = "/usr/sbin/lvremove";
pub const LVCHANGE: &str = "/usr/sbin/lvchange";
pub const LVRESIZE: &str = "/usr/sbin/lvresize";
/// LVMS runs `/usr/sbin/lvmdevices`; some distributions (Debian's lvm2 2.03.16) ship no such
/// link, while `lvm lvmdevices` works everywhere, so lvms runs that.
pub const LVM: &str = "/usr/sbin/lvm";

/// `lvmdevices --delpvid` exits 5 when the PV is not in the devices file: nothing to do.
pub const LVMDEVICES_PV_NOT_FOUND_EXIT: i32 = 5;

/// Columns of the `lvs` report: LVMS `DefaultListLVColumns` plus `data_percent` for the
/// thin-pool metrics.
pub const LVS_COLUMNS: &str = "lv_name,vg_name,pool_lv,lv_attr,lv_size,metadata_percent,chunk_size,lv_metadata_size,sync_percent,lv_health_status,lv_layout,raid_sync_action,data_percent,thin_id,lv_tags";
/// Columns of the `vgs` report: LVMS `ListVGs`'s, plus the free space and extent size a thin
/// pool's extension is sized from (`thin::pool_extend_to`).
pub const VGS_COLUMNS: &str = "vg_name,vg_size,vg_free,vg_extent_size,vg_tags";

#[derive(Debug, Error, PartialEq, Eq)]
pub enum CommandError {
    #[error("{command}: the volume group name is empty; the LVMVolumeGroup name is the VG name")]
    EmptyVgName { command: &'static str },
    #[error("{command}: the logical volume name is empty; set thinPoolConfig.name")]
    EmptyLvName { command: &'static str },
    #[error("{command}: no devices given; there must be at least one device to {purpose}")]
    NoDevices {
        command: &'static str,
        purpose: &'static str,
    },
    #[error("{command}: the device name is empty")]
    EmptyDevice { command: &'static str },
    #[error("{command}: sizePercent must be greater than 0, got {got}")]
    SizePercent { command: &'static str, got: i32 },
    #[error("{command}: metadata size must be greater than 0 bytes")]
    MetadataSize { command: &'static str },
    #[error("{command}: a thin pool's size must be greater than 0 bytes")]
    PoolSize { command: &'static str },
}

pub(crate) fn argv<I, S>(program: &str, args: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    std::iter::once(program.to_string())
        .chain(args.into_iter().map(Into::into))
        .collect()
}

pub(crate) fn need_vg(command: &'static str, vg: &str) -> Result<(), CommandError> {
    if vg.is_empty() {
        return Err(CommandError::EmptyVgName { command });
    }
    Ok(())
}

pub(crate) fn need_lv(command: &'static str, vg: &str, lv: &str) -> Result<String, CommandError> {
    need_vg(command, vg)?;
    if lv.is_empty() {
        return Err(CommandError::EmptyLvName { command });
    }
    Ok(format!("{vg}/{lv}"))
}

fn need_devices(
    command: &'static str,
    purpose: &'static str,
    devices: &[String],
) -> Result<(), CommandError> {
    if devices.is_empty() {
        return Err(CommandError::NoDevices { command, purpose });
    }
    if devices.iter().any(String::is_empty) {
        return Err(CommandError::EmptyDevice { command });
    }
    Ok(())
}

/// Whether argv runs an lvm2 tool (these take `--config`).
pub fn is_lvm_program(argv: &[String]) -> bool {
    argv.first().is_some_and(|p| {
        matches!(
            p.as_str(),
            PVS | VGS
                | LVS
                | VGCREATE
                | VGCHANGE
                | VGEXTEND
                | VGREDUCE
                | VGREMOVE
                | PVREMOVE
                | LVCREATE
                | LVEXTEND
                | LVREMOVE
                | LVCHANGE
                | LVRESIZE
                | LVM
        )
    })
}

/// Adds `--config <config>` to an lvm command line (after the subcommand for `lvm <cmd>`).
/// Other programs are returned unchanged.
pub fn with_lvm_config(argv: &[String], config: &str) -> Vec<String> {
    if !is_lvm_program(argv) || config.is_empty() {
        return argv.to_vec();
    }
    // lvm2 takes one --config: a command that has its own gets both, in one string.
    if let Some(i) = argv.iter().position(|a| a == "--config")
        && i + 1 < argv.len()
    {
        let mut out = argv.to_vec();
        out[i + 1] = format!("{config} {}", argv[i + 1]);
        return out;
    }
    let at = if argv[0] == LVM { 2.min(argv.len()) } else { 1 };
    let mut out = argv[..at].to_vec();
    out.push("--config".into());
    out.push(config.into());
    out.extend_from_slice(&argv[at..]);
    out
}

/// `lsblk --json --paths -o <columns>` (LVMS's columns + MOUNTPOINT).
pub fn lsblk() -> Vec<String> {
    argv(LSBLK, ["--json", "--paths", "-o", LSBLK_COLUMNS])
}

/// `losetup <dev> -O BACK-FILE --json`
pub fn losetup_back_file(device: &str) -> Vec<String> {
    argv(LOSETUP, [device, "-O", "BACK-FILE", "--json"])
}

/// `blkid -p -o export <dev>`: reads signatures from the device itself (no udev needed).
pub fn blkid_probe(device: &str) -> Vec<String> {
    argv(BLKID, ["-p", "-o", "export", device])
}

/// `wipefs --all --force <dev>`
pub fn wipefs(device: &str) -> Result<Vec<String>, CommandError> {
    if device.is_empty() {
        return Err(CommandError::EmptyDevice { command: "wipefs" });
    }
    Ok(argv(WIPEFS, ["--all", "--force", device]))
}

/// `dmsetup remove --force <dev>`
pub fn dmsetup_remove(device: &str) -> Result<Vec<String>, CommandError> {
    if device.is_empty() {
        return Err(CommandError::EmptyDevice {
            command: "dmsetup remove",
        });
    }
    Ok(argv(DMSETUP, ["remove", "--force", device]))
}

/// dmsetup's combined output says the mapping is already gone: not an error.
pub fn dmsetup_reference_not_found(output: &str) -> bool {
    output.contains("not found")
}

/// `pvs --units b --nosuffix -v --reportformat json -o +pv_missing [-S vgname=<vg>]`
pub fn pvs(vg: Option<&str>) -> Vec<String> {
    let mut a = argv(
        PVS,
        [
            "--units",
            "b",
            "--nosuffix",
            "-v",
            "--reportformat",
            "json",
            "-o",
            "+pv_missing",
        ],
    );
    if let Some(vg) = vg.filter(|v| !v.is_empty()) {
        a.push("-S".into());
        a.push(format!("vgname={vg}"));
    }
    a
}

/// `vgs -o vg_name,vg_size,vg_free,vg_extent_size,vg_tags --units b --nosuffix --reportformat json [@lvms]`
pub fn vgs(tagged_only: bool) -> Vec<String> {
    let mut a = argv(
        VGS,
        [
            "-o",
            VGS_COLUMNS,
            "--units",
            "b",
            "--nosuffix",
            "--reportformat",
            "json",
        ],
    );
    if tagged_only {
        a.push(LVMS_TAG.into());
    }
    a
}

/// `lvs -S vgname=<vg> --units b --nosuffix --reportformat json -o <13 columns>`
pub fn lvs(vg: &str) -> Result<Vec<String>, CommandError> {
    need_vg("lvs", vg)?;
    Ok(argv(
        LVS,
        [
            "-S",
            &format!("vgname={vg}"),
            "--units",
            "b",
            "--nosuffix",
            "--reportformat",
            "json",
            "-o",
            LVS_COLUMNS,
        ],
    ))
}

/// `vgcreate <vg> --addtag @lvms [-y] <devices>`. No pvcreate: vgcreate initialises the PVs.
/// `-y` answers lvm's "wipe signature?" prompts.
pub fn vgcreate(
    vg: &str,
    devices: &[String],
    assume_yes: bool,
) -> Result<Vec<String>, CommandError> {
    need_vg("vgcreate", vg)?;
    need_devices("vgcreate", "create the volume group", devices)?;
    let mut a = argv(VGCREATE, [vg, "--addtag", LVMS_TAG]);
    if assume_yes {
        a.push("-y".into());
    }
    a.extend(devices.iter().cloned());
    Ok(a)
}

/// `vgextend <vg> <devices>`
pub fn vgextend(vg: &str, devices: &[String]) -> Result<Vec<String>, CommandError> {
    need_vg("vgextend", vg)?;
    need_devices("vgextend", "extend the volume group", devices)?;
    let mut a = argv(VGEXTEND, [vg]);
    a.extend(devices.iter().cloned());
    Ok(a)
}

/// `lvcreate -l <pct>%FREE -Z y -T [-c <n>b] [--poolmetadatasize <n>b] <vg>/<pool>`. A None
/// size (Host policy) leaves the choice to lvm.
pub fn lvcreate_thin_pool(
    vg: &str,
    pool: &str,
    size_percent: i32,
    chunk_size: Option<u64>,
    metadata_size: Option<u64>,
) -> Result<Vec<String>, CommandError> {
    let target = need_lv("lvcreate", vg, pool)?;
    if size_percent <= 0 {
        return Err(CommandError::SizePercent {
            command: "lvcreate",
            got: size_percent,
        });
    }
    let mut a = argv(
        LVCREATE,
        ["-l", &format!("{size_percent}%FREE"), "-Z", "y", "-T"],
    );
    if let Some(c) = chunk_size.filter(|c| *c > 0) {
        a.push("-c".into());
        a.push(format!("{c}b"));
    }
    if let Some(m) = metadata_size.filter(|m| *m > 0) {
        a.push("--poolmetadatasize".into());
        a.push(format!("{m}b"));
    }
    a.push(target);
    Ok(a)
}

/// `lvextend -L <bytes>b <vg>/<pool>`: the pool's data to that size (lvm2 rounds up to an extent).
pub fn lvextend_pool(vg: &str, pool: &str, data_size: u64) -> Result<Vec<String>, CommandError> {
    let target = need_lv("lvextend", vg, pool)?;
    if data_size == 0 {
        return Err(CommandError::PoolSize {
            command: "lvextend",
        });
    }
    Ok(argv(
        LVEXTEND,
        ["-L".into(), format!("{data_size}b"), target],
    ))
}

/// `lvextend --poolmetadatasize <n>b <vg>/<pool>`
pub fn lvextend_pool_metadata(
    vg: &str,
    pool: &str,
    metadata_size: u64,
) -> Result<Vec<String>, CommandError> {
    let target = need_lv("lvextend", vg, pool)?;
    if metadata_size == 0 {
        return Err(CommandError::MetadataSize {
            command: "lvextend",
        });
    }
    Ok(argv(
        LVEXTEND,
        [
            "--poolmetadatasize".into(),
            format!("{metadata_size}b"),
            target,
        ],
    ))
}

/// `vgreduce <vg> <pv>`
pub fn vgreduce(vg: &str, pv: &str) -> Result<Vec<String>, CommandError> {
    need_vg("vgreduce", vg)?;
    if pv.is_empty() {
        return Err(CommandError::EmptyDevice {
            command: "vgreduce",
        });
    }
    Ok(argv(VGREDUCE, [vg, pv]))
}

/// `pvremove <pvs>`
pub fn pvremove(pvs: &[String]) -> Result<Vec<String>, CommandError> {
    need_devices("pvremove", "remove", pvs)?;
    Ok(argv(PVREMOVE, pvs.iter().cloned()))
}

/// `lvchange -ay <vg>/<lv>`
pub fn lvchange_activate(vg: &str, lv: &str) -> Result<Vec<String>, CommandError> {
    let target = need_lv("lvchange", vg, lv)?;
    Ok(argv(LVCHANGE, ["-ay".into(), target]))
}

/// `lvchange -an <vg>/<lv>`
pub fn lvchange_deactivate(vg: &str, lv: &str) -> Result<Vec<String>, CommandError> {
    let target = need_lv("lvchange", vg, lv)?;
    Ok(argv(LVCHANGE, ["-an".into(), target]))
}

/// `lvremove <vg>/<lv>`
pub fn lvremove(vg: &str, lv: &str) -> Result<Vec<String>, CommandError> {
    let target = need_lv("lvremove", vg, lv)?;
    Ok(argv(LVREMOVE, [target]))
}

/// `vgchange -an <vg>`
pub fn vgchange_deactivate(vg: &str) -> Result<Vec<String>, CommandError> {
    need_vg("vgchange", vg)?;
    Ok(argv(VGCHANGE, ["-an", vg]))
}

/// `vgremove <vg>`
pub fn vgremove(vg: &str) -> Result<Vec<String>, CommandError> {
    need_vg("vgremove", vg)?;
    Ok(argv(VGREMOVE, [vg]))
}

/// `lvm lvmdevices --delpvid <uuid>` (exit 5 = not in the devices file, ignored).
pub fn lvmdevices_delpvid(pv_uuid: &str) -> Result<Vec<String>, CommandError> {
    if pv_uuid.is_empty() {
        return Err(CommandError::EmptyDevice {
            command: "lvmdevices --delpvid",
        });
    }
    Ok(argv(LVM, ["lvmdevices", "--delpvid", pv_uuid]))
}

/// Thin pool teardown (LVMS `DeleteLV`): deactivate, then remove.
pub fn delete_lv(vg: &str, lv: &str) -> Result<[Vec<String>; 2], CommandError> {
    Ok([lvchange_deactivate(vg, lv)?, lvremove(vg, lv)?])
}

/// VG teardown (LVMS `DeleteVG`): `vgchange -an`, `vgremove`, `pvremove <pvs>`, then
/// `lvmdevices --delpvid` per PV uuid.
pub fn delete_vg(
    vg: &str,
    pv_names: &[String],
    pv_uuids: &[String],
) -> Result<Vec<Vec<String>>, CommandError> {
    let mut out = vec![vgchange_deactivate(vg)?, vgremove(vg)?, pvremove(pv_names)?];
    for u in pv_uuids {
        out.push(lvmdevices_delpvid(u)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn a_command_with_its_own_config_gets_one_config_with_both() {
        let argv: Vec<String> = [
            "/usr/sbin/lvs",
            "--config",
            "devices{ignore_suspended_devices=1}",
            "vg1",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            with_lvm_config(&argv, "global{activation=0}"),
            [
                "/usr/sbin/lvs",
                "--config",
                "global{activation=0} devices{ignore_suspended_devices=1}",
                "vg1"
            ]
        );
    }

    #[test]
    fn report_commands() {
        assert_eq!(
            lsblk(),
            s(&[
                "/usr/bin/lsblk",
                "--json",
                "--paths",
                "-o",
                "NAME,ROTA,TYPE,SIZE,MODEL,VENDOR,RO,STATE,KNAME,SERIAL,PARTLABEL,FSTYPE,MOUNTPOINT,TRAN"
            ])
        );
        assert_eq!(
            pvs(None).join(" "),
            "/usr/sbin/pvs --units b --nosuffix -v --reportformat json -o +pv_missing"
        );
        assert_eq!(
            pvs(Some("vg1"))[1..].join(" "),
            "--units b --nosuffix -v --reportformat json -o +pv_missing -S vgname=vg1"
        );
        assert_eq!(
            vgs(true).join(" "),
            "/usr/sbin/vgs -o vg_name,vg_size,vg_free,vg_extent_size,vg_tags --units b --nosuffix --reportformat json @lvms"
        );
        assert_eq!(vgs(false).last().map(String::as_str), Some("json"));
        assert_eq!(
            lvs("vg1").unwrap()[1..],
            s(&[
                "-S",
                "vgname=vg1",
                "--units",
                "b",
                "--nosuffix",
                "--reportformat",
                "json",
                "-o",
                "lv_name,vg_name,pool_lv,lv_attr,lv_size,metadata_percent,chunk_size,lv_metadata_size,sync_percent,lv_health_status,lv_layout,raid_sync_action,data_percent,thin_id,lv_tags"
            ])
        );
        assert_eq!(
            losetup_back_file("/dev/loop0"),
            s(&[
                "/usr/sbin/losetup",
                "/dev/loop0",
                "-O",
                "BACK-FILE",
                "--json"
            ])
        );
        assert_eq!(
            blkid_probe("/dev/loop1"),
            s(&["/usr/sbin/blkid", "-p", "-o", "export", "/dev/loop1"])
        );
    }

    #[test]
    fn wipe_commands() {
        assert_eq!(
            wipefs("/dev/sdb").unwrap(),
            s(&["/usr/sbin/wipefs", "--all", "--force", "/dev/sdb"])
        );
        assert_eq!(
            dmsetup_remove("/dev/dm-1").unwrap(),
            s(&["/usr/sbin/dmsetup", "remove", "--force", "/dev/dm-1"])
        );
        assert!(wipefs("").is_err() && dmsetup_remove("").is_err());
        assert!(dmsetup_reference_not_found(
            "device-mapper: remove ioctl on dm-1 failed: No such device or address\nCommand failed.\n/dev/dm-1: not found"
        ));
        assert!(!dmsetup_reference_not_found("Device or resource busy"));
    }

    #[test]
    fn vgcreate_and_vgextend() {
        let devs = s(&["/dev/sdb", "/dev/sdc"]);
        assert_eq!(
            vgcreate("vg1", &devs, false).unwrap(),
            s(&[
                "/usr/sbin/vgcreate",
                "vg1",
                "--addtag",
                "@lvms",
                "/dev/sdb",
                "/dev/sdc"
            ])
        );
        assert_eq!(
            vgcreate("vg1", &devs, true).unwrap()[1..5],
            s(&["vg1", "--addtag", "@lvms", "-y"])
        );
        assert_eq!(
            vgextend("vg1", &devs).unwrap(),
            s(&["/usr/sbin/vgextend", "vg1", "/dev/sdb", "/dev/sdc"])
        );
        assert_eq!(
            vgcreate("vg1", &[], false).unwrap_err().to_string(),
            "vgcreate: no devices given; there must be at least one device to create the volume group"
        );
        assert!(vgcreate("", &devs, false).is_err());
        assert!(vgextend("vg1", &s(&[""])).is_err());
    }

    #[test]
    fn thin_pool_commands() {
        assert_eq!(
            lvcreate_thin_pool("vg1", "tp", 90, Some(131_072), Some(1 << 30)).unwrap(),
            s(&[
                "/usr/sbin/lvcreate",
                "-l",
                "90%FREE",
                "-Z",
                "y",
                "-T",
                "-c",
                "131072b",
                "--poolmetadatasize",
                "1073741824b",
                "vg1/tp"
            ])
        );
        // Host policies: lvm chooses.
        assert_eq!(
            lvcreate_thin_pool("vg1", "tp", 50, None, None).unwrap(),
            s(&[
                "/usr/sbin/lvcreate",
                "-l",
                "50%FREE",
                "-Z",
                "y",
                "-T",
                "vg1/tp"
            ])
        );
        assert_eq!(
            lvcreate_thin_pool("vg1", "tp", 0, None, None).unwrap_err(),
            CommandError::SizePercent {
                command: "lvcreate",
                got: 0
            }
        );
        assert!(lvcreate_thin_pool("vg1", "", 90, None, None).is_err());
        assert_eq!(
            lvextend_pool("vg1", "tp", 1_929_379_840).unwrap(),
            s(&["/usr/sbin/lvextend", "-L", "1929379840b", "vg1/tp"])
        );
        assert_eq!(
            lvextend_pool("vg1", "tp", 0).unwrap_err().to_string(),
            "lvextend: a thin pool's size must be greater than 0 bytes"
        );
        assert_eq!(
            lvextend_pool_metadata("vg1", "tp", 2 << 30).unwrap(),
            s(&[
                "/usr/sbin/lvextend",
                "--poolmetadatasize",
                "2147483648b",
                "vg1/tp"
            ])
        );
        assert!(lvextend_pool_metadata("vg1", "tp", 0).is_err());
    }

    #[test]
    fn removal_and_teardown_commands() {
        assert_eq!(
            vgreduce("vg1", "/dev/sdc").unwrap(),
            s(&["/usr/sbin/vgreduce", "vg1", "/dev/sdc"])
        );
        assert_eq!(
            pvremove(&s(&["/dev/sdc"])).unwrap(),
            s(&["/usr/sbin/pvremove", "/dev/sdc"])
        );
        assert_eq!(
            lvchange_activate("vg1", "tp").unwrap(),
            s(&["/usr/sbin/lvchange", "-ay", "vg1/tp"])
        );
        assert_eq!(
            delete_lv("vg1", "tp").unwrap(),
            [
                s(&["/usr/sbin/lvchange", "-an", "vg1/tp"]),
                s(&["/usr/sbin/lvremove", "vg1/tp"])
            ]
        );
        assert_eq!(
            delete_vg("vg1", &s(&["/dev/sdb", "/dev/sdc"]), &s(&["u1", "u2"])).unwrap(),
            vec![
                s(&["/usr/sbin/vgchange", "-an", "vg1"]),
                s(&["/usr/sbin/vgremove", "vg1"]),
                s(&["/usr/sbin/pvremove", "/dev/sdb", "/dev/sdc"]),
                s(&["/usr/sbin/lvm", "lvmdevices", "--delpvid", "u1"]),
                s(&["/usr/sbin/lvm", "lvmdevices", "--delpvid", "u2"]),
            ]
        );
        assert!(pvremove(&[]).is_err() && vgremove("").is_err() && lvmdevices_delpvid("").is_err());
    }

    #[test]
    fn lvm_config_goes_after_the_program_or_subcommand() {
        let cfg = "global{activation=0}";
        assert_eq!(
            with_lvm_config(&vgremove("vg1").unwrap(), cfg),
            s(&["/usr/sbin/vgremove", "--config", cfg, "vg1"])
        );
        assert_eq!(
            with_lvm_config(&lvmdevices_delpvid("u").unwrap(), cfg),
            s(&[
                "/usr/sbin/lvm",
                "lvmdevices",
                "--config",
                cfg,
                "--delpvid",
                "u"
            ])
        );
        assert_eq!(with_lvm_config(&lsblk(), cfg), lsblk());
        assert_eq!(with_lvm_config(&wipefs("/dev/a").unwrap(), cfg)[0], WIPEFS);
        assert!(is_lvm_program(&pvs(None)) && !is_lvm_program(&lsblk()));
    }
}
