//! forceWipeDevicesAndDestroyAllData (LVMS `wipe_devices.go`): once per node, before the devices
//! are filtered, remove device-mapper mappings on top of each selected device and wipe its
//! signatures. The per-node annotation on the LVMVolumeGroup records that it happened.

use std::collections::BTreeMap;

use thiserror::Error;

use crate::api::LVMVolumeGroupSpec;

use crate::node::lsblk::{BlockDevice, TYPE_PART};
use crate::node::vg::resolve::ResolvedPaths;

/// Annotation prefix; the key is `<prefix><node>`.
pub const WIPED_ANNOTATION_PREFIX: &str = "wiped.devices.lvms.openshift.io/";

pub fn wiped_annotation_key(node: &str) -> String {
    format!("{WIPED_ANNOTATION_PREFIX}{node}")
}

/// The annotation value LVMS writes (`at` is an RFC 3339 timestamp).
pub fn wiped_annotation_value(at: &str) -> String {
    format!(
        "the devices of this volume group have been wiped at {at} by lvms according to policy. This marker serves as indicator that the devices have been wiped before and should not be wiped again. removal of this annotation is unsupported and may lead to data loss due to additional wiping."
    )
}

/// Wipe only when forceWipe is true and this node has not wiped before (LVMS
/// `shouldWipeDevicesOnVolumeGroup`).
pub fn should_wipe(
    spec: &LVMVolumeGroupSpec,
    annotations: &BTreeMap<String, String>,
    node: &str,
) -> bool {
    let force = spec
        .device_selector
        .as_ref()
        .and_then(|s| s.force_wipe_devices_and_destroy_all_data)
        .unwrap_or(false);
    force && !annotations.contains_key(&wiped_annotation_key(node))
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WipeStep {
    /// `dmsetup remove --force <kname>` ("not found" in its output is fine).
    DmsetupRemove(String),
    /// `wipefs --all --force <kname>`
    Wipefs(String),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WipePlan {
    /// In order: every mapping under a device (innermost first), then the device.
    pub steps: Vec<WipeStep>,
    /// Devices not wiped, with the reason (a mounted filesystem in the tree).
    pub refused: Vec<(String, String)>,
}

impl WipePlan {
    /// At least one device is wiped: set the annotation afterwards.
    pub fn wipes_anything(&self) -> bool {
        self.steps.iter().any(|s| matches!(s, WipeStep::Wipefs(_)))
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
#[error("failed to wipe device {path}: {reason}")]
pub struct WipeError {
    pub path: String,
    pub reason: String,
}

/// Steps for every selected path found in the lsblk tree. A required path that does not resolve
/// stops the wipe; an optional one is skipped; a path not in the tree is nothing to wipe. lvms
/// adds one refusal LVMS lacks: a device with a mounted filesystem anywhere in its tree is
/// never wiped.
pub fn wipe_plan(
    spec: &LVMVolumeGroupSpec,
    resolved: &ResolvedPaths,
    devices: &[BlockDevice],
) -> Result<WipePlan, WipeError> {
    let mut plan = WipePlan::default();
    let Some(sel) = &spec.device_selector else {
        return Ok(plan);
    };
    let mut targets: Vec<&str> = Vec::new();
    for p in &sel.paths {
        let k = resolved.resolve(p).map_err(|e| WipeError {
            path: p.clone(),
            reason: e.to_string(),
        })?;
        targets.push(k);
    }
    // An optional path that does not resolve is not wiped: the safe side.
    targets.extend(
        sel.optional_paths
            .iter()
            .filter_map(|p| resolved.resolve(p).ok()),
    );

    let mut done: Vec<&str> = Vec::new();
    for kname in targets {
        if done.contains(&kname) {
            continue;
        }
        done.push(kname);
        let Some(dev) = find(devices, kname) else {
            continue;
        };
        let mounted = dev.mounted_in_tree();
        if !mounted.is_empty() {
            plan.refused.push((
                dev.kname.clone(),
                format!(
                    "{} has a mounted filesystem ({}) and is not wiped; unmount it or remove it from the device selector",
                    dev.name,
                    mounted.join(", ")
                ),
            ));
            continue;
        }
        for child in &dev.children {
            remove_mappings(child, &mut plan.steps);
        }
        plan.steps.push(WipeStep::Wipefs(dev.kname.clone()));
    }
    Ok(plan)
}

fn find<'a>(devices: &'a [BlockDevice], kname: &str) -> Option<&'a BlockDevice> {
    devices.iter().find_map(|d| {
        if d.kname == kname {
            Some(d)
        } else {
            find(&d.children, kname)
        }
    })
}

/// Innermost first; partitions are not mappings and are left to wipefs.
fn remove_mappings(dev: &BlockDevice, steps: &mut Vec<WipeStep>) {
    for c in &dev.children {
        remove_mappings(c, steps);
    }
    if dev.device_type != TYPE_PART {
        steps.push(WipeStep::DmsetupRemove(dev.kname.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::DeviceSelector;
    use crate::node::lsblk::parse_lsblk;

    fn spec(paths: &[&str], optional: &[&str], force: Option<bool>) -> LVMVolumeGroupSpec {
        LVMVolumeGroupSpec {
            device_selector: Some(DeviceSelector {
                paths: paths.iter().map(|s| s.to_string()).collect(),
                optional_paths: optional.iter().map(|s| s.to_string()).collect(),
                force_wipe_devices_and_destroy_all_data: force,
            }),
            ..Default::default()
        }
    }

    fn tree() -> Vec<BlockDevice> {
        parse_lsblk(
            r#"{"blockdevices":[
            {"name":"/dev/sdb","kname":"/dev/sdb","type":"disk","children":[
                {"name":"/dev/sdb1","kname":"/dev/sdb1","type":"part","children":[
                    {"name":"/dev/mapper/old-lv","kname":"/dev/dm-0","type":"lvm"}]},
                {"name":"/dev/mapper/luks","kname":"/dev/dm-1","type":"crypt","children":[
                    {"name":"/dev/mapper/inner","kname":"/dev/dm-2","type":"lvm"}]}]},
            {"name":"/dev/sdc","kname":"/dev/sdc","type":"disk","children":[
                {"name":"/dev/sdc1","kname":"/dev/sdc1","type":"part","mountpoint":"/data"}]},
            {"name":"/dev/sdd","kname":"/dev/sdd","type":"disk"}]}"#,
        )
        .unwrap()
    }

    #[test]
    fn should_wipe_only_once_per_node_and_only_when_forced() {
        let none = BTreeMap::new();
        assert!(!should_wipe(&LVMVolumeGroupSpec::default(), &none, "n1"));
        assert!(!should_wipe(&spec(&["/dev/sdb"], &[], None), &none, "n1"));
        assert!(!should_wipe(
            &spec(&["/dev/sdb"], &[], Some(false)),
            &none,
            "n1"
        ));
        let s = spec(&["/dev/sdb"], &[], Some(true));
        assert!(should_wipe(&s, &none, "n1"));
        let done = BTreeMap::from([(wiped_annotation_key("n1"), "x".to_string())]);
        assert!(!should_wipe(&s, &done, "n1"));
        assert!(should_wipe(&s, &done, "n2"));
        assert_eq!(
            wiped_annotation_key("n1"),
            "wiped.devices.lvms.openshift.io/n1"
        );
        assert!(
            wiped_annotation_value("2026-01-01T00:00:00Z")
                .contains("wiped at 2026-01-01T00:00:00Z")
        );
    }

    #[test]
    fn mappings_removed_innermost_first_then_wipefs() {
        let s = spec(&["/dev/disk/by-id/b"], &[], Some(true));
        let mut r = ResolvedPaths::new();
        r.insert("/dev/disk/by-id/b", "/dev/sdb");
        let plan = wipe_plan(&s, &r, &tree()).unwrap();
        assert_eq!(
            plan.steps,
            vec![
                WipeStep::DmsetupRemove("/dev/dm-0".into()),
                WipeStep::DmsetupRemove("/dev/dm-2".into()),
                WipeStep::DmsetupRemove("/dev/dm-1".into()),
                WipeStep::Wipefs("/dev/sdb".into()),
            ]
        );
        assert!(plan.wipes_anything());
    }

    #[test]
    fn missing_optional_path_is_tolerated_required_is_not() {
        let mut r = ResolvedPaths::new();
        r.insert("/dev/sdd", "/dev/sdd")
            .insert_error("/dev/gone", "no such file or directory");
        let s = spec(&["/dev/sdd"], &["/dev/gone"], Some(true));
        let plan = wipe_plan(&s, &r, &tree()).unwrap();
        assert_eq!(plan.steps, vec![WipeStep::Wipefs("/dev/sdd".into())]);
        let s = spec(&["/dev/gone"], &[], Some(true));
        assert_eq!(
            wipe_plan(&s, &r, &tree()).unwrap_err().to_string(),
            "failed to wipe device /dev/gone: /dev/gone: no such file or directory"
        );
        // Resolves, but lsblk does not show it: nothing to wipe, no annotation.
        let mut r = ResolvedPaths::new();
        r.insert("/dev/sdx", "/dev/sdx");
        let plan = wipe_plan(&spec(&["/dev/sdx"], &[], Some(true)), &r, &tree()).unwrap();
        assert!(!plan.wipes_anything());
    }

    #[test]
    fn mounted_device_is_never_wiped() {
        let r = ResolvedPaths::identity(["/dev/sdc", "/dev/sdd"]);
        let plan = wipe_plan(
            &spec(&["/dev/sdc", "/dev/sdd"], &[], Some(true)),
            &r,
            &tree(),
        )
        .unwrap();
        assert_eq!(plan.steps, vec![WipeStep::Wipefs("/dev/sdd".into())]);
        assert_eq!(plan.refused.len(), 1);
        assert!(plan.refused[0].1.contains("(/data)"));
    }
}
