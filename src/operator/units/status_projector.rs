//! The StatusProjector: LVMCluster status = fold(journal's UnitHealth projection, node
//! statuses, nodes). Patched only when it changes; each write is a Published(Status) record.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use lvms_actors::{Done, Pass, Replayed, Steps, Unit, UnitError, UnitHealth as HealthProjection};
use lvms_journal::{Intent, PublishKind, Published, Seq};
use serde_json::json;

use crate::api::LVMCluster;
use crate::kube::apply;
use crate::operator::context::{Ctx, object_ref};
use crate::operator::status::{UnitHealth, fold_status};

pub const UNIT: &str = super::table::UnitId::Status.name();

pub struct StatusUnit {
    pub ctx: Arc<Ctx>,
    /// The projection, caught up incrementally from the journal tail.
    health: Mutex<(HealthProjection, Seq)>,
}

impl StatusUnit {
    pub fn new(ctx: Arc<Ctx>) -> Self {
        StatusUnit {
            ctx,
            health: Mutex::new((HealthProjection::default(), 0)),
        }
    }

    fn unit_health(&self, steps: &Steps) -> Result<BTreeMap<String, UnitHealth>, UnitError> {
        let mut guard = self
            .health
            .lock()
            .map_err(|_| UnitError::retryable("Internal", "health projection poisoned"))?;
        let (proj, upto) = &mut *guard;
        *upto = proj
            .catch_up(steps.journal(), *upto)
            .map_err(UnitError::journal)?;
        Ok(proj
            .units
            .iter()
            .filter(|(name, _)| name.as_str() != UNIT)
            .map(|(name, s)| {
                (
                    name.clone(),
                    UnitHealth {
                        ok: s.ok,
                        message: s.message.clone(),
                    },
                )
            })
            .collect())
    }
}

impl Unit for StatusUnit {
    fn name(&self) -> &str {
        UNIT
    }

    async fn reconcile(&self, steps: &Steps) -> Result<Pass, UnitError> {
        let Some(cluster) = self.ctx.primary() else {
            return Ok(Pass::default());
        };
        steps.begin(object_ref(cluster.as_ref()));
        let units = self.unit_health(steps)?;
        let world = self.ctx.world();
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let status = fold_status(&cluster, &world, &units, &now);
        let state = status
            .state
            .map(|s| format!("{s:?}"))
            .unwrap_or_else(|| "Unknown".into());
        // Ready names its generation: reaching Ready again after an edit is a new outcome, and
        // the one success Event of that reconcile (events::event_for).
        let summary = match status.state {
            Some(crate::api::LVMStateType::Ready) => {
                super::events::ready_summary(cluster.metadata.generation.unwrap_or_default())
            }
            _ => format!("status {state}"),
        };
        if cluster.status.as_ref() == Some(&status) {
            return Ok(Pass {
                summary,
                requeue_after: None,
            });
        }
        let ns = cluster.metadata.namespace.clone().unwrap_or_default();
        let name = cluster.metadata.name.clone().unwrap_or_default();
        let api: Api<LVMCluster> = Api::namespaced(self.ctx.client.clone(), &ns);
        // A merge patch replaces lists wholesale, so conditions and class statuses are exact.
        let body = json!({ "status": status });
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(_) => {}
            // Gone (its finalizer was just removed): nothing to report on, a normal end.
            Err(kube::Error::Api(s)) if s.code == 404 => {
                steps.quiet();
                return Ok(Pass {
                    summary: format!("LVMCluster {ns}/{name} gone"),
                    requeue_after: None,
                });
            }
            Err(e) => {
                return Err(apply::unit_error(
                    &format!("status of LVMCluster {ns}/{name}"),
                    e,
                ));
            }
        }
        let journal = steps.journal();
        let upto = journal
            .next_seq()
            .map_err(UnitError::journal)?
            .saturating_sub(1);
        journal
            .append_published(
                Published {
                    unit: UNIT.into(),
                    object: Some(object_ref(cluster.as_ref())),
                    kind: PublishKind::Status,
                    dedupe_key: format!(
                        "status/{}",
                        cluster.metadata.uid.as_deref().unwrap_or_default()
                    ),
                    source_seq: upto,
                    count: 1,
                    summary: format!("state={state} ready={}", status.ready),
                },
                steps.trace(),
            )
            .map_err(UnitError::journal)?;
        Ok(Pass {
            summary,
            requeue_after: None,
        })
    }

    async fn replay(&self, _intent: &Intent, _steps: &Steps) -> Result<Done, UnitError> {
        // Status is recomputed by every pass.
        Ok(Done::replayed(Replayed::Rechecked))
    }
}
