//! What this node reports: each volume-group actor puts its VGStatus here; the node-status
//! unit writes the lot to `LVMVolumeGroupNodeStatus/<node>` (spec.nodeStatus is one list, so
//! one writer).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use lvms_actors::Trigger;

use crate::api::VGStatus;

#[derive(Clone, Default)]
pub struct NodeReport {
    entries: Arc<Mutex<BTreeMap<String, VGStatus>>>,
    /// Which volume groups this life has heard from (set or removed), and which it runs
    /// (the registry's; `None` until its first pass): a report is complete once every one it
    /// runs has spoken.
    heard: Arc<Mutex<Heard>>,
    /// Bumped on every change: the node-status unit.
    pub changed: Trigger,
}

#[derive(Default)]
struct Heard {
    from: BTreeSet<String>,
    expected: Option<BTreeSet<String>>,
}

impl NodeReport {
    /// Whether `vg` was heard from for the first time.
    fn heard_from(&self, vg: &str) -> bool {
        self.heard
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .from
            .insert(vg.to_string())
    }

    pub fn set(&self, status: VGStatus) {
        // Poisoned or not, the map is whole (see `snapshot`): never drop an update.
        let mut m = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let changed = m.insert(status.name.clone(), status.clone()).as_ref() != Some(&status);
        drop(m);
        if self.heard_from(&status.name) || changed {
            self.changed.bump("vg-status");
        }
    }

    pub fn remove(&self, vg: &str) {
        let removed = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(vg)
            .is_some();
        if self.heard_from(vg) || removed {
            self.changed.bump("vg-removed");
        }
    }

    /// The volume groups whose actors run on this node (the registry, each pass).
    pub fn expect(&self, vgs: &BTreeSet<String>) {
        let mut h = self
            .heard
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if h.expected.as_ref() != Some(vgs) {
            h.expected = Some(vgs.clone());
            drop(h);
            self.changed.bump("vg-expected");
        }
    }

    /// Ok once every volume group this node runs has reported in this life; else who is
    /// still to. Before that, the report is what this life has not seen yet, not "no volume
    /// groups": a restarted vg-manager must not wipe what its node status says.
    pub fn complete(&self) -> Result<(), String> {
        let h = self
            .heard
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(expected) = &h.expected else {
            return Err("the volume-group registry's first pass".into());
        };
        let missing: Vec<&str> = expected
            .iter()
            .filter(|v| !h.from.contains(*v))
            .map(String::as_str)
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("volume group(s) {}", missing.join(", ")))
        }
    }

    /// Sorted by VG name (stable writes). Never an empty list because a panic elsewhere
    /// poisoned the lock (it would be written out as "no volume groups"): each change under
    /// the lock is a single insert or remove, so the map is whole either way.
    pub fn snapshot(&self) -> Vec<VGStatus> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_never_reads_as_no_volume_groups() {
        let entry = |name: &str| VGStatus {
            name: name.into(),
            ..Default::default()
        };
        let report = NodeReport::default();
        report.set(entry("vg1"));
        let entries = report.entries.clone();
        let _ = std::thread::spawn(move || {
            let _held = entries.lock().unwrap();
            panic!("poisons the lock (expected in this test)");
        })
        .join();
        assert!(report.entries.is_poisoned());
        assert_eq!(report.snapshot(), vec![entry("vg1")]);
        report.set(entry("vg2"));
        report.remove("vg1");
        assert_eq!(report.snapshot(), vec![entry("vg2")]);
    }

    #[test]
    fn a_report_is_complete_once_every_volume_group_run_has_spoken() {
        let report = NodeReport::default();
        assert!(
            report.complete().is_err(),
            "before the registry's first pass"
        );
        let vgs: BTreeSet<String> = ["vg1", "vg2"].map(String::from).into();
        report.expect(&vgs);
        assert_eq!(report.complete(), Err("volume group(s) vg1, vg2".into()));
        report.set(VGStatus {
            name: "vg1".into(),
            ..Default::default()
        });
        assert_eq!(report.complete(), Err("volume group(s) vg2".into()));
        // A removal is an answer too (its LVMVolumeGroup gone, or torn down).
        report.remove("vg2");
        assert_eq!(report.complete(), Ok(()));
        // A node that runs none is complete at once.
        let empty = NodeReport::default();
        empty.expect(&BTreeSet::new());
        assert_eq!(empty.complete(), Ok(()));
    }
}
