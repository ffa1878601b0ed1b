//! The orphan audit of this node (`--audit-interval`, and whenever
//! `lvms.topolvm.io/audit-requested` on this node's LVMVolumeGroupNodeStatus changes): lvm2's
//! view of each class's volume group, this node's LogicalVolumes and this node's journal,
//! joined by [`crate::node::audit::audit_node`]. Each finding becomes one Warning Event (a
//! journaled report, made once per finding however many audits see it), the `lvms_orphans`
//! gauges, and the `lvms.topolvm.io/audit` annotation `lvms audit` reads. Under the `leaked`
//! repair policy, an LV the journal proves lvms made and that no LogicalVolume and no
//! PersistentVolume names is removed, as a journaled step.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::reflector::Store;
use lvms_actors::{Action, Done, Pass, Replayed, StepSpec, Steps, Unit, UnitError};
use lvms_journal::{
    Body, EventNote, Intent, OutcomeResult, PublishKind, Published, Record, rfc3339_utc,
};
use serde_json::json;

use super::context::{NodeCtx, cmd_err, host_err};
use crate::api::topolvm::DRIVER_NAME;
use crate::api::{LVMVolumeGroupNodeStatus, LogicalVolume};
use crate::kube::apply::unit_error;
use crate::node::audit::{
    ClassVg, Finding, FindingKind, HISTORY_LINES, JournalFacts, NodeAudit, OpenStep, UnreadClass,
    VolumeHistory, VolumeRef, audit_node, unreadable_findings,
};
use crate::node::commands;
use crate::node::report::{LogicalVolume as Lv, parse_lvs, parse_vgs};
use crate::node::volume::commands as cmd;
use crate::objects::object_ref;

pub const UNIT: &str = "audit";
/// The node's last audit, as JSON ([`NodeAudit`]), on its LVMVolumeGroupNodeStatus.
pub const AUDIT_ANNOTATION: &str = "lvms.topolvm.io/audit";

/// A fresh `lvms.topolvm.io/audit-requested` value: now, RFC 3339 (a node answers a request
/// its last audit did not).
pub fn audit_request_token() -> String {
    lvms_journal::rfc3339_utc(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or_default(),
    )
}

/// Ask a node's vg-manager for an audit: `token` on its node status.
pub async fn request_audit(
    api: &kube::Api<crate::api::LVMVolumeGroupNodeStatus>,
    node: &str,
    token: &str,
) -> Result<(), kube::Error> {
    let patch = serde_json::json!({"metadata": {"annotations": {AUDIT_REQUEST_ANNOTATION: token}}});
    api.patch(
        node,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .map(|_| ())
}
/// Set (to any new value) on a node status to have that node audited now; the audit it
/// answers carries the value back in `request`.
pub const AUDIT_REQUEST_ANNOTATION: &str = "lvms.topolvm.io/audit-requested";

/// What the audit may repair by itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum RepairPolicy {
    /// Report only.
    #[default]
    None,
    /// Remove leaked LVs the journal proves lvms made and nothing references.
    Leaked,
}

#[derive(Clone, Debug)]
pub struct AuditConfig {
    /// Between audits; zero: only on request.
    pub interval: Duration,
    pub repair: RepairPolicy,
    /// An intent open longer than this is a half-finished step.
    pub open_after: Duration,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            interval: Duration::from_secs(600),
            repair: RepairPolicy::None,
            open_after: Duration::from_secs(600),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditAction {
    /// One finding, reported once (its Warning Event). Object: the node status; args: the
    /// finding's key, its Event reason and note (replay publishes them if a kill came first).
    ReportFinding,
    /// A leaked LV removed under the `leaked` policy. Object: the node status; args: lvremove's
    /// argv (its last word `<vg>/<lv>`).
    RemoveLeakedLv,
}

impl Action for AuditAction {
    const ALL: &'static [Self] = &[Self::ReportFinding, Self::RemoveLeakedLv];

    fn name(self) -> &'static str {
        match self {
            Self::ReportFinding => "report-finding",
            Self::RemoveLeakedLv => "remove-leaked-lv",
        }
    }
}

#[derive(Default)]
struct State {
    next_due: Option<Instant>,
    /// The request value the last audit answered.
    served: Option<String>,
}

pub struct AuditUnit {
    pub ctx: Arc<NodeCtx>,
    /// This node's LogicalVolumes.
    pub volumes: Store<LogicalVolume>,
    pub config: AuditConfig,
    state: Mutex<State>,
}

impl AuditUnit {
    pub fn new(ctx: Arc<NodeCtx>, volumes: Store<LogicalVolume>, config: AuditConfig) -> Self {
        AuditUnit {
            ctx,
            volumes,
            config,
            state: Mutex::default(),
        }
    }

    fn node_status(&self) -> Option<Arc<LVMVolumeGroupNodeStatus>> {
        self.ctx
            .node_statuses
            .state()
            .into_iter()
            .find(|n| n.metadata.name.as_deref() == Some(self.ctx.node.as_str()))
    }

    async fn run_host(&self, argv: &[String]) -> Result<String, UnitError> {
        self.ctx
            .host
            .run(argv, &[])
            .await
            .map(|o| o.stdout)
            .map_err(host_err(
                argv.first().map(String::as_str).unwrap_or("command"),
            ))
    }

    /// The LVs of `vg`, which must exist (`lvs -S vgname=` of a missing VG is an empty
    /// report, which would make every volume look missing).
    async fn read_vg(&self, vg: &str) -> Result<Vec<Lv>, UnitError> {
        let vgs = parse_vgs(&self.run_host(&cmd::vgs_free(vg).map_err(cmd_err)?).await?)
            .map_err(|e| UnitError::retryable("VgsFailed", e.to_string()))?;
        if !vgs.iter().any(|r| r.vg_name == vg) {
            return Err(UnitError::retryable(
                "VolumeGroupUnreadable",
                format!("vgs did not report {vg}"),
            ));
        }
        let lvs = parse_lvs(&self.run_host(&commands::lvs(vg).map_err(cmd_err)?).await?)
            .map_err(|e| UnitError::retryable("LvsFailed", e.to_string()))?;
        Ok(lvs.all().cloned().collect())
    }

    /// Every class's LVs: (class, vg, default, lvs), and the classes whose volume group could
    /// not be read. An unread class is audited as unseen, never as empty: it is left out of
    /// the join (and so out of the repair) and reported as `unreadable-vg`, while the rest of
    /// the node, and the journal's open steps (a step a held lock keeps open is exactly what
    /// the audit must show), are still audited.
    async fn read_classes(&self) -> Result<ReadClasses, UnitError> {
        let Some(config) = self.ctx.read_lvmd()? else {
            return Ok(ReadClasses::default());
        };
        let mut out = ReadClasses::default();
        for c in &config.device_classes {
            match self.read_vg(&c.volume_group).await {
                Ok(lvs) => out
                    .seen
                    .push((c.name.clone(), c.volume_group.clone(), c.default, lvs)),
                Err(e) => {
                    tracing::warn!(class = %c.name, volume_group = %c.volume_group, reason = %e.reason, error = %e.message, "audit: volume group not read");
                    out.unread.push(UnreadClass {
                        class: c.name.clone(),
                        vg: c.volume_group.clone(),
                        reason: e.reason,
                    });
                }
            }
        }
        Ok(out)
    }

    fn volume_refs(&self) -> Vec<VolumeRef> {
        self.volumes
            .state()
            .iter()
            .filter(|v| v.spec.node_name == self.ctx.node)
            .map(|v| VolumeRef {
                name: v.metadata.name.clone().unwrap_or_default(),
                uid: v.metadata.uid.clone().unwrap_or_default(),
                volume_id: v
                    .status
                    .as_ref()
                    .and_then(|s| s.volume_id.clone())
                    .filter(|id| !id.is_empty()),
                device_class: v.spec.device_class.clone().unwrap_or_default(),
                deleting: v.metadata.deletion_timestamp.is_some(),
            })
            .collect()
    }

    /// The findings of two reads of the disks around one read of the objects and the journal:
    /// only what both reads show is reported, so a volume created or removed in between
    /// (its LV and its object changing at different moments) is never a finding.
    async fn audit(&self, steps: &Steps) -> Result<(Vec<Finding>, u64), UnitError> {
        let before = self.read_classes().await?;
        let volumes = self.volume_refs();
        let journal = steps.journal();
        let (open, unreadable) = journal.open_intents_checked().map_err(UnitError::journal)?;
        let (facts, skipped) = journal_facts(journal.iter(), &open);
        let after = self.read_classes().await?;
        // A class unread in either look is reported once; its LVs' findings cannot be in both
        // looks, so the intersection below already leaves them out.
        let mut unread = before.unread;
        for u in after.unread {
            if !unread.iter().any(|x| x.class == u.class) {
                unread.push(u);
            }
        }
        let (before, after) = (before.seen, after.seen);
        let now = journal.config().clock.now_ms();
        let open_after = self.config.open_after.as_millis() as u64;
        let find = |classes: &[(String, String, bool, Vec<Lv>)]| {
            let views: Vec<ClassVg<'_>> = classes
                .iter()
                .map(|(class, vg, default, lvs)| ClassVg {
                    class,
                    vg,
                    default: *default,
                    lvs,
                })
                .collect();
            audit_node(&self.ctx.node, &views, &volumes, &facts, now, open_after)
        };
        let first: BTreeSet<String> = find(&before).iter().map(Finding::key).collect();
        let mut findings: Vec<Finding> = find(&after)
            .into_iter()
            .filter(|f| first.contains(&f.key()))
            .collect();
        findings.extend(unreadable_findings(&self.ctx.node, &unread));
        findings.sort_by_key(Finding::key);
        Ok((findings, skipped + unreadable.len() as u64))
    }

    /// Under the `leaked` policy, each repairable finding whose LV no PersistentVolume names
    /// (read now, in full: a failed read repairs nothing) is removed. Returns `vg/lv` of each.
    async fn repair(&self, steps: &Steps, findings: &[Finding]) -> Result<Vec<String>, UnitError> {
        if self.config.repair != RepairPolicy::Leaked || !findings.iter().any(|f| f.repairable) {
            return Ok(Vec::new());
        }
        let Some(ns) = self.node_status() else {
            return Ok(Vec::new());
        };
        let pvs: Api<PersistentVolume> = Api::all(self.ctx.client.clone());
        let handles: BTreeSet<String> = pvs
            .list(&ListParams::default())
            .await
            .map_err(|e| unit_error("PersistentVolumes", e))?
            .items
            .into_iter()
            .filter_map(|pv| pv.spec?.csi)
            .filter(|csi| csi.driver == DRIVER_NAME)
            .map(|csi| csi.volume_handle)
            .collect();
        let mut removed = Vec::new();
        for f in findings.iter().filter(|f| f.repairable) {
            let (Some(vg), Some(lv)) = (&f.volume_group, &f.lv) else {
                continue;
            };
            if handles.contains(lv) {
                continue;
            }
            let argv = cmd::lvremove_volume(vg, lv).map_err(cmd_err)?;
            let spec = StepSpec::new(object_ref(ns.as_ref()), AuditAction::RemoveLeakedLv)
                .args(argv.clone());
            let note = format!(
                "removed leaked LV {vg}/{lv} (made by lvms for LogicalVolume {}, which is gone; no PersistentVolume names it)",
                f.logical_volume.as_deref().unwrap_or("?")
            );
            steps
                .run(spec, || async move {
                    self.run_host(&argv).await?;
                    Ok(Done::event(EventNote::normal(
                        "LeakedLogicalVolumeRemoved",
                        note,
                    )))
                })
                .await?;
            removed.push(format!("{vg}/{lv}"));
        }
        Ok(removed)
    }

    /// Each finding's Warning, once: a finding seen by many audits is one report.
    async fn report(
        &self,
        steps: &Steps,
        ns: &LVMVolumeGroupNodeStatus,
        findings: &[Finding],
    ) -> Result<u32, UnitError> {
        let mut made = 0;
        for f in findings {
            let spec = StepSpec::new(object_ref(ns), AuditAction::ReportFinding).args(vec![
                f.key(),
                f.kind.reason().to_string(),
                f.detail.clone(),
            ]);
            let note = EventNote::warning(f.kind.reason(), f.detail.clone());
            if steps
                .run_once(spec, || async move { Ok(Done::event(note)) })
                .await?
                .is_some()
            {
                made += 1;
            }
        }
        Ok(made)
    }

    /// The annotation `lvms audit` reads, written when what it says changed (or a request is
    /// answered), pinned to the node status's uid.
    async fn publish(
        &self,
        steps: &Steps,
        ns: &LVMVolumeGroupNodeStatus,
        audit: &NodeAudit,
        request: Option<&str>,
    ) -> Result<bool, UnitError> {
        let current = ns
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(AUDIT_ANNOTATION))
            .and_then(|s| serde_json::from_str::<PublishedAudit>(s).ok());
        let unchanged = current.as_ref().is_some_and(|c| {
            c.audit.counts == audit.counts
                && c.audit.findings == audit.findings
                && c.audit.repaired == audit.repaired
                && c.request.as_deref() == request
        });
        if unchanged {
            return Ok(false);
        }
        let body = PublishedAudit {
            audit: audit.clone(),
            request: request.map(String::from),
        };
        let text = serde_json::to_string(&body)
            .map_err(|e| UnitError::permanent("AuditUnserializable", e.to_string()))?;
        let api: Api<LVMVolumeGroupNodeStatus> =
            Api::namespaced(self.ctx.client.clone(), &self.ctx.namespace);
        let patch = json!({
            "metadata": {"uid": ns.metadata.uid, "annotations": {AUDIT_ANNOTATION: text}},
        });
        let written = api
            .patch(
                &self.ctx.node,
                &PatchParams {
                    field_manager: Some(super::node_status_unit::FIELD_MANAGER.into()),
                    ..Default::default()
                },
                &Patch::Merge(&patch),
            )
            .await
            .map_err(|e| unit_error(&format!("LVMVolumeGroupNodeStatus {}", self.ctx.node), e))?;
        let journal = steps.journal();
        journal
            .append_published(
                Published {
                    unit: UNIT.into(),
                    object: Some(object_ref(&written)),
                    kind: PublishKind::Status,
                    dedupe_key: format!("audit/{}", self.ctx.node),
                    source_seq: journal
                        .next_seq()
                        .map_err(UnitError::journal)?
                        .saturating_sub(1),
                    count: 1,
                    summary: summary(&audit.counts),
                },
                steps.trace(),
            )
            .map_err(UnitError::journal)?;
        Ok(true)
    }
}

/// One look at the node's classes: those read, and those whose volume group was not.
#[derive(Default)]
struct ReadClasses {
    seen: Vec<(String, String, bool, Vec<Lv>)>,
    unread: Vec<UnreadClass>,
}

/// The annotation's document: the audit and the request it answered.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishedAudit {
    #[serde(flatten)]
    pub audit: NodeAudit,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
}

/// `leaked-lv=1 missing-lv=0 …`, the kinds with a count.
fn summary(counts: &BTreeMap<FindingKind, u64>) -> String {
    let found: Vec<String> = counts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{}={n}", k.as_str()))
        .collect();
    if found.is_empty() {
        "no orphan".into()
    } else {
        found.join(" ")
    }
}

/// What the journal says about each volume (by its LogicalVolume's uid, its LV's name) and
/// which steps are open. Unreadable records are passed over and counted (the audit says so;
/// a record lost to corruption must not stop the audit of everything else).
pub fn journal_facts(
    records: impl Iterator<Item = lvms_journal::Result<Record>>,
    open: &[Record],
) -> (JournalFacts, u64) {
    const VOLUME_STEPS: [&str; 6] = [
        "lvcreate",
        "lvcreate-snapshot",
        "lvresize",
        "lvremove",
        "write-status",
        "remove-finalizer",
    ];
    let mut facts = JournalFacts::default();
    let mut skipped = 0;
    // Intent seq → (uid, action) of the volume steps whose outcome is still to come.
    let mut pending: HashMap<u64, (String, String)> = HashMap::new();
    for r in records {
        let Ok(r) = r else {
            skipped += 1;
            continue;
        };
        match r.body {
            Body::Intent(i)
                if i.unit == super::volumes::UNIT
                    && i.object.kind == "LogicalVolume"
                    && !i.object.uid.is_empty()
                    && VOLUME_STEPS.contains(&i.action.as_str()) =>
            {
                let h = facts.volumes.entry(i.object.uid.clone()).or_default();
                h.logical_volume = i.object.name.clone();
                pending.insert(r.seq, (i.object.uid, i.action));
            }
            Body::Outcome(o) => {
                let Some((uid, action)) = pending.remove(&o.intent_seq) else {
                    continue;
                };
                let Some(h) = facts.volumes.get_mut(&uid) else {
                    continue;
                };
                let result = match &o.result {
                    OutcomeResult::Ok(_) => {
                        if action == "lvcreate" || action == "lvcreate-snapshot" {
                            h.created = true;
                        }
                        "ok".to_string()
                    }
                    OutcomeResult::Err { reason, .. } => format!("failed ({reason})"),
                };
                push_line(
                    h,
                    format!(
                        "#{} {action} {result} at {}",
                        o.intent_seq,
                        rfc3339_utc(r.at_ms)
                    ),
                );
            }
            _ => {}
        }
    }
    // A unit's open pass is not a step: it wraps the steps (one of which, open, is the finding)
    // and closes with the next pass once replay has.
    facts.open = open
        .iter()
        .filter_map(|r| match &r.body {
            Body::Intent(i) if i.action != lvms_actors::PASS_ACTION => Some(OpenStep {
                seq: r.seq,
                at_ms: r.at_ms,
                unit: i.unit.clone(),
                action: i.action.clone(),
                object_kind: i.object.kind.clone(),
                object_name: i.object.name.clone(),
                object_uid: i.object.uid.clone(),
            }),
            _ => None,
        })
        .collect();
    (facts, skipped)
}

fn push_line(h: &mut VolumeHistory, line: String) {
    if h.lines.len() == HISTORY_LINES {
        h.lines.remove(0);
    }
    h.lines.push(line);
}

impl Unit for AuditUnit {
    fn name(&self) -> &str {
        UNIT
    }

    async fn reconcile(&self, steps: &Steps) -> Result<Pass, UnitError> {
        let ns = self.node_status();
        let request = ns
            .as_ref()
            .and_then(|n| n.metadata.annotations.as_ref())
            .and_then(|a| a.get(AUDIT_REQUEST_ANNOTATION))
            .cloned();
        let periodic = !self.config.interval.is_zero();
        let (next_due, asked) = {
            let s = self.state.lock().map_err(|_| {
                UnitError::retryable(lvms_actors::Reason::Internal, "audit state poisoned")
            })?;
            (s.next_due, request.is_some() && request != s.served)
        };
        let due = periodic && next_due.is_none_or(|d| Instant::now() >= d);
        if !due && !asked {
            return Ok(Pass {
                summary: "audit not due".into(),
                requeue_after: next_due
                    .filter(|_| periodic)
                    .map(|d| d.saturating_duration_since(Instant::now())),
            });
        }
        let (mut findings, skipped) = self.audit(steps).await?;
        let repaired = self.repair(steps, &findings).await?;
        findings.retain(|f| {
            let vg_lv = format!(
                "{}/{}",
                f.volume_group.as_deref().unwrap_or_default(),
                f.lv.as_deref().unwrap_or_default()
            );
            !repaired.contains(&vg_lv)
        });
        let audit = NodeAudit::new(
            &self.ctx.node,
            rfc3339_utc(steps.journal().config().clock.now_ms()),
            findings,
            repaired,
        );
        self.ctx.metrics.set_orphans(
            &self.ctx.node,
            audit.counts.iter().map(|(k, n)| (k.as_str(), *n)),
        );
        let mut summary = summary(&audit.counts);
        if let Some(ns) = ns.as_deref() {
            let made = self.report(steps, ns, &audit.findings).await?;
            self.publish(steps, ns, &audit, request.as_deref()).await?;
            summary.push_str(&format!("; {made} new finding(s) reported"));
        }
        if !audit.repaired.is_empty() {
            summary.push_str(&format!("; repaired {}", audit.repaired.join(" ")));
        }
        if skipped > 0 {
            summary.push_str(&format!(
                "; {skipped} unreadable journal record(s) passed over"
            ));
        }
        if let Ok(mut s) = self.state.lock() {
            s.next_due = Some(Instant::now() + self.config.interval);
            s.served = request;
        }
        Ok(Pass {
            summary,
            requeue_after: periodic.then_some(self.config.interval),
        })
    }

    /// A removal a crash interrupted: lvremove again if the LV is still there.
    async fn replay(&self, intent: &Intent, _steps: &Steps) -> Result<Done, UnitError> {
        match intent.action_as::<AuditAction>() {
            Ok(AuditAction::RemoveLeakedLv) => {}
            // The report's Event, which the kill kept from its outcome: published now, once.
            Ok(AuditAction::ReportFinding) => {
                let mut done = Done::replayed(Replayed::Rechecked);
                if let [_, reason, note] = intent.args.as_slice() {
                    done.event = Some(EventNote::warning(reason.clone(), note.clone()));
                }
                return Ok(done);
            }
            Err(e) => return Err(UnitError::permanent("UnknownAction", e.to_string())),
        }
        let target = intent.args.last().cloned().unwrap_or_default();
        let Some((vg, lv)) = target.split_once('/') else {
            return Err(UnitError::permanent(
                "UnreadableIntent",
                format!("no <vg>/<lv> at the end of {:?}", intent.args),
            ));
        };
        // Gone: the removal ran before the kill. Still there: not done, and not redone here,
        // since whether nothing names the LV was seen before the kill, maybe long ago; the next
        // audit decides afresh, from a new look at LogicalVolumes and PersistentVolumes.
        let lvs = parse_lvs(&self.run_host(&commands::lvs(vg).map_err(cmd_err)?).await?)
            .map_err(|e| UnitError::retryable("LvsFailed", e.to_string()))?;
        Ok(Done::replayed(if lvs.find(lv).is_some() {
            Replayed::NotDone
        } else {
            Replayed::AlreadyDone
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::audit::counts;
    use lvms_journal::{ObjectRef, Outcome, Trace};

    fn record(seq: u64, body: Body) -> lvms_journal::Result<Record> {
        Ok(Record {
            seq,
            at_ms: seq * 1000,
            trace: Trace::default(),
            body,
        })
    }

    fn intent(action: &str, uid: &str) -> Body {
        Body::Intent(Intent {
            unit: "volumes".into(),
            object: ObjectRef {
                kind: "LogicalVolume".into(),
                namespace: String::new(),
                name: format!("pvc-{uid}"),
                uid: uid.into(),
                generation: 1,
            },
            action: action.into(),
            args: vec![],
            desired_digest: String::new(),
            idempotency_key: String::new(),
            lease_epoch: 0,
            regarding: vec![],
        })
    }

    fn outcome(intent_seq: u64, ok: bool) -> Body {
        Body::Outcome(Outcome {
            intent_seq,
            unit: "volumes".into(),
            object: ObjectRef::default(),
            result: if ok {
                OutcomeResult::Ok(Done::default())
            } else {
                OutcomeResult::Err {
                    reason: "LvcreateFailed".into(),
                    message: "no space".into(),
                    retryable: true,
                }
            },
            duration_ms: 1,
            regarding: vec![],
        })
    }

    #[test]
    fn the_journal_proves_an_lvcreate_only_by_its_successful_outcome() {
        let records = vec![
            record(1, intent("lvcreate", "u-a")),
            record(2, outcome(1, true)),
            record(3, intent("lvcreate", "u-b")),
            record(4, outcome(3, false)),
            record(5, intent("remove-finalizer", "u-a")),
            record(6, outcome(5, true)),
            // Open: no outcome yet, and the interrupted pass around it.
            record(7, intent("lvcreate", "u-c")),
            record(8, intent(lvms_actors::PASS_ACTION, "node-a")),
            Err(lvms_journal::JournalError::IntentNotOpen { seq: 0 }),
        ];
        let open = vec![
            record(7, intent("lvcreate", "u-c")).unwrap(),
            record(8, intent(lvms_actors::PASS_ACTION, "node-a")).unwrap(),
        ];
        let (facts, skipped) = journal_facts(records.into_iter(), &open);
        assert_eq!(skipped, 1);
        assert!(facts.volumes["u-a"].created);
        assert_eq!(facts.volumes["u-a"].logical_volume, "pvc-u-a");
        assert_eq!(facts.volumes["u-a"].lines.len(), 2);
        assert!(facts.volumes["u-a"].lines[1].starts_with("#5 remove-finalizer ok"));
        assert!(
            !facts.volumes["u-b"].created,
            "a failed lvcreate proves nothing"
        );
        assert!(facts.volumes["u-b"].lines[0].contains("failed (LvcreateFailed)"));
        assert!(!facts.volumes["u-c"].created);
        assert_eq!(
            facts.open.len(),
            1,
            "a pass is not a step: {:?}",
            facts.open
        );
        assert_eq!(facts.open[0].object_uid, "u-c");
    }

    #[test]
    fn a_volume_keeps_its_latest_history_lines() {
        let mut records = vec![
            record(1, intent("lvcreate", "u-a")),
            record(2, outcome(1, true)),
        ];
        for i in 0..20u64 {
            records.push(record(10 + 2 * i, intent("lvresize", "u-a")));
            records.push(record(11 + 2 * i, outcome(10 + 2 * i, true)));
        }
        let (facts, _) = journal_facts(records.into_iter(), &[]);
        let h = &facts.volumes["u-a"];
        assert!(h.created, "proof outlives the lines kept");
        assert_eq!(h.lines.len(), HISTORY_LINES);
        assert!(h.lines.last().unwrap().starts_with("#48 lvresize ok"));
    }

    #[test]
    fn the_summary_names_only_kinds_found() {
        let mut c = counts(&[]);
        assert_eq!(summary(&c), "no orphan");
        c.insert(FindingKind::LeakedLv, 2);
        assert_eq!(summary(&c), "leaked-lv=2");
    }
}
