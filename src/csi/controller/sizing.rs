//! Volume sizes as TopoLVM decides them: the minimum per access type and filesystem is
//! applied first, then the capacity range is checked and rounded to whole 4 KiB sectors; an
//! empty request is 1 GiB (or the limit, when smaller).

use std::collections::BTreeMap;

use crate::csi::access::Access;
use crate::csi::errors::CsiError;

/// Size of a volume created without a request.
pub const DEFAULT_SIZE: i64 = 1 << 30;
/// Sizes are whole multiples of this.
pub const SECTOR: i64 = 4096;

/// The smallest volume per access type (LVMS's defaults: block 8Mi, ext4 32Mi, xfs 300Mi,
/// the size below which mkfs.xfs refuses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinimumAllocations {
    pub block: i64,
    pub filesystem: BTreeMap<String, i64>,
}

impl Default for MinimumAllocations {
    fn default() -> Self {
        MinimumAllocations {
            block: 8 << 20,
            filesystem: BTreeMap::from([("ext4".into(), 32 << 20), ("xfs".into(), 300 << 20)]),
        }
    }
}

impl MinimumAllocations {
    /// The minimum for the first capability (TopoLVM looks at the first that says block or
    /// mount); a filesystem with no minimum, or none named, has none.
    pub fn minimum(&self, access: &[Access]) -> i64 {
        match access.first() {
            Some(Access::Block) => self.block,
            Some(Access::Mount { fs_type }) => self.filesystem.get(fs_type).copied().unwrap_or(0),
            None => 0,
        }
    }
}

/// `size` rounded up to a whole `multiple`; None when that does not fit in an i64 (a request
/// near 2^63 would otherwise wrap to a tiny or negative size).
fn round_up(size: i64, multiple: i64) -> Option<i64> {
    size.checked_add(multiple - 1)
        .map(|s| s / multiple)
        .and_then(|n| n.checked_mul(multiple))
}

/// The largest size a request may round up to: the last whole sector an i64 holds.
pub const MAX_BYTES: i64 = i64::MAX - i64::MAX % SECTOR;

/// The bytes to allocate for a `capacity_range` (0 = not set), after raising `required` to
/// `minimum` (so an empty request on xfs gets the 300Mi minimum, not 1 GiB, as in TopoLVM).
/// Errors are InvalidArgument, naming the values and what to change.
pub fn requested_bytes(required: i64, limit: i64, minimum: i64) -> Result<i64, CsiError> {
    if required < 0 {
        return Err(CsiError::invalid(format!(
            "capacity_range.required_bytes is negative ({required}); request 0 or more bytes"
        )));
    }
    if limit < 0 {
        return Err(CsiError::invalid(format!(
            "capacity_range.limit_bytes is negative ({limit}); set 0 (no limit) or more bytes"
        )));
    }
    // TopoLVM raises the request to the minimum before anything else, even an empty one.
    let required = required.max(minimum);
    if limit != 0 && required > limit {
        return Err(CsiError::invalid(format!(
            "capacity_range.required_bytes ({required}, after the minimum of {minimum}) exceeds limit_bytes ({limit}); raise the limit or lower the request"
        )));
    }
    if required == 0 {
        if limit == 0 || limit >= DEFAULT_SIZE {
            return Ok(DEFAULT_SIZE);
        }
        let rounded = limit - limit % SECTOR;
        if rounded == 0 {
            return Err(CsiError::invalid(format!(
                "capacity_range.limit_bytes ({limit}) is smaller than one {SECTOR}-byte sector; set a limit of at least {SECTOR} bytes"
            )));
        }
        return Ok(rounded);
    }
    let rounded = round_up(required, SECTOR).ok_or_else(|| {
        CsiError::new(
            tonic::Code::OutOfRange,
            format!(
                "capacity_range.required_bytes ({required}) cannot be rounded up to whole {SECTOR}-byte sectors within {MAX_BYTES} bytes; request at most {MAX_BYTES} bytes (no node has that much anyway)"
            ),
        )
    })?;
    if limit > 0 && rounded > limit {
        return Err(CsiError::invalid(format!(
            "capacity_range: required_bytes {required} rounded up to whole {SECTOR}-byte sectors ({rounded}) exceeds limit_bytes ({limit}); lower the request or raise the limit"
        )));
    }
    Ok(rounded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    #[test]
    fn empty_requests_default_to_one_gib_or_the_limit() {
        assert_eq!(requested_bytes(0, 0, 0), Ok(DEFAULT_SIZE));
        assert_eq!(requested_bytes(0, 2 * DEFAULT_SIZE, 0), Ok(DEFAULT_SIZE));
        assert_eq!(requested_bytes(0, 10_000, 0), Ok(8192));
        assert_eq!(
            requested_bytes(0, 100, 0).unwrap_err().code,
            Code::InvalidArgument
        );
    }

    #[test]
    fn requests_round_up_to_sectors_within_the_limit() {
        assert_eq!(requested_bytes(1, 0, 0), Ok(4096));
        assert_eq!(requested_bytes(4096, 4096, 0), Ok(4096));
        assert_eq!(requested_bytes(4097, 0, 0), Ok(8192));
        let e = requested_bytes(4097, 5000, 0).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
        assert!(e.message.contains("limit_bytes"), "{e}");
    }

    /// A request near 2^63 would wrap when rounded (a 0-byte LV retried forever, a panic in
    /// debug builds): OUT_OF_RANGE instead, naming the largest request; the largest whole
    /// sector itself is still a size.
    #[test]
    fn requests_too_large_to_round_are_out_of_range_not_wrapped() {
        for huge in [i64::MAX, i64::MAX - 1, MAX_BYTES + 1] {
            let e = requested_bytes(huge, 0, 0).unwrap_err();
            assert_eq!(e.code, Code::OutOfRange, "{huge}: {e}");
            assert!(e.message.contains(&MAX_BYTES.to_string()), "{e}");
            assert_eq!(
                requested_bytes(huge, i64::MAX, 0).unwrap_err().code,
                Code::OutOfRange
            );
        }
        assert_eq!(requested_bytes(MAX_BYTES, 0, 0), Ok(MAX_BYTES));
        assert_eq!(requested_bytes(MAX_BYTES - 1, 0, 0), Ok(MAX_BYTES));
    }

    #[test]
    fn negative_or_inverted_ranges_are_invalid() {
        assert_eq!(
            requested_bytes(-1, 0, 0).unwrap_err().code,
            Code::InvalidArgument
        );
        assert_eq!(
            requested_bytes(0, -1, 0).unwrap_err().code,
            Code::InvalidArgument
        );
        assert_eq!(
            requested_bytes(10, 5, 0).unwrap_err().code,
            Code::InvalidArgument
        );
    }

    #[test]
    fn the_minimum_raises_small_requests() {
        let min = MinimumAllocations::default();
        let xfs = [Access::Mount {
            fs_type: "xfs".into(),
        }];
        assert_eq!(min.minimum(&xfs), 300 << 20);
        assert_eq!(
            requested_bytes(1 << 20, 0, min.minimum(&xfs)),
            Ok(300 << 20)
        );
        assert_eq!(min.minimum(&[Access::Block]), 8 << 20);
        let btrfs = [Access::Mount {
            fs_type: "btrfs".into(),
        }];
        assert_eq!(min.minimum(&btrfs), 0);
        assert_eq!(requested_bytes(0, 0, min.minimum(&xfs)), Ok(300 << 20));
        // A limit below the minimum cannot be met.
        assert_eq!(
            requested_bytes(1 << 20, 2 << 20, 8 << 20).unwrap_err().code,
            Code::InvalidArgument
        );
    }
}
