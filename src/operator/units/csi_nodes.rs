//! `csi-node-registrations`: not done until kubelet lists topolvm.io in the CSINode of every
//! node that runs vg-manager (LVMS reports an error until then; so do we).

use std::collections::BTreeSet;
use std::sync::Arc;

use lvms_actors::{Done, Pass, Replayed, Steps, Unit, UnitError};
use lvms_journal::Intent;

use crate::operator::context::{Ctx, object_ref};
use crate::operator::desired::csi_driver::CSI_DRIVER_NAME;
use crate::operator::nodes::valid_nodes_for_any_class;

pub const UNIT: &str = crate::operator::table::UnitId::CsiNodes.name();

pub struct CsiNodesUnit {
    pub ctx: Arc<Ctx>,
}

/// Nodes (sorted) that should have the driver registered but do not.
pub fn unregistered(expected: &[String], registered: &BTreeSet<String>) -> Vec<String> {
    expected
        .iter()
        .filter(|n| !registered.contains(*n))
        .cloned()
        .collect()
}

impl Unit for CsiNodesUnit {
    fn name(&self) -> &str {
        UNIT
    }

    async fn reconcile(&self, steps: &Steps) -> Result<Pass, UnitError> {
        let Some(cluster) = self.ctx.primary() else {
            return Ok(Pass::default());
        };
        if cluster.metadata.deletion_timestamp.is_some() {
            return Ok(Pass {
                summary: "LVMCluster is being deleted".into(),
                requeue_after: None,
            });
        }
        steps.begin(object_ref(cluster.as_ref()));
        let world = self.ctx.world();
        let mut expected: Vec<String> = valid_nodes_for_any_class(&cluster, &world.nodes)
            .nodes
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        expected.sort();
        let registered: BTreeSet<String> = world
            .csi_nodes
            .iter()
            .filter(|n| n.spec.drivers.iter().any(|d| d.name == CSI_DRIVER_NAME))
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        let missing = unregistered(&expected, &registered);
        if !missing.is_empty() {
            let shown: Vec<_> = missing.iter().take(5).cloned().collect();
            let more = missing.len().saturating_sub(shown.len());
            return Err(UnitError::retryable(
                "CSINodeRegistrationPending",
                format!(
                    "{CSI_DRIVER_NAME} is not registered with kubelet on {} of {} node(s): {}{}",
                    missing.len(),
                    expected.len(),
                    shown.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                ),
            ));
        }
        Ok(Pass {
            summary: format!("{CSI_DRIVER_NAME} registered on {} node(s)", expected.len()),
            requeue_after: None,
        })
    }

    async fn replay(&self, _intent: &Intent, _steps: &Steps) -> Result<Done, UnitError> {
        // A check-only unit journals passes, never steps: nothing to resolve.
        Ok(Done::replayed(Replayed::Rechecked))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_only_missing_nodes() {
        let expected = vec!["a".to_string(), "b".into(), "c".into()];
        let registered = BTreeSet::from(["b".to_string(), "z".into()]);
        assert_eq!(unregistered(&expected, &registered), vec!["a", "c"]);
    }
}
