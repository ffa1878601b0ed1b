//! What one reconcile of an LVMVolumeGroup should do with the devices it found (LVMS
//! `vgmanager.reconcile` after filtering): fail, keep the VG as is (maybe dropping PVs that left
//! the selector), or create/extend the VG with new devices. Pure: the caller ran lsblk, pvs, vgs
//! and the filters, and carries the plan out.

use std::time::Duration;

use thiserror::Error;

use crate::api::{
    DeviceDiscoveryPolicySpec, DeviceDiscoveryPolicyStatus, LVMVolumeGroupSpec, RaidConfig,
};

use crate::node::lsblk::LSBLK_COLUMNS;
use crate::node::report::{ExistingVg, LVMS_TAG};
use crate::node::vg::events::EventReason;
use crate::node::vg::filter::{ExcludedBlockDevice, FilteredDevices, Rejection};
use crate::node::vg::resolve::{ResolvedPaths, Unresolved};

/// Requeue after creating/extending a VG, and in Dynamic discovery without paths (LVMS
/// `reconcileInterval`).
pub const RECONCILE_INTERVAL: Duration = Duration::from_secs(30);
/// Requeue for RAID classes, whose health changes without any Kubernetes event.
pub const RAID_RECONCILE_INTERVAL: Duration = Duration::from_secs(60);

#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum RaidCountError {
    #[error("{raid_type} requires at least {min} devices, got {got}")]
    TooFew {
        raid_type: &'static str,
        min: u32,
        got: usize,
    },
    #[error("raid10 with mirrors=1 requires an even number of devices, got {got}")]
    Raid10Odd { got: usize },
    #[error(
        "raid10 with mirrors={mirrors} requires a device count divisible by {group}, got {got}"
    )]
    Raid10NotDivisible {
        mirrors: u32,
        group: u32,
        got: usize,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DiscoveryError {
    #[error(
        "RAID VG {vg} on node {node} has missing physical volumes. Repair the volume group on the node (replace the failed device, run 'pvcreate' and 'vgextend' with the new device, then 'lvconvert --repair' for each degraded LV, and 'vgreduce --removemissing' to clean up), and update the LVMCluster CR with the correct device paths"
    )]
    RaidMissingPvs { vg: String, node: String },
    #[error("failed to resolve symlink to determine available or setup path: {0}")]
    PathUnresolvable(String),
    #[error(
        "mandatory device path {path:?} cannot be used, because it is NOT available as a new device for the volume group and NOT part of a valid and tagged existing volume group: {cause}"
    )]
    MandatoryPathUnusable { path: String, cause: String },
    #[error(
        "the volume group {vg} does not exist (or was not tagged properly with {LVMS_TAG:?}), and there were no available devices to create it"
    )]
    NoDevicesForVg { vg: String },
    #[error(
        "VG {vg} on node {node} is missing one or more devices. Please fix the VG on the node first and update LVMCluster to reflect current state"
    )]
    RemovalWithMissingDevices { vg: String, node: String },
    #[error("failed to resolve path {path}, {reason}")]
    RemovalPathUnresolvable { path: String, reason: Unresolved },
    #[error(
        "devices can't be deleted from VG {vg} because after deletion there will be less than 1 device in VG"
    )]
    RemovalWouldEmptyVg { vg: String },
    #[error("devices can't be deleted from VG {vg}: {source}")]
    RemovalBelowRaidMinimum { vg: String, source: RaidCountError },
    #[error("{0}")]
    RaidDeviceCount(RaidCountError),
}

/// Paths or optionalPaths are set: the discovery policy does not apply (LVMS
/// `hasExplicitDevicePaths`).
pub fn has_explicit_device_paths(spec: &LVMVolumeGroupSpec) -> bool {
    spec.device_selector
        .as_ref()
        .is_some_and(|s| !s.paths.is_empty() || !s.optional_paths.is_empty())
}

/// The policy that decides whether new devices join an existing VG: nil means Dynamic (classes
/// from before the field existed); RAID is always Static.
pub fn effective_policy(spec: &LVMVolumeGroupSpec) -> DeviceDiscoveryPolicySpec {
    if spec.raid_config.is_some() {
        return DeviceDiscoveryPolicySpec::Static;
    }
    spec.device_discovery_policy
        .unwrap_or(DeviceDiscoveryPolicySpec::Dynamic)
}

/// `status.deviceDiscoveryPolicy` (LVMS `setVolumeGroupStatus`).
pub fn policy_status(spec: &LVMVolumeGroupSpec) -> DeviceDiscoveryPolicyStatus {
    if has_explicit_device_paths(spec) {
        DeviceDiscoveryPolicyStatus::Preconfigured
    } else if matches!(
        spec.device_discovery_policy,
        None | Some(DeviceDiscoveryPolicySpec::Dynamic)
    ) {
        DeviceDiscoveryPolicyStatus::RuntimeDynamic
    } else {
        DeviceDiscoveryPolicyStatus::RuntimeStatic
    }
}

/// LVMS `validateRAIDDeviceCount`.
pub fn validate_raid_device_count(rc: &RaidConfig, count: usize) -> Result<(), RaidCountError> {
    let mirrors = rc.effective_mirrors();
    // Negative stripes are refused by the CRD (minimum 2); the level's default stands in.
    let stripes = rc.stripes.and_then(|s| u32::try_from(s).ok());
    let min = rc.raid_type.min_device_count(mirrors, stripes);
    if count < min as usize {
        return Err(RaidCountError::TooFew {
            raid_type: rc.raid_type.as_str(),
            min,
            got: count,
        });
    }
    if rc.raid_type == crate::api::RaidType::Raid10 {
        let group = mirrors + 1;
        if !count.is_multiple_of(group as usize) {
            return Err(if mirrors == 1 {
                RaidCountError::Raid10Odd { got: count }
            } else {
                RaidCountError::Raid10NotDivisible {
                    mirrors,
                    group,
                    got: count,
                }
            });
        }
    }
    Ok(())
}

/// LVMS `checkRAIDVGHealth`: run before wiping, so a broken RAID VG is never touched.
pub fn raid_health_check(
    spec: &LVMVolumeGroupSpec,
    vg_name: &str,
    node: &str,
    existing: Option<&ExistingVg>,
) -> Result<(), DiscoveryError> {
    if spec.raid_config.is_some() && existing.is_some_and(ExistingVg::is_missing_devices) {
        return Err(DiscoveryError::RaidMissingPvs {
            vg: vg_name.to_string(),
            node: node.to_string(),
        });
    }
    Ok(())
}

/// LVMS `VerifyMandatoryDevicePaths`: each `paths` entry is available or already in the VG.
pub fn verify_mandatory_paths(
    paths: &[String],
    resolved: &ResolvedPaths,
    devices: &FilteredDevices,
) -> Result<(), DiscoveryError> {
    for p in paths {
        let kname = resolved
            .resolve(p)
            .map_err(|e| DiscoveryError::PathUnresolvable(e.to_string()))?;
        let rejections = devices.rejections(kname);
        let already_set_up = rejections
            .iter()
            .any(|r| matches!(r, Rejection::AlreadySetUp { .. }));
        if devices.is_available(kname) || already_set_up {
            continue;
        }
        let cause = if rejections.is_empty() {
            format!(
                "the device did not exist on the host, make sure it is connected and visible via \"lsblk --json --paths -o {LSBLK_COLUMNS}\" and confirm it is discoverable via a path resolvable (e.g. via symlink) on the host"
            )
        } else {
            // Go's errors.Join separates with newlines.
            rejections
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        };
        return Err(DiscoveryError::MandatoryPathUnusable {
            path: kname.to_string(),
            cause,
        });
    }
    Ok(())
}

/// PVs of the VG that are no longer listed in paths/optionalPaths (LVMS `deleteRemovedDevices`),
/// with its refusals. Only when the selector lists paths.
pub fn devices_to_remove(
    spec: &LVMVolumeGroupSpec,
    vg_name: &str,
    node: &str,
    vg: &ExistingVg,
    resolved: &ResolvedPaths,
) -> Result<Vec<String>, DiscoveryError> {
    let Some(sel) = spec
        .device_selector
        .as_ref()
        .filter(|_| has_explicit_device_paths(spec))
    else {
        return Ok(Vec::new());
    };
    if vg.is_missing_devices() {
        return Err(DiscoveryError::RemovalWithMissingDevices {
            vg: vg_name.to_string(),
            node: node.to_string(),
        });
    }
    let mut wanted: Vec<&str> = Vec::new();
    for p in &sel.paths {
        let k = resolved
            .resolve(p)
            .map_err(|e| DiscoveryError::RemovalPathUnresolvable {
                path: p.clone(),
                reason: e.reason,
            })?;
        wanted.push(k);
    }
    // An optional path that does not resolve is just absent (the caller records only "not
    // there" as unresolved; any other lookup failure fails the pass before planning).
    wanted.extend(
        sel.optional_paths
            .iter()
            .filter_map(|p| resolved.resolve(p).ok()),
    );

    // A PV may be named /dev/mapper/x while the path resolves to /dev/dm-0, or the reverse.
    let remove: Vec<String> = vg
        .pvs
        .iter()
        .filter(|pv| {
            let direct = wanted.contains(&pv.pv_name.as_str());
            let via_resolution = resolved
                .resolve(&pv.pv_name)
                .is_ok_and(|r| wanted.contains(&r));
            !(direct || via_resolution)
        })
        .map(|pv| pv.pv_name.clone())
        .collect();
    if remove.is_empty() {
        return Ok(remove);
    }
    let remaining = vg.pvs.len() - remove.len();
    if remaining < 1 {
        return Err(DiscoveryError::RemovalWouldEmptyVg {
            vg: vg_name.to_string(),
        });
    }
    if let Some(rc) = &spec.raid_config {
        validate_raid_device_count(rc, remaining).map_err(|source| {
            DiscoveryError::RemovalBelowRaidMinimum {
                vg: vg_name.to_string(),
                source,
            }
        })?;
    }
    Ok(remove)
}

/// Inputs of one discovery decision.
#[derive(Clone, Copy, Debug)]
pub struct DiscoveryInput<'a> {
    pub node: &'a str,
    /// The LVMVolumeGroup's name (= VG name).
    pub vg_name: &'a str,
    pub spec: &'a LVMVolumeGroupSpec,
    pub resolved: &'a ResolvedPaths,
    /// The lvms-tagged VG of this name with its PVs, if it exists.
    pub existing_vg: Option<&'a ExistingVg>,
    /// LVMS passes `-y` to vgcreate when forceWipe is on and the per-node wiped annotation is
    /// still absent (`shouldWipeDevicesOnVolumeGroup`); see `wipe::should_wipe`.
    pub vgcreate_assume_yes: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VgAction {
    /// `vgcreate <vg> --addtag @lvms [-y] <knames>`
    Create {
        devices: Vec<String>,
        assume_yes: bool,
    },
    /// `vgextend <vg> <knames>`
    Extend { devices: Vec<String> },
}

impl VgAction {
    pub fn devices(&self) -> &[String] {
        match self {
            Self::Create { devices, .. } | Self::Extend { devices } => devices,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Set Failed (Degraded when the VG has PVs) with this reason; send `event` if any. Retry
    /// after `requeue_after`, or with error backoff when None.
    Fail {
        event: Option<EventReason>,
        error: DiscoveryError,
        requeue_after: Option<Duration>,
    },
    /// No new devices and the VG exists: vgreduce + pvremove each of `remove` (events
    /// DeviceRemoved / DeviceRemovalFailed), validate the thin pool, write lvmd.yaml, Ready.
    Steady {
        remove: Vec<String>,
        requeue_after: Option<Duration>,
    },
    /// New devices: set Progressing, then create or extend the VG, create/extend the thin pool
    /// and validate it, write lvmd.yaml, Ready; requeue after `RECONCILE_INTERVAL`.
    Grow {
        action: VgAction,
        requeue_after: Duration,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Discovery {
    pub plan: Plan,
    /// Filter results after the Static policy moved new devices to `excluded`: what status
    /// reports.
    pub devices: FilteredDevices,
    pub policy: DeviceDiscoveryPolicyStatus,
}

/// Decides the reconcile's course (LVMS `reconcile`, from the RAID health check on; the wipe is
/// the caller's, between the health check and filtering).
pub fn plan(input: &DiscoveryInput<'_>, mut devices: FilteredDevices) -> Discovery {
    let spec = input.spec;
    let policy = policy_status(spec);
    let done = |plan, devices| Discovery {
        plan,
        devices,
        policy,
    };
    let fail = |event, error, requeue_after| Plan::Fail {
        event,
        error,
        requeue_after,
    };

    if let Err(e) = raid_health_check(spec, input.vg_name, input.node, input.existing_vg) {
        return done(
            fail(
                Some(EventReason::RAIDHealthCheckFailed),
                e,
                Some(RAID_RECONCILE_INTERVAL),
            ),
            // LVMS reports no device details with this failure.
            FilteredDevices::default(),
        );
    }

    if let Some(sel) = &spec.device_selector
        && let Err(e) = verify_mandatory_paths(&sel.paths, input.resolved, &devices)
    {
        return done(
            fail(Some(EventReason::DevicePathCheckFailed), e, None),
            devices,
        );
    }

    let eff = effective_policy(spec);
    if !has_explicit_device_paths(spec)
        && eff == DeviceDiscoveryPolicySpec::Static
        && input.existing_vg.is_some()
        && !devices.available.is_empty()
    {
        for d in std::mem::take(&mut devices.available) {
            let reason = Rejection::StaticDiscovery {
                kname: d.kname.clone(),
                vg: input.vg_name.to_string(),
            };
            match devices.excluded.iter_mut().find(|e| e.kname == d.kname) {
                Some(e) => e.reasons.push(reason),
                None => devices.excluded.push(ExcludedBlockDevice {
                    name: d.name,
                    kname: d.kname,
                    reasons: vec![reason],
                }),
            }
        }
        devices.excluded.sort_by(|a, b| a.kname.cmp(&b.kname));
    }

    if devices.available.is_empty() {
        let Some(vg) = input.existing_vg else {
            return done(
                fail(
                    Some(EventReason::NoAvailableDevicesForVG),
                    DiscoveryError::NoDevicesForVg {
                        vg: input.vg_name.to_string(),
                    },
                    None,
                ),
                devices,
            );
        };
        return match devices_to_remove(spec, input.vg_name, input.node, vg, input.resolved) {
            // LVMS sends no event for a refused removal, only the status reason.
            Err(e) => done(fail(None, e, None), devices),
            Ok(remove) => {
                let requeue_after = if spec.raid_config.is_some() {
                    Some(RAID_RECONCILE_INTERVAL)
                } else if has_explicit_device_paths(spec) {
                    None
                } else if eff == DeviceDiscoveryPolicySpec::Dynamic {
                    Some(RECONCILE_INTERVAL)
                } else {
                    None
                };
                done(
                    Plan::Steady {
                        remove,
                        requeue_after,
                    },
                    devices,
                )
            }
        };
    }

    let new: Vec<String> = devices.available.iter().map(|d| d.kname.clone()).collect();
    if let Some(rc) = &spec.raid_config {
        let total = new.len() + input.existing_vg.map_or(0, |v| v.pvs.len());
        if let Err(e) = validate_raid_device_count(rc, total) {
            return done(
                fail(
                    Some(EventReason::NoAvailableDevicesForVG),
                    DiscoveryError::RaidDeviceCount(e),
                    None,
                ),
                devices,
            );
        }
    }
    let action = match input.existing_vg {
        Some(_) => VgAction::Extend { devices: new },
        None => VgAction::Create {
            devices: new,
            assume_yes: input.vgcreate_assume_yes,
        },
    };
    done(
        Plan::Grow {
            action,
            requeue_after: RECONCILE_INTERVAL,
        },
        devices,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{DeviceSelector, RaidType};
    use crate::node::lsblk::BlockDevice;
    use crate::node::report::PhysicalVolume;

    fn dev(kname: &str) -> BlockDevice {
        BlockDevice {
            name: kname.into(),
            kname: kname.into(),
            device_type: "disk".into(),
            ..Default::default()
        }
    }

    fn avail(knames: &[&str]) -> FilteredDevices {
        FilteredDevices {
            available: knames.iter().map(|k| dev(k)).collect(),
            excluded: vec![],
        }
    }

    fn vg(pvs: &[&str]) -> ExistingVg {
        ExistingVg {
            name: "vg1".into(),
            size: Some(100),
            free: None,
            tags: vec!["lvms".into()],
            pvs: pvs
                .iter()
                .map(|p| PhysicalVolume {
                    pv_name: p.to_string(),
                    vg_name: Some("vg1".into()),
                    ..Default::default()
                })
                .collect(),
        }
    }

    fn with_paths(paths: &[&str], optional: &[&str]) -> LVMVolumeGroupSpec {
        LVMVolumeGroupSpec {
            device_selector: Some(DeviceSelector {
                paths: paths.iter().map(|s| s.to_string()).collect(),
                optional_paths: optional.iter().map(|s| s.to_string()).collect(),
                force_wipe_devices_and_destroy_all_data: None,
            }),
            ..Default::default()
        }
    }

    fn input<'a>(
        spec: &'a LVMVolumeGroupSpec,
        resolved: &'a ResolvedPaths,
        existing: Option<&'a ExistingVg>,
    ) -> DiscoveryInput<'a> {
        DiscoveryInput {
            node: "node-a",
            vg_name: "vg1",
            spec,
            resolved,
            existing_vg: existing,
            vgcreate_assume_yes: false,
        }
    }

    fn raid(t: RaidType, mirrors: Option<i32>, stripes: Option<i32>) -> RaidConfig {
        RaidConfig {
            raid_type: t,
            mirrors,
            stripes,
            stripe_size: None,
        }
    }

    #[test]
    fn policy_status_follows_paths_then_policy() {
        let mut spec = LVMVolumeGroupSpec::default();
        assert_eq!(
            policy_status(&spec),
            DeviceDiscoveryPolicyStatus::RuntimeDynamic
        );
        spec.device_discovery_policy = Some(DeviceDiscoveryPolicySpec::Static);
        assert_eq!(
            policy_status(&spec),
            DeviceDiscoveryPolicyStatus::RuntimeStatic
        );
        spec.device_discovery_policy = Some(DeviceDiscoveryPolicySpec::Dynamic);
        assert_eq!(
            policy_status(&spec),
            DeviceDiscoveryPolicyStatus::RuntimeDynamic
        );
        let mut p = with_paths(&[], &["/dev/sdb"]);
        p.device_discovery_policy = Some(DeviceDiscoveryPolicySpec::Static);
        assert_eq!(
            policy_status(&p),
            DeviceDiscoveryPolicyStatus::Preconfigured
        );
        // An empty selector is not "explicit paths".
        assert!(!has_explicit_device_paths(&with_paths(&[], &[])));
    }

    #[test]
    fn effective_policy_nil_is_dynamic_and_raid_is_static() {
        let mut spec = LVMVolumeGroupSpec::default();
        assert_eq!(effective_policy(&spec), DeviceDiscoveryPolicySpec::Dynamic);
        spec.raid_config = Some(raid(RaidType::Raid1, None, None));
        spec.device_discovery_policy = Some(DeviceDiscoveryPolicySpec::Dynamic);
        assert_eq!(effective_policy(&spec), DeviceDiscoveryPolicySpec::Static);
    }

    #[test]
    fn raid_device_counts() {
        let r1 = raid(RaidType::Raid1, None, None);
        assert_eq!(
            validate_raid_device_count(&r1, 1).unwrap_err().to_string(),
            "raid1 requires at least 2 devices, got 1"
        );
        assert!(validate_raid_device_count(&r1, 2).is_ok());
        let r5 = raid(RaidType::Raid5, None, Some(3));
        assert!(validate_raid_device_count(&r5, 3).is_err());
        assert!(validate_raid_device_count(&r5, 4).is_ok());
        let r6 = raid(RaidType::Raid6, None, None);
        assert!(validate_raid_device_count(&r6, 4).is_err());
        assert!(validate_raid_device_count(&r6, 5).is_ok());
        let r10 = raid(RaidType::Raid10, None, None);
        assert!(validate_raid_device_count(&r10, 4).is_ok());
        assert_eq!(
            validate_raid_device_count(&r10, 5).unwrap_err().to_string(),
            "raid10 with mirrors=1 requires an even number of devices, got 5"
        );
        let r10m2 = raid(RaidType::Raid10, Some(2), None);
        assert_eq!(
            validate_raid_device_count(&r10m2, 7)
                .unwrap_err()
                .to_string(),
            "raid10 with mirrors=2 requires a device count divisible by 3, got 7"
        );
    }

    #[test]
    fn new_vg_is_created_from_available_devices() {
        let spec = with_paths(&["/dev/disk/by-id/a"], &[]);
        let mut r = ResolvedPaths::new();
        r.insert("/dev/disk/by-id/a", "/dev/sdb");
        let mut inp = input(&spec, &r, None);
        inp.vgcreate_assume_yes = true;
        let d = plan(&inp, avail(&["/dev/sdb"]));
        assert_eq!(
            d.plan,
            Plan::Grow {
                action: VgAction::Create {
                    devices: vec!["/dev/sdb".into()],
                    assume_yes: true
                },
                requeue_after: RECONCILE_INTERVAL
            }
        );
        assert_eq!(d.policy, DeviceDiscoveryPolicyStatus::Preconfigured);
    }

    #[test]
    fn missing_required_path_fails_with_device_path_check() {
        let spec = with_paths(&["/dev/disk/by-id/gone"], &[]);
        let mut r = ResolvedPaths::new();
        r.insert_error(
            "/dev/disk/by-id/gone",
            "lstat /dev/disk/by-id/gone: no such file or directory",
        );
        let d = plan(&input(&spec, &r, None), avail(&[]));
        let Plan::Fail { event, error, .. } = &d.plan else {
            panic!("{:?}", d.plan)
        };
        assert_eq!(*event, Some(EventReason::DevicePathCheckFailed));
        assert_eq!(
            error.to_string(),
            "failed to resolve symlink to determine available or setup path: /dev/disk/by-id/gone: lstat /dev/disk/by-id/gone: no such file or directory"
        );
    }

    #[test]
    fn required_path_that_resolves_but_is_absent_or_excluded() {
        let spec = with_paths(&["/dev/sdb"], &[]);
        let r = ResolvedPaths::identity(["/dev/sdb"]);
        let d = plan(&input(&spec, &r, None), avail(&[]));
        let Plan::Fail { error, .. } = &d.plan else {
            panic!()
        };
        assert!(error.to_string().starts_with(
            "mandatory device path \"/dev/sdb\" cannot be used, because it is NOT available as a new device for the volume group and NOT part of a valid and tagged existing volume group: the device did not exist on the host"
        ));

        let excluded = FilteredDevices {
            available: vec![],
            excluded: vec![ExcludedBlockDevice {
                name: "/dev/sdb".into(),
                kname: "/dev/sdb".into(),
                reasons: vec![
                    Rejection::ReadOnly {
                        name: "/dev/sdb".into(),
                    },
                    Rejection::HasChildren {
                        name: "/dev/sdb".into(),
                    },
                ],
            }],
        };
        let d = plan(&input(&spec, &r, None), excluded);
        let Plan::Fail { error, .. } = &d.plan else {
            panic!()
        };
        assert!(error.to_string().ends_with(
            ": /dev/sdb cannot be read-only\n/dev/sdb has children block devices and could not be considered"
        ));
    }

    #[test]
    fn required_path_already_in_the_vg_is_fine() {
        let spec = with_paths(&["/dev/sdb"], &[]);
        let r = ResolvedPaths::identity(["/dev/sdb"]);
        let existing = vg(&["/dev/sdb"]);
        let devices = FilteredDevices {
            available: vec![],
            excluded: vec![ExcludedBlockDevice {
                name: "/dev/sdb".into(),
                kname: "/dev/sdb".into(),
                reasons: vec![Rejection::AlreadySetUp {
                    name: "/dev/sdb".into(),
                    vg: "vg1".into(),
                }],
            }],
        };
        let d = plan(&input(&spec, &r, Some(&existing)), devices);
        assert_eq!(
            d.plan,
            Plan::Steady {
                remove: vec![],
                requeue_after: None
            }
        );
    }

    #[test]
    fn no_devices_and_no_vg_fails() {
        let spec = LVMVolumeGroupSpec::default();
        let r = ResolvedPaths::new();
        let d = plan(&input(&spec, &r, None), avail(&[]));
        let Plan::Fail { event, error, .. } = &d.plan else {
            panic!()
        };
        assert_eq!(*event, Some(EventReason::NoAvailableDevicesForVG));
        assert_eq!(
            error.to_string(),
            "the volume group vg1 does not exist (or was not tagged properly with \"@lvms\"), and there were no available devices to create it"
        );
    }

    #[test]
    fn static_policy_excludes_new_devices_once_the_vg_exists() {
        let spec = LVMVolumeGroupSpec {
            device_discovery_policy: Some(DeviceDiscoveryPolicySpec::Static),
            ..Default::default()
        };
        let r = ResolvedPaths::new();
        let existing = vg(&["/dev/sdb"]);
        let d = plan(&input(&spec, &r, Some(&existing)), avail(&["/dev/sdc"]));
        assert_eq!(
            d.plan,
            Plan::Steady {
                remove: vec![],
                requeue_after: None
            }
        );
        assert!(d.devices.available.is_empty());
        assert_eq!(
            d.devices.status_excluded()[0].reasons,
            vec!["/dev/sdc was not part of vg1 at creation (static device discovery enabled)"]
        );
        assert_eq!(d.policy, DeviceDiscoveryPolicyStatus::RuntimeStatic);

        // Before the VG exists, Static creates it from what it finds.
        let d = plan(&input(&spec, &r, None), avail(&["/dev/sdc"]));
        assert!(matches!(
            d.plan,
            Plan::Grow {
                action: VgAction::Create { .. },
                ..
            }
        ));
    }

    #[test]
    fn dynamic_and_nil_policy_extend_and_requeue() {
        for policy in [Some(DeviceDiscoveryPolicySpec::Dynamic), None] {
            let spec = LVMVolumeGroupSpec {
                device_discovery_policy: policy,
                ..Default::default()
            };
            let r = ResolvedPaths::new();
            let existing = vg(&["/dev/sdb"]);
            let d = plan(&input(&spec, &r, Some(&existing)), avail(&["/dev/sdc"]));
            assert_eq!(
                d.plan,
                Plan::Grow {
                    action: VgAction::Extend {
                        devices: vec!["/dev/sdc".into()]
                    },
                    requeue_after: RECONCILE_INTERVAL
                }
            );
            // Nothing new: Ready, but keep looking every 30s.
            let d = plan(&input(&spec, &r, Some(&existing)), avail(&[]));
            assert_eq!(
                d.plan,
                Plan::Steady {
                    remove: vec![],
                    requeue_after: Some(RECONCILE_INTERVAL)
                }
            );
        }
    }

    #[test]
    fn explicit_paths_override_static_policy() {
        let mut spec = with_paths(&["/dev/sdb"], &["/dev/sdc"]);
        spec.device_discovery_policy = Some(DeviceDiscoveryPolicySpec::Static);
        let r = ResolvedPaths::identity(["/dev/sdb", "/dev/sdc"]);
        let existing = vg(&["/dev/sdb"]);
        let devices = FilteredDevices {
            available: vec![dev("/dev/sdc")],
            excluded: vec![ExcludedBlockDevice {
                name: "/dev/sdb".into(),
                kname: "/dev/sdb".into(),
                reasons: vec![Rejection::AlreadySetUp {
                    name: "/dev/sdb".into(),
                    vg: "vg1".into(),
                }],
            }],
        };
        let d = plan(&input(&spec, &r, Some(&existing)), devices);
        assert!(matches!(
            d.plan,
            Plan::Grow {
                action: VgAction::Extend { .. },
                ..
            }
        ));
    }

    #[test]
    fn day2_removal_of_pvs_that_left_the_selector() {
        let spec = with_paths(&["/dev/disk/by-id/a"], &["/dev/sdd"]);
        let mut r = ResolvedPaths::new();
        r.insert("/dev/disk/by-id/a", "/dev/sdb")
            .insert_error("/dev/sdd", "gone");
        r.insert("/dev/sdb", "/dev/sdb")
            .insert("/dev/sdc", "/dev/sdc");
        let existing = vg(&["/dev/sdb", "/dev/sdc"]);
        assert_eq!(
            devices_to_remove(&spec, "vg1", "node-a", &existing, &r),
            Ok(vec!["/dev/sdc".to_string()])
        );
        // /dev/sdb is the VG's PV (already set up); /dev/sdc left the selector.
        let devices = FilteredDevices {
            available: vec![],
            excluded: vec![ExcludedBlockDevice {
                name: "/dev/sdb".into(),
                kname: "/dev/sdb".into(),
                reasons: vec![Rejection::AlreadySetUp {
                    name: "/dev/sdb".into(),
                    vg: "vg1".into(),
                }],
            }],
        };
        let d = plan(&input(&spec, &r, Some(&existing)), devices);
        assert_eq!(
            d.plan,
            Plan::Steady {
                remove: vec!["/dev/sdc".into()],
                requeue_after: None
            }
        );
    }

    #[test]
    fn day2_removal_matches_pv_names_through_symlinks() {
        // PV recorded as /dev/mapper/luks-1, the path resolves to /dev/dm-0.
        let spec = with_paths(&["/dev/disk/by-id/dm-uuid-luks"], &[]);
        let mut r = ResolvedPaths::new();
        r.insert("/dev/disk/by-id/dm-uuid-luks", "/dev/dm-0")
            .insert("/dev/mapper/luks-1", "/dev/dm-0");
        let existing = vg(&["/dev/mapper/luks-1"]);
        assert_eq!(
            devices_to_remove(&spec, "vg1", "n", &existing, &r),
            Ok(vec![])
        );
    }

    #[test]
    fn day2_removal_refusals() {
        let r = ResolvedPaths::identity(["/dev/sdb", "/dev/sdc", "/dev/sdd"]);
        // Nothing would remain.
        let spec = with_paths(&["/dev/sdd"], &[]);
        let existing = vg(&["/dev/sdb", "/dev/sdc"]);
        assert_eq!(
            devices_to_remove(&spec, "vg1", "n", &existing, &r)
                .unwrap_err()
                .to_string(),
            "devices can't be deleted from VG vg1 because after deletion there will be less than 1 device in VG"
        );
        // A member PV is missing.
        let mut broken = vg(&["/dev/sdb", "/dev/sdc"]);
        broken.pvs[1].missing = true;
        let spec = with_paths(&["/dev/sdb"], &[]);
        assert_eq!(
            devices_to_remove(&spec, "vg1", "node-a", &broken, &r)
                .unwrap_err()
                .to_string(),
            "VG vg1 on node node-a is missing one or more devices. Please fix the VG on the node first and update LVMCluster to reflect current state"
        );
        // Below the RAID minimum.
        let mut spec = with_paths(&["/dev/sdb"], &[]);
        spec.raid_config = Some(raid(RaidType::Raid1, None, None));
        assert_eq!(
            devices_to_remove(&spec, "vg1", "n", &existing, &r)
                .unwrap_err()
                .to_string(),
            "devices can't be deleted from VG vg1: raid1 requires at least 2 devices, got 1"
        );
        // A required path that does not resolve.
        let spec = with_paths(&["/dev/nope"], &[]);
        assert!(matches!(
            devices_to_remove(&spec, "vg1", "n", &existing, &r),
            Err(DiscoveryError::RemovalPathUnresolvable { .. })
        ));
        // No paths at all: no removal.
        let spec = LVMVolumeGroupSpec::default();
        assert_eq!(
            devices_to_remove(&spec, "vg1", "n", &existing, &r),
            Ok(vec![])
        );
    }

    #[test]
    fn refused_removal_is_a_failure_without_event() {
        let spec = with_paths(&["/dev/sdd"], &[]);
        let r = ResolvedPaths::identity(["/dev/sdb", "/dev/sdd"]);
        let existing = vg(&["/dev/sdb"]);
        // /dev/sdd is in the selector but not found: verify_mandatory_paths fails first.
        let d = plan(&input(&spec, &r, Some(&existing)), avail(&[]));
        assert!(matches!(
            d.plan,
            Plan::Fail {
                event: Some(EventReason::DevicePathCheckFailed),
                ..
            }
        ));
        // Optional-only selector: the removal refusal itself surfaces.
        let spec = with_paths(&[], &["/dev/sdd"]);
        let d = plan(&input(&spec, &r, Some(&existing)), avail(&[]));
        assert!(matches!(
            d.plan,
            Plan::Fail {
                event: None,
                error: DiscoveryError::RemovalWouldEmptyVg { .. },
                ..
            }
        ));
    }

    #[test]
    fn raid_health_and_count() {
        let mut spec = with_paths(&["/dev/sdb", "/dev/sdc"], &[]);
        spec.raid_config = Some(raid(RaidType::Raid1, None, None));
        let r = ResolvedPaths::identity(["/dev/sdb", "/dev/sdc"]);
        let mut broken = vg(&["/dev/sdb", "/dev/sdc"]);
        broken.pvs[0].missing = true;
        let d = plan(&input(&spec, &r, Some(&broken)), avail(&[]));
        assert!(matches!(
            d.plan,
            Plan::Fail {
                event: Some(EventReason::RAIDHealthCheckFailed),
                requeue_after: Some(RAID_RECONCILE_INTERVAL),
                ..
            }
        ));
        // Only one of two required devices available: the path check catches it first; with
        // optional paths the RAID count does.
        let mut spec = with_paths(&[], &["/dev/sdb", "/dev/sdc"]);
        spec.raid_config = Some(raid(RaidType::Raid1, None, None));
        let d = plan(&input(&spec, &r, None), avail(&["/dev/sdb"]));
        let Plan::Fail { event, error, .. } = &d.plan else {
            panic!()
        };
        assert_eq!(*event, Some(EventReason::NoAvailableDevicesForVG));
        assert_eq!(
            error.to_string(),
            "raid1 requires at least 2 devices, got 1"
        );
        // Healthy steady RAID requeues every 60s.
        let healthy = vg(&["/dev/sdb", "/dev/sdc"]);
        let d = plan(&input(&spec, &r, Some(&healthy)), avail(&[]));
        assert_eq!(
            d.plan,
            Plan::Steady {
                remove: vec![],
                requeue_after: Some(RAID_RECONCILE_INTERVAL)
            }
        );
    }
}
