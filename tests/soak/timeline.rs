//! Cycle boundaries on the wall clock.

use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Wall-clock boundaries: cycle 0 is the setup, cycle k starts at `starts[k]`.
#[derive(Default)]
pub(crate) struct Timeline {
    starts: Vec<u64>,
    /// When the cycle's LVMCluster was created and when its delete was issued.
    pub(crate) live: Vec<(Option<u64>, Option<u64>)>,
}

impl Timeline {
    pub(crate) fn begin(&mut self) -> usize {
        self.starts.push(now_ms());
        self.live.push((None, None));
        self.starts.len() - 1
    }

    /// When cycle `k` began (its records are those at or after it: cycles end at rest).
    pub(crate) fn start_ms(&self, k: usize) -> u64 {
        self.starts.get(k).copied().unwrap_or(0)
    }

    pub(crate) fn cycle_of(&self, ms: u64) -> usize {
        self.starts.partition_point(|s| *s <= ms).saturating_sub(1)
    }

    pub(crate) fn offset(&self, ms: u64) -> String {
        let c = self.cycle_of(ms);
        format!(
            "cycle {c} +{:.1}s",
            ms.saturating_sub(self.starts[c]) as f64 / 1000.0
        )
    }

    /// The cycles whose objects an object first seen at `ms` may be: its own, and for one
    /// created while no cluster was live (e.g. a node status a restarted vg-manager wrote
    /// between cycles, reported on its own) also the next, whose cluster adopts it.
    pub(crate) fn object_cycles(&self, ms: u64) -> std::ops::RangeInclusive<usize> {
        let c = self.cycle_of(ms);
        if self.cluster_live_at(ms) {
            c..=c
        } else {
            c..=c + 1
        }
    }

    /// Was a cluster of the cycle containing `ms` live (created, delete not yet issued)?
    pub(crate) fn cluster_live_at(&self, ms: u64) -> bool {
        match self.live.get(self.cycle_of(ms)) {
            Some((Some(created), teardown)) => *created <= ms && teardown.is_none_or(|t| ms < t),
            _ => false,
        }
    }
}
