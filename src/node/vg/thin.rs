//! Thin pool sizing (LVMS `addThinPoolToVG`, `extendThinPool`, `verifyMetadataSize`,
//! `convertChunkSize`/`convertMetadataSize`) as pure decisions.

use thiserror::Error;

use crate::api::ThinPoolConfig;

use crate::node::commands::{self, CommandError};
use crate::node::report::{LvAttr, LvReport};

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ThinError {
    #[error(
        "thinPoolConfig.{field} of thin pool {pool:?} is not a valid size: {reason}; use a quantity such as 128Ki or 1Gi"
    )]
    InvalidQuantity {
        pool: String,
        field: &'static str,
        reason: String,
    },
    #[error("lvSize is empty and cannot be used for extension")]
    LvSizeEmpty,
    #[error("VgSize is empty and cannot be used for extension")]
    VgSizeEmpty,
    #[error("could not parse lvattr to determine if thin pool exists: {0}")]
    LvAttr(String),
    #[error(
        "failed to create thin pool {pool:?}, logical volume with same name already exists, but cannot be extended as its not a thinpool ({lv_attr})"
    )]
    NameTakenByNonPool { pool: String, lv_attr: String },
    #[error(transparent)]
    Command(#[from] CommandError),
}

/// The sizes a thin pool is created with: None = lvm decides (Host policy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThinPoolSizing {
    pub size_percent: i32,
    pub chunk_size: Option<u64>,
    pub metadata_size: Option<u64>,
}

/// Effective chunk and metadata sizes of a thin pool config (Static defaults 128Ki / 1Gi).
pub fn sizing(config: &ThinPoolConfig) -> Result<ThinPoolSizing, ThinError> {
    let invalid = |field, e: crate::api::quantity::QuantityError| ThinError::InvalidQuantity {
        pool: config.name.clone(),
        field,
        reason: e.to_string(),
    };
    Ok(ThinPoolSizing {
        size_percent: config.size_percent,
        chunk_size: config
            .effective_chunk_size()
            .map_err(|e| invalid("chunkSize", e))?,
        metadata_size: config
            .effective_metadata_size()
            .map_err(|e| invalid("metadataSize", e))?,
    })
}

/// Whether the pool should grow to `size_percent` of the VG: LVMS extends when
/// `size_percent > int(lv_size / vg_size * 100)`. Computed in integers (floor), so a pool at
/// exactly the target is never extended because of float rounding.
pub fn pool_needs_extend(
    size_percent: i32,
    lv_size: Option<u64>,
    vg_size: Option<u64>,
) -> Result<bool, ThinError> {
    let lv = lv_size.ok_or(ThinError::LvSizeEmpty)?;
    let vg = vg_size.filter(|v| *v > 0).ok_or(ThinError::VgSizeEmpty)?;
    let current_pct = (u128::from(lv) * 100) / u128::from(vg);
    Ok(i128::from(size_percent) > current_pct as i128)
}

/// The metadata size to extend to, if the Static size is larger than the pool's
/// (`lv_metadata_size`). Metadata only grows; Host policy (None) never extends.
pub fn metadata_extend_to(
    desired: Option<u64>,
    current: Option<u64>,
) -> Result<Option<u64>, MetadataSizeError> {
    let Some(desired) = desired else {
        return Ok(None);
    };
    let current = current.ok_or(MetadataSizeError)?;
    Ok((current < desired).then_some(desired))
}

/// The pool's `lv_metadata_size` was empty where a number was needed.
#[derive(Debug, Error, PartialEq, Eq)]
#[error(
    "failed to parse metadata size. lv_metadata_size is empty in the lvs report; check the pool with `lvs -o +lv_metadata_size`"
)]
pub struct MetadataSizeError;

/// What to do about the thin pool after the VG was created or extended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ThinPoolAction {
    /// `lvcreate -l <pct>%FREE -Z y -T ...`
    Create(Vec<String>),
    /// `lvextend -l <pct>%Vg ...`
    Extend(Vec<String>),
    /// The pool exists and already has its share of the VG.
    UpToDate,
}

/// LVMS `addThinPoolToVG`: create the pool, or extend it when the VG grew. `lvs` is the report of
/// this VG, `vg_size` its size from `vgs`.
pub fn plan_thin_pool(
    vg: &str,
    config: &ThinPoolConfig,
    lvs: &LvReport,
    vg_size: Option<u64>,
) -> Result<ThinPoolAction, ThinError> {
    let s = sizing(config)?;
    let Some(lv) = lvs.find(&config.name) else {
        return Ok(ThinPoolAction::Create(commands::lvcreate_thin_pool(
            vg,
            &config.name,
            s.size_percent,
            s.chunk_size,
            s.metadata_size,
        )?));
    };
    let attr = LvAttr::parse(&lv.lv_attr).map_err(|e| ThinError::LvAttr(e.to_string()))?;
    if !attr.is_thin_pool() {
        return Err(ThinError::NameTakenByNonPool {
            pool: config.name.clone(),
            lv_attr: lv.lv_attr.clone(),
        });
    }
    if pool_needs_extend(s.size_percent, lv.lv_size, vg_size)? {
        Ok(ThinPoolAction::Extend(commands::lvextend_pool(
            vg,
            &config.name,
            s.size_percent,
        )?))
    } else {
        Ok(ThinPoolAction::UpToDate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ChunkSizeCalculationPolicy, MetadataSizePolicy};
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

    #[test]
    fn sizing_defaults_and_policies() {
        let c = cfg();
        assert_eq!(
            sizing(&c).unwrap(),
            ThinPoolSizing {
                size_percent: 90,
                chunk_size: Some(128 * 1024),
                metadata_size: None
            }
        );
        let mut c = cfg();
        c.chunk_size_calculation_policy = ChunkSizeCalculationPolicy::Host;
        c.metadata_size_calculation_policy = MetadataSizePolicy::Static;
        let s = sizing(&c).unwrap();
        assert_eq!((s.chunk_size, s.metadata_size), (None, Some(1 << 30)));
        c.metadata_size = Some(Quantity("2Gi".into()));
        assert_eq!(sizing(&c).unwrap().metadata_size, Some(2 << 30));
        let mut c = cfg();
        c.chunk_size = Some(Quantity("lots".into()));
        let e = sizing(&c).unwrap_err().to_string();
        assert!(
            e.contains("thinPoolConfig.chunkSize") && e.contains("thin-pool-1"),
            "{e}"
        );
    }

    #[test]
    fn extend_boundaries() {
        // 89.99% of the VG is int 89 < 90: extend.
        assert!(pool_needs_extend(90, Some(8999), Some(10_000)).unwrap());
        // Exactly 90%: no.
        assert!(!pool_needs_extend(90, Some(9000), Some(10_000)).unwrap());
        assert!(!pool_needs_extend(90, Some(9999), Some(10_000)).unwrap());
        // VG doubled: pool is now 45%.
        assert!(pool_needs_extend(90, Some(9000), Some(20_000)).unwrap());
        // Float rounding trap: 0.29 * 100 is 28.999... in binary; integer math says 29.
        assert!(!pool_needs_extend(29, Some(29), Some(100)).unwrap());
        assert_eq!(
            pool_needs_extend(90, None, Some(1))
                .unwrap_err()
                .to_string(),
            "lvSize is empty and cannot be used for extension"
        );
        assert_eq!(
            pool_needs_extend(90, Some(1), None).unwrap_err(),
            ThinError::VgSizeEmpty
        );
        assert!(pool_needs_extend(90, Some(1), Some(0)).is_err());
    }

    #[test]
    fn metadata_only_grows() {
        assert_eq!(metadata_extend_to(None, Some(1)), Ok(None));
        assert_eq!(metadata_extend_to(Some(1 << 30), Some(1 << 30)), Ok(None));
        assert_eq!(metadata_extend_to(Some(1 << 30), Some(2 << 30)), Ok(None));
        assert_eq!(
            metadata_extend_to(Some(2 << 30), Some(1 << 30)),
            Ok(Some(2 << 30))
        );
        assert!(metadata_extend_to(Some(1), None).is_err());
    }

    #[test]
    fn create_when_missing_extend_when_vg_grew() {
        let empty = LvReport {
            reports: vec![vec![]],
        };
        let a = plan_thin_pool("vg1", &cfg(), &empty, Some(100)).unwrap();
        assert_eq!(
            a,
            ThinPoolAction::Create(
                commands::lvcreate_thin_pool("vg1", "thin-pool-1", 90, Some(131_072), None)
                    .unwrap()
            )
        );

        let lvs = parse_lvs(&crate::node::fixture("lvs_thin.json")).unwrap();
        // Pool is 28948079575 bytes; in a 32 GB VG that is 90%: up to date.
        assert_eq!(
            plan_thin_pool("vg1", &cfg(), &lvs, Some(32_164_532_861)).unwrap(),
            ThinPoolAction::UpToDate
        );
        // The VG doubled.
        assert_eq!(
            plan_thin_pool("vg1", &cfg(), &lvs, Some(64_329_065_722)).unwrap(),
            ThinPoolAction::Extend(commands::lvextend_pool("vg1", "thin-pool-1", 90).unwrap())
        );
    }

    #[test]
    fn name_taken_by_a_plain_lv() {
        let lvs = LvReport {
            reports: vec![vec![LogicalVolume {
                lv_name: "thin-pool-1".into(),
                lv_attr: "-wi-a-----".into(),
                ..Default::default()
            }]],
        };
        assert_eq!(
            plan_thin_pool("vg1", &cfg(), &lvs, Some(1))
                .unwrap_err()
                .to_string(),
            "failed to create thin pool \"thin-pool-1\", logical volume with same name already exists, but cannot be extended as its not a thinpool (-wi-a-----)"
        );
    }
}
