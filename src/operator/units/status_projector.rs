//! The StatusProjector: LVMCluster status = fold(journal's UnitHealth projection, node
//! statuses, nodes). Patched only when it changes; each write is a Published(Status) record.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Resource;
use kube::api::{Patch, PatchParams};
use lvms_actors::{Done, Pass, Replayed, Steps, Unit, UnitError, UnitHealth as HealthProjection};
use lvms_journal::{Intent, PublishKind, Published, Seq};

use crate::api::{LVMCluster, LVMClusterStatus};
use crate::kube::apply;
use crate::operator::context::{Ctx, object_ref};
use crate::operator::status::{UnitHealth, fold_head, with_device_classes};

use super::generations::PassedGenerations;

pub const UNIT: &str = crate::operator::table::UnitId::Status.name();

/// Never defer a status write longer than this, however slow the last one was.
const MAX_DEFER: Duration = Duration::from_secs(2);

/// Never hold a new generation's status back longer than this for units that have not
/// reconciled it (one in backoff, one planning 1000 node statuses): it is then written as the
/// units' health stands.
const MAX_HOLD: Duration = Duration::from_secs(2);

/// The generation a status reports observed (its ResourcesAvailable condition's).
fn observed(s: &LVMClusterStatus) -> Option<i64> {
    s.conditions
        .iter()
        .find(|c| c.type_ == crate::api::CONDITION_RESOURCES_AVAILABLE)
        .and_then(|c| c.observed_generation)
}

/// The generation whose status must wait for the units to reconcile it: the one `head` reports
/// when the current status reports an older one (or none). None while the cluster is torn
/// down: the object units stop reconciling it then, and its status follows the teardown.
pub fn awaits_generation(
    current: Option<&LVMClusterStatus>,
    head: &LVMClusterStatus,
    deleting: bool,
) -> Option<i64> {
    let new = observed(head)?;
    (!deleting && current.and_then(observed).is_none_or(|old| old < new)).then_some(new)
}

/// The pass summary for a status of `state` observing `generation`: Ready names its generation
/// (reaching Ready again after an edit is a new outcome, and the one success Event of that
/// reconcile: events::event_for).
fn summary_of(state: Option<crate::api::LVMStateType>, generation: Option<i64>) -> String {
    match state {
        Some(crate::api::LVMStateType::Ready) => {
            super::events::ready_summary(generation.unwrap_or_default())
        }
        Some(s) => format!("status {s:?}"),
        None => "status Unknown".into(),
    }
}

/// The last status write: when it ended and how long it took.
#[derive(Clone, Copy, Debug)]
pub struct LastWrite {
    pub ended: Instant,
    pub took: Duration,
}

/// How long to put off a status write, from the new status's head (state, readiness,
/// conditions; see `fold_head`). A change there is written at once; otherwise only
/// deviceClassStatuses can have changed (one more node reporting), and that waits until as long
/// after the last write as that write took: the status lists every node, so on a large cluster
/// each write is expensive for the API server and for every watcher, and reports arriving
/// meanwhile are folded into the next one. Writes then take at most half the time, and a
/// deferred pass does not even build the per-node part.
pub fn defer_for(
    current: Option<&LVMClusterStatus>,
    head: &LVMClusterStatus,
    last: Option<LastWrite>,
    now: Instant,
) -> Duration {
    let urgent = current.is_none_or(|c| {
        c.state != head.state || c.ready != head.ready || c.conditions != head.conditions
    });
    match last {
        Some(l) if !urgent => (l.ended + l.took.min(MAX_DEFER)).saturating_duration_since(now),
        _ => Duration::ZERO,
    }
}

pub struct StatusUnit {
    pub ctx: Arc<Ctx>,
    /// The projection, caught up incrementally from the journal tail.
    health: Mutex<(HealthProjection, Seq)>,
    last_write: Mutex<Option<LastWrite>>,
    /// Each unit's latest reconciled generation (recorded by the operator's pass hook).
    passed: Arc<PassedGenerations>,
    /// The units a generation's status waits for: those ResourcesAvailable waits for.
    expected: Vec<&'static str>,
    /// The (cluster uid, generation) held back for `behind` units, and since when.
    held: Mutex<Option<(String, i64, Instant)>>,
}

/// `{"status": …}`, encoded straight to bytes (a JSON tree of a 1000-node status is ~10× its
/// text).
#[derive(serde::Serialize)]
pub struct StatusPatch<'a> {
    status: StatusBody<'a>,
}

/// One field of the patch: left out (as the current status has it), `null` (removed), or set.
type Field<T> = Option<Option<T>>;

/// The status as a JSON merge patch of the current one: a field the new status leaves out
/// (LVMS's `omitempty`: `ready` false, no conditions, no classes) is sent as `null`, which
/// removes it (omitting it kept the old value: a cluster that went from Ready to Failed kept
/// `ready: true`, and every later pass saw a difference and patched again); a field equal to
/// the current one is left out. deviceClassStatuses lists every node (~0.5 MB at 1000 nodes ×
/// 3 classes): a write of conditions alone (an edit's observedGeneration) no longer resends
/// it. A merge patch replaces lists wholesale, so what is sent is exact.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusBody<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    ready: Field<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Field<crate::api::LVMStateType>,
    #[serde(skip_serializing_if = "Option::is_none")]
    conditions: Field<&'a [k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    device_class_statuses: Field<&'a [crate::api::DeviceClassStatus]>,
}

/// `None` when `now` equals `before` (left out), else `Some(now)` (`Some(None)` = removed).
fn changed<T: PartialEq>(before: Option<Option<T>>, now: Option<T>) -> Field<T> {
    match before {
        Some(b) if b == now => None,
        _ => Some(now),
    }
}

impl<'a> StatusPatch<'a> {
    /// What turns `current` (as last seen; `None`: unknown, send everything) into `s`.
    pub fn between(current: Option<&'a LVMClusterStatus>, s: &'a LVMClusterStatus) -> Self {
        fn set<T>(v: &[T]) -> Option<&[T]> {
            (!v.is_empty()).then_some(v)
        }
        StatusPatch {
            status: StatusBody {
                ready: changed(
                    current.map(|c| c.ready.then_some(true)),
                    s.ready.then_some(true),
                ),
                state: changed(current.map(|c| c.state), s.state),
                conditions: changed(current.map(|c| set(&c.conditions)), set(&s.conditions)),
                device_class_statuses: changed(
                    current.map(|c| set(&c.device_class_statuses)),
                    set(&s.device_class_statuses),
                ),
            },
        }
    }
}

/// Merge-patches the status without decoding the reply: it is the whole object again (the
/// status lists every node), which the watch delivers to the cache anyway.
async fn patch_status_unread(
    client: &kube::Client,
    ns: &str,
    name: &str,
    body: &StatusPatch<'_>,
) -> Result<(), kube::Error> {
    let request = kube::core::Request::new(LVMCluster::url_path(&(), Some(ns)))
        .patch_subresource("status", name, &PatchParams::default(), &Patch::Merge(body))
        .map_err(kube::Error::BuildRequest)?;
    client.request_text(request).await.map(drop)
}

impl StatusUnit {
    pub fn new(ctx: Arc<Ctx>, passed: Arc<PassedGenerations>) -> Self {
        let expected = crate::operator::status::expected_units(&ctx.capabilities);
        StatusUnit {
            ctx,
            health: Mutex::new((HealthProjection::default(), 0)),
            last_write: Mutex::new(None),
            passed,
            expected,
            held: Mutex::new(None),
        }
    }

    /// How long to hold back the status of `generation` of cluster `uid` while units are
    /// `behind`: zero when none is, or once [`MAX_HOLD`] has passed since the hold began.
    fn hold(&self, uid: &str, generation: i64, behind: &[&str]) -> Duration {
        let Ok(mut held) = self.held.lock() else {
            return Duration::ZERO;
        };
        if behind.is_empty() {
            *held = None;
            return Duration::ZERO;
        }
        let now = Instant::now();
        let since = match &*held {
            Some((u, g, since)) if u == uid && *g == generation => *since,
            _ => {
                *held = Some((uid.to_owned(), generation, now));
                now
            }
        };
        MAX_HOLD.saturating_sub(now.duration_since(since))
    }

    fn unit_health(&self, steps: &Steps) -> Result<BTreeMap<String, UnitHealth>, UnitError> {
        let mut guard = self.health.lock().map_err(|_| {
            UnitError::retryable(lvms_actors::Reason::Internal, "health projection poisoned")
        })?;
        let (proj, upto) = &mut *guard;
        if *upto == 0 {
            // First use (or an empty journal so far): start from the latest snapshot, not
            // from seq 1 (a fold of the whole journal).
            let rebuilt = steps
                .journal()
                .rebuild::<HealthProjection>()
                .map_err(UnitError::journal)?;
            *proj = rebuilt.state;
            *upto = rebuilt.upto_seq;
        }
        *upto = proj
            .catch_up(steps.journal(), *upto)
            .map_err(UnitError::journal)?;
        Ok(proj
            .units
            .iter()
            // The status's own passes, and the volume helpers (users' volumes are not the
            // cluster's resources), are not in ResourcesAvailable.
            .filter(|(name, _)| {
                name.as_str() != UNIT
                    && !crate::operator::table::UnitId::from_name(name)
                        .is_some_and(|u| u.volume_helper())
            })
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
        let head = fold_head(&cluster, &world, &units, &now);
        let state = head
            .state
            .map(|s| format!("{s:?}"))
            .unwrap_or_else(|| "Unknown".into());
        let deleting = cluster.metadata.deletion_timestamp.is_some();
        if let Some(generation) = awaits_generation(cluster.status.as_ref(), &head, deleting) {
            let uid = cluster.metadata.uid.as_deref().unwrap_or_default();
            let behind = self
                .passed
                .behind(self.expected.iter().copied(), uid, generation);
            let hold = self.hold(uid, generation, &behind);
            if !hold.is_zero() {
                // Each of their passes wakes this unit; the requeue bounds the wait. The
                // summary stays what the written status says (no Ready of a generation the
                // units have not reconciled).
                let current = cluster.status.as_ref();
                return Ok(Pass {
                    summary: summary_of(current.and_then(|c| c.state), current.and_then(observed)),
                    requeue_after: Some(hold),
                });
            }
        }
        let summary = summary_of(head.state, observed(&head));
        let last = *self.last_write.lock().map_err(|_| {
            UnitError::retryable(lvms_actors::Reason::Internal, "last status write poisoned")
        })?;
        // Deferred: the requeue (or an earlier wake-up) folds everything new by then.
        let wait = defer_for(cluster.status.as_ref(), &head, last, Instant::now());
        if !wait.is_zero() {
            return Ok(Pass {
                summary,
                requeue_after: Some(wait),
            });
        }
        let status = with_device_classes(head, &cluster, &world);
        if cluster.status.as_ref() == Some(&status) {
            return Ok(Pass {
                summary,
                requeue_after: None,
            });
        }
        let ns = cluster.metadata.namespace.clone().unwrap_or_default();
        let name = cluster.metadata.name.clone().unwrap_or_default();
        let body = StatusPatch::between(cluster.status.as_ref(), &status);
        let started = Instant::now();
        let written = patch_status_unread(&self.ctx.client, &ns, &name, &body).await;
        if let Ok(mut guard) = self.last_write.lock() {
            *guard = Some(LastWrite {
                ended: Instant::now(),
                took: started.elapsed(),
            });
        }
        match written {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{DeviceClassStatus, LVMStateType};

    fn status(state: LVMStateType, classes: usize) -> LVMClusterStatus {
        LVMClusterStatus {
            state: Some(state),
            ready: state == LVMStateType::Ready,
            conditions: vec![],
            device_class_statuses: (0..classes)
                .map(|i| DeviceClassStatus {
                    name: format!("vg{i}"),
                    node_status: vec![],
                })
                .collect(),
        }
    }

    /// A merge patch removes what the status leaves out, so a cluster that stops being Ready
    /// loses `ready: true` (LVMS's omitempty fields, cleared as its full update clears them).
    #[test]
    fn the_patch_clears_what_the_status_omits() {
        let ready =
            serde_json::to_value(StatusPatch::between(None, &status(LVMStateType::Ready, 1)))
                .unwrap();
        assert_eq!(ready["status"]["ready"], serde_json::json!(true));
        assert_eq!(ready["status"]["conditions"], serde_json::Value::Null);
        let failed =
            serde_json::to_value(StatusPatch::between(None, &status(LVMStateType::Failed, 0)))
                .unwrap();
        let body = failed["status"].as_object().unwrap();
        assert_eq!(body["state"], "Failed");
        for cleared in ["ready", "conditions", "deviceClassStatuses"] {
            assert_eq!(
                body.get(cleared),
                Some(&serde_json::Value::Null),
                "{cleared}"
            );
        }
        // Applied to a Ready status as a JSON merge patch, the result reads back as the status.
        let mut doc = serde_json::json!({"status": serde_json::to_value(status(LVMStateType::Ready, 1)).unwrap()});
        json_patch::merge(&mut doc, &failed);
        let back: LVMClusterStatus = serde_json::from_value(doc["status"].clone()).unwrap();
        assert_eq!(back, status(LVMStateType::Failed, 0));
    }

    /// Only what differs from the current status is sent; applied to it, the patch reads back
    /// as the new status.
    #[test]
    fn the_patch_leaves_out_what_is_unchanged() {
        let mut current = status(LVMStateType::Ready, 2);
        current.conditions = vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
            type_: "ResourcesAvailable".into(),
            status: "True".into(),
            reason: "ResourcesAvailable".into(),
            message: String::new(),
            observed_generation: Some(1),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
        }];
        let mut edited = current.clone();
        edited.conditions[0].observed_generation = Some(2);
        let patch = serde_json::to_value(StatusPatch::between(Some(&current), &edited)).unwrap();
        let body = patch["status"].as_object().unwrap();
        assert_eq!(body.keys().collect::<Vec<_>>(), ["conditions"]);
        let mut doc = serde_json::json!({"status": serde_json::to_value(&current).unwrap()});
        json_patch::merge(&mut doc, &patch);
        let back: LVMClusterStatus = serde_json::from_value(doc["status"].clone()).unwrap();
        assert_eq!(back, edited);
        // Leaving Ready: state and ready change, the rest is left out or removed.
        let mut failed = edited.clone();
        failed.state = Some(LVMStateType::Failed);
        failed.ready = false;
        failed.device_class_statuses.clear();
        let patch = serde_json::to_value(StatusPatch::between(Some(&edited), &failed)).unwrap();
        let body = patch["status"].as_object().unwrap();
        assert_eq!(body.len(), 3, "{body:?}");
        assert_eq!(body["ready"], serde_json::Value::Null);
        assert_eq!(body["deviceClassStatuses"], serde_json::Value::Null);
        json_patch::merge(&mut doc, &patch);
        let back: LVMClusterStatus = serde_json::from_value(doc["status"].clone()).unwrap();
        assert_eq!(back, failed);
        // Nothing differs: an empty status object.
        let same = serde_json::to_value(StatusPatch::between(Some(&failed), &failed)).unwrap();
        assert_eq!(same, serde_json::json!({"status": {}}));
    }

    fn observing(state: LVMStateType, generation: Option<i64>) -> LVMClusterStatus {
        let mut s = status(state, 0);
        s.conditions = vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
            type_: crate::api::CONDITION_RESOURCES_AVAILABLE.into(),
            status: "True".into(),
            reason: "ResourcesAvailable".into(),
            message: String::new(),
            observed_generation: generation,
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        }];
        s
    }

    /// A status reporting a newer generation than the written one waits for the units; one
    /// that only changes state, or a cluster being torn down, does not.
    #[test]
    fn only_a_new_generation_waits_for_the_units() {
        let written = observing(LVMStateType::Ready, Some(2));
        let edited = observing(LVMStateType::Ready, Some(3));
        assert_eq!(awaits_generation(Some(&written), &edited, false), Some(3));
        // Never written, or written without a generation: the first one waits too.
        assert_eq!(awaits_generation(None, &edited, false), Some(3));
        let unobserved = observing(LVMStateType::Progressing, None);
        assert_eq!(
            awaits_generation(Some(&unobserved), &edited, false),
            Some(3)
        );
        // Same generation (a unit failed, a node reported): written at once.
        let failed = observing(LVMStateType::Failed, Some(2));
        assert_eq!(awaits_generation(Some(&written), &failed, false), None);
        // Teardown: the object units stop passing over the cluster.
        assert_eq!(awaits_generation(Some(&written), &edited, true), None);
        // A head without ResourcesAvailable has no generation to wait for.
        assert_eq!(
            awaits_generation(Some(&written), &status(LVMStateType::Ready, 0), false),
            None
        );
        // While held, the pass says what the written status says.
        assert_eq!(
            summary_of(written.state, observed(&written)),
            super::super::events::ready_summary(2)
        );
        assert_eq!(summary_of(None, None), "status Unknown");
    }

    #[test]
    fn only_node_details_wait_as_long_as_the_last_write_took() {
        let now = Instant::now();
        let slow = Some(LastWrite {
            ended: now - Duration::from_millis(100),
            took: Duration::from_millis(300),
        });
        let cur = status(LVMStateType::Progressing, 1);
        // Heads carry no per-node part; the current status has one class.
        let same_head = status(LVMStateType::Progressing, 0);
        // Never written, or nothing written yet by this process: at once.
        assert_eq!(defer_for(None, &same_head, slow, now), Duration::ZERO);
        assert_eq!(defer_for(Some(&cur), &same_head, None, now), Duration::ZERO);
        // Same head (only node details may differ): the rest of the last write's duration.
        assert_eq!(
            defer_for(Some(&cur), &same_head, slow, now),
            Duration::from_millis(200)
        );
        // Long enough ago: at once.
        let long_ago = Some(LastWrite {
            ended: now - Duration::from_secs(1),
            took: Duration::from_millis(300),
        });
        assert_eq!(
            defer_for(Some(&cur), &same_head, long_ago, now),
            Duration::ZERO
        );
        // A state change (e.g. Ready) never waits.
        let ready = status(LVMStateType::Ready, 0);
        assert_eq!(defer_for(Some(&cur), &ready, slow, now), Duration::ZERO);
        // However slow the last write, the wait is bounded.
        let very_slow = Some(LastWrite {
            ended: now,
            took: Duration::from_secs(60),
        });
        assert_eq!(defer_for(Some(&cur), &same_head, very_slow, now), MAX_DEFER);
    }
}
