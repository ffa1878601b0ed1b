//! `persistent-volume-claim` (LVMS's PVC helper): a Pending claim on `lvms-<class>` that no
//! node's capacity annotation can hold gets a Warning `NotEnoughCapacity`, once per claim and
//! requested size; Pending claims are looked at again every 15 s, as LVMS does, and whenever
//! a Node's capacity annotations move.

use std::sync::Arc;

use lvms_actors::{Action, Done, Pass, StepSpec, Steps, Unit, UnitError};
use lvms_journal::{EventNote, Intent, Replayed};
use tracing::warn;

use crate::operator::context::{Ctx, object_ref};
use crate::operator::volumes::actions::VolumeHelperAction as A;
use crate::operator::volumes::claims::{
    REASON_NOT_ENOUGH_CAPACITY, RECHECK, not_enough_capacity, pending_lvms_claim,
};

pub const UNIT: &str = crate::operator::table::UnitId::PersistentVolumeClaims.name();

pub struct PersistentVolumeClaimsUnit {
    pub ctx: Arc<Ctx>,
}

impl Unit for PersistentVolumeClaimsUnit {
    fn name(&self) -> &str {
        UNIT
    }

    async fn reconcile(&self, steps: &Steps) -> Result<Pass, UnitError> {
        super::begin_volume_helper_pass(steps, "PersistentVolumeClaim");
        let nodes = self.ctx.caches.nodes.state();
        let (mut pending, mut first_err) = (0usize, None);
        for pvc in self.ctx.caches.pvcs.state() {
            let Some((_, _, bytes)) = pending_lvms_claim(&pvc) else {
                continue;
            };
            pending += 1;
            let note = match not_enough_capacity(&pvc, &nodes) {
                Ok(Some(note)) => note,
                Ok(None) => continue,
                Err(e) => {
                    warn!(error = %e, "capacity annotation unreadable");
                    first_err.get_or_insert(UnitError::retryable("CapacityUnreadable", e));
                    continue;
                }
            };
            let object = object_ref(pvc.as_ref());
            // The key holds the claim's uid and request: a claim resized while Pending is news.
            let spec = StepSpec::new(object.clone(), A::ReportNotEnoughCapacity)
                .digest(format!("{}/{bytes}", object.uid));
            steps
                .run_once(spec, || async {
                    Ok(Done::event(EventNote::warning(
                        REASON_NOT_ENOUGH_CAPACITY,
                        note,
                    )))
                })
                .await?;
        }
        if let Some(e) = first_err {
            return Err(e.with_retry_after(RECHECK));
        }
        Ok(Pass {
            summary: format!("{pending} Pending lvms claim(s)"),
            requeue_after: (pending > 0).then_some(RECHECK),
        })
    }

    /// The report is the Event: if the claim still cannot be placed it is published now, with
    /// what the nodes say now; otherwise the moment has passed.
    async fn replay(&self, intent: &Intent, _steps: &Steps) -> Result<Done, UnitError> {
        let action = intent
            .action_as::<A>()
            .map_err(|e| UnitError::permanent("UnknownAction", e.to_string()))?;
        if action != A::ReportNotEnoughCapacity {
            return Err(UnitError::permanent(
                "UnknownAction",
                format!("{} is not a step of {UNIT}", action.name()),
            ));
        }
        let o = &intent.object;
        let pvc = self.ctx.caches.pvcs.state().into_iter().find(|p| {
            p.metadata.uid.as_deref() == Some(o.uid.as_str())
                && p.metadata.name.as_deref() == Some(o.name.as_str())
        });
        let Some(pvc) = pvc else {
            return Ok(Done::replayed(Replayed::Superseded));
        };
        match not_enough_capacity(&pvc, &self.ctx.caches.nodes.state())
            .map_err(|e| UnitError::retryable("CapacityUnreadable", e))?
        {
            Some(note) => Ok(Done::replayed(Replayed::Redone)
                .with_event(EventNote::warning(REASON_NOT_ENOUGH_CAPACITY, note))),
            None => Ok(Done::replayed(Replayed::Superseded)),
        }
    }
}
