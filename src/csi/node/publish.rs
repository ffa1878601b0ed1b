//! NodePublishVolume / NodeUnpublishVolume / NodeExpandVolume as pure decisions, TopoLVM's
//! model (no staging: everything happens at publish): what a request asks for, and, from what
//! the node shows (the device's signature, what is mounted at the target), the steps left to
//! take. The commands those steps run are built here too; vg-manager runs them.

use crate::csi::access::{Access, access_of};
pub use crate::csi::access::{DEFAULT_FS_TYPE, FS_TYPES};
use crate::csi::errors::CsiError;
use crate::csi::node::mountinfo::Mount;
use crate::csi::proto::volume_capability::AccessType;
use crate::csi::proto::{NodePublishVolumeRequest, VolumeCapability};
use tonic::Code;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Filesystem {
        fs_type: String,
        /// What `mount -o` gets: the request's flags, `ro`, and `nouuid` for xfs (a snapshot
        /// or clone carries its origin's UUID, and both may be mounted on one node).
        options: Vec<String>,
    },
    Block,
}

/// One NodePublishVolume request, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishSpec {
    pub volume_id: String,
    pub target: String,
    pub kind: Kind,
    pub readonly: bool,
}

fn required<'a>(value: &'a str, field: &str) -> Result<&'a str, CsiError> {
    if value.is_empty() {
        Err(CsiError::invalid(format!("{field} is empty")))
    } else {
        Ok(value)
    }
}

/// The longest path the kernel takes (PATH_MAX).
const MAX_PATH: usize = 4096;

/// A node RPC's host path (`target_path`, `volume_path`): absolute and plain (no `.` or `..`
/// part, no NUL, not `/` itself), so it can neither climb out of where kubelet put it nor
/// reach `mount` or `umount` as an option. Which volume is mounted there is checked apart.
pub fn host_path<'a>(value: &'a str, field: &str) -> Result<&'a str, CsiError> {
    let value = required(value, field)?;
    let why = if value.len() > MAX_PATH {
        Some("is longer than PATH_MAX")
    } else if !value.starts_with('/') {
        Some("is not absolute")
    } else if value.contains('\0') {
        Some("holds a NUL byte")
    } else if value.split('/').any(|part| part == "." || part == "..") {
        Some("has a '.' or '..' part")
    } else if value.trim_end_matches('/').is_empty() {
        Some("is the root directory")
    } else {
        None
    };
    match why {
        None => Ok(value),
        Some(why) => Err(CsiError::invalid(format!(
            "{field} {:?} {why}: kubelet passes a plain absolute path under its root directory",
            value.chars().take(128).collect::<String>()
        ))),
    }
}

/// A stats or expansion `volume_path`: empty is INVALID_ARGUMENT; one that is no plain absolute
/// path cannot be where a volume is published, so it is NOT_FOUND, as CSI names a path that is
/// not the volume's (csi-sanity asks exactly this with `some/path`).
pub fn volume_path(value: &str) -> Result<&str, CsiError> {
    required(value, "volume_path")?;
    host_path(value, "volume_path").map_err(|e| CsiError::not_found(e.message))
}

/// Whether `mount` (what the mount table shows at a path) is the volume's: a filesystem on
/// one of its `devices` (`major:minor` of its gate and its LV), or a block volume's device
/// node bind-mounted there (`node_device`: the path's own `major:minor`, if it is a device).
pub fn is_volume_mount(mount: &Mount, node_device: Option<&str>, devices: &[String]) -> bool {
    devices
        .iter()
        .any(|d| *d == mount.device || Some(d.as_str()) == node_device)
}

/// The request as the node will act on it; a missing field or an unsupported capability is
/// InvalidArgument naming it.
pub fn publish_spec(r: &NodePublishVolumeRequest) -> Result<PublishSpec, CsiError> {
    let volume_id = required(&r.volume_id, "volume_id")?.to_string();
    let target = host_path(&r.target_path, "target_path")?.to_string();
    let cap = r
        .volume_capability
        .as_ref()
        .ok_or_else(|| CsiError::invalid("volume_capability is empty; set block or mount"))?;
    let kind = match access_of(cap)? {
        Access::Block => Kind::Block,
        Access::Mount { fs_type } => filesystem(cap, &fs_type, r.readonly)?,
    };
    Ok(PublishSpec {
        volume_id,
        target,
        kind,
        readonly: r.readonly,
    })
}

fn filesystem(cap: &VolumeCapability, fs_type: &str, readonly: bool) -> Result<Kind, CsiError> {
    let fs_type = if fs_type.is_empty() {
        DEFAULT_FS_TYPE
    } else {
        fs_type
    };
    let mut options: Vec<String> = match &cap.access_type {
        Some(AccessType::Mount(m)) => m
            .mount_flags
            .iter()
            .flat_map(|f| f.split(','))
            .filter(|f| !f.is_empty())
            .map(String::from)
            .collect(),
        _ => Vec::new(),
    };
    if readonly {
        if options.iter().any(|o| o == "rw") {
            return Err(CsiError::invalid(
                "volume_capability.mount.mount_flags has `rw` but readonly is set; drop one",
            ));
        }
        options.push("ro".into());
    }
    if fs_type == "xfs" {
        options.push("nouuid".into());
    }
    options.dedup();
    Ok(Kind::Filesystem {
        fs_type: fs_type.to_string(),
        options,
    })
}

/// What the node shows for one publish (read just before deciding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishView {
    /// `major:minor` of the volume's device.
    pub device: String,
    /// The device's signature (`blkid -p`'s TYPE or PTTYPE), `None` when it carries none.
    pub signature: Option<String>,
    /// What is mounted at the target, if anything.
    pub target_mount: Option<Mount>,
    /// For a block target: `major:minor` of the device node there (a bind-mounted LV).
    pub target_device: Option<String>,
    /// `major:minor` of the LV itself when `device` is its gate: a filesystem mounted on the
    /// LV directly (published before gates) is the same volume.
    pub lv_device: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublishStep {
    /// `mkdir -p` the target (a directory), or its parent and an empty file (block).
    MakeTarget,
    /// Make the filesystem: only ever on a device that carries no signature.
    Format {
        fs_type: String,
    },
    Mount,
}

/// Steps left (empty: published already, with what was asked), or why it cannot be.
pub fn plan_publish(spec: &PublishSpec, view: &PublishView) -> Result<Vec<PublishStep>, CsiError> {
    if let Some(m) = &view.target_mount {
        let same = match spec.kind {
            Kind::Block => view.target_device.as_deref() == Some(view.device.as_str()),
            Kind::Filesystem { .. } => {
                m.device == view.device || view.lv_device.as_deref() == Some(m.device.as_str())
            }
        };
        if !same {
            return Err(CsiError::new(
                Code::AlreadyExists,
                format!(
                    "{} already has {} ({}) mounted, not volume {}; unpublish it first",
                    spec.target, m.source, m.device, spec.volume_id
                ),
            ));
        }
        if m.read_only() != spec.readonly {
            return Err(CsiError::new(
                Code::AlreadyExists,
                format!(
                    "volume {} is published at {} {}; unpublish it before publishing it {}",
                    spec.volume_id,
                    spec.target,
                    if m.read_only() {
                        "read-only"
                    } else {
                        "read-write"
                    },
                    if spec.readonly {
                        "read-only"
                    } else {
                        "read-write"
                    },
                ),
            ));
        }
        return Ok(Vec::new());
    }
    match &spec.kind {
        Kind::Block => Ok(vec![PublishStep::MakeTarget, PublishStep::Mount]),
        Kind::Filesystem { fs_type, .. } => match view.signature.as_deref() {
            None => Ok(vec![
                PublishStep::MakeTarget,
                PublishStep::Format {
                    fs_type: fs_type.clone(),
                },
                PublishStep::Mount,
            ]),
            Some(s) if s == fs_type => Ok(vec![PublishStep::MakeTarget, PublishStep::Mount]),
            Some(other) => Err(CsiError::internal(format!(
                "volume {} carries {other}, not {fs_type}; lvms never formats a device with data (publish it with fs_type {other})",
                spec.volume_id
            ))),
        },
    }
}

/// The signature `blkid -p -o export` printed (`TYPE=`, else `PTTYPE=`); `None` for empty output
/// (blkid exits 2 when it finds nothing).
pub fn signature_of(export: &str) -> Option<String> {
    let value = |key: &str| {
        export
            .lines()
            .find_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='))
            .filter(|v| !v.is_empty())
            .map(String::from)
    };
    value("TYPE").or_else(|| value("PTTYPE"))
}

/// `mkfs` of a blank device (never forced: mkfs itself refuses a device with a signature).
pub fn format_argv(fs_type: &str, device: &str) -> Vec<String> {
    let mut argv: Vec<String> = match fs_type {
        "xfs" => vec!["mkfs.xfs".into(), "-q".into()],
        _ => vec![format!("mkfs.{fs_type}"), "-q".into()],
    };
    argv.push(device.into());
    argv
}

pub fn mount_argv(spec: &PublishSpec, device: &str) -> Vec<String> {
    match &spec.kind {
        Kind::Filesystem { fs_type, options } => {
            let mut argv = vec!["mount".into(), "-t".into(), fs_type.clone()];
            if !options.is_empty() {
                argv.extend(["-o".into(), options.join(",")]);
            }
            argv.extend([device.into(), spec.target.clone()]);
            argv
        }
        Kind::Block => {
            let mut argv = vec!["mount".into(), "--bind".into()];
            if spec.readonly {
                argv.extend(["-o".into(), "ro".into()]);
            }
            argv.extend([device.into(), spec.target.clone()]);
            argv
        }
    }
}

/// Grow the filesystem mounted at `mount` to its device's size.
pub fn resize_argv(mount: &Mount) -> Result<Vec<String>, CsiError> {
    match mount.fs_type.as_str() {
        "ext4" | "ext3" | "ext2" => Ok(vec!["resize2fs".into(), mount.source.clone()]),
        "xfs" => Ok(vec!["xfs_growfs".into(), mount.mount_point.clone()]),
        other => Err(CsiError::new(
            Code::FailedPrecondition,
            format!(
                "{} is {other}; lvms grows ext4 and xfs only",
                mount.mount_point
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csi::proto::volume_capability::{AccessMode, BlockVolume, MountVolume, access_mode};

    fn request(access: AccessType, readonly: bool) -> NodePublishVolumeRequest {
        NodePublishVolumeRequest {
            volume_id: "v1".into(),
            target_path: "/t".into(),
            readonly,
            volume_capability: Some(VolumeCapability {
                access_type: Some(access),
                access_mode: Some(AccessMode {
                    mode: access_mode::Mode::SingleNodeWriter as i32,
                }),
            }),
            ..Default::default()
        }
    }

    fn mount(fs: &str, flags: &[&str]) -> AccessType {
        AccessType::Mount(MountVolume {
            fs_type: fs.into(),
            mount_flags: flags.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        })
    }

    fn fs_spec(fs: &str, readonly: bool) -> PublishSpec {
        publish_spec(&request(mount(fs, &["noatime"]), readonly)).unwrap()
    }

    fn mounted(device: &str, ro: bool) -> Mount {
        Mount {
            device: device.into(),
            root: "/".into(),
            mount_point: "/t".into(),
            options: vec![if ro { "ro" } else { "rw" }.into()],
            fs_type: "xfs".into(),
            source: "/dev/mapper/vg-v1".into(),
        }
    }

    #[test]
    fn host_paths_are_plain_absolute_paths_and_never_the_root() {
        let ok = "/var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/pvc-1/mount";
        assert_eq!(host_path(ok, "target_path"), Ok(ok));
        for bad in [
            "/",
            "//",
            "-rf",
            "relative/x",
            "/var/lib/kubelet/../../etc",
            "/a/./b",
            "/a\0b",
            "",
        ] {
            let e = host_path(bad, "target_path").unwrap_err();
            assert_eq!(e.code, Code::InvalidArgument, "{bad:?}");
            assert!(
                e.message.starts_with("target_path"),
                "{bad:?}: {}",
                e.message
            );
        }
        assert!(host_path(&format!("/{}", "a".repeat(MAX_PATH)), "volume_path").is_err());
        assert_eq!(volume_path("").unwrap_err().code, Code::InvalidArgument);
        assert_eq!(volume_path("some/path").unwrap_err().code, Code::NotFound);
        assert_eq!(volume_path("/var/lib/x"), Ok("/var/lib/x"));
        let mut r = request(mount("xfs", &[]), false);
        r.target_path = "/".into();
        assert_eq!(publish_spec(&r).unwrap_err().code, Code::InvalidArgument);
    }

    #[test]
    fn only_the_volumes_own_devices_make_a_mount_its_own() {
        let devices = ["254:3".to_string(), "254:1".to_string()];
        // A filesystem on the gate or on the LV.
        assert!(is_volume_mount(&mounted("254:3", false), None, &devices));
        assert!(is_volume_mount(&mounted("254:1", false), None, &devices));
        // A block volume: devtmpfs bind-mounted, the node there is the LV.
        assert!(is_volume_mount(
            &mounted("0:5", false),
            Some("254:1"),
            &devices
        ));
        // The root filesystem, another volume, or a volume with no device on this node.
        assert!(!is_volume_mount(&mounted("8:1", false), None, &devices));
        assert!(!is_volume_mount(
            &mounted("0:5", false),
            Some("254:9"),
            &devices
        ));
        assert!(!is_volume_mount(&mounted("254:3", false), None, &[]));
    }

    fn view(signature: Option<&str>, target: Option<Mount>) -> PublishView {
        PublishView {
            device: "254:3".into(),
            signature: signature.map(String::from),
            target_mount: target,
            target_device: None,
            lv_device: None,
        }
    }

    #[test]
    fn options_carry_flags_readonly_and_nouuid_for_xfs() {
        assert_eq!(
            fs_spec("xfs", true).kind,
            Kind::Filesystem {
                fs_type: "xfs".into(),
                options: vec!["noatime".into(), "ro".into(), "nouuid".into()]
            }
        );
        assert_eq!(
            fs_spec("", false).kind,
            Kind::Filesystem {
                fs_type: "ext4".into(),
                options: vec!["noatime".into()]
            },
            "TopoLVM's default filesystem"
        );
    }

    #[test]
    fn bad_requests_name_the_field() {
        let mut r = request(mount("ext4", &[]), false);
        r.target_path.clear();
        assert!(
            publish_spec(&r)
                .unwrap_err()
                .message
                .contains("target_path")
        );
        let e = publish_spec(&request(mount("btrfs", &[]), false)).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
        assert!(e.message.contains("fs_type"), "{e}");
        let e = publish_spec(&request(mount("ext4", &["rw"]), true)).unwrap_err();
        assert!(e.message.contains("rw"), "{e}");
        r = request(mount("ext4", &[]), false);
        r.volume_capability = None;
        assert!(
            publish_spec(&r)
                .unwrap_err()
                .message
                .contains("volume_capability")
        );
    }

    #[test]
    fn a_filesystem_mounted_on_the_lv_before_gates_is_the_same_volume() {
        let spec = fs_spec("xfs", false);
        let mut v = view(Some("xfs"), Some(mounted("254:9", false)));
        assert_eq!(
            plan_publish(&spec, &v).unwrap_err().code,
            Code::AlreadyExists,
            "another device at the target"
        );
        v.lv_device = Some("254:9".into());
        assert_eq!(plan_publish(&spec, &v).unwrap(), []);
    }

    #[test]
    fn a_blank_device_is_formatted_a_formatted_one_only_mounted() {
        let spec = fs_spec("xfs", false);
        assert_eq!(
            plan_publish(&spec, &view(None, None)).unwrap(),
            [
                PublishStep::MakeTarget,
                PublishStep::Format {
                    fs_type: "xfs".into()
                },
                PublishStep::Mount
            ]
        );
        assert_eq!(
            plan_publish(&spec, &view(Some("xfs"), None)).unwrap(),
            [PublishStep::MakeTarget, PublishStep::Mount]
        );
    }

    #[test]
    fn a_device_with_other_data_is_never_formatted() {
        for sig in ["ext4", "LVM2_member", "dos"] {
            let e = plan_publish(&fs_spec("xfs", false), &view(Some(sig), None)).unwrap_err();
            assert!(e.message.contains(sig), "{e}");
        }
    }

    #[test]
    fn a_target_already_published_is_success_or_a_conflict() {
        let spec = fs_spec("xfs", false);
        assert!(
            plan_publish(&spec, &view(Some("xfs"), Some(mounted("254:3", false))))
                .unwrap()
                .is_empty()
        );
        let e = plan_publish(&spec, &view(Some("xfs"), Some(mounted("254:9", false)))).unwrap_err();
        assert_eq!(e.code, Code::AlreadyExists);
        let e = plan_publish(&spec, &view(Some("xfs"), Some(mounted("254:3", true)))).unwrap_err();
        assert!(e.message.contains("read-only"), "{e}");
    }

    #[test]
    fn a_block_volume_is_a_bind_mount_checked_by_its_device_node() {
        let spec = publish_spec(&request(AccessType::Block(BlockVolume {}), false)).unwrap();
        assert_eq!(
            plan_publish(&spec, &view(None, None)).unwrap(),
            [PublishStep::MakeTarget, PublishStep::Mount],
            "a block volume is never formatted"
        );
        let mut v = view(None, Some(mounted("0:5", false)));
        v.target_device = Some("254:3".into());
        assert!(plan_publish(&spec, &v).unwrap().is_empty());
        v.target_device = Some("254:4".into());
        assert!(plan_publish(&spec, &v).is_err());
        assert_eq!(
            mount_argv(&spec, "/dev/vg/v1"),
            ["mount", "--bind", "/dev/vg/v1", "/t"]
        );
    }

    #[test]
    fn signatures_come_from_blkid_export() {
        assert_eq!(
            signature_of("DEVNAME=/dev/x\nUUID=1\nTYPE=xfs\n").as_deref(),
            Some("xfs")
        );
        assert_eq!(
            signature_of("PTUUID=a\nPTTYPE=gpt\n").as_deref(),
            Some("gpt")
        );
        assert_eq!(signature_of(""), None);
    }

    #[test]
    fn commands_never_force_and_grow_by_filesystem() {
        assert_eq!(format_argv("xfs", "/d"), ["mkfs.xfs", "-q", "/d"]);
        assert_eq!(format_argv("ext4", "/d"), ["mkfs.ext4", "-q", "/d"]);
        let mut m = mounted("254:3", false);
        assert_eq!(resize_argv(&m).unwrap(), ["xfs_growfs", "/t"]);
        m.fs_type = "ext4".into();
        assert_eq!(resize_argv(&m).unwrap(), ["resize2fs", "/dev/mapper/vg-v1"]);
        m.fs_type = "vfat".into();
        assert!(resize_argv(&m).is_err());
        assert_eq!(
            mount_argv(&fs_spec("xfs", true), "/d"),
            ["mount", "-t", "xfs", "-o", "noatime,ro,nouuid", "/d", "/t"]
        );
    }
}
