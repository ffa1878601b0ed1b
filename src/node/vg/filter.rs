//! LVMS's device filters (`filter/filter.go`, ADR 0004) plus lvms's device-safety filters, applied
//! to the lsblk tree recursively and deduplicated by kname (LVMS `filterDevices`).
//!
//! A device is available when no filter rejects it. Every rejection keeps LVMS's wording, since
//! users read it in `status.excluded[].reasons`. Two rejections mean "this device is already in
//! use by the VG" and are hidden from status, as in LVMS (`IsExpectedDeviceErrorAfterSetup`).

use std::collections::{BTreeMap, BTreeSet};

use crate::api::{DeviceSelector, ExcludedDevice};

use crate::node::lsblk::{BlockDevice, STATE_SUSPENDED, TYPE_DM, TYPE_LOOP, TYPE_LVM, TYPE_ROM};
use crate::node::report::PhysicalVolume;
use crate::node::vg::resolve::{ResolvedPaths, Unresolved};

/// lsblk FSTYPE of an LVM physical volume.
pub const FSTYPE_LVM2_MEMBER: &str = "LVM2_member";

/// Partition labels that mark firmware/boot partitions (matched case-insensitively, as substrings).
pub const INVALID_PARTITION_LABELS: [&str; 3] = ["bios", "boot", "reserved"];

const ERR_ALREADY_SETUP: &str =
    "the device is already setup correctly and was filtered to avoid attempting recreation";
const ERR_LVM_PARTITION: &str = "the device is a lvm partition and is excluded by default";

/// Why a device cannot be used. `Display` is the status reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// partOfDeviceSelector
    NotInSelector { name: String },
    /// notReadOnly
    ReadOnly { name: String },
    /// notSuspended
    Suspended { name: String, state: String },
    /// noInvalidPartitionLabel
    InvalidPartitionLabel { name: String, label: String },
    /// noChildren
    HasChildren { name: String },
    /// onlyValidFilesystemSignatures: a PV name lvm reported could not be resolved.
    PvNotResolvable { pv: String, reason: Unresolved },
    /// onlyValidFilesystemSignatures: already a PV of this VG (hidden from status).
    AlreadySetUp { name: String, vg: String },
    /// onlyValidFilesystemSignatures
    InOtherVg {
        name: String,
        other_vg: String,
        vg: String,
    },
    /// onlyValidFilesystemSignatures
    NoFreePvCapacity { name: String },
    /// onlyValidFilesystemSignatures
    InvalidFilesystem { name: String, fstype: String },
    /// noChildren (lvms): a partition table the kernel shows no partitions for.
    PartitionTable { name: String, pttype: String },
    /// usableDeviceType: loop device backing a Kubernetes volume (or whose back-file is unknown).
    UnusableLoop { name: String },
    /// usableDeviceType: rom.
    UnsupportedType { name: String, device_type: String },
    /// usableDeviceType: an LV (hidden from status).
    LvmPartition,
    /// usableDeviceType (lvms): lvms's own gate over a published volume's LV (hidden from
    /// status, as the LV under it).
    VolumeGate,
    /// usableDeviceType (lvms, discovery only): a disk another host reaches too (Ceph RBD,
    /// NBD, iSCSI); taken only when a deviceSelector names it.
    NetworkDisk { name: String, what: &'static str },
    /// notMounted (lvms): a filesystem on the device is mounted.
    Mounted {
        name: String,
        mountpoints: Vec<String>,
    },
    /// noHolders (lvms): another block device (dm, md) sits on top of this one.
    Held { name: String, holders: Vec<String> },
    /// Static discovery with an existing VG (added by `discovery`, not by a filter).
    StaticDiscovery { kname: String, vg: String },
}

impl Rejection {
    /// The LVMS filter (or lvms safety filter) that produced it.
    pub fn filter_name(&self) -> &'static str {
        match self {
            Self::NotInSelector { .. } => "partOfDeviceSelector",
            Self::ReadOnly { .. } => "notReadOnly",
            Self::Suspended { .. } => "notSuspended",
            Self::InvalidPartitionLabel { .. } => "noInvalidPartitionLabel",
            Self::HasChildren { .. } | Self::PartitionTable { .. } => "noChildren",
            Self::PvNotResolvable { .. }
            | Self::AlreadySetUp { .. }
            | Self::InOtherVg { .. }
            | Self::NoFreePvCapacity { .. }
            | Self::InvalidFilesystem { .. } => "onlyValidFilesystemSignatures",
            Self::UnusableLoop { .. }
            | Self::UnsupportedType { .. }
            | Self::LvmPartition
            | Self::VolumeGate
            | Self::NetworkDisk { .. } => "usableDeviceType",
            Self::Mounted { .. } => "notMounted",
            Self::Held { .. } => "noHolders",
            Self::StaticDiscovery { .. } => "deviceDiscoveryPolicy",
        }
    }

    /// Rejections that are expected once the VG exists (its PVs and LVs); LVMS hides a device
    /// carrying one of them from `status.excluded`.
    pub fn is_expected_after_setup(&self) -> bool {
        matches!(
            self,
            Self::AlreadySetUp { .. } | Self::LvmPartition | Self::VolumeGate
        )
    }
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotInSelector { name } => write!(
                f,
                "{name} is not part of the device selector or could not be resolved via symlink resolution"
            ),
            Self::ReadOnly { name } => write!(f, "{name} cannot be read-only"),
            // LVMS swaps the two arguments ("suspended cannot be in a \"/dev/x\" state"); this is
            // the sentence it meant.
            Self::Suspended { name, state } => write!(f, "{name} cannot be in a {state:?} state"),
            Self::InvalidPartitionLabel { name, label } => {
                write!(f, "{name} has an invalid partition label {label:?}")
            }
            Self::HasChildren { name } => write!(
                f,
                "{name} has children block devices and could not be considered"
            ),
            Self::PartitionTable { name, pttype } => write!(
                f,
                "{name} has a {pttype} partition table and could not be considered"
            ),
            Self::PvNotResolvable { pv, reason } => {
                write!(f, "the pv {pv} could not be resolved via symlink: {reason}")
            }
            Self::AlreadySetUp { name, vg } => {
                write!(
                    f,
                    "{name} is already a LVM2_Member of {vg}: {ERR_ALREADY_SETUP}"
                )
            }
            Self::InOtherVg { name, other_vg, vg } => write!(
                f,
                "{name} is already a LVM2_Member of another volume group ({other_vg}) and cannot be used for the volume group {vg}"
            ),
            Self::NoFreePvCapacity { name } => write!(
                f,
                "{name} was reported as having no free capacity as a physical volume and cannot be used"
            ),
            Self::InvalidFilesystem { name, fstype } => write!(
                f,
                "{name} has an invalid filesystem signature ({fstype}) and cannot be used"
            ),
            Self::UnusableLoop { name } => write!(f, "{name} is an unusable loopback device"),
            Self::NetworkDisk { name, what } => write!(
                f,
                "{name} is {what}, reached over the network: discovery never takes it; name it in the deviceSelector to use it"
            ),
            Self::UnsupportedType { name, device_type } => write!(
                f,
                "{name} has a device type of {device_type:?} which is unsupported"
            ),
            Self::LvmPartition => f.write_str(ERR_LVM_PARTITION),
            Self::VolumeGate => f.write_str(
                "the device is lvms's gate over a published volume and is excluded by default",
            ),
            Self::Mounted { name, mountpoints } => write!(
                f,
                "{name} has a mounted filesystem ({}) and cannot be used; unmount it or remove it from the device selector",
                mountpoints.join(", ")
            ),
            Self::Held { name, holders } => write!(
                f,
                "{name} is held by {} and cannot be used; release the holder or remove it from the device selector",
                holders.join(", ")
            ),
            Self::StaticDiscovery { kname, vg } => write!(
                f,
                "{kname} was not part of {vg} at creation (static device discovery enabled)"
            ),
        }
    }
}

/// Everything the filters look at besides the device itself.
#[derive(Clone, Copy, Debug)]
pub struct FilterContext<'a> {
    /// The LVMVolumeGroup's name, which is the VG name.
    pub vg_name: &'a str,
    /// `spec.deviceSelector`; None accepts every device (Dynamic/Static discovery).
    pub selector: Option<&'a DeviceSelector>,
    pub resolved: &'a ResolvedPaths,
    /// `pvs` report (all PVs on the host).
    pub pvs: &'a [PhysicalVolume],
    /// kname -> back-file of each loop device (`losetup <dev> -O BACK-FILE`). A loop device
    /// missing here is refused: LVMS treats a loop device without this information as unusable.
    pub loop_back_files: &'a BTreeMap<String, String>,
    /// kname -> names in `/sys/class/block/<dev>/holders`. Missing = no holders.
    pub holders: &'a BTreeMap<String, Vec<String>>,
    /// knames of lvms's volume gates (`volume_gates`): refused unprobed.
    pub gates: &'a BTreeSet<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExcludedBlockDevice {
    pub name: String,
    pub kname: String,
    pub reasons: Vec<Rejection>,
}

impl ExcludedBlockDevice {
    pub fn is_already_set_up(&self) -> bool {
        self.reasons
            .iter()
            .any(|r| matches!(r, Rejection::AlreadySetUp { .. }))
    }
}

/// Filter results, each list sorted by kname.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FilteredDevices {
    pub available: Vec<BlockDevice>,
    pub excluded: Vec<ExcludedBlockDevice>,
}

impl FilteredDevices {
    pub fn is_available(&self, kname: &str) -> bool {
        self.available.iter().any(|d| d.kname == kname)
    }

    pub fn rejections(&self, kname: &str) -> &[Rejection] {
        self.excluded
            .iter()
            .find(|e| e.kname == kname)
            .map(|e| e.reasons.as_slice())
            .unwrap_or(&[])
    }

    /// `status.excluded` as LVMS writes it (`setDevices`): devices with an expected-after-setup
    /// rejection left out, reasons sorted, entries sorted by name.
    pub fn status_excluded(&self) -> Vec<ExcludedDevice> {
        let mut out: Vec<ExcludedDevice> = self
            .excluded
            .iter()
            .filter(|e| !e.reasons.iter().any(Rejection::is_expected_after_setup))
            .map(|e| {
                let mut reasons: Vec<String> = e.reasons.iter().map(ToString::to_string).collect();
                reasons.sort();
                ExcludedDevice {
                    name: e.name.clone(),
                    reasons,
                }
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }
}

/// Every filter's verdict on one device (children are not looked at here).
pub fn check_device(dev: &BlockDevice, ctx: &FilterContext<'_>) -> Vec<Rejection> {
    let mut out = Vec::new();
    if let Some(r) = part_of_device_selector(dev, ctx) {
        out.push(r);
    }
    if dev.read_only {
        out.push(Rejection::ReadOnly {
            name: dev.name.clone(),
        });
    }
    if dev.state == STATE_SUSPENDED {
        out.push(Rejection::Suspended {
            name: dev.name.clone(),
            state: dev.state.clone(),
        });
    }
    let label = dev.partlabel.to_lowercase();
    if INVALID_PARTITION_LABELS.iter().any(|l| label.contains(l)) {
        out.push(Rejection::InvalidPartitionLabel {
            name: dev.name.clone(),
            label: dev.partlabel.clone(),
        });
    }
    if let Some(r) = only_valid_filesystem_signatures(dev, ctx) {
        out.push(r);
    }
    if dev.has_children() {
        out.push(Rejection::HasChildren {
            name: dev.name.clone(),
        });
    } else if !dev.pttype.is_empty() {
        // The kernel may not show the partitions (loop devices without partscan, a table
        // written since the last rescan): the table alone means the disk is spoken for.
        out.push(Rejection::PartitionTable {
            name: dev.name.clone(),
            pttype: dev.pttype.clone(),
        });
    }
    if let Some(r) = usable_device_type(dev, ctx) {
        out.push(r);
    }
    if dev.is_mounted() {
        out.push(Rejection::Mounted {
            name: dev.name.clone(),
            mountpoints: dev.mountpoints.clone(),
        });
    }
    if let Some(h) = ctx.holders.get(&dev.kname).filter(|h| !h.is_empty()) {
        out.push(Rejection::Held {
            name: dev.name.clone(),
            holders: h.clone(),
        });
    }
    out
}

fn part_of_device_selector(dev: &BlockDevice, ctx: &FilterContext<'_>) -> Option<Rejection> {
    let sel = ctx.selector?;
    let matched = sel
        .paths
        .iter()
        .chain(&sel.optional_paths)
        .any(|p| ctx.resolved.resolve(p).is_ok_and(|k| k == dev.kname));
    (!matched).then(|| Rejection::NotInSelector {
        name: dev.name.clone(),
    })
}

fn only_valid_filesystem_signatures(
    dev: &BlockDevice,
    ctx: &FilterContext<'_>,
) -> Option<Rejection> {
    // lvm's own report is authoritative: a PV is an LVM2_member even when lsblk could not read
    // the signature (no udev database), so it is never mistaken for a blank disk.
    let pv = match find_pv(dev, ctx) {
        Ok(pv) => pv,
        Err(r) => return Some(r),
    };
    let fstype = if dev.fstype.is_empty() && pv.is_some() {
        FSTYPE_LVM2_MEMBER
    } else {
        dev.fstype.as_str()
    };
    if fstype.is_empty() {
        return None;
    }
    if fstype == FSTYPE_LVM2_MEMBER {
        let Some(pv) = pv else {
            // Formatted as a PV but unknown to lvm: vgcreate can take it over.
            return None;
        };
        match pv.vg_name.as_deref() {
            Some(vg) if vg == ctx.vg_name => {
                return Some(Rejection::AlreadySetUp {
                    name: dev.name.clone(),
                    vg: vg.to_string(),
                });
            }
            Some(other) => {
                return Some(Rejection::InOtherVg {
                    name: dev.name.clone(),
                    other_vg: other.to_string(),
                    vg: ctx.vg_name.to_string(),
                });
            }
            None if !dev.has_children() => {
                // LVMS compares pv_free with "0G", which `--units b --nosuffix` never prints; a
                // PV with zero free bytes is what it means.
                return (pv.pv_free == Some(0)).then(|| Rejection::NoFreePvCapacity {
                    name: dev.name.clone(),
                });
            }
            None => {}
        }
    }
    Some(Rejection::InvalidFilesystem {
        name: dev.name.clone(),
        fstype: fstype.to_string(),
    })
}

/// The PV lvm reports for this device, comparing resolved PV names with the kname. A PV name
/// that cannot be resolved is a rejection (LVMS returns the resolver error).
fn find_pv<'a>(
    dev: &BlockDevice,
    ctx: &FilterContext<'a>,
) -> Result<Option<&'a PhysicalVolume>, Rejection> {
    for pv in ctx.pvs {
        let resolved = if pv.pv_name == dev.kname {
            // A kernel name resolves to itself; no lookup needed.
            pv.pv_name.as_str()
        } else {
            match ctx.resolved.resolve(&pv.pv_name) {
                Ok(r) => r,
                // Only a device that lsblk reports as a PV needs every PV resolved to decide;
                // LVMS fails this filter then.
                Err(e) if dev.fstype == FSTYPE_LVM2_MEMBER => {
                    return Err(Rejection::PvNotResolvable {
                        pv: pv.pv_name.clone(),
                        reason: e.reason,
                    });
                }
                Err(_) => continue,
            }
        };
        if resolved == dev.kname {
            return Ok(Some(pv));
        }
    }
    Ok(None)
}

fn usable_device_type(dev: &BlockDevice, ctx: &FilterContext<'_>) -> Option<Rejection> {
    if ctx.gates.contains(&dev.kname) {
        return Some(Rejection::VolumeGate);
    }
    match dev.device_type.as_str() {
        TYPE_LOOP => {
            let usable = ctx
                .loop_back_files
                .get(&dev.kname)
                .is_some_and(|f| crate::node::lsblk::is_usable_loop_back_file(f));
            (!usable).then(|| Rejection::UnusableLoop {
                name: dev.name.clone(),
            })
        }
        TYPE_ROM => Some(Rejection::UnsupportedType {
            name: dev.name.clone(),
            device_type: dev.device_type.clone(),
        }),
        TYPE_LVM => Some(Rejection::LvmPartition),
        _ => ctx
            .selector
            .is_none()
            .then(|| network_disk(dev))
            .flatten()
            .map(|what| Rejection::NetworkDisk {
                name: dev.name.clone(),
                what,
            }),
    }
}

/// What network-backed disk `dev` is, if it is one: another host may write it too (a Ceph
/// image, an NBD export, an iSCSI LUN), so discovery must not format it.
fn network_disk(dev: &BlockDevice) -> Option<&'static str> {
    let base = dev.kname.rsplit('/').next().unwrap_or_default();
    if base.starts_with("rbd") {
        Some("a Ceph RBD image")
    } else if base.starts_with("nbd") {
        Some("a network block device (NBD)")
    } else if dev.tran.eq_ignore_ascii_case("iscsi") {
        Some("an iSCSI LUN")
    } else {
        None
    }
}

/// knames of lvms's volume gates in the tree: a plain dm device named `lvms-<volume id>`
/// (`node::volume::gate`) stacked on an LV. One sits on every published filesystem, so a pass
/// that probed them would cost more with each mounted volume; they are never a disk for a VG.
pub fn volume_gates(devices: &[BlockDevice]) -> BTreeSet<String> {
    fn walk(ds: &[BlockDevice], parent_is_lv: bool, out: &mut BTreeSet<String>) {
        for d in ds {
            let gate = d
                .name
                .strip_prefix("/dev/mapper/")
                .and_then(crate::node::volume::gate::volume_of)
                .is_some();
            if parent_is_lv && d.device_type == TYPE_DM && gate {
                out.insert(d.kname.clone());
            }
            walk(&d.children, d.device_type == TYPE_LVM, out);
        }
    }
    let mut out = BTreeSet::new();
    walk(devices, false, &mut out);
    out
}

/// Filters the whole tree (LVMS `filterDevices`): children first, recursively; a kname seen
/// twice (multipath members under several disks) is kept once, its reasons merged without
/// repeats.
pub fn filter_devices(devices: &[BlockDevice], ctx: &FilterContext<'_>) -> FilteredDevices {
    let mut available: BTreeMap<String, BlockDevice> = BTreeMap::new();
    let mut excluded: BTreeMap<String, ExcludedBlockDevice> = BTreeMap::new();
    walk(devices, ctx, &mut available, &mut excluded);
    FilteredDevices {
        available: available.into_values().collect(),
        excluded: excluded.into_values().collect(),
    }
}

fn walk(
    devices: &[BlockDevice],
    ctx: &FilterContext<'_>,
    available: &mut BTreeMap<String, BlockDevice>,
    excluded: &mut BTreeMap<String, ExcludedBlockDevice>,
) {
    for dev in devices {
        walk(&dev.children, ctx, available, excluded);
        let reasons = check_device(dev, ctx);
        if reasons.is_empty() {
            available
                .entry(dev.kname.clone())
                .or_insert_with(|| dev.clone());
            continue;
        }
        let entry = excluded
            .entry(dev.kname.clone())
            .or_insert_with(|| ExcludedBlockDevice {
                name: dev.name.clone(),
                kname: dev.kname.clone(),
                reasons: Vec::new(),
            });
        for r in reasons {
            if !entry.reasons.contains(&r) {
                entry.reasons.push(r);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::lsblk::parse_lsblk;

    fn disk(kname: &str) -> BlockDevice {
        BlockDevice {
            name: kname.into(),
            kname: kname.into(),
            device_type: "disk".into(),
            ..Default::default()
        }
    }

    struct Env {
        resolved: ResolvedPaths,
        pvs: Vec<PhysicalVolume>,
        loops: BTreeMap<String, String>,
        holders: BTreeMap<String, Vec<String>>,
        gates: BTreeSet<String>,
        selector: Option<DeviceSelector>,
    }

    impl Env {
        fn new() -> Self {
            Self {
                resolved: ResolvedPaths::new(),
                pvs: Vec::new(),
                loops: BTreeMap::new(),
                holders: BTreeMap::new(),
                gates: BTreeSet::new(),
                selector: None,
            }
        }
        fn ctx(&self) -> FilterContext<'_> {
            FilterContext {
                vg_name: "vg1",
                selector: self.selector.as_ref(),
                resolved: &self.resolved,
                pvs: &self.pvs,
                loop_back_files: &self.loops,
                holders: &self.holders,
                gates: &self.gates,
            }
        }
        fn check(&self, d: &BlockDevice) -> Vec<String> {
            check_device(d, &self.ctx())
                .iter()
                .map(ToString::to_string)
                .collect()
        }
    }

    fn pv(name: &str, vg: Option<&str>, free: Option<u64>) -> PhysicalVolume {
        PhysicalVolume {
            pv_name: name.into(),
            vg_name: vg.map(str::to_string),
            pv_free: free,
            ..Default::default()
        }
    }

    #[test]
    fn plain_disk_passes_every_filter() {
        assert!(Env::new().check(&disk("/dev/sdb")).is_empty());
    }

    #[test]
    fn part_of_device_selector_uses_resolved_paths() {
        let mut env = Env::new();
        env.selector = Some(DeviceSelector {
            paths: vec!["/dev/disk/by-id/wwn-0x1".into()],
            optional_paths: vec!["/dev/disk/by-path/opt".into()],
            force_wipe_devices_and_destroy_all_data: None,
        });
        env.resolved
            .insert("/dev/disk/by-id/wwn-0x1", "/dev/sdb")
            .insert("/dev/disk/by-path/opt", "/dev/sdc");
        assert!(env.check(&disk("/dev/sdb")).is_empty());
        assert!(env.check(&disk("/dev/sdc")).is_empty());
        assert_eq!(
            env.check(&disk("/dev/sdd")),
            vec![
                "/dev/sdd is not part of the device selector or could not be resolved via symlink resolution"
            ]
        );
        // A path that did not resolve matches nothing, not even its literal spelling.
        env.resolved
            .insert_error("/dev/disk/by-id/wwn-0x1", "no such file");
        assert_eq!(env.check(&disk("/dev/sdb")).len(), 1);
    }

    #[test]
    fn not_read_only() {
        let env = Env::new();
        let mut d = disk("/dev/sdb");
        d.read_only = true;
        assert_eq!(env.check(&d), vec!["/dev/sdb cannot be read-only"]);
    }

    #[test]
    fn not_suspended() {
        let env = Env::new();
        let mut d = disk("/dev/sdb");
        d.state = "running".into();
        assert!(env.check(&d).is_empty());
        d.state = "suspended".into();
        assert_eq!(
            env.check(&d),
            vec!["/dev/sdb cannot be in a \"suspended\" state"]
        );
    }

    #[test]
    fn no_invalid_partition_label_is_case_insensitive_substring() {
        let env = Env::new();
        for ok in ["", "abc", "data"] {
            let mut d = disk("/dev/sdb1");
            d.partlabel = ok.into();
            assert!(env.check(&d).is_empty(), "{ok}");
        }
        for bad in [
            "bios",
            "BIOS",
            "BIOS-BOOT",
            "boot",
            "Reserved",
            "EFI reserved",
        ] {
            let mut d = disk("/dev/sdb1");
            d.partlabel = bad.into();
            assert_eq!(
                env.check(&d),
                vec![format!("/dev/sdb1 has an invalid partition label {bad:?}")]
            );
        }
    }

    #[test]
    fn no_children() {
        let env = Env::new();
        let mut d = disk("/dev/sdb");
        d.children = vec![disk("/dev/sdb1")];
        assert_eq!(
            env.check(&d),
            vec!["/dev/sdb has children block devices and could not be considered"]
        );
    }

    #[test]
    fn filesystem_signatures_other_than_lvm_are_refused() {
        let env = Env::new();
        let mut d = disk("/dev/sdb");
        for fs in ["xfs", "swap", "crypto_LUKS"] {
            d.fstype = fs.into();
            assert_eq!(
                env.check(&d),
                vec![format!(
                    "/dev/sdb has an invalid filesystem signature ({fs}) and cannot be used"
                )]
            );
        }
    }

    #[test]
    fn lvm2_member_without_pv_record_is_reusable() {
        let mut env = Env::new();
        let mut d = disk("/dev/sdb");
        d.fstype = FSTYPE_LVM2_MEMBER.into();
        assert!(env.check(&d).is_empty());
        // A PV record for another device does not matter.
        env.pvs = vec![pv("/dev/sdz", None, Some(10))];
        env.resolved.insert("/dev/sdz", "/dev/sdz");
        assert!(env.check(&d).is_empty());
    }

    #[test]
    fn lvm2_member_of_this_vg_is_already_set_up_and_hidden() {
        let mut env = Env::new();
        env.pvs = vec![pv("/dev/sdb", Some("vg1"), Some(0))];
        let mut d = disk("/dev/sdb");
        d.fstype = FSTYPE_LVM2_MEMBER.into();
        d.children = vec![disk("/dev/dm-3")];
        let r = check_device(&d, &env.ctx());
        assert!(matches!(r[0], Rejection::AlreadySetUp { .. }));
        assert_eq!(
            r[0].to_string(),
            "/dev/sdb is already a LVM2_Member of vg1: the device is already setup correctly and was filtered to avoid attempting recreation"
        );
        assert!(r[0].is_expected_after_setup());
        let f = filter_devices(std::slice::from_ref(&d), &env.ctx());
        let sdb = f.excluded.iter().find(|e| e.kname == "/dev/sdb").unwrap();
        assert!(sdb.is_already_set_up());
        assert_eq!(
            sdb.reasons[0].filter_name(),
            "onlyValidFilesystemSignatures"
        );
        assert_eq!(Rejection::LvmPartition.filter_name(), "usableDeviceType");
    }

    #[test]
    fn lvm2_member_of_another_vg_is_refused() {
        let mut env = Env::new();
        env.pvs = vec![pv("/dev/sdb", Some("othervg"), Some(5))];
        let mut d = disk("/dev/sdb");
        d.fstype = FSTYPE_LVM2_MEMBER.into();
        assert_eq!(
            env.check(&d),
            vec![
                "/dev/sdb is already a LVM2_Member of another volume group (othervg) and cannot be used for the volume group vg1"
            ]
        );
    }

    #[test]
    fn lvm2_member_without_vg_needs_free_space_and_no_children() {
        let mut env = Env::new();
        let mut d = disk("/dev/sdb");
        d.fstype = FSTYPE_LVM2_MEMBER.into();
        env.pvs = vec![pv("/dev/sdb", None, Some(1 << 30))];
        assert!(env.check(&d).is_empty());
        env.pvs = vec![pv("/dev/sdb", None, Some(0))];
        assert_eq!(
            env.check(&d),
            vec![
                "/dev/sdb was reported as having no free capacity as a physical volume and cannot be used"
            ]
        );
        env.pvs = vec![pv("/dev/sdb", None, Some(1 << 30))];
        d.children = vec![disk("/dev/dm-1")];
        let r = env.check(&d);
        assert!(
            r.contains(
                &"/dev/sdb has an invalid filesystem signature (LVM2_member) and cannot be used"
                    .to_string()
            )
        );
        assert!(r.contains(
            &"/dev/sdb has children block devices and could not be considered".to_string()
        ));
    }

    #[test]
    fn lvm2_member_pv_names_are_resolved_before_comparing() {
        let mut env = Env::new();
        env.pvs = vec![pv("/dev/mapper/luks-1", Some("vg1"), Some(0))];
        env.resolved.insert("/dev/mapper/luks-1", "/dev/dm-0");
        let mut d = disk("/dev/dm-0");
        d.name = "/dev/mapper/luks-1".into();
        d.fstype = FSTYPE_LVM2_MEMBER.into();
        assert!(matches!(
            check_device(&d, &env.ctx())[0],
            Rejection::AlreadySetUp { .. }
        ));
        // An unresolvable PV name fails the filter for an LVM2_member device.
        let mut env2 = Env::new();
        env2.pvs = vec![pv("/dev/mapper/gone", Some("vg1"), Some(0))];
        assert_eq!(
            env2.check(&d),
            vec![
                "the pv /dev/mapper/gone could not be resolved via symlink: the path was not looked up on the host"
            ]
        );
    }

    #[test]
    fn a_pv_lsblk_could_not_see_is_still_an_lvm2_member() {
        // No udev: lsblk prints fstype null for PVs; the pvs report decides.
        let mut env = Env::new();
        env.pvs = vec![pv("/dev/loop0", Some("vg1"), Some(0))];
        let d = disk("/dev/loop0");
        assert!(matches!(
            check_device(&d, &env.ctx())[0],
            Rejection::AlreadySetUp { .. }
        ));
        env.pvs = vec![pv("/dev/loop0", Some("other"), Some(0))];
        assert!(env.check(&d)[0].contains("another volume group (other)"));
    }

    #[test]
    fn discovery_never_takes_a_network_disk_but_a_selector_may() {
        let env = Env::new();
        let mut rbd = disk("/dev/rbd0");
        rbd.device_type = "disk".into();
        let mut nbd = disk("/dev/nbd3");
        nbd.device_type = "disk".into();
        let mut iscsi = disk("/dev/sdc");
        iscsi.tran = "iscsi".into();
        for d in [&rbd, &nbd, &iscsi] {
            let r = check_device(d, &env.ctx());
            assert!(
                matches!(r.as_slice(), [Rejection::NetworkDisk { .. }]),
                "{}: {r:?}",
                d.kname
            );
            assert_eq!(r[0].filter_name(), "usableDeviceType");
        }
        let mut sata = disk("/dev/sdd");
        sata.tran = "sata".into();
        assert!(check_device(&sata, &env.ctx()).is_empty());
    }

    #[test]
    fn usable_device_type_rom_lvm_and_loop() {
        let mut env = Env::new();
        let mut rom = disk("/dev/sr0");
        rom.device_type = "rom".into();
        assert_eq!(
            env.check(&rom),
            vec!["/dev/sr0 has a device type of \"rom\" which is unsupported"]
        );
        let mut lv = disk("/dev/dm-2");
        lv.device_type = "lvm".into();
        assert_eq!(check_device(&lv, &env.ctx()), vec![Rejection::LvmPartition]);
        assert_eq!(
            Rejection::LvmPartition.to_string(),
            "the device is a lvm partition and is excluded by default"
        );

        let mut lo = disk("/dev/loop3");
        lo.device_type = "loop".into();
        // Unknown back-file: refused, as LVMS does without BlockDeviceInfo.
        assert_eq!(
            env.check(&lo),
            vec!["/dev/loop3 is an unusable loopback device"]
        );
        env.loops.insert(
            "/dev/loop3".into(),
            "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/x".into(),
        );
        assert_eq!(
            env.check(&lo),
            vec!["/dev/loop3 is an unusable loopback device"]
        );
        env.loops
            .insert("/dev/loop3".into(), "/var/tmp/disk3.img".into());
        assert!(env.check(&lo).is_empty());
    }

    #[test]
    fn mounted_and_held_devices_are_refused() {
        let mut env = Env::new();
        let mut d = disk("/dev/sdb");
        d.mountpoints = vec!["/var/lib/data".into()];
        assert_eq!(
            env.check(&d),
            vec![
                "/dev/sdb has a mounted filesystem (/var/lib/data) and cannot be used; unmount it or remove it from the device selector"
            ]
        );
        let d = disk("/dev/sdc");
        env.holders.insert("/dev/sdc".into(), vec!["dm-4".into()]);
        assert_eq!(
            env.check(&d),
            vec![
                "/dev/sdc is held by dm-4 and cannot be used; release the holder or remove it from the device selector"
            ]
        );
        env.holders.insert("/dev/sdc".into(), vec![]);
        assert!(env.check(&d).is_empty());
    }

    #[test]
    fn a_partition_table_without_visible_partitions_is_refused() {
        let env = Env::new();
        let mut d = disk("/dev/loop7");
        d.pttype = "gpt".into();
        let r = check_device(&d, &env.ctx());
        assert_eq!(
            r,
            vec![Rejection::PartitionTable {
                name: "/dev/loop7".into(),
                pttype: "gpt".into()
            }]
        );
        assert_eq!(r[0].filter_name(), "noChildren");
        assert_eq!(
            r[0].to_string(),
            "/dev/loop7 has a gpt partition table and could not be considered"
        );
        // With its partitions visible the usual reason is given, once.
        d.children = vec![disk("/dev/loop7p1")];
        let r = check_device(&d, &env.ctx());
        assert!(
            matches!(r.as_slice(), [Rejection::HasChildren { .. }]),
            "{r:?}"
        );
    }

    #[test]
    fn tree_is_filtered_recursively_and_deduplicated() {
        let mpath = BlockDevice {
            name: "/dev/mapper/mpatha".into(),
            kname: "/dev/dm-5".into(),
            device_type: "mpath".into(),
            ..Default::default()
        };
        let mut sdb = disk("/dev/sdb");
        sdb.children = vec![mpath.clone()];
        let mut sdc = disk("/dev/sdc");
        sdc.children = vec![mpath];
        let env = Env::new();
        let f = filter_devices(&[sdb, sdc, disk("/dev/sdd")], &env.ctx());
        let avail: Vec<_> = f.available.iter().map(|d| d.kname.as_str()).collect();
        assert_eq!(avail, vec!["/dev/dm-5", "/dev/sdd"]);
        assert_eq!(f.excluded.len(), 2);
        assert!(f.is_available("/dev/dm-5"));
        assert_eq!(f.rejections("/dev/sdb").len(), 1);
        assert!(f.rejections("/dev/sdd").is_empty());
    }

    #[test]
    fn duplicate_exclusions_merge_reasons_once() {
        let mut child = disk("/dev/dm-5");
        child.read_only = true;
        let mut sdb = disk("/dev/sdb");
        sdb.children = vec![child.clone()];
        let mut sdc = disk("/dev/sdc");
        sdc.children = vec![child];
        let env = Env::new();
        let f = filter_devices(&[sdb, sdc], &env.ctx());
        assert_eq!(f.rejections("/dev/dm-5").len(), 1);
    }

    #[test]
    fn only_a_dm_device_named_as_a_gate_and_stacked_on_an_lv_is_a_gate() {
        let devs = parse_lsblk(
            r#"{"blockdevices":[
            {"name":"/dev/vdb","kname":"/dev/vdb","type":"disk","children":[
                {"name":"/dev/mapper/vg1-pvc--1","kname":"/dev/dm-1","type":"lvm","children":[
                    {"name":"/dev/mapper/lvms-pvc-1","kname":"/dev/dm-2","type":"dm"}]},
                {"name":"/dev/mapper/vg1-pvc--2","kname":"/dev/dm-3","type":"lvm","children":[
                    {"name":"/dev/mapper/lvms-pvc-2","kname":"/dev/dm-4","type":"crypt"},
                    {"name":"/dev/mapper/users-own","kname":"/dev/dm-5","type":"dm"},
                    {"name":"/dev/mapper/lvms-","kname":"/dev/dm-6","type":"dm"}]}]},
            {"name":"/dev/vdc","kname":"/dev/vdc","type":"disk","children":[
                {"name":"/dev/mapper/lvms-pvc-3","kname":"/dev/dm-7","type":"dm"}]}]}"#,
        )
        .unwrap();
        // Not a crypt device of that name, not another dm device on an LV, not a name without
        // a volume id, and not one straight on a disk.
        assert_eq!(
            volume_gates(&devs),
            BTreeSet::from(["/dev/dm-2".to_string()])
        );
    }

    #[test]
    fn a_gate_is_refused_and_left_out_of_the_status_as_the_lv_under_it() {
        let mut env = Env::new();
        env.gates = BTreeSet::from(["/dev/dm-2".to_string()]);
        let devs = parse_lsblk(
            r#"{"blockdevices":[
            {"name":"/dev/sdb","kname":"/dev/sdb","type":"disk","fstype":"LVM2_member","children":[
                {"name":"/dev/mapper/vg1-lv","kname":"/dev/dm-1","type":"lvm","children":[
                    {"name":"/dev/mapper/lvms-lv","kname":"/dev/dm-2","type":"dm",
                     "mountpoint":"/var/lib/kubelet/pods/p/volumes/v/mount"}]}]}]}"#,
        )
        .unwrap();
        env.pvs = vec![pv("/dev/sdb", Some("vg1"), Some(0))];
        let f = filter_devices(&devs, &env.ctx());
        assert!(f.available.is_empty());
        assert!(f.rejections("/dev/dm-2").contains(&Rejection::VolumeGate));
        assert_eq!(f.status_excluded(), Vec::new());
        // Unprobed, unmounted and named as a gate but not one (not in `gates`): an empty dm
        // device on an LV is a candidate, as LVMS has it.
        env.gates.clear();
        let bare = parse_lsblk(
            r#"{"blockdevices":[{"name":"/dev/mapper/lvms-x","kname":"/dev/dm-9","type":"dm"}]}"#,
        )
        .unwrap();
        assert_eq!(filter_devices(&bare, &env.ctx()).available.len(), 1);
    }

    #[test]
    fn status_hides_already_set_up_devices_and_sorts() {
        let mut env = Env::new();
        env.pvs = vec![pv("/dev/sdb", Some("vg1"), Some(0))];
        let devs = parse_lsblk(
            r#"{"blockdevices":[
            {"name":"/dev/sdb","kname":"/dev/sdb","type":"disk","fstype":"LVM2_member","children":[
                {"name":"/dev/mapper/vg1-lv","kname":"/dev/dm-1","type":"lvm"}]},
            {"name":"/dev/sdc","kname":"/dev/sdc","type":"disk","fstype":"xfs","ro":true},
            {"name":"/dev/sda","kname":"/dev/sda","type":"disk","fstype":"ext4"}]}"#,
        )
        .unwrap();
        let f = filter_devices(&devs, &env.ctx());
        assert!(f.available.is_empty());
        assert_eq!(f.excluded.len(), 4);
        let s = f.status_excluded();
        assert_eq!(
            s,
            vec![
                ExcludedDevice {
                    name: "/dev/sda".into(),
                    reasons: vec![
                        "/dev/sda has an invalid filesystem signature (ext4) and cannot be used"
                            .into()
                    ],
                },
                ExcludedDevice {
                    name: "/dev/sdc".into(),
                    reasons: vec![
                        "/dev/sdc cannot be read-only".into(),
                        "/dev/sdc has an invalid filesystem signature (xfs) and cannot be used"
                            .into(),
                    ],
                },
            ]
        );
    }

    #[test]
    fn real_loop_fixture_with_selector() {
        let devs = parse_lsblk(&crate::node::fixture("lsblk_loops.json")).unwrap();
        let mut env = Env::new();
        env.selector = Some(DeviceSelector {
            paths: vec!["/dev/loop4".into(), "/dev/loop5".into()],
            ..Default::default()
        });
        env.resolved = ResolvedPaths::identity(["/dev/loop4", "/dev/loop5"]);
        for i in 0..6 {
            env.loops
                .insert(format!("/dev/loop{i}"), format!("/tmp/disk{i}.img"));
        }
        let f = filter_devices(&devs, &env.ctx());
        assert_eq!(f.available.len(), 1);
        assert_eq!(f.available[0].kname, "/dev/loop4");
        assert_eq!(f.rejections("/dev/loop5").len(), 1);
        assert_eq!(
            f.rejections("/dev/loop0")[0].filter_name(),
            "partOfDeviceSelector"
        );
    }
}
