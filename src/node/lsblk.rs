//! Block devices as `lsblk --json --paths -o <columns>` reports them (recursive `children`),
//! plus the two probes that complete them: `losetup <dev> -O BACK-FILE --json` for loop devices
//! and `blkid -p -o export <dev>` for signatures lsblk could not see.
//!
//! lsblk versions differ: util-linux >= 2.33 prints `ro`/`rota` as JSON booleans and older ones
//! as `"0"`/`"1"`; `--bytes` prints sizes as numbers. Both spellings are accepted.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};
use thiserror::Error;

/// LVMS's column list (`lsblk.LSBLK_COLUMNS`), quoted in the "device did not exist" message.
pub const LVMS_LSBLK_COLUMNS: &str =
    "NAME,ROTA,TYPE,SIZE,MODEL,VENDOR,RO,STATE,KNAME,SERIAL,PARTLABEL,FSTYPE";
/// The columns lvms asks for: LVMS's plus MOUNTPOINT, which the device-safety rule needs.
/// MOUNTPOINT (not MOUNTPOINTS) because every util-linux knows it; one mount point is enough
/// to refuse a device. The parser also accepts the newer `mountpoints` array.
pub const LSBLK_COLUMNS: &str =
    "NAME,ROTA,TYPE,SIZE,MODEL,VENDOR,RO,STATE,KNAME,SERIAL,PARTLABEL,FSTYPE,MOUNTPOINT,TRAN";

/// lsblk `TYPE` values the filters look at.
pub const TYPE_LOOP: &str = "loop";
pub const TYPE_ROM: &str = "rom";
pub const TYPE_LVM: &str = "lvm";
pub const TYPE_PART: &str = "part";
/// A plain device-mapper device (lsblk's type for a `dmsetup create` one, as lvms's gates).
pub const TYPE_DM: &str = "dm";

/// `STATE` value that makes a device unusable (notSuspended filter).
pub const STATE_SUSPENDED: &str = "suspended";

/// A loop device whose back-file path contains this is a Kubernetes volume (LVMS `pluginString`).
pub const KUBERNETES_PLUGIN_BACK_FILE: &str = "plugins/kubernetes.io";

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockDevice {
    /// `NAME`, e.g. `/dev/mapper/luks-x` (what status reports).
    pub name: String,
    /// `KNAME`, the kernel name, e.g. `/dev/dm-0` (what paths are resolved to and compared with).
    pub kname: String,
    /// `TYPE`: disk, part, loop, rom, lvm, crypt, mpath, raid1, ...
    pub device_type: String,
    pub size: String,
    pub model: String,
    pub vendor: String,
    pub state: String,
    pub fstype: String,
    /// Partition table type (`dos`, `gpt`) probed by blkid; empty when none. A disk can carry
    /// a table whose partitions the kernel does not show (loop devices without partscan).
    pub pttype: String,
    pub serial: String,
    pub partlabel: String,
    pub read_only: bool,
    pub rotational: bool,
    /// Every mount point lsblk printed (MOUNTPOINT or MOUNTPOINTS); empty when not mounted.
    pub mountpoints: Vec<String>,
    /// `TRAN`: the transport (sata, nvme, usb, iscsi, ...); empty for virtual devices.
    pub tran: String,
    pub children: Vec<BlockDevice>,
}

impl BlockDevice {
    pub fn has_children(&self) -> bool {
        !self.children.is_empty()
    }

    pub fn is_mounted(&self) -> bool {
        !self.mountpoints.is_empty()
    }

    /// Mount points of this device and of every descendant (a mounted partition makes its disk
    /// unsafe to wipe).
    pub fn mounted_in_tree(&self) -> Vec<String> {
        let mut out = self.mountpoints.clone();
        for c in &self.children {
            out.extend(c.mounted_in_tree());
        }
        out
    }
}

#[derive(Debug, Error)]
pub enum LsblkError {
    #[error(
        "lsblk output is not the JSON of `lsblk --json --paths -o {LSBLK_COLUMNS}`: {0}; run that exact command on the host to see what it prints"
    )]
    Json(#[from] serde_json::Error),
    #[error(
        "lsblk reported a device without a kernel name (KNAME) under {parent:?}; the KNAME column is required"
    )]
    MissingKname { parent: String },
    #[error(
        "losetup output is not the JSON of `losetup <dev> -O BACK-FILE --json`: {0}; run it on the host to check"
    )]
    Losetup(serde_json::Error),
}

/// Parses the whole lsblk document (`{"blockdevices": [...]}`).
pub fn parse_lsblk(json: &str) -> Result<Vec<BlockDevice>, LsblkError> {
    // No default: lsblk prints `"blockdevices": []` when there is nothing, so a document
    // without the key is not lsblk's, and must not read as a node without disks.
    #[derive(Deserialize)]
    struct Doc {
        blockdevices: Vec<RawDevice>,
    }
    let doc: Doc = serde_json::from_str(json)?;
    doc.blockdevices
        .into_iter()
        .map(|d| d.into_device("<top level>"))
        .collect()
}

/// Every device in the tree by kname (LVMS `FlattenedBlockDevices`); later duplicates (a
/// multipath member seen under two disks) replace earlier ones, which are identical anyway.
pub fn flatten(devices: &[BlockDevice]) -> BTreeMap<String, &BlockDevice> {
    fn walk<'a>(ds: &'a [BlockDevice], out: &mut BTreeMap<String, &'a BlockDevice>) {
        for d in ds {
            out.insert(d.kname.clone(), d);
            walk(&d.children, out);
        }
    }
    let mut out = BTreeMap::new();
    walk(devices, &mut out);
    out
}

/// knames of the loop devices in the tree: the ones whose back-file the caller must look up.
pub fn loop_devices(devices: &[BlockDevice]) -> Vec<String> {
    flatten(devices)
        .into_values()
        .filter(|d| d.device_type == TYPE_LOOP)
        .map(|d| d.kname.clone())
        .collect()
}

/// The back-files in `losetup <dev> -O BACK-FILE --json` output.
pub fn parse_losetup_back_files(json: &str) -> Result<Vec<String>, LsblkError> {
    // No default: without the key this is not losetup's answer (the caller refuses an empty
    // back-file list rather than read it as "no back-file").
    #[derive(Deserialize)]
    struct Doc {
        loopdevices: Vec<Entry>,
    }
    #[derive(Deserialize)]
    struct Entry {
        #[serde(rename = "back-file", default, deserialize_with = "lenient_string")]
        back_file: String,
    }
    let doc: Doc = serde_json::from_str(json).map_err(LsblkError::Losetup)?;
    Ok(doc.loopdevices.into_iter().map(|e| e.back_file).collect())
}

/// Whether a loop device may be used: not when its back-file is a Kubernetes volume.
pub fn is_usable_loop_back_file(back_file: &str) -> bool {
    !back_file.contains(KUBERNETES_PLUGIN_BACK_FILE)
}

/// What `blkid -p -o export <dev>` found on a device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlkidProbe {
    /// `TYPE=`: a filesystem or other signature (ext4, LVM2_member, ...).
    pub fstype: Option<String>,
    /// `PTTYPE=`: a partition table (dos, gpt).
    pub pttype: Option<String>,
}

/// Parses `blkid -p -o export` output. blkid exits 2 with no output on a device without
/// signatures; pass "" then.
pub fn parse_blkid_export(text: &str) -> BlkidProbe {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim().replace("\\ ", " "))
            .filter(|v| !v.is_empty())
    };
    BlkidProbe {
        fstype: field("TYPE="),
        pttype: field("PTTYPE="),
    }
}

/// Fills `fstype` (where lsblk left it empty) and `pttype` from blkid probes by kname. lsblk
/// takes FSTYPE from the udev database, so without udev (containers, CI) an LVM2_member or
/// ext4 signature is invisible to it; `blkid -p` reads the device itself.
pub fn apply_probes(devices: &mut [BlockDevice], probed: &BTreeMap<String, BlkidProbe>) {
    for d in devices {
        if let Some(p) = probed.get(&d.kname) {
            if d.fstype.is_empty()
                && let Some(t) = &p.fstype
            {
                d.fstype = t.clone();
            }
            if let Some(t) = &p.pttype {
                d.pttype = t.clone();
            }
        }
        apply_probes(&mut d.children, probed);
    }
}

#[derive(Deserialize)]
struct RawDevice {
    #[serde(default, deserialize_with = "lenient_string")]
    name: String,
    #[serde(default, deserialize_with = "lenient_string")]
    kname: String,
    #[serde(rename = "type", default, deserialize_with = "lenient_string")]
    device_type: String,
    #[serde(default, deserialize_with = "lenient_string")]
    size: String,
    #[serde(default, deserialize_with = "lenient_string")]
    model: String,
    #[serde(default, deserialize_with = "lenient_string")]
    vendor: String,
    #[serde(default, deserialize_with = "lenient_string")]
    state: String,
    #[serde(default, deserialize_with = "lenient_string")]
    fstype: String,
    #[serde(default, deserialize_with = "lenient_string")]
    serial: String,
    #[serde(default, deserialize_with = "lenient_string")]
    partlabel: String,
    #[serde(default, deserialize_with = "lenient_bool")]
    ro: bool,
    #[serde(default, deserialize_with = "lenient_bool")]
    rota: bool,
    #[serde(default, deserialize_with = "lenient_string")]
    mountpoint: String,
    #[serde(default, deserialize_with = "lenient_string_list")]
    mountpoints: Vec<String>,
    #[serde(default, deserialize_with = "lenient_string")]
    tran: String,
    #[serde(default)]
    children: Vec<RawDevice>,
}

impl RawDevice {
    fn into_device(self, parent: &str) -> Result<BlockDevice, LsblkError> {
        if self.kname.is_empty() {
            return Err(LsblkError::MissingKname {
                parent: parent.to_string(),
            });
        }
        let mut mountpoints = self.mountpoints;
        if !self.mountpoint.is_empty() && !mountpoints.contains(&self.mountpoint) {
            mountpoints.insert(0, self.mountpoint);
        }
        let children = self
            .children
            .into_iter()
            .map(|c| c.into_device(&self.kname))
            .collect::<Result<_, _>>()?;
        Ok(BlockDevice {
            name: if self.name.is_empty() {
                self.kname.clone()
            } else {
                self.name
            },
            kname: self.kname,
            device_type: self.device_type,
            size: self.size,
            model: self.model.trim().to_string(),
            vendor: self.vendor.trim().to_string(),
            state: self.state,
            fstype: self.fstype,
            pttype: String::new(),
            serial: self.serial,
            partlabel: self.partlabel,
            read_only: self.ro,
            rotational: self.rota,
            mountpoints,
            tran: self.tran,
            children,
        })
    }
}

/// A string, a number (printed as-is) or null (empty).
fn lenient_string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s,
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::Bool(b) => b.to_string(),
        other => {
            return Err(serde::de::Error::custom(format!(
                "expected a string, number or null, got {other}"
            )));
        }
    })
}

/// `true`/`false`, `"1"`/`"0"`, `1`/`0`, `"true"`/`"false"` or null (false).
fn lenient_bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::Null => Ok(false),
        serde_json::Value::Bool(b) => Ok(b),
        serde_json::Value::Number(n) => Ok(n.as_u64().is_some_and(|v| v != 0)),
        serde_json::Value::String(s) => match s.trim() {
            "1" | "true" => Ok(true),
            "0" | "false" | "" => Ok(false),
            other => Err(serde::de::Error::custom(format!(
                "expected a boolean or \"0\"/\"1\", got {other:?}"
            ))),
        },
        other => Err(serde::de::Error::custom(format!(
            "expected a boolean, got {other}"
        ))),
    }
}

/// MOUNTPOINTS: an array whose entries may be null (not mounted), or a single string/null.
fn lenient_string_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::Null => Vec::new(),
        serde_json::Value::String(s) if s.is_empty() => Vec::new(),
        serde_json::Value::String(s) => vec![s],
        serde_json::Value::Array(items) => items
            .into_iter()
            .filter_map(|v| match v {
                serde_json::Value::String(s) if !s.is_empty() => Some(s),
                _ => None,
            })
            .collect(),
        other => {
            return Err(serde::de::Error::custom(format!(
                "expected mount points as an array or string, got {other}"
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::fixture;

    #[test]
    fn parses_real_loop_devices_with_json_booleans() {
        let devs = parse_lsblk(&fixture("lsblk_loops.json")).unwrap();
        assert_eq!(devs.len(), 6);
        let d0 = &devs[0];
        assert_eq!(d0.name, "/dev/loop0");
        assert_eq!(d0.kname, "/dev/loop0");
        assert_eq!(d0.device_type, TYPE_LOOP);
        assert_eq!(d0.size, "200M");
        assert!(!d0.read_only);
        assert!(d0.rotational);
        assert_eq!(d0.model, "");
        assert!(!d0.is_mounted());
        // The sixth loop device was attached read-only (`losetup -r`).
        assert!(devs[5].read_only);
        assert_eq!(loop_devices(&devs).len(), 6);
    }

    #[test]
    fn parses_mountpoints_array_with_null_entries() {
        let devs = parse_lsblk(&fixture("lsblk_mountpoints.json")).unwrap();
        assert_eq!(devs[0].mountpoints, Vec::<String>::new());
        let json = r#"{"blockdevices":[{"name":"/dev/sda","kname":"/dev/sda","type":"disk",
            "mountpoints":[null,"/var","/var/lib"]}]}"#;
        let devs = parse_lsblk(json).unwrap();
        assert_eq!(devs[0].mountpoints, vec!["/var", "/var/lib"]);
        assert!(devs[0].is_mounted());
    }

    #[test]
    fn parses_old_lsblk_string_booleans_and_numeric_sizes() {
        let devs = parse_lsblk(&fixture("lsblk_partitions.json")).unwrap();
        let sda = &devs[0];
        assert!(!sda.read_only && sda.rotational);
        assert_eq!(sda.size, "10737418240");
        assert_eq!(sda.children.len(), 2);
        assert_eq!(sda.children[0].partlabel, "BIOS-BOOT");
        assert_eq!(sda.children[1].mountpoints, vec!["/boot"]);
        assert_eq!(sda.mounted_in_tree(), vec!["/boot"]);
        let flat = flatten(&devs);
        assert!(flat.contains_key("/dev/sda2"));
        assert_eq!(flat["/dev/sdb"].children.len(), 1);
    }

    #[test]
    fn rejects_devices_without_kname_and_non_json() {
        let err = parse_lsblk(r#"{"blockdevices":[{"name":"/dev/sda"}]}"#).unwrap_err();
        assert!(err.to_string().contains("KNAME"), "{err}");
        assert!(parse_lsblk("lsblk: unknown column").is_err());
        assert!(parse_lsblk(r#"{"blockdevices":[{"kname":"/dev/sda","ro":"maybe"}]}"#).is_err());
    }

    #[test]
    fn a_document_without_its_list_is_an_error_not_an_empty_node() {
        // What lsblk and losetup print when there is nothing to list.
        assert!(parse_lsblk(r#"{"blockdevices": []}"#).unwrap().is_empty());
        assert!(
            parse_losetup_back_files(r#"{"loopdevices": []}"#)
                .unwrap()
                .is_empty()
        );
        // Anything else is not their answer.
        assert!(parse_lsblk("{}").is_err());
        assert!(parse_lsblk(r#"{"loopdevices": []}"#).is_err());
        assert!(parse_losetup_back_files("{}").is_err());
    }

    #[test]
    fn name_defaults_to_kname() {
        let devs = parse_lsblk(r#"{"blockdevices":[{"kname":"/dev/sdz"}]}"#).unwrap();
        assert_eq!(devs[0].name, "/dev/sdz");
    }

    #[test]
    fn losetup_back_file_and_kubernetes_rule() {
        let files = parse_losetup_back_files(&fixture("losetup_back_file.json")).unwrap();
        assert_eq!(files, vec!["/tmp/lvmsfix/work/disk1.img"]);
        assert!(is_usable_loop_back_file(&files[0]));
        assert!(!is_usable_loop_back_file(
            "/var/lib/kubelet/plugins/kubernetes.io/csi/pv/x/dev"
        ));
        assert!(parse_losetup_back_files("nope").is_err());
    }

    #[test]
    fn blkid_probe_fills_missing_fstype_only() {
        let fs = |name: &str| parse_blkid_export(&fixture(name)).fstype;
        assert_eq!(fs("blkid_ext4.txt").as_deref(), Some("ext4"));
        assert_eq!(fs("blkid_lvm2_member.txt").as_deref(), Some("LVM2_member"));
        assert_eq!(parse_blkid_export(""), BlkidProbe::default());
        let table = parse_blkid_export(&fixture("blkid_dos_pttype.txt"));
        assert_eq!(
            table,
            BlkidProbe {
                fstype: None,
                pttype: Some("dos".into())
            },
            "PTTYPE is not TYPE"
        );
        let mut devs = parse_lsblk(&fixture("lsblk_partitions.json")).unwrap();
        let probe = |t: &str| BlkidProbe {
            fstype: Some(t.into()),
            pttype: None,
        };
        let probed = BTreeMap::from([
            ("/dev/dm-0".to_string(), probe("LVM2_member")),
            ("/dev/sda2".to_string(), probe("ext4")),
            ("/dev/sda".to_string(), table),
        ]);
        apply_probes(&mut devs, &probed);
        assert_eq!(devs[1].children[0].fstype, "LVM2_member");
        // lsblk already said xfs for /dev/sda2: the probe does not override it.
        assert_eq!(devs[0].children[1].fstype, "xfs");
        assert_eq!(devs[0].pttype, "dos");
    }
}
