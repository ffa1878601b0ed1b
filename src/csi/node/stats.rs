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

/// What is wrong with an LV by its `lv_attr` (lvs(8)), as TopoLVM's `VerifyHealth` judges
/// it: the 9th character (health) read by the 1st (type), then the 5th (state), then the 6th
/// (open). None: healthy. An attr too short to hold those is unknown, not healthy.
pub fn unhealthy(attr: &str) -> Option<&'static str> {
    let c: Vec<char> = attr.chars().collect();
    let (Some(&kind), Some(&state), Some(&open), Some(&health)) =
        (c.first(), c.get(4), c.get(5), c.get(8))
    else {
        return Some("has an lv_attr lvs(8) does not write: verify on the node");
    };
    match health {
        'p' => return Some("is partial: one of its physical volumes is missing"),
        'X' => return Some("has an unknown health: verify on the node"),
        'E' => return Some("has a write cache error (dm-writecache)"),
        _ => {}
    }
    match (kind, health) {
        ('t', 'F') => return Some("is in a failed thin pool: no I/O is permitted"),
        ('t', 'D') => return Some("is a thin pool out of data space: writes fail until it grows"),
        ('t', 'M') => {
            return Some("is a thin pool with read-only metadata: no metadata change is allowed");
        }
        ('V', 'F') => return Some("is a thin volume whose pool failed: no I/O is permitted"),
        ('r' | 'R', 'r') => {
            return Some(
                "needs a refresh: a RAID member had a write error (refresh or replace it)",
            );
        }
        ('r' | 'R', 'm') => {
            return Some("has RAID mismatches: run a check/repair scrub (lvchange --syncaction)");
        }
        ('r' | 'R', 's') => return Some("is reshaping (RAID)"),
        ('r' | 'R', 'R') => return Some("has RAID images freed by a reshape"),
        ('r' | 'R', 'w') => return Some("has a RAID member marked write-mostly"),
        _ => {}
    }
    match state {
        's' | 'S' => return Some("is suspended: no I/O is permitted"),
        'I' => return Some("is an invalid snapshot: no I/O is permitted"),
        'm' | 'M' => return Some("has a failed snapshot merge: no I/O is permitted"),
        'i' => return Some("has a mapped device with inactive tables: no I/O is permitted"),
        'd' => return Some("has a mapped device without tables: no I/O is permitted"),
        'c' | 'C' => return Some("needs a thin pool check"),
        'X' => return Some("has an unknown state: verify on the node"),
        'h' => return Some("is historical (removed, kept in lvm2's records)"),
        _ => {}
    }
    (open == 'X').then_some("has an unknown device open state: verify on the node")
}

/// The volume's condition from its LV's `lv_attr` (None: lvm2 was read and has no such LV).
pub fn condition(volume_id: &str, attr: Option<&str>) -> VolumeCondition {
    let Some(attr) = attr else {
        return VolumeCondition {
            abnormal: true,
            message: format!(
                "logical volume {volume_id} not found in any volume group of this node"
            ),
        };
    };
    match unhealthy(attr) {
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

    /// TopoLVM's `VerifyHealth` states, each abnormal with its own words; healthy ones not.
    #[test]
    fn every_state_topolvm_reports_is_abnormal() {
        for healthy in [
            "-wi-a-----",
            "Vwi-aotz--",
            "Vwi---tz--",
            "twi-aotz--",
            "rwi-aor---",
            "-wi-ao----",
        ] {
            assert_eq!(unhealthy(healthy), None, "{healthy}");
        }
        let cases = [
            ("-wi-a---p-", "partial"),
            ("-wi-a---X-", "unknown health"),
            ("Cwi-aoC-E-", "write cache"),
            ("twi-aotzF-", "failed thin pool"),
            ("twi-aotzD-", "out of data space"),
            ("twi-aotzM-", "read-only metadata"),
            ("Vwi-aotzF-", "pool failed"),
            ("rwi-aor-r-", "refresh"),
            ("rwi-aor-m-", "mismatches"),
            ("rwi-aor-s-", "reshaping"),
            ("Rwi-aor-R-", "freed by a reshape"),
            ("rwi-aor-w-", "write-mostly"),
            ("-wi-s-----", "suspended"),
            ("swi-S-s---", "suspended"),
            ("swi-I-s---", "invalid snapshot"),
            ("Owi-m-s---", "merge"),
            ("Owi-M-s---", "merge"),
            ("-wi-i-----", "inactive tables"),
            ("-wi-d-----", "without tables"),
            ("twi-c-tz--", "thin pool check"),
            ("twi-C-tz--", "thin pool check"),
            ("-wi-X-----", "unknown state"),
            ("-wi-h-----", "historical"),
            ("-wi-aX----", "open state"),
            ("-wi", "does not write"),
        ];
        for (attr, words) in cases {
            let why = unhealthy(attr).unwrap_or_else(|| panic!("{attr} read as healthy"));
            assert!(why.contains(words), "{attr}: {why}");
            let c = condition("v", Some(attr));
            assert!(c.abnormal && c.message.contains(attr), "{c:?}");
        }
        // 'F', 'D', 'M' mean something only on thin pools/volumes; 'w' only on RAID.
        assert_eq!(unhealthy("-wi-a---D-"), None);
        assert_eq!(unhealthy("-wi-a---w-"), None);
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
