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
