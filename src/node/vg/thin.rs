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
    #[error(
        "{0} is empty in the vgs report and a thin pool's extension is sized from it; check `vgs -o +{0}`"
    )]
    VgFigureEmpty(&'static str),
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

/// The VG's figures a pool is sized from (`vgs` in bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VgSpace {
    pub size: Option<u64>,
    pub free: Option<u64>,
    pub extent_size: Option<u64>,
}

impl VgSpace {
    pub fn of(row: Option<&crate::node::report::VolumeGroupRow>) -> Self {
        row.map(|r| Self {
            size: r.vg_size,
            free: r.vg_free,
            extent_size: r.vg_extent_size,
        })
        .unwrap_or_default()
    }
}

/// The data size to extend a pool of `lv_size` bytes to, or None when it already has its
/// share of the VG (LVMS's test, `pool_needs_extend`) or the VG has no whole extent free.
///
/// The target is `size_percent` of the VG rounded up to a whole extent, so the next look
/// finds the pool up to date; it is capped by the VG's free extents, so the command never asks
/// for more than there is. Not `lvextend -l <pct>%VG`, as LVMS runs it: lvm2 counts that in
/// physical extents, the pool's metadata and spare included, so a pool whose data alone is
/// below the percentage (LVMS makes them so, and lvm2 may move them there) is never extended
/// by it, and the step would repeat on every pass.
pub fn pool_extend_to(
    size_percent: i32,
    lv_size: Option<u64>,
    space: VgSpace,
) -> Result<Option<u64>, ThinError> {
    if !pool_needs_extend(size_percent, lv_size, space.size)? {
        return Ok(None);
    }
    // Both are Some and the VG non-empty: pool_needs_extend checked.
    let (Some(lv), Some(vg)) = (lv_size, space.size) else {
        return Ok(None);
    };
    let extent = space
        .extent_size
        .filter(|e| *e > 0)
        .ok_or(ThinError::VgFigureEmpty("vg_extent_size"))?;
    let free = space.free.ok_or(ThinError::VgFigureEmpty("vg_free"))?;
    let pct = u128::from(size_percent.clamp(0, 100).unsigned_abs());
    let want = (u128::from(vg) * pct)
        .div_ceil(100)
        .div_ceil(u128::from(extent))
        * u128::from(extent);
    let room = u128::from(lv) + u128::from(free) / u128::from(extent) * u128::from(extent);
    let target = want.min(room);
    Ok((target > u128::from(lv))
        .then(|| u64::try_from(target).ok())
        .flatten())
}

/// lvm2 refuses thin pool metadata above about 16 GiB (`DEFAULT_THIN_POOL_MAX_METADATA_SIZE`,
/// 15.81 GiB); autoextend stops below it.
pub const MAX_POOL_METADATA: u64 = 16_978_542_592;

/// What autoextend grows a pool past its threshold to: data size, metadata size (bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AutoExtend {
    pub data_to: Option<u64>,
    pub metadata_to: Option<u64>,
}

/// Autoextend of `pool` (its `lvs` row: size, data and metadata use): each part whose use is at
/// or past the threshold grows by `extendPercent` of its size, rounded up to whole extents and
/// capped by the VG's free extents (data first; metadata from what is left, and below lvm2's
/// maximum). A use lvm2 did not report (an inactive pool) extends nothing.
pub fn auto_extend(
    cfg: &crate::api::ThinPoolAutoExtend,
    pool: &crate::node::report::LogicalVolume,
    space: VgSpace,
) -> Result<AutoExtend, ThinError> {
    let threshold = f64::from(cfg.threshold_percent);
    let data_hot = pool.data_percent.is_some_and(|d| d >= threshold);
    let meta_hot = pool.metadata_percent.is_some_and(|m| m >= threshold);
    if !data_hot && !meta_hot {
        return Ok(AutoExtend::default());
    }
    let extent = space
        .extent_size
        .filter(|e| *e > 0)
        .ok_or(ThinError::VgFigureEmpty("vg_extent_size"))?;
    let mut free = space.free.ok_or(ThinError::VgFigureEmpty("vg_free"))? / extent * extent;
    let pct = u64::from(cfg.extend_percent.clamp(1, 100).unsigned_abs());
    // `size` grown by pct, whole extents, at least one, at most `free`.
    let grow = |size: u64, free: u64| -> u64 {
        let want = (u128::from(size) * u128::from(pct))
            .div_ceil(100)
            .div_ceil(u128::from(extent))
            .max(1)
            * u128::from(extent);
        u64::try_from(want).unwrap_or(u64::MAX).min(free)
    };
    let mut out = AutoExtend::default();
    if data_hot {
        let lv = pool.lv_size.ok_or(ThinError::LvSizeEmpty)?;
        let by = grow(lv, free);
        if by > 0 {
            out.data_to = lv.checked_add(by);
            free -= by;
        }
    }
    if meta_hot {
        let meta = pool
            .lv_metadata_size
            .ok_or(ThinError::VgFigureEmpty("lv_metadata_size"))?;
        let by = grow(meta, free).min(MAX_POOL_METADATA.saturating_sub(meta) / extent * extent);
        if by > 0 {
            out.metadata_to = meta.checked_add(by);
        }
    }
    Ok(out)
}

/// What to do about the thin pool after the VG was created or extended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ThinPoolAction {
    /// `lvcreate -l <pct>%FREE -Z y -T ...`
    Create(Vec<String>),
    /// `lvextend -L <bytes>b ...`, from the pool's data size (`from`) to `to`.
    Extend {
        argv: Vec<String>,
        from: u64,
        to: u64,
    },
    /// The pool exists and already has its share of the VG, or the VG has no room left.
    UpToDate,
}

/// LVMS `addThinPoolToVG`: create the pool, or extend it when the VG grew. `lvs` is the report of
/// this VG, `space` its figures from `vgs`.
pub fn plan_thin_pool(
    vg: &str,
    config: &ThinPoolConfig,
    lvs: &LvReport,
    space: VgSpace,
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
    match (
        pool_extend_to(s.size_percent, lv.lv_size, space)?,
        lv.lv_size,
    ) {
        (Some(to), Some(from)) => Ok(ThinPoolAction::Extend {
            argv: commands::lvextend_pool(vg, &config.name, to)?,
            from,
            to,
        }),
        _ => Ok(ThinPoolAction::UpToDate),
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

    const MIB4: u64 = 4 << 20;

    fn space(extents: u64, free_extents: u64) -> VgSpace {
        VgSpace {
            size: Some(extents * MIB4),
            free: Some(free_extents * MIB4),
            extent_size: Some(MIB4),
        }
    }

    #[test]
    fn create_when_missing_extend_when_vg_grew() {
        let empty = LvReport {
            reports: vec![vec![]],
        };
        let a = plan_thin_pool("vg1", &cfg(), &empty, VgSpace::default()).unwrap();
        assert_eq!(
            a,
            ThinPoolAction::Create(
                commands::lvcreate_thin_pool("vg1", "thin-pool-1", 90, Some(131_072), None)
                    .unwrap()
            )
        );

        let lvs = parse_lvs(&crate::node::fixture("lvs_thin.json")).unwrap();
        let vgs = |size: u64, free: u64| VgSpace {
            size: Some(size),
            free: Some(free),
            extent_size: Some(MIB4),
        };
        // Pool is 28948079575 bytes; in a 32 GB VG that is 90%: up to date.
        assert_eq!(
            plan_thin_pool("vg1", &cfg(), &lvs, vgs(32_164_532_861, 0)).unwrap(),
            ThinPoolAction::UpToDate
        );
        // The VG doubled: to 90% of it, rounded up to an extent.
        let to = 57_896_159_150_u64.div_ceil(MIB4) * MIB4;
        assert_eq!(
            plan_thin_pool("vg1", &cfg(), &lvs, vgs(64_329_065_722, 32_164_532_861)).unwrap(),
            ThinPoolAction::Extend {
                argv: commands::lvextend_pool("vg1", "thin-pool-1", to).unwrap(),
                from: 28_948_079_575,
                to
            }
        );
        // A VG report without the figures the extension needs is an error, not a guess.
        let e = plan_thin_pool(
            "vg1",
            &cfg(),
            &lvs,
            VgSpace {
                size: Some(64_329_065_722),
                ..VgSpace::default()
            },
        )
        .unwrap_err();
        assert_eq!(e, ThinError::VgFigureEmpty("vg_extent_size"));
    }

    /// The pool LVMS 4.20 left on a 2 GiB disk (VG of 511 extents of 4 MiB): 457 data extents
    /// and 52 free. `-l 90%VG` counts the pool's metadata and spare, so it never grew it and the
    /// step ran on every pass; the byte target takes it to 460 once, then it is up to date.
    #[test]
    fn a_pool_short_of_its_share_reaches_it_once() {
        let pool = |extents: u64| LvReport {
            reports: vec![vec![LogicalVolume {
                lv_name: "thin-pool-1".into(),
                lv_attr: "twi-a-tz--".into(),
                lv_size: Some(extents * MIB4),
                ..Default::default()
            }]],
        };
        let a = plan_thin_pool("vg1", &cfg(), &pool(457), space(511, 52)).unwrap();
        assert_eq!(
            a,
            ThinPoolAction::Extend {
                argv: commands::lvextend_pool("vg1", "thin-pool-1", 460 * MIB4).unwrap(),
                from: 457 * MIB4,
                to: 460 * MIB4
            }
        );
        // After it: 460/511 is 90.0%, nothing more to do.
        assert_eq!(
            plan_thin_pool("vg1", &cfg(), &pool(460), space(511, 49)).unwrap(),
            ThinPoolAction::UpToDate
        );
        // Short of its share but the VG has less free than the gap: as far as there is room.
        assert_eq!(
            pool_extend_to(90, Some(457 * MIB4), space(511, 2)).unwrap(),
            Some(459 * MIB4)
        );
        // No whole extent free: nothing to run (an lvextend would only fail).
        assert_eq!(
            plan_thin_pool("vg1", &cfg(), &pool(457), space(511, 0)).unwrap(),
            ThinPoolAction::UpToDate
        );
        let part = VgSpace {
            free: Some(MIB4 - 1),
            ..space(511, 0)
        };
        assert_eq!(pool_extend_to(90, Some(457 * MIB4), part).unwrap(), None);
    }

    /// Whatever the VG, pool and percentage, an extension is planned only to a strictly larger
    /// size within the VG's free space, and the size it plans is up to date by LVMS's test.
    #[test]
    fn extension_is_strictly_larger_and_converges() {
        for extents in [1_u64, 2, 3, 10, 511, 512, 2559, 65_535] {
            for pct in [1, 10, 33, 50, 89, 90, 99, 100] {
                for used in [0, extents / 3, extents / 2, extents * 9 / 10, extents] {
                    for free in [0, 1, extents / 10, extents] {
                        let free = free.min(extents - used.min(extents));
                        let sp = space(extents, free);
                        let lv = Some(used * MIB4);
                        let Some(to) = pool_extend_to(pct, lv, sp).unwrap() else {
                            continue;
                        };
                        assert!(to > used * MIB4, "{extents} {pct} {used} {free}");
                        assert!(to <= (used + free) * MIB4);
                        assert_eq!(to % MIB4, 0);
                        if to < (used + free) * MIB4 {
                            assert!(!pool_needs_extend(pct, Some(to), sp.size).unwrap());
                        }
                    }
                }
            }
        }
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
            plan_thin_pool("vg1", &cfg(), &lvs, space(1, 0))
                .unwrap_err()
                .to_string(),
            "failed to create thin pool \"thin-pool-1\", logical volume with same name already exists, but cannot be extended as its not a thinpool (-wi-a-----)"
        );
    }
}

#[cfg(test)]
mod auto_extend_tests {
    use super::*;
    use crate::api::ThinPoolAutoExtend;
    use crate::node::report::LogicalVolume;

    const MIB: u64 = 1 << 20;

    fn pool(size: u64, data: f64, meta_size: u64, meta: f64) -> LogicalVolume {
        LogicalVolume {
            lv_name: "pool".into(),
            lv_attr: "twi-aotz--".into(),
            lv_size: Some(size),
            data_percent: Some(data),
            lv_metadata_size: Some(meta_size),
            metadata_percent: Some(meta),
            ..Default::default()
        }
    }

    fn space(free: u64) -> VgSpace {
        VgSpace {
            size: Some(10_000 * MIB),
            free: Some(free),
            extent_size: Some(4 * MIB),
        }
    }

    #[test]
    fn below_the_threshold_nothing_grows() {
        let cfg = ThinPoolAutoExtend::default();
        let p = pool(1000 * MIB, 79.9, 8 * MIB, 10.0);
        assert_eq!(
            auto_extend(&cfg, &p, space(1000 * MIB)),
            Ok(AutoExtend::default())
        );
    }

    #[test]
    fn data_past_the_threshold_grows_by_its_percent_in_whole_extents() {
        let cfg = ThinPoolAutoExtend::default();
        // 1000 MiB + 20 % = 200 MiB, already whole 4 MiB extents.
        let p = pool(1000 * MIB, 80.0, 8 * MIB, 10.0);
        let got = auto_extend(&cfg, &p, space(1000 * MIB)).unwrap();
        assert_eq!(got.data_to, Some(1200 * MIB));
        assert_eq!(got.metadata_to, None);
        // 10 MiB + 20 % = 2 MiB, rounded up to one extent.
        let small = pool(10 * MIB, 90.0, 4 * MIB, 10.0);
        assert_eq!(
            auto_extend(&cfg, &small, space(1000 * MIB))
                .unwrap()
                .data_to,
            Some(14 * MIB)
        );
    }

    #[test]
    fn growth_is_capped_by_the_free_extents_and_metadata_gets_what_is_left() {
        let cfg = ThinPoolAutoExtend {
            threshold_percent: 80,
            extend_percent: 50,
        };
        let p = pool(1000 * MIB, 85.0, 100 * MIB, 90.0);
        // 301 MiB free = 75 whole extents: data takes 300 MiB, metadata nothing.
        let got = auto_extend(&cfg, &p, space(301 * MIB)).unwrap();
        assert_eq!(got.data_to, Some(1300 * MIB));
        assert_eq!(got.metadata_to, None);
        // Enough for both.
        let got = auto_extend(&cfg, &p, space(1000 * MIB)).unwrap();
        assert_eq!(got.data_to, Some(1500 * MIB));
        assert_eq!(got.metadata_to, Some(152 * MIB));
        // No room at all: nothing to run.
        assert_eq!(
            auto_extend(&cfg, &p, space(2 * MIB)),
            Ok(AutoExtend::default())
        );
    }

    #[test]
    fn metadata_stops_below_lvm2s_maximum_and_an_inactive_pool_extends_nothing() {
        let cfg = ThinPoolAutoExtend::default();
        let near = MAX_POOL_METADATA - 6 * MIB;
        let p = pool(1000 * MIB, 10.0, near, 95.0);
        let got = auto_extend(&cfg, &p, space(100_000 * MIB)).unwrap();
        let to = got.metadata_to.expect("some growth");
        assert!(to <= MAX_POOL_METADATA, "{to}");
        let mut inactive = pool(1000 * MIB, 0.0, 8 * MIB, 0.0);
        inactive.data_percent = None;
        inactive.metadata_percent = None;
        assert_eq!(
            auto_extend(&cfg, &inactive, space(1000 * MIB)),
            Ok(AutoExtend::default())
        );
    }
}
