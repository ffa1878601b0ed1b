//! The node gauges LVMS exports under TopoLVM's names (`topolvm_volumegroup_*`,
//! `topolvm_thinpool_*`), computed from what a volume-group pass observed: the VG (`vgs` joined
//! with `pvs`), the `lvs` rows of a thin class, and its thin-pool spec. Pure, so the thin
//! figures are tested on lvm2 fixtures although thin pools cannot be created here.

use crate::api::{RaidHealthStatus, RaidStatus, ThinPoolConfig};
use crate::node::report::{ExistingVg, LvReport};

/// One device class on one node.
#[derive(Clone, Debug, PartialEq)]
pub struct VolumeGroupGauges {
    pub size_bytes: u64,
    pub available_bytes: u64,
    /// Thin classes whose pool exists; None for thick classes and pools not yet created.
    pub thin_pool: Option<ThinPoolGauges>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ThinPoolGauges {
    pub size_bytes: u64,
    /// None when lvm2 prints no value (an inactive pool).
    pub data_percent: Option<f64>,
    pub metadata_percent: Option<f64>,
    /// TopoLVM's definition: pool size × overprovisionRatio − the thin volumes' sizes.
    pub overprovisioned_available: u64,
}

/// LVMS's `lvms_raid_*` gauges of one RAID device class on one node, from the node status's
/// `raidStatus` of the same pass.
#[derive(Clone, Debug, PartialEq)]
pub struct RaidGauges {
    /// 0 healthy, 1 degraded, 2 failed (the worst of the class's RAID LVs).
    pub health: i64,
    /// 1 while any of its RAID LVs resynchronizes.
    pub sync_in_progress: i64,
    pub member_count: i64,
    pub degraded_count: i64,
    /// The slowest LV's resynchronization, 0..=100 (100 with no LV yet).
    pub sync_percent: i64,
}

pub fn raid_gauges(raid: &RaidStatus) -> RaidGauges {
    RaidGauges {
        health: match raid.status {
            RaidHealthStatus::Healthy => 0,
            RaidHealthStatus::Degraded => 1,
            RaidHealthStatus::Failed => 2,
        },
        sync_in_progress: i64::from(raid.lv_health.iter().any(|lv| lv.sync_percent < 100)),
        member_count: i64::from(raid.member_count),
        degraded_count: i64::from(raid.degraded_member_count),
        sync_percent: i64::from(raid.min_sync_percent.unwrap_or(100).clamp(0, 100)),
    }
}

/// The gauges of `vg` after a pass. `thin` is the class's pool spec with its `lvs` report.
pub fn volume_group_gauges(
    vg: &ExistingVg,
    thin: Option<(&ThinPoolConfig, &LvReport)>,
) -> VolumeGroupGauges {
    // LVMS's `vgs` asks for no vg_free: the VG's free space is its PVs' free space.
    let size_bytes = vg
        .size
        .unwrap_or_else(|| vg.pvs.iter().filter_map(|p| p.pv_size).sum());
    let available_bytes = vg
        .free
        .unwrap_or_else(|| vg.pvs.iter().filter_map(|p| p.pv_free).sum());
    VolumeGroupGauges {
        size_bytes,
        available_bytes,
        thin_pool: thin.and_then(|(config, lvs)| thin_pool_gauges(config, lvs)),
    }
}

fn thin_pool_gauges(config: &ThinPoolConfig, lvs: &LvReport) -> Option<ThinPoolGauges> {
    let pool = lvs.find(&config.name)?;
    let size_bytes = pool.lv_size?;
    let virtual_bytes: u128 = lvs
        .all()
        .filter(|lv| lv.pool_lv.as_deref() == Some(config.name.as_str()))
        .filter_map(|lv| lv.lv_size)
        .map(u128::from)
        .sum();
    // The CRD keeps the ratio at 1..=100; a negative one would mean no room at all.
    let ratio = u128::try_from(config.overprovision_ratio).unwrap_or(0);
    let room = (u128::from(size_bytes) * ratio).saturating_sub(virtual_bytes);
    Some(ThinPoolGauges {
        size_bytes,
        data_percent: pool.data_percent,
        metadata_percent: pool.metadata_percent,
        overprovisioned_available: u64::try_from(room).unwrap_or(u64::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raid_gauges_are_lvms_numbers() {
        use crate::api::{RaidLvHealth, RaidType};
        let lv = |sync: i32| RaidLvHealth {
            name: "lv".into(),
            raid_type: RaidType::Raid1,
            sync_percent: sync,
            health_status: String::new(),
        };
        let mut raid = RaidStatus {
            status: RaidHealthStatus::Healthy,
            member_count: 2,
            degraded_member_count: 0,
            min_sync_percent: None,
            lv_health: vec![],
        };
        assert_eq!(
            raid_gauges(&raid),
            RaidGauges {
                health: 0,
                sync_in_progress: 0,
                member_count: 2,
                degraded_count: 0,
                sync_percent: 100
            }
        );
        raid.status = RaidHealthStatus::Degraded;
        raid.degraded_member_count = 1;
        raid.lv_health = vec![lv(100), lv(42)];
        raid.min_sync_percent = Some(42);
        let g = raid_gauges(&raid);
        assert_eq!(
            (
                g.health,
                g.sync_in_progress,
                g.degraded_count,
                g.sync_percent
            ),
            (1, 1, 1, 42)
        );
        raid.status = RaidHealthStatus::Failed;
        assert_eq!(raid_gauges(&raid).health, 2);
    }
    use crate::node::fixture;
    use crate::node::report::{LogicalVolume, find_vg, join_vgs, parse_lvs, parse_pvs, parse_vgs};

    fn observed_vg(vgs_fixture: &str, name: &str) -> ExistingVg {
        let pvs = parse_pvs(&fixture("pvs.json")).unwrap();
        let vgs = parse_vgs(&fixture(vgs_fixture)).unwrap();
        find_vg(&join_vgs(&vgs, &pvs), name).unwrap().clone()
    }

    fn pool_config(ratio: i32) -> ThinPoolConfig {
        ThinPoolConfig {
            name: "thin-pool-1".into(),
            size_percent: 90,
            overprovision_ratio: ratio,
            ..Default::default()
        }
    }

    #[test]
    fn thick_class_from_lvms_vgs_report_takes_free_space_from_its_pvs() {
        // LVMS's exact vgs columns (no vg_free): loop0 is full, loop1 empty.
        let vg = observed_vg("vgs_tagged.json", "lvmsfix-thick");
        assert_eq!(vg.free, None);
        let g = volume_group_gauges(&vg, None);
        assert_eq!(
            g,
            VolumeGroupGauges {
                size_bytes: 411_041_792,
                available_bytes: 205_520_896,
                thin_pool: None,
            }
        );
        // lvm2's own vg_free agrees with the PV sum.
        let with_free = observed_vg("vgs_with_free.json", "lvmsfix-thick");
        assert_eq!(volume_group_gauges(&with_free, None), g);
    }

    #[test]
    fn thin_pool_figures_from_the_lvs_fixture() {
        let vg = observed_vg("vgs_with_free.json", "lvmsfix-thick");
        let lvs = parse_lvs(&fixture("lvs_thin.json")).unwrap();
        let g = volume_group_gauges(&vg, Some((&pool_config(10), &lvs)));
        let pool = g.thin_pool.unwrap();
        assert_eq!(pool.size_bytes, 28_948_079_575);
        assert_eq!(pool.data_percent, Some(41.37));
        assert_eq!(pool.metadata_percent, Some(10.52));
        // 10 × the pool, less the one 1 GiB thin volume.
        assert_eq!(
            pool.overprovisioned_available,
            28_948_079_575 * 10 - 1_073_741_824
        );
    }

    #[test]
    fn overprovisioned_room_never_goes_below_zero() {
        let mut lvs = parse_lvs(&fixture("lvs_thin.json")).unwrap();
        lvs.reports[0].push(LogicalVolume {
            lv_name: "big".into(),
            vg_name: "vg1".into(),
            pool_lv: Some("thin-pool-1".into()),
            lv_size: Some(100 << 30),
            ..Default::default()
        });
        let vg = observed_vg("vgs_with_free.json", "lvmsfix-thick");
        let pool = volume_group_gauges(&vg, Some((&pool_config(1), &lvs)))
            .thin_pool
            .unwrap();
        assert_eq!(pool.overprovisioned_available, 0);
    }

    #[test]
    fn no_pool_yet_and_linear_rows_give_no_thin_gauges() {
        let vg = observed_vg("vgs_with_free.json", "lvmsfix-thick");
        let empty = parse_lvs(&fixture("lvs_empty.json")).unwrap();
        assert_eq!(
            volume_group_gauges(&vg, Some((&pool_config(10), &empty))).thin_pool,
            None
        );
        let linear = parse_lvs(&fixture("lvs_linear.json")).unwrap();
        assert_eq!(
            volume_group_gauges(&vg, Some((&pool_config(10), &linear))).thin_pool,
            None
        );
    }
}
