//! What this node reports: each volume-group actor puts its VGStatus here; the node-status
//! unit writes the lot to `LVMVolumeGroupNodeStatus/<node>` (spec.nodeStatus is one list, so
//! one writer).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use lvms_actors::Trigger;

use crate::api::VGStatus;

#[derive(Clone, Default)]
pub struct NodeReport {
    entries: Arc<Mutex<BTreeMap<String, VGStatus>>>,
    /// Bumped on every change: the node-status unit.
    pub changed: Trigger,
}

impl NodeReport {
    pub fn set(&self, status: VGStatus) {
        // Poisoned or not, the map is whole (see `snapshot`): never drop an update.
        let mut m = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let changed = m.insert(status.name.clone(), status.clone()).as_ref() != Some(&status);
        drop(m);
        if changed {
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
        if removed {
            self.changed.bump("vg-removed");
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
}
