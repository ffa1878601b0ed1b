//! `persistent-volume` (LVMS's PV helper): a Warning `ClaimReferenceRemoved` on an lvms PV
//! whose claim reference was removed, once per PV, and the `kubernetes.io/hostname` label
//! kept equal to the node in its topology.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::Api;
use kube::api::{Patch, PatchParams};
use lvms_actors::{Action, Done, Pass, StepSpec, Steps, Unit, UnitError};
use lvms_journal::{EventNote, Intent, Replayed};
use serde_json::json;
use tracing::warn;

use crate::kube::apply::unit_error;
use crate::operator::context::{Ctx, object_ref};
use crate::operator::volumes::HOSTNAME_LABEL;
use crate::operator::volumes::actions::VolumeHelperAction as A;
use crate::operator::volumes::persistent_volumes::{
    MESSAGE_CLAIM_REFERENCE_REMOVED, REASON_CLAIM_REFERENCE_REMOVED, findings,
};

pub const UNIT: &str = crate::operator::table::UnitId::PersistentVolumes.name();

pub struct PersistentVolumesUnit {
    pub ctx: Arc<Ctx>,
}

fn claim_removed() -> EventNote {
    EventNote::warning(
        REASON_CLAIM_REFERENCE_REMOVED,
        MESSAGE_CLAIM_REFERENCE_REMOVED,
    )
}

async fn label_hostname(client: &kube::Client, name: &str, node: &str) -> Result<Done, UnitError> {
    let patch = json!({"metadata": {"labels": {HOSTNAME_LABEL: node}}});
    Api::<PersistentVolume>::all(client.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|pv| Done::resource_version(pv.metadata.resource_version))
        .map_err(|e| unit_error(&format!("label of PersistentVolume {name}"), e))
}

impl Unit for PersistentVolumesUnit {
    fn name(&self) -> &str {
        UNIT
    }

    async fn reconcile(&self, steps: &Steps) -> Result<Pass, UnitError> {
        super::begin_volume_helper_pass(steps, "PersistentVolume");
        let client = &self.ctx.client;
        let (mut checked, mut first_err) = (0usize, None);
        for pv in self.ctx.caches.pvs.state() {
            let Some(found) = findings(&pv) else {
                continue;
            };
            checked += 1;
            let object = object_ref(pv.as_ref());
            let name = object.name.clone();
            if found.claim_reference_removed {
                // Once per PV (its uid is in the key): LVMS's recorder repeats it each
                // reconcile; one Event that stays is what a user reads.
                let spec = StepSpec::new(object.clone(), A::ReportClaimReferenceRemoved)
                    .digest(object.uid.clone());
                steps
                    .run_once(spec, || async { Ok(Done::event(claim_removed())) })
                    .await?;
            }
            if let Some(node) = found.hostname {
                let spec = StepSpec::new(object, A::LabelHostname).args(vec![node.clone()]);
                if let Err(e) = steps
                    .run(spec, || label_hostname(client, &name, &node))
                    .await
                {
                    warn!(pv = %name, error = %e.message, "hostname label failed");
                    first_err.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        Ok(Pass {
            summary: format!("{checked} lvms PersistentVolume(s) checked"),
            requeue_after: None,
        })
    }

    async fn replay(&self, intent: &Intent, _steps: &Steps) -> Result<Done, UnitError> {
        let action = intent
            .action_as::<A>()
            .map_err(|e| UnitError::permanent("UnknownAction", e.to_string()))?;
        let name = &intent.object.name;
        let current = self
            .ctx
            .caches
            .pvs
            .state()
            .into_iter()
            .find(|pv| pv.metadata.name.as_deref() == Some(name.as_str()))
            .filter(|pv| pv.metadata.uid.as_deref() == Some(intent.object.uid.as_str()));
        let Some(pv) = current else {
            return Ok(Done::replayed(Replayed::Superseded));
        };
        match action {
            // The report is the Event: still true → published now, once.
            A::ReportClaimReferenceRemoved => Ok(match findings(&pv) {
                Some(f) if f.claim_reference_removed => {
                    Done::replayed(Replayed::Redone).with_event(claim_removed())
                }
                _ => Done::replayed(Replayed::Superseded),
            }),
            A::LabelHostname => {
                let Some(node) = intent.args.first() else {
                    return Err(UnitError::permanent(
                        "MalformedIntent",
                        "label-hostname intent without its node",
                    ));
                };
                label_hostname(&self.ctx.client, name, node).await?;
                Ok(Done::replayed(Replayed::Redone))
            }
            other => Err(UnitError::permanent(
                "UnknownAction",
                format!("{} is not a step of {UNIT}", other.name()),
            )),
        }
    }
}
