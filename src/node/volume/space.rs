//! Free space per device class, as TopoLVM's lvmd computes it: a thick class has its VG's free
//! bytes (less `spare-gb` when published as capacity), a thin class `overprovision-ratio` ×
//! the pool's size less the virtual sizes of its thin volumes.

use crate::node::lvmd_config::{LvmdDeviceClass, LvmdDeviceType};
use crate::node::report::LogicalVolume;

/// TopoLVM keeps this many GiB free in a thick VG when `spare-gb` is not set.
pub const DEFAULT_SPARE_GB: u64 = 10;

/// Overprovisioned free bytes of a thin pool (floored at 0).
pub fn thin_free(pool_size: u64, ratio: f64, lvs: &[LogicalVolume], pool: &str) -> u64 {
    let virtual_used: u64 = lvs
        .iter()
        .filter(|l| l.pool_lv.as_deref() == Some(pool))
        .filter_map(|l| l.lv_size)
        .fold(0u64, u64::saturating_add);
    // Ratio × size as TopoLVM computes it (float, then truncated).
    let limit = (pool_size as f64 * ratio).floor();
    let limit = if limit.is_finite() && limit > 0.0 {
        limit as u64
    } else {
        0
    };
    limit.saturating_sub(virtual_used)
}

/// What the class can still hold for a new volume (TopoLVM's `pool.Free`: no spare).
/// None when the thin pool is not in the report (an unfinished class: no room yet).
pub fn free_for_create(
    class: &LvmdDeviceClass,
    vg_free: u64,
    lvs: &[LogicalVolume],
) -> Option<u64> {
    match class.device_type {
        LvmdDeviceType::Thick => Some(vg_free),
        LvmdDeviceType::Thin => {
            let tp = class.thin_pool.as_ref()?;
            let pool = lvs.iter().find(|l| l.lv_name == tp.name)?;
            Some(thin_free(
                pool.lv_size?,
                tp.overprovision_ratio,
                lvs,
                &tp.name,
            ))
        }
    }
}

/// The class's capacity as the Node annotation publishes it (thick: less the spare).
pub fn published(class: &LvmdDeviceClass, vg_free: u64, lvs: &[LogicalVolume]) -> Option<u64> {
    let free = free_for_create(class, vg_free, lvs)?;
    Some(match class.device_type {
        LvmdDeviceType::Thick => {
            let spare = class
                .spare_gb
                .unwrap_or(DEFAULT_SPARE_GB)
                .saturating_mul(1 << 30);
            free.saturating_sub(spare)
        }
        LvmdDeviceType::Thin => free,
    })
}

/// Past these, a thin pool takes no new or larger volume whatever the formula says: its
/// volumes' writes would soon fail (data), or the pool could become unrecoverable (metadata:
/// lvm2 warns from 80 %, and a pool whose metadata fills cannot be repaired in place).
pub const POOL_DATA_FULL_PERCENT: f64 = 95.0;
pub const POOL_METADATA_FULL_PERCENT: f64 = 90.0;

fn pool_of<'a>(class: &LvmdDeviceClass, lvs: &'a [LogicalVolume]) -> Option<&'a LogicalVolume> {
    let tp = class.thin_pool.as_ref()?;
    (class.device_type == LvmdDeviceType::Thin)
        .then(|| lvs.iter().find(|l| l.lv_name == tp.name))
        .flatten()
}

fn percent(v: Option<f64>) -> String {
    v.map_or_else(|| "?".into(), |p| format!("{p:.1}%"))
}

/// Why the class's thin pool takes no new or larger volume now, from its real use as lvm2
/// reports it; None for a thick class, a pool not reported, or one below both limits.
pub fn pool_full(class: &LvmdDeviceClass, lvs: &[LogicalVolume]) -> Option<String> {
    let pool = pool_of(class, lvs)?;
    let over = pool
        .data_percent
        .is_some_and(|d| d >= POOL_DATA_FULL_PERCENT)
        || pool
            .metadata_percent
            .is_some_and(|m| m >= POOL_METADATA_FULL_PERCENT);
    over.then(|| {
        format!(
            "thin pool {vg}/{name} of device class {class} is {data} full (data) and {meta} (metadata): new and larger thin volumes are refused from {POOL_DATA_FULL_PERCENT}% data or {POOL_METADATA_FULL_PERCENT}% metadata, before writes fail; free space in its volumes, or extend it (lvextend -L +SIZE {vg}/{name}, --poolmetadatasize +SIZE for metadata)",
            vg = pool.vg_name,
            name = pool.lv_name,
            class = class.name,
            data = percent(pool.data_percent),
            meta = percent(pool.metadata_percent),
        )
    })
}

/// The class's thin pool's real use, as the pool-usage annotation says it (`thin pool vg/pool is
/// 96.2% full (data) and 11.0% (metadata)`); None for a thick class or a pool lvm2 reports no
/// use of (inactive).
pub fn pool_usage(class: &LvmdDeviceClass, lvs: &[LogicalVolume]) -> Option<String> {
    let pool = pool_of(class, lvs)?;
    pool.data_percent?;
    Some(format!(
        "thin pool {}/{} is {} full (data) and {} (metadata)",
        pool.vg_name,
        pool.lv_name,
        percent(pool.data_percent),
        percent(pool.metadata_percent)
    ))
}

/// The real-usage bound of a thin class: `overprovision-ratio` × the bytes of the pool not yet
/// written (size × (1 − data %)), 0 once [`pool_full`]. None when lvm2 reports no use (an
/// inactive pool): the bound then says nothing.
pub fn usage_bound(class: &LvmdDeviceClass, lvs: &[LogicalVolume]) -> Option<u64> {
    let pool = pool_of(class, lvs)?;
    let ratio = class.thin_pool.as_ref()?.overprovision_ratio;
    let data = pool.data_percent?;
    if pool_full(class, lvs).is_some() {
        return Some(0);
    }
    let unwritten = pool.lv_size? as f64 * (1.0 - data.clamp(0.0, 100.0) / 100.0);
    let bound = (unwritten * ratio).floor();
    Some(if bound.is_finite() && bound > 0.0 {
        bound as u64
    } else {
        0
    })
}

/// [`published`], also bounded by [`usage_bound`] when `follow_usage` (the class's
/// `capacityFollowsUsage`): only ever lower than TopoLVM's formula.
pub fn published_following_usage(
    class: &LvmdDeviceClass,
    vg_free: u64,
    lvs: &[LogicalVolume],
    follow_usage: bool,
) -> Option<u64> {
    let formula = published(class, vg_free, lvs)?;
    if !follow_usage {
        return Some(formula);
    }
    Some(usage_bound(class, lvs).map_or(formula, |b| formula.min(b)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::lvmd_config::LvmdThinPool;

    fn lv(name: &str, pool: Option<&str>, size: u64) -> LogicalVolume {
        LogicalVolume {
            lv_name: name.into(),
            vg_name: "vg".into(),
            pool_lv: pool.map(String::from),
            lv_size: Some(size),
            ..Default::default()
        }
    }

    fn thin(ratio: f64) -> LvmdDeviceClass {
        LvmdDeviceClass {
            name: "thin".into(),
            volume_group: "vg".into(),
            device_type: LvmdDeviceType::Thin,
            thin_pool: Some(LvmdThinPool {
                name: "pool".into(),
                overprovision_ratio: ratio,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn thin_space_is_overprovisioned_pool_less_virtual_sizes() {
        let lvs = [
            lv("pool", None, 100),
            lv("a", Some("pool"), 300),
            lv("b", Some("pool"), 150),
            lv("other", Some("other"), 1000),
        ];
        assert_eq!(free_for_create(&thin(10.0), 0, &lvs), Some(550));
        assert_eq!(free_for_create(&thin(2.0), 0, &lvs), Some(0));
        // No pool yet: no room, not "unlimited".
        assert_eq!(free_for_create(&thin(10.0), 0, &lvs[1..]), None);
    }

    fn used(pool: u64, data: f64, meta: f64) -> LogicalVolume {
        LogicalVolume {
            data_percent: Some(data),
            metadata_percent: Some(meta),
            lv_attr: "twi-aotz--".into(),
            ..lv("pool", None, pool)
        }
    }

    #[test]
    fn a_pool_past_its_limits_is_full_and_says_how_full() {
        let class = thin(10.0);
        assert_eq!(pool_full(&class, &[used(100, 94.9, 89.9)]), None);
        let data = pool_full(&class, &[used(100, 95.0, 10.0)]).expect("data full");
        assert!(
            data.contains("vg/pool")
                && data.contains("95.0% full (data)")
                && data.contains("10.0% (metadata)"),
            "{data}"
        );
        assert!(
            pool_full(&class, &[used(100, 5.0, 90.0)]).is_some(),
            "metadata full"
        );
        // Not reported (an inactive pool, the host tier): not full.
        assert_eq!(pool_full(&class, &[lv("pool", None, 100)]), None);
    }

    #[test]
    fn following_usage_only_ever_lowers_the_formula() {
        // 1000-byte pool, ratio 10: the formula allows 10000 less 2000 of volumes = 8000.
        let lvs = |data| [used(1000, data, 10.0), lv("a", Some("pool"), 2000)];
        let class = thin(10.0);
        assert_eq!(published(&class, 0, &lvs(60.0)), Some(8000));
        // 60 % written: 400 bytes left × 10 = 4000 < 8000.
        assert_eq!(
            published_following_usage(&class, 0, &lvs(60.0), true),
            Some(4000)
        );
        assert_eq!(
            published_following_usage(&class, 0, &lvs(60.0), false),
            Some(8000)
        );
        // 10 % written: the real bound (9000) is above the formula, which stands.
        assert_eq!(
            published_following_usage(&class, 0, &lvs(10.0), true),
            Some(8000)
        );
        // Full: nothing.
        assert_eq!(
            published_following_usage(&class, 0, &lvs(96.0), true),
            Some(0)
        );
        // No use reported: the formula.
        let quiet = [lv("pool", None, 1000), lv("a", Some("pool"), 2000)];
        assert_eq!(
            published_following_usage(&class, 0, &quiet, true),
            Some(8000)
        );
    }

    #[test]
    fn thick_capacity_keeps_the_spare_when_published() {
        let mut thick = LvmdDeviceClass {
            name: "ssd".into(),
            volume_group: "vg".into(),
            spare_gb: Some(0),
            ..Default::default()
        };
        assert_eq!(published(&thick, 5 << 30, &[]), Some(5 << 30));
        thick.spare_gb = None;
        assert_eq!(published(&thick, 5 << 30, &[]), Some(0));
        assert_eq!(free_for_create(&thick, 5 << 30, &[]), Some(5 << 30));
        thick.spare_gb = Some(1);
        assert_eq!(published(&thick, 5 << 30, &[]), Some(4 << 30));
    }
}
