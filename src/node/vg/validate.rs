//! LVMS `validateLVs`: a thin class's pool must exist, be a thin pool, be active, have metadata
//! at most 95% full and, under the Static chunk policy, the configured chunk size. Activation
//! and the metadata extension are commands, so they come back as things for the caller to run.

use thiserror::Error;

use crate::api::{ChunkSizeCalculationPolicy, ThinPoolConfig};

use crate::node::report::{LvAttr, LvReport};
use crate::node::vg::thin::{ThinError, metadata_extend_to, sizing};

/// Above this metadata fill the class fails: thin metadata overflow cannot be recovered.
pub const METADATA_WARNING_PERCENTAGE: f64 = 95.0;

/// Prefix LVMS puts before a validation error in status and events.
pub const VALIDATION_ERROR_PREFIX: &str =
    "error while validating logical volumes in existing volume group";

#[derive(Debug, Error, PartialEq)]
pub enum ValidateError {
    #[error(
        "LV report was empty, meaning that the thin-pool LV is no longer found, but the volume group might still exist"
    )]
    EmptyReport,
    #[error(
        "no LV was found in the report, meaning that the thin-pool LV is no longer found, but the volume group might still exist"
    )]
    NoLvs,
    #[error("the thin-pool LV is no longer present, but the volume group might still exist")]
    PoolMissing,
    #[error("could not parse lv_attr from logical volume {lv}: {reason}")]
    LvAttr { lv: String, reason: String },
    #[error(
        "found logical volume in volume group that is not of type Thin-Pool, even though there is a Thin-Pool configured: {volume_type}, lv_attr: {lv_attr}, this is most likely a corruption of the thin pool or a setup gone wrong"
    )]
    NotThinPool { volume_type: char, lv_attr: String },
    #[error(
        "could not activate the inactive logical volume, maybe external repairs are necessary/already happening or there is another entity conflicting with vg-manager, cannot proceed until volume is activated again: lv_attr: {lv_attr}"
    )]
    ActivationFailed { lv_attr: String },
    #[error(
        "could not ensure metadata percentage of LV due to a parsing error: metadata_percent of {lv} is empty"
    )]
    MetadataPercentMissing { lv: String },
    #[error(
        "metadata partition is over {percent} percent filled and LVM Metadata Overflows cannot be recovered, you should manually extend the metadata_partition or you will risk data loss: metadata_percent: {percent}"
    )]
    MetadataFull { percent: f64 },
    #[error(
        "chunk size of logical volume {lv} does not match the static policy: {actual} != {expected}"
    )]
    ChunkSizeMismatch {
        lv: String,
        actual: u64,
        expected: u64,
    },
    #[error(
        "could not parse chunk size from logical volume {lv} to verify against static policy: chunk_size is empty"
    )]
    ChunkSizeMissing { lv: String },
    #[error("failed to verify metadata size for thinpool {pool} in volume group {vg}: {reason}")]
    MetadataSize {
        pool: String,
        vg: String,
        reason: String,
    },
    #[error(transparent)]
    Config(#[from] ThinError),
}

impl ValidateError {
    /// The status reason / event message LVMS writes.
    pub fn status_message(&self) -> String {
        format!("{VALIDATION_ERROR_PREFIX}: {self}")
    }
}

/// Commands the pool needs after a successful validation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Validation {
    /// The pool is not active: run `lvchange -ay <vg>/<pool>`; if that fails, the class fails
    /// with `ValidateError::ActivationFailed`.
    pub activate: bool,
    /// Run `lvextend --poolmetadatasize <n>b` (Static metadata size grew).
    pub extend_metadata_to: Option<u64>,
}

/// Checks the `lvs -S vgname=<vg>` report against the thin pool config.
pub fn validate_lvs(
    vg: &str,
    config: &ThinPoolConfig,
    report: &LvReport,
) -> Result<Validation, ValidateError> {
    if report.reports.is_empty() {
        return Err(ValidateError::EmptyReport);
    }
    let mut out = Validation::default();
    for lvs in &report.reports {
        if lvs.is_empty() {
            return Err(ValidateError::NoLvs);
        }
        let Some(lv) = lvs.iter().find(|lv| lv.lv_name == config.name) else {
            return Err(ValidateError::PoolMissing);
        };
        let attr = LvAttr::parse(&lv.lv_attr).map_err(|e| ValidateError::LvAttr {
            lv: lv.lv_name.clone(),
            reason: e.to_string(),
        })?;
        if !attr.is_thin_pool() {
            return Err(ValidateError::NotThinPool {
                volume_type: attr.volume_type,
                lv_attr: lv.lv_attr.clone(),
            });
        }
        let active = attr.is_active();
        out.activate |= !active;
        // An inactive pool has no metadata_percent (lvm2 reads it from the live mapping): the
        // caller activates it and validates the report that follows. (LVMS checks the stale
        // report right after activating, so its pass fails once and the next one succeeds.)
        if active {
            let percent =
                lv.metadata_percent
                    .ok_or_else(|| ValidateError::MetadataPercentMissing {
                        lv: lv.lv_name.clone(),
                    })?;
            if percent > METADATA_WARNING_PERCENTAGE {
                return Err(ValidateError::MetadataFull { percent });
            }
        }
        let s = sizing(config)?;
        if config.chunk_size_calculation_policy == ChunkSizeCalculationPolicy::Static {
            let actual = lv
                .chunk_size
                .ok_or_else(|| ValidateError::ChunkSizeMissing {
                    lv: lv.lv_name.clone(),
                })?;
            // Static always has a (defaulted) chunk size; 0 would match no real pool anyway.
            let expected = s.chunk_size.unwrap_or_default();
            if actual != expected {
                return Err(ValidateError::ChunkSizeMismatch {
                    lv: lv.lv_name.clone(),
                    actual,
                    expected,
                });
            }
        }
        out.extend_metadata_to =
            metadata_extend_to(s.metadata_size, lv.lv_metadata_size).map_err(|e| {
                ValidateError::MetadataSize {
                    pool: config.name.clone(),
                    vg: vg.to_string(),
                    reason: e.to_string(),
                }
            })?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::MetadataSizePolicy;
    use crate::node::report::{LogicalVolume, parse_lvs};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn cfg() -> ThinPoolConfig {
        ThinPoolConfig {
            name: "thin-pool-1".into(),
            size_percent: 90,
            overprovision_ratio: 10,
            ..Default::default()
        }
    }

    fn pool(attr: &str, meta_pct: Option<f64>, chunk: Option<u64>) -> LvReport {
        LvReport {
            reports: vec![vec![LogicalVolume {
                lv_name: "thin-pool-1".into(),
                vg_name: "vg1".into(),
                lv_attr: attr.into(),
                lv_size: Some(28_948_079_575),
                metadata_percent: meta_pct,
                chunk_size: chunk,
                lv_metadata_size: Some(1 << 30),
                ..Default::default()
            }]],
        }
    }

    #[test]
    fn valid_pool_from_fixture() {
        let lvs = parse_lvs(&crate::node::fixture("lvs_thin.json")).unwrap();
        assert_eq!(validate_lvs("vg1", &cfg(), &lvs), Ok(Validation::default()));
    }

    #[test]
    fn fails_on_chunk_size_mismatch_under_static() {
        let mut c = cfg();
        c.chunk_size = Some(Quantity("512Ki".into()));
        let e =
            validate_lvs("vg1", &c, &pool("twi-a-tz--", Some(10.52), Some(131_072))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "chunk size of logical volume thin-pool-1 does not match the static policy: 131072 != 524288"
        );
        assert!(validate_lvs("vg1", &c, &pool("twi-a-tz--", Some(10.52), Some(524_288))).is_ok());
        // Host policy: chunk size is lvm's business.
        c.chunk_size = None;
        c.chunk_size_calculation_policy = ChunkSizeCalculationPolicy::Host;
        assert!(validate_lvs("vg1", &c, &pool("twi-a-tz--", Some(10.52), Some(65_536))).is_ok());
    }

    #[test]
    fn fails_on_non_pool_lv() {
        let e = validate_lvs(
            "vg1",
            &cfg(),
            &pool("rwi-a-tz--", Some(10.52), Some(131_072)),
        )
        .unwrap_err();
        assert!(matches!(
            e,
            ValidateError::NotThinPool {
                volume_type: 'r',
                ..
            }
        ));
        assert!(e.to_string().starts_with(
            "found logical volume in volume group that is not of type Thin-Pool, even though there is a Thin-Pool configured: r, lv_attr: rwi-a-tz--"
        ));
    }

    #[test]
    fn fails_on_metadata_over_95_percent() {
        let e = validate_lvs(
            "vg1",
            &cfg(),
            &pool("twi-a-tz--", Some(98.52), Some(131_072)),
        )
        .unwrap_err();
        assert_eq!(e, ValidateError::MetadataFull { percent: 98.52 });
        assert!(e.to_string().contains("metadata_percent: 98.52"));
        // 95.00 exactly is still fine.
        assert!(
            validate_lvs(
                "vg1",
                &cfg(),
                &pool("twi-a-tz--", Some(95.0), Some(131_072))
            )
            .is_ok()
        );
        assert!(matches!(
            validate_lvs("vg1", &cfg(), &pool("twi-a-tz--", None, Some(131_072))),
            Err(ValidateError::MetadataPercentMissing { .. })
        ));
    }

    #[test]
    fn suspended_pool_needs_activation() {
        let v = validate_lvs(
            "vg1",
            &cfg(),
            &pool("twi-s-tz--", Some(10.52), Some(131_072)),
        )
        .unwrap();
        assert!(v.activate);
        // The caller's lvchange -ay failed: this is the status reason.
        let e = ValidateError::ActivationFailed {
            lv_attr: "twi-s-tz--".into(),
        };
        assert_eq!(
            e.status_message(),
            "error while validating logical volumes in existing volume group: could not activate the inactive logical volume, maybe external repairs are necessary/already happening or there is another entity conflicting with vg-manager, cannot proceed until volume is activated again: lv_attr: twi-s-tz--"
        );
    }

    /// Found on the real-kernel tier: a deactivated pool reports no metadata_percent, and
    /// demanding one would keep it inactive forever.
    #[test]
    fn inactive_pool_without_metadata_percent_needs_activation() {
        let v = validate_lvs("vg1", &cfg(), &pool("twi---tz--", None, Some(131_072))).unwrap();
        assert!(v.activate);
        assert_eq!(
            validate_lvs("vg1", &cfg(), &pool("twi-a-tz--", None, Some(131_072))),
            Err(ValidateError::MetadataPercentMissing {
                lv: "thin-pool-1".into()
            }),
            "an active pool must report it"
        );
    }

    #[test]
    fn fails_on_empty_report() {
        let no_lvs = parse_lvs(&crate::node::fixture("lvs_empty.json")).unwrap();
        assert_eq!(
            validate_lvs("vg1", &cfg(), &no_lvs),
            Err(ValidateError::NoLvs)
        );
        assert_eq!(
            validate_lvs("vg1", &cfg(), &LvReport::default()),
            Err(ValidateError::EmptyReport)
        );
    }

    #[test]
    fn fails_on_missing_pool() {
        let mut r = pool("twi-a-tz--", Some(10.52), Some(131_072));
        r.reports[0][0].lv_name = "thin-pool-BLUB".into();
        let e = validate_lvs("vg1", &cfg(), &r).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the thin-pool LV is no longer present, but the volume group might still exist"
        );
    }

    #[test]
    fn bad_lv_attr_and_metadata_growth() {
        let e = validate_lvs("vg1", &cfg(), &pool("twi", Some(1.0), Some(131_072))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "could not parse lv_attr from logical volume thin-pool-1: twi is an invalid length lv_attr"
        );
        let mut c = cfg();
        c.metadata_size_calculation_policy = MetadataSizePolicy::Static;
        c.metadata_size = Some(Quantity("2Gi".into()));
        let v = validate_lvs("vg1", &c, &pool("twi-a-tz--", Some(1.0), Some(131_072))).unwrap();
        assert_eq!(v.extend_metadata_to, Some(2 << 30));
        let mut r = pool("twi-a-tz--", Some(1.0), Some(131_072));
        r.reports[0][0].lv_metadata_size = None;
        assert!(matches!(
            validate_lvs("vg1", &c, &r),
            Err(ValidateError::MetadataSize { .. })
        ));
    }
}
