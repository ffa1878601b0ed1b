//! Which LVMCluster generation each unit's latest pass reconciled. The status reports a
//! generation as observed only once the units ResourcesAvailable waits for have reconciled it
//! (LVMS writes status at the end of its reconcile, after every resource): written earlier, the
//! conditions claimed an edit the DaemonSet did not carry yet, and the status write competed
//! with the edit's own object writes for the API server.
//!
//! In memory only: after a restart every unit's first pass records its generation again.

use std::collections::BTreeMap;
use std::sync::Mutex;

use lvms_journal::ObjectRef;

use crate::api::LVMCluster;

/// unit → (cluster uid, generation) of its latest pass over an LVMCluster.
#[derive(Debug, Default)]
pub struct PassedGenerations(Mutex<BTreeMap<String, (String, i64)>>);

impl PassedGenerations {
    /// The pass hook that records each pass and wakes the status unit (`status`) after every
    /// other unit's pass that journaled or moved to a new generation: that pass may be the
    /// last one a held status waits for, even when it wrote nothing.
    pub fn status_waker(
        self: std::sync::Arc<Self>,
        status: Option<lvms_actors::Trigger>,
    ) -> lvms_actors::PassHook {
        let status_unit = crate::operator::table::UnitId::Status.name();
        std::sync::Arc::new(move |pass: &lvms_actors::PassReport<'_>| {
            let moved = pass.subject.is_some_and(|s| self.record(pass.unit, s));
            if pass.unit != status_unit
                && (pass.journaled || moved)
                && let Some(t) = &status
            {
                t.bump(pass.unit);
            }
        })
    }

    /// Record a finished pass (successful or not: a failed pass has reconciled the generation
    /// too, and its failure is what the status must report). True when the unit moved to
    /// another generation or cluster.
    pub fn record(&self, unit: &str, subject: &ObjectRef) -> bool {
        use kube::Resource;
        if subject.kind != LVMCluster::kind(&()) {
            return false;
        }
        let Ok(mut passed) = self.0.lock() else {
            return false;
        };
        let now = (subject.uid.clone(), subject.generation);
        passed.insert(unit.to_owned(), now.clone()) != Some(now)
    }

    /// The `units` whose latest pass was not over generation `generation` (or later) of the
    /// cluster `uid`.
    pub fn behind<'a>(
        &self,
        units: impl IntoIterator<Item = &'a str>,
        uid: &str,
        generation: i64,
    ) -> Vec<&'a str> {
        let Ok(passed) = self.0.lock() else {
            return units.into_iter().collect();
        };
        units
            .into_iter()
            .filter(|u| {
                passed
                    .get(*u)
                    .is_none_or(|(id, g)| id != uid || *g < generation)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(uid: &str, generation: i64) -> ObjectRef {
        ObjectRef {
            kind: "LVMCluster".into(),
            namespace: "ns".into(),
            name: "c".into(),
            uid: uid.into(),
            generation,
        }
    }

    #[test]
    fn a_unit_is_behind_until_its_pass_covers_the_generation_of_that_cluster() {
        let passed = PassedGenerations::default();
        let units = ["vg-manager", "topolvm-storageclass"];
        assert_eq!(passed.behind(units, "a", 1), units);
        assert!(passed.record("vg-manager", &cluster("a", 1)));
        assert!(
            !passed.record("vg-manager", &cluster("a", 1)),
            "same pass again"
        );
        assert_eq!(passed.behind(units, "a", 1), ["topolvm-storageclass"]);
        assert!(passed.record("topolvm-storageclass", &cluster("a", 2)));
        assert_eq!(passed.behind(units, "a", 2), ["vg-manager"]);
        // Another cluster of the same name (deleted and created again) starts over.
        assert_eq!(passed.behind(units, "b", 1), units);
        // Passes over other kinds are not a cluster's generation.
        let other = ObjectRef {
            kind: "Node".into(),
            ..cluster("a", 9)
        };
        assert!(!passed.record("vg-manager", &other));
        assert_eq!(passed.behind(units, "a", 2), ["vg-manager"]);
    }
}
