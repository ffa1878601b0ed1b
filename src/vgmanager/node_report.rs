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
        let changed = match self.entries.lock() {
            Ok(mut m) => m.insert(status.name.clone(), status.clone()).as_ref() != Some(&status),
            Err(_) => false,
        };
        if changed {
            self.changed.bump("vg-status");
        }
    }

    pub fn remove(&self, vg: &str) {
        let removed = self
            .entries
            .lock()
            .map(|mut m| m.remove(vg).is_some())
            .unwrap_or(false);
        if removed {
            self.changed.bump("vg-removed");
        }
    }

    /// Sorted by VG name (stable writes).
    pub fn snapshot(&self) -> Vec<VGStatus> {
        self.entries
            .lock()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }
}
