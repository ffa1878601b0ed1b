//! Volume capabilities as the driver accepts them: a block device or a mounted filesystem,
//! written by one node (TopoLVM supports SINGLE_NODE_WRITER only).

use super::errors::CsiError;
use super::proto::VolumeCapability;
use super::proto::volume_capability::AccessType;
use super::proto::volume_capability::access_mode::Mode;

/// TopoLVM's default when neither the class nor the PV names a filesystem.
pub const DEFAULT_FS_TYPE: &str = "ext4";
/// The filesystems the node formats and grows.
pub const FS_TYPES: [&str; 2] = ["ext4", "xfs"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    Block,
    /// `fs_type` as requested (empty: the node's default).
    Mount {
        fs_type: String,
    },
}

impl Access {
    pub fn is_block(&self) -> bool {
        matches!(self, Access::Block)
    }
}

/// One capability: its access type, and its access mode when given.
pub fn access_of(cap: &VolumeCapability) -> Result<Access, CsiError> {
    let access = match &cap.access_type {
        Some(AccessType::Block(_)) => Access::Block,
        Some(AccessType::Mount(m)) => {
            if !m.fs_type.is_empty() && !FS_TYPES.contains(&m.fs_type.as_str()) {
                // Refused here, at CreateVolume, not first at mount on the node.
                return Err(CsiError::invalid(format!(
                    "volume_capabilities: mount.fs_type {:?} is not supported; use one of {FS_TYPES:?} (the StorageClass's csi.storage.k8s.io/fstype)",
                    m.fs_type.chars().take(64).collect::<String>()
                )));
            }
            Access::Mount {
                fs_type: m.fs_type.clone(),
            }
        }
        None => {
            return Err(CsiError::invalid(
                "volume_capabilities: access_type is empty; set block or mount",
            ));
        }
    };
    if let Some(mode) = &cap.access_mode {
        let m = Mode::try_from(mode.mode).unwrap_or(Mode::Unknown);
        if m != Mode::SingleNodeWriter {
            return Err(CsiError::invalid(format!(
                "volume_capabilities: access mode {} is not supported; topolvm.io volumes are SINGLE_NODE_WRITER (ReadWriteOnce)",
                m.as_str_name()
            )));
        }
    }
    Ok(access)
}

/// Every capability of a request, which must name at least one.
pub fn accesses(caps: &[VolumeCapability]) -> Result<Vec<Access>, CsiError> {
    if caps.is_empty() {
        return Err(CsiError::invalid(
            "volume_capabilities is empty; name at least one (block or mount)",
        ));
    }
    caps.iter().map(access_of).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csi::proto::volume_capability::{AccessMode, BlockVolume, MountVolume};
    use tonic::Code;

    fn cap(access: Option<AccessType>, mode: Option<Mode>) -> VolumeCapability {
        VolumeCapability {
            access_type: access,
            access_mode: mode.map(|m| AccessMode { mode: m as i32 }),
        }
    }

    fn mount(fs: &str) -> Option<AccessType> {
        Some(AccessType::Mount(MountVolume {
            fs_type: fs.into(),
            ..Default::default()
        }))
    }

    #[test]
    fn a_filesystem_the_node_cannot_make_is_refused_naming_the_field() {
        let e = accesses(&[cap(mount("ntfs"), None)]).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
        assert!(
            e.message.contains("mount.fs_type \"ntfs\""),
            "{}",
            e.message
        );
        assert!(
            accesses(&[cap(mount(""), None)]).is_ok(),
            "empty: the default"
        );
    }

    #[test]
    fn block_and_mount_single_writer_are_accepted() {
        let got = accesses(&[
            cap(
                Some(AccessType::Block(BlockVolume {})),
                Some(Mode::SingleNodeWriter),
            ),
            cap(mount("xfs"), None),
        ])
        .unwrap();
        assert_eq!(
            got,
            [
                Access::Block,
                Access::Mount {
                    fs_type: "xfs".into()
                }
            ]
        );
    }

    #[test]
    fn empty_missing_or_shared_capabilities_are_invalid() {
        assert_eq!(accesses(&[]).unwrap_err().code, Code::InvalidArgument);
        assert_eq!(
            accesses(&[cap(None, None)]).unwrap_err().code,
            Code::InvalidArgument
        );
        let e = accesses(&[cap(mount(""), Some(Mode::MultiNodeMultiWriter))]).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
        assert!(e.message.contains("MULTI_NODE_MULTI_WRITER"), "{e}");
    }
}
