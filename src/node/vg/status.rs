//! The VGStatus entry this node reports for one volume group (LVMS `status.go`, `raid.go`).

use crate::api::{
    LVMVolumeGroupSpec, RaidHealthStatus, RaidLvHealth, RaidStatus, RaidType, VGStatus,
    VGStatusType,
};

use crate::node::report::{ExistingVg, LogicalVolume, LvAttr, LvAttrError, PhysicalVolume};
use crate::node::vg::discovery::policy_status;
use crate::node::vg::events::EventReason;
use crate::node::vg::filter::FilteredDevices;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    Progressing,
    Ready,
    /// Failed with this reason; reported as Degraded when the VG already has PVs.
    Failed(String),
}

/// Builds the entry: PV names of the existing VG as `devices`, the filter exclusions LVMS shows,
/// the discovery policy, and for RAID classes the health (a Degraded/Failed RAID makes the entry
/// Degraded).
pub fn vg_status(
    vg_name: &str,
    spec: &LVMVolumeGroupSpec,
    phase: Phase,
    existing: Option<&ExistingVg>,
    devices: &FilteredDevices,
    raid: Option<RaidStatus>,
) -> VGStatus {
    // None is a VG that pvs/vgs (read successfully) do not show: no devices yet.
    let pv_names = existing.map(ExistingVg::pv_names).unwrap_or_default();
    let (mut status, reason) = match phase {
        Phase::Progressing => (VGStatusType::Progressing, String::new()),
        Phase::Ready => (VGStatusType::Ready, String::new()),
        // A failure on a VG that already holds data is Degraded: volumes still work.
        Phase::Failed(r) if !pv_names.is_empty() => (VGStatusType::Degraded, r),
        Phase::Failed(r) => (VGStatusType::Failed, r),
    };
    let raid_status = if spec.raid_config.is_some() {
        raid
    } else {
        None
    };
    if raid_status.as_ref().is_some_and(|r| {
        matches!(
            r.status,
            RaidHealthStatus::Degraded | RaidHealthStatus::Failed
        )
    }) {
        status = VGStatusType::Degraded;
    }
    VGStatus {
        name: vg_name.to_string(),
        status: Some(status),
        reason,
        devices: pv_names,
        excluded: devices.status_excluded(),
        device_discovery_policy: policy_status(spec),
        raid_status,
    }
}

/// LVMS `buildRAIDStatus`: health of the RAID LVs (internal `_rimage_`/`_rmeta_` skipped) and of
/// the member PVs. None when there is neither. An unreadable `lv_attr` is an error: skipping
/// that LV could report a failing RAID as Healthy.
pub fn raid_status(
    lvs: &[LogicalVolume],
    pvs: &[PhysicalVolume],
    raid_type: RaidType,
) -> Result<Option<RaidStatus>, LvAttrError> {
    let mut raid_lvs: Vec<(&LogicalVolume, LvAttr)> = Vec::new();
    for lv in lvs {
        let attr = LvAttr::parse(&lv.lv_attr)?;
        if attr.is_raid() {
            raid_lvs.push((lv, attr));
        }
    }
    let health: Vec<RaidLvHealth> = raid_lvs
        .iter()
        .filter(|(lv, _)| !lv.lv_name.contains("_rimage_") && !lv.lv_name.contains("_rmeta_"))
        .map(|(lv, _)| RaidLvHealth {
            name: lv.lv_name.clone(),
            raid_type,
            // Go's int() truncates.
            sync_percent: lv.sync_percent.map_or(100, |p| p as i32),
            // An empty lv_health_status column (None) is lvm2's "healthy", not a lost value.
            health_status: lv.lv_health_status.clone().unwrap_or_default(),
        })
        .collect();
    if health.is_empty() && pvs.is_empty() {
        return Ok(None);
    }
    let failed = health
        .iter()
        .filter(|h| !h.health_status.is_empty() && h.health_status != "partial")
        .count();
    let degraded = health
        .iter()
        .filter(|h| h.health_status == "partial")
        .count();
    let mut overall = RaidHealthStatus::Healthy;
    if !health.is_empty() {
        if failed == health.len() {
            overall = RaidHealthStatus::Failed;
        } else if failed > 0 || degraded > 0 {
            overall = RaidHealthStatus::Degraded;
        }
    }
    if overall == RaidHealthStatus::Healthy
        && raid_lvs
            .iter()
            .any(|(_, a)| a.health == crate::node::report::HEALTH_PARTIAL)
    {
        overall = RaidHealthStatus::Degraded;
    }
    let missing = pvs.iter().filter(|p| p.missing).count();
    if missing > 0 && overall == RaidHealthStatus::Healthy {
        overall = RaidHealthStatus::Degraded;
    }
    let min_sync = health
        .iter()
        .map(|h| h.sync_percent)
        .min()
        .map(|m| m.min(100));
    Ok(Some(RaidStatus {
        status: overall,
        member_count: i32::try_from(pvs.len()).unwrap_or(i32::MAX),
        degraded_member_count: i32::try_from(missing).unwrap_or(i32::MAX),
        min_sync_percent: min_sync,
        lv_health: health,
    }))
}

/// The reason a pass that discovery refused fails with: the Event discovery names, or LVMS's
/// generic one.
pub fn refusal_reason(event: Option<EventReason>) -> &'static str {
    event.map(|e| e.as_str()).unwrap_or("VolumeGroupFailed")
}

/// A RAID class that is not healthy: the Warning a Ready pass still ends with, repeated every
/// RAID requeue until it heals (its status entry already says Degraded or Failed).
pub fn raid_warning(vg: &str, raid: Option<&RaidStatus>) -> Option<(EventReason, String)> {
    let r = raid.filter(|r| r.status != RaidHealthStatus::Healthy)?;
    Some((
        EventReason::RAIDHealthCheckFailed,
        format!(
            "RAID volume group {vg} is {:?}: {} of {} member(s) degraded",
            r.status, r.degraded_member_count, r.member_count
        ),
    ))
}

/// Puts `status` into the node's list, replacing the entry of the same name. True if changed.
pub fn upsert(list: &mut Vec<VGStatus>, status: VGStatus) -> bool {
    match list.iter_mut().find(|s| s.name == status.name) {
        Some(existing) if *existing == status => false,
        Some(existing) => {
            *existing = status;
            true
        }
        None => {
            list.push(status);
            true
        }
    }
}

/// Drops the entry of a deleted volume group. True if there was one.
pub fn remove(list: &mut Vec<VGStatus>, vg_name: &str) -> bool {
    let before = list.len();
    list.retain(|s| s.name != vg_name);
    list.len() != before
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_unhealthy_raid_warns_and_a_refusal_names_its_event() {
        let raid = |status| RaidStatus {
            status,
            member_count: 2,
            degraded_member_count: 1,
            min_sync_percent: None,
            lv_health: vec![],
        };
        assert_eq!(raid_warning("vg1", None), None);
        assert_eq!(
            raid_warning("vg1", Some(&raid(RaidHealthStatus::Healthy))),
            None
        );
        let (reason, note) = raid_warning("vg1", Some(&raid(RaidHealthStatus::Degraded))).unwrap();
        assert_eq!(reason, EventReason::RAIDHealthCheckFailed);
        assert_eq!(
            note,
            "RAID volume group vg1 is Degraded: 1 of 2 member(s) degraded"
        );
        assert_eq!(refusal_reason(None), "VolumeGroupFailed");
        assert_eq!(
            refusal_reason(Some(EventReason::VGCreateOrExtendFailed)),
            "VGCreateOrExtendFailed"
        );
    }
    use crate::api::{
        DeviceDiscoveryPolicySpec, DeviceDiscoveryPolicyStatus, DeviceSelector, ExcludedDevice,
        RaidConfig,
    };
    use crate::node::report::parse_lvs;
    use crate::node::vg::filter::{ExcludedBlockDevice, Rejection};

    fn vg(pvs: &[&str]) -> ExistingVg {
        ExistingVg {
            name: "vg1".into(),
            pvs: pvs
                .iter()
                .map(|p| PhysicalVolume {
                    pv_name: p.to_string(),
                    vg_name: Some("vg1".into()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn excluded() -> FilteredDevices {
        FilteredDevices {
            available: vec![],
            excluded: vec![
                ExcludedBlockDevice {
                    name: "/dev/sdc".into(),
                    kname: "/dev/sdc".into(),
                    reasons: vec![Rejection::ReadOnly {
                        name: "/dev/sdc".into(),
                    }],
                },
                ExcludedBlockDevice {
                    name: "/dev/sdb".into(),
                    kname: "/dev/sdb".into(),
                    reasons: vec![Rejection::AlreadySetUp {
                        name: "/dev/sdb".into(),
                        vg: "vg1".into(),
                    }],
                },
            ],
        }
    }

    #[test]
    fn ready_lists_pvs_and_visible_exclusions() {
        let spec = LVMVolumeGroupSpec {
            device_selector: Some(DeviceSelector {
                paths: vec!["/dev/sdb".into()],
                ..Default::default()
            }),
            ..Default::default()
        };
        let s = vg_status(
            "vg1",
            &spec,
            Phase::Ready,
            Some(&vg(&["/dev/sdb"])),
            &excluded(),
            None,
        );
        assert_eq!(s.status, Some(VGStatusType::Ready));
        assert_eq!(s.devices, vec!["/dev/sdb"]);
        assert_eq!(
            s.excluded,
            vec![ExcludedDevice {
                name: "/dev/sdc".into(),
                reasons: vec!["/dev/sdc cannot be read-only".into()]
            }]
        );
        assert_eq!(
            s.device_discovery_policy,
            DeviceDiscoveryPolicyStatus::Preconfigured
        );
        assert_eq!(s.reason, "");
    }

    #[test]
    fn failure_with_pvs_is_degraded_without_is_failed() {
        let spec = LVMVolumeGroupSpec {
            device_discovery_policy: Some(DeviceDiscoveryPolicySpec::Static),
            ..Default::default()
        };
        let s = vg_status(
            "vg1",
            &spec,
            Phase::Failed("boom".into()),
            Some(&vg(&["/dev/sdb"])),
            &FilteredDevices::default(),
            None,
        );
        assert_eq!(s.status, Some(VGStatusType::Degraded));
        assert_eq!(s.reason, "boom");
        assert_eq!(
            s.device_discovery_policy,
            DeviceDiscoveryPolicyStatus::RuntimeStatic
        );
        let s = vg_status(
            "vg1",
            &spec,
            Phase::Failed("boom".into()),
            None,
            &FilteredDevices::default(),
            None,
        );
        assert_eq!(s.status, Some(VGStatusType::Failed));
        assert!(s.devices.is_empty());
        let s = vg_status(
            "vg1",
            &spec,
            Phase::Progressing,
            None,
            &FilteredDevices::default(),
            None,
        );
        assert_eq!(s.status, Some(VGStatusType::Progressing));
    }

    #[test]
    fn raid_health_from_lvs_and_pvs() {
        let lvs = parse_lvs(&crate::node::fixture("lvs_raid1.json")).unwrap();
        let all: Vec<LogicalVolume> = lvs.all().cloned().collect();
        let pvs = vg(&["/dev/sdb", "/dev/sdc"]).pvs;
        let r = raid_status(&all, &pvs, RaidType::Raid1).unwrap().unwrap();
        assert_eq!(r.status, RaidHealthStatus::Degraded);
        assert_eq!(r.min_sync_percent, Some(42));
        assert_eq!(r.member_count, 2);
        assert_eq!(r.lv_health.len(), 2);

        // Healthy LVs but a missing PV: Degraded, counted.
        let mut healthy = all.clone();
        healthy.remove(0);
        let mut pvs2 = pvs.clone();
        pvs2[1].missing = true;
        let r = raid_status(&healthy, &pvs2, RaidType::Raid1)
            .unwrap()
            .unwrap();
        assert_eq!(r.status, RaidHealthStatus::Degraded);
        assert_eq!(r.degraded_member_count, 1);
        let r = raid_status(&healthy, &pvs, RaidType::Raid1)
            .unwrap()
            .unwrap();
        assert_eq!(r.status, RaidHealthStatus::Healthy);

        // Every LV failed.
        let mut failed = healthy.clone();
        failed[0].lv_health_status = Some("refresh needed".into());
        assert_eq!(
            raid_status(&failed, &pvs, RaidType::Raid1)
                .unwrap()
                .unwrap()
                .status,
            RaidHealthStatus::Failed
        );
        assert_eq!(raid_status(&[], &[], RaidType::Raid1), Ok(None));

        // An lv_attr lvm2 did not print in full is an error, not an LV left out (which could
        // make a failing RAID look Healthy).
        let mut garbled = all.clone();
        garbled[0].lv_attr = "rwi-a-r".into();
        assert_eq!(
            raid_status(&garbled, &pvs, RaidType::Raid1),
            Err(LvAttrError("rwi-a-r".into()))
        );

        // A Degraded RAID makes a Ready entry Degraded.
        let spec = LVMVolumeGroupSpec {
            raid_config: Some(RaidConfig {
                raid_type: RaidType::Raid1,
                mirrors: None,
                stripes: None,
                stripe_size: None,
            }),
            ..Default::default()
        };
        let degraded = raid_status(&all, &pvs, RaidType::Raid1).unwrap();
        let s = vg_status(
            "vg1",
            &spec,
            Phase::Ready,
            None,
            &FilteredDevices::default(),
            degraded,
        );
        assert_eq!(s.status, Some(VGStatusType::Degraded));
    }

    #[test]
    fn upsert_and_remove_entries() {
        let spec = LVMVolumeGroupSpec::default();
        let mut list = Vec::new();
        let a = vg_status(
            "vg1",
            &spec,
            Phase::Progressing,
            None,
            &FilteredDevices::default(),
            None,
        );
        assert!(upsert(&mut list, a.clone()));
        assert!(!upsert(&mut list, a));
        let b = vg_status(
            "vg1",
            &spec,
            Phase::Ready,
            None,
            &FilteredDevices::default(),
            None,
        );
        assert!(upsert(&mut list, b));
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].status, Some(VGStatusType::Ready));
        assert!(remove(&mut list, "vg1"));
        assert!(!remove(&mut list, "vg1"));
    }
}
