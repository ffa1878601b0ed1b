//! `persistent-volume-claim` (LVMS's PVC helper): a Pending claim on `lvms-<class>` that no
//! node's capacity annotation can hold gets a Warning `NotEnoughCapacity`, once per claim and
//! requested size; Pending claims are looked at again every 15 s, as LVMS does, and whenever
//! a Node's capacity annotations move. And TopoLVM's PVC reconciler: legacy claim finalizers
//! come off, and the Pods of a claim waiting for its filesystem to grow are nudged.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use lvms_actors::{Action, Done, Pass, StepSpec, Steps, Unit, UnitError};
use lvms_journal::{EventNote, Intent, Replayed};
use serde_json::json;
use tracing::{info, warn};

use crate::kube::apply::{self, unit_error};
use crate::kube::kinds::Kind;
use crate::objects::object_ref as ref_of;
use crate::operator::context::{Ctx, object_ref};
use crate::operator::desired::csi_driver::CSI_DRIVER_NAME;
use crate::operator::volumes::actions::VolumeHelperAction as A;
use crate::operator::volumes::claims::{
    REASON_NOT_ENOUGH_CAPACITY, RECHECK, not_enough_capacity, pending_lvms_claim,
};
use crate::operator::volumes::resize::{
    LAST_RESIZEFS_REQUESTED_AT, legacy_finalizers, pods_to_nudge, resize_pending_since,
};

pub const UNIT: &str = crate::operator::table::UnitId::PersistentVolumeClaims.name();

pub struct PersistentVolumeClaimsUnit {
    pub ctx: Arc<Ctx>,
}

impl PersistentVolumeClaimsUnit {
    /// TopoLVM's PVC reconciler over every claim the cache holds: legacy finalizers off, and
    /// the nudge for claims whose filesystem resize waits on kubelet. Pods are read from the
    /// API server (not cached: the operator would hold every Pod of the cluster), one list
    /// per namespace with such a claim, only then.
    async fn topolvm_claims(&self, steps: &Steps) -> Result<(), UnitError> {
        let driver_classes: BTreeSet<String> = self
            .ctx
            .caches
            .storage_classes
            .state()
            .iter()
            .filter(|sc| sc.provisioner == CSI_DRIVER_NAME)
            .filter_map(|sc| sc.metadata.name.clone())
            .collect();
        let client = &self.ctx.client;
        let mut waiting: BTreeMap<String, Vec<(String, Timestamp, String)>> = BTreeMap::new();
        for pvc in self.ctx.caches.pvcs.state() {
            let ns = pvc.metadata.namespace.clone().unwrap_or_default();
            let name = pvc.metadata.name.clone().unwrap_or_default();
            let legacy = legacy_finalizers(&pvc);
            if !legacy.is_empty() {
                let spec = StepSpec::new(object_ref(pvc.as_ref()), A::RemoveLegacyClaimFinalizer)
                    .args(legacy.clone());
                steps
                    .run(spec, || {
                        apply::edit_finalizers(
                            client,
                            Kind::PersistentVolumeClaim,
                            &ns,
                            &name,
                            |f| f.retain(|x| !legacy.contains(x)),
                        )
                    })
                    .await?;
            }
            if let Some(since) = resize_pending_since(&pvc, &driver_classes) {
                let uid = pvc.metadata.uid.clone().unwrap_or_default();
                waiting.entry(ns).or_default().push((name, since, uid));
            }
        }
        for (ns, claims) in waiting {
            let pods = Api::<Pod>::namespaced(client.clone(), &ns)
                .list(&ListParams::default())
                .await
                .map_err(|e| unit_error(&format!("list Pods of {ns}"), e))?
                .items;
            for (claim, since, uid) in claims {
                for target in pods_to_nudge(&claim, since, &pods) {
                    let pod = target.metadata.name.clone().unwrap_or_default();
                    // Not `run_once`: a failed patch is tried again by the next pass, and a
                    // nudged Pod's annotation (after `since`) keeps it from being nudged twice.
                    let spec = StepSpec::new(ref_of(target), A::NudgeResizeFs)
                        .args(vec![claim.clone()])
                        .digest(format!("{uid}/{}", since.as_second()));
                    let api = Api::<Pod>::namespaced(client.clone(), &ns);
                    steps
                        .run(spec, || async {
                            let now = Timestamp::now().to_string();
                            let patch = json!({"metadata": {"annotations": {
                                LAST_RESIZEFS_REQUESTED_AT: now,
                            }}});
                            match api
                                .patch_metadata(&pod, &PatchParams::default(), &Patch::Merge(patch))
                                .await
                            {
                                Ok(_) => {
                                    info!(pod = %format!("{ns}/{pod}"), %claim, "nudged kubelet to grow the claim's filesystem");
                                    Ok(Done::default())
                                }
                                Err(kube::Error::Api(s)) if s.code == 404 => {
                                    Ok(Done::default().with_fact("gone", "true"))
                                }
                                Err(e) => Err(unit_error(&format!("annotate Pod {ns}/{pod}"), e)),
                            }
                        })
                        .await?;
                }
            }
        }
        Ok(())
    }
}

impl Unit for PersistentVolumeClaimsUnit {
    fn name(&self) -> &str {
        UNIT
    }

    async fn reconcile(&self, steps: &Steps) -> Result<Pass, UnitError> {
        super::begin_volume_helper_pass(steps, "PersistentVolumeClaim");
        self.topolvm_claims(steps).await?;
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
        // Both are re-decided by the next pass from what the claim and its Pods show.
        if matches!(action, A::RemoveLegacyClaimFinalizer | A::NudgeResizeFs) {
            return Ok(Done::replayed(Replayed::Rechecked));
        }
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
