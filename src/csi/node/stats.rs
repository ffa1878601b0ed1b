//! NodeGetVolumeStats as TopoLVM answers it: a filesystem volume's bytes and inodes from
//! statfs of the path it is published at, a block volume's size, and the volume's condition
//! from what lvm2 says of its LV (missing, or unhealthy by `lv_attr`).

use std::path::Path;

use crate::csi::proto::volume_usage::Unit;
use crate::csi::proto::{VolumeCondition, VolumeUsage};

/// What statvfs(3) says of a filesystem (sizes in fragments of `frsize` bytes, as df counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsStats {
    pub frsize: u64,
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
}

fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Bytes and inodes, as `df` reports them: used = total − free, available to non-root.
pub fn fs_usage(s: &FsStats) -> Vec<VolumeUsage> {
    vec![
        VolumeUsage {
            available: i(s.bavail.saturating_mul(s.frsize)),
            total: i(s.blocks.saturating_mul(s.frsize)),
            used: i(s.blocks.saturating_sub(s.bfree).saturating_mul(s.frsize)),
            unit: Unit::Bytes as i32,
        },
        VolumeUsage {
            available: i(s.ffree),
            total: i(s.files),
            used: i(s.files.saturating_sub(s.ffree)),
            unit: Unit::Inodes as i32,
        },
    ]
}

/// A block volume: its size in bytes only.
pub fn block_usage(bytes: u64) -> Vec<VolumeUsage> {
    vec![VolumeUsage {
        total: i(bytes),
        unit: Unit::Bytes as i32,
        ..Default::default()
    }]
}

/// statvfs(3) of `path`.
pub fn statfs(path: &Path) -> std::io::Result<FsStats> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: statvfs is a plain C struct of integers; all-zero is a valid value of it.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a valid, writable statvfs.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)] // the field types differ between libc targets
    Ok(FsStats {
        frsize: st.f_frsize as u64,
        blocks: st.f_blocks as u64,
        bfree: st.f_bfree as u64,
        bavail: st.f_bavail as u64,
        files: st.f_files as u64,
        ffree: st.f_ffree as u64,
    })
}

/// A block device's size: seek to its end.
pub fn block_size(path: &Path) -> std::io::Result<u64> {
    use std::io::Seek;
    std::fs::File::open(path)?.seek(std::io::SeekFrom::End(0))
}

/// The volume's condition from its LV's `lv_attr` (None: lvm2 was read and has no such LV).
/// The 9th character is the volume health (lvs(8)): `p` partial (a PV is missing), `r` refresh
/// needed, `m` mismatches, `w` writemostly, `X` unknown; `-` is healthy.
pub fn condition(volume_id: &str, attr: Option<&str>) -> VolumeCondition {
    let Some(attr) = attr else {
        return VolumeCondition {
            abnormal: true,
            message: format!(
                "logical volume {volume_id} not found in any volume group of this node"
            ),
        };
    };
    let why = match attr.chars().nth(8) {
        Some('p') => Some("partial: one of its physical volumes is missing"),
        Some('r') => Some("needs a refresh"),
        Some('m') => Some("has mismatches"),
        Some('X') => Some("health unknown"),
        _ => None,
    };
    match why {
        Some(w) => VolumeCondition {
            abnormal: true,
            message: format!("logical volume {volume_id} {w} (lv_attr {attr})"),
        },
        None => VolumeCondition {
            abnormal: false,
            message: format!("logical volume {volume_id} is healthy"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_counts_as_df_does() {
        let s = FsStats {
            frsize: 4096,
            blocks: 1000,
            bfree: 400,
            bavail: 350,
            files: 64,
            ffree: 60,
        };
        let u = fs_usage(&s);
        assert_eq!(
            (u[0].total, u[0].used, u[0].available),
            (4_096_000, 2_457_600, 1_433_600)
        );
        assert_eq!(u[0].unit, Unit::Bytes as i32);
        assert_eq!((u[1].total, u[1].used, u[1].available), (64, 4, 60));
        assert_eq!(u[1].unit, Unit::Inodes as i32);
        assert_eq!(block_usage(5 << 20)[0].total, 5 << 20);
    }

    #[test]
    fn a_missing_or_partial_lv_is_abnormal() {
        assert!(!condition("v", Some("-wi-a-----")).abnormal);
        assert!(!condition("v", Some("Vwi---tz--")).abnormal);
        let partial = condition("v", Some("-wi-a---p-"));
        assert!(
            partial.abnormal && partial.message.contains("partial"),
            "{partial:?}"
        );
        let gone = condition("v", None);
        assert!(
            gone.abnormal && gone.message.contains("not found"),
            "{gone:?}"
        );
    }

    #[test]
    fn statfs_reads_a_real_filesystem() {
        let s = statfs(Path::new("/")).unwrap();
        assert!(s.frsize > 0 && s.blocks > 0 && s.files > 0);
        assert!(statfs(Path::new("/no/such/dir")).is_err());
    }
}
