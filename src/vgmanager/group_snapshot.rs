//! Volume group snapshots on this node: the LogicalVolume actor's side of CSI's
//! GroupController. The controller writes one snapshot LogicalVolume per member, each
//! annotated with the group and the list of members; this takes them at one instant (the
//! decisions and why they are consistent: [`crate::node::volume::group_plan`]): hold (the sources'
//! gates suspended), one `lvcreate -s` per member, release, each a journaled step. A hold a
//! crash left is thawed before anything else runs, and a partly taken group is removed and
//! taken again.

use std::collections::BTreeMap;
use std::sync::Arc;

use lvms_actors::{Done, StepSpec, Steps, UnitError};
use lvms_journal::ObjectRef;
use tonic::Code;
use tracing::{Instrument, info, info_span, warn};

use super::context::host_err;
use super::node_volumes::NodeReads;
use super::volumes::{Observed, VolumesUnit, host_view};
use crate::api::LogicalVolume;
use crate::api::topolvm::GROUP_MEMBERS_ANNOTATION;
use crate::node::lvmd_config::LvmdConfig;
use crate::node::volume::actions::VolumeAction as A;
use crate::node::volume::commands as cmd;
use crate::node::volume::gate;
use crate::node::volume::group_plan::{
    GroupPlan, MemberState, Source, held_devices, hold_gates, plan_group, under_hold,
    with_group_tag,
};
use crate::node::volume::plan::{Plan, StatusWrite, plan, resolve_class};
use crate::node::volume::view::view_of;
use crate::objects::object_ref;

/// The journal object kind of a volume group snapshot on its node.
pub const GROUP_KIND: &str = "VolumeGroupSnapshot";

fn group_ref(group: &str) -> ObjectRef {
    ObjectRef {
        kind: GROUP_KIND.into(),
        name: group.into(),
        ..ObjectRef::default()
    }
}

fn unavailable(e: crate::csi::errors::CsiError) -> UnitError {
    UnitError::retryable("DeviceMapperUnreadable", e.message)
}

/// A member to take: its object, its `lvcreate -s` under the hold, its source.
type Member = (Arc<LogicalVolume>, Vec<String>, Source);

/// One group's members (the LogicalVolumes this node has) and the member names it expects.
struct Group {
    members: Vec<Arc<LogicalVolume>>,
    expected: Vec<String>,
}

fn groups_of(volumes: &[Arc<LogicalVolume>]) -> BTreeMap<String, Group> {
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    for lv in volumes {
        let Some(name) = view_of(lv).group else {
            continue;
        };
        let expected: Vec<String> = lv
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(GROUP_MEMBERS_ANNOTATION))
            .map(|m| {
                m.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        let g = groups.entry(name).or_insert_with(|| Group {
            members: Vec::new(),
            expected: Vec::new(),
        });
        g.members.push(lv.clone());
        for e in expected {
            if !g.expected.contains(&e) {
                g.expected.push(e);
            }
        }
    }
    groups
}

impl VolumesUnit {
    /// Thaws every gate, and every LV of the class's VGs, left suspended (a crash during a
    /// hold, a gate reload or an lvm2 command), journaled. Measured on 6.1: an lvm2 scan (`lvs
    /// vg`) of a suspended gate waits, uninterruptibly, for its resume, so this runs before the
    /// first pass reads lvm2.
    pub(super) async fn thaw_held(&self, steps: &Steps, vgs: &[&str]) -> Result<(), UnitError> {
        let reads = NodeReads { ctx: &self.ctx };
        let held = held_devices(&reads.dm_devices().await.map_err(unavailable)?, vgs);
        if held.is_empty() {
            return Ok(());
        }
        warn!(devices = ?held, "devices left suspended by an interrupted hold or lvm2 command: resuming them");
        let argv = gate::resume_argv(&held);
        let spec = StepSpec::new(self.node_object(), A::ReleaseGates)
            .args(vec![format!("gates={}", held.join(","))]);
        steps
            .run(spec, || async {
                self.exec(&argv).await.map_err(host_err("dmsetup resume"))?;
                Ok(Done::default())
            })
            .await?;
        Ok(())
    }

    /// Once per process, before anything reads lvm2: thaw what a crash left held (an lvm2 scan
    /// of a suspended gate would wait for a resume that only this can do).
    pub(super) async fn thaw_once(
        &self,
        steps: &Steps,
        config: &LvmdConfig,
    ) -> Result<(), UnitError> {
        use std::sync::atomic::Ordering;
        if self.holds_checked.load(Ordering::Relaxed) {
            return Ok(());
        }
        let _gates = self.ctx.gate_lock.lock().await;
        let vgs: Vec<&str> = config
            .device_classes
            .iter()
            .map(|c| c.volume_group.as_str())
            .collect();
        self.thaw_held(steps, &vgs).await?;
        self.holds_checked.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Every group of this node brought forward: waited for, cleaned of a crash's partial
    /// snapshots, or taken. Runs under the gate lock (no publish makes or removes a gate
    /// meanwhile).
    pub(super) async fn groups(
        &self,
        steps: &Steps,
        config: &LvmdConfig,
        observed: &mut Observed,
    ) -> Result<(), UnitError> {
        let groups = groups_of(&self.volumes());
        if groups.is_empty() {
            return Ok(());
        }
        let _gates = self.ctx.gate_lock.lock().await;
        let mut first_err = None;
        for (name, group) in groups {
            match self.group(steps, config, observed, &name, &group).await {
                Ok(_) => {}
                Err(e) => {
                    warn!(group = %name, error = %e.message, "group snapshot step failed");
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    async fn group(
        &self,
        steps: &Steps,
        config: &LvmdConfig,
        observed: &mut Observed,
        name: &str,
        group: &Group,
    ) -> Result<bool, UnitError> {
        let mut states = Vec::new();
        for lv in &group.members {
            let v = view_of(lv);
            let class = resolve_class(config, &v.device_class).ok();
            let on_disk = match class.map(|c| observed.get(&c.name)) {
                Some(Some(Ok(o))) => o.lvs.iter().any(|l| l.lv_name == v.uid),
                Some(Some(Err(e))) => return Err(e.unit_error()),
                _ => false,
            };
            states.push(MemberState {
                name: v.name.clone(),
                uid: v.uid.clone(),
                on_disk,
                settled: v.volume_id.is_some() || v.code != 0,
                deleting: v.deleting,
            });
        }
        match plan_group(&group.expected, &states) {
            GroupPlan::Settled => Ok(false),
            GroupPlan::Wait(missing) => {
                info!(group = %name, ?missing, "waiting for every member of the group");
                Ok(false)
            }
            GroupPlan::RemovePartial(uids) => {
                warn!(group = %name, partial = ?uids, "removing a partly taken group to take it again");
                for lv in group
                    .members
                    .iter()
                    .filter(|l| uids.contains(&view_of(l).uid))
                {
                    self.remove_member(steps, config, observed, lv).await?;
                }
                // None is on disk now: the group is taken whole, at a new instant.
                self.take(steps, config, observed, name, group).await
            }
            GroupPlan::Take => self.take(steps, config, observed, name, group).await,
        }
    }

    async fn remove_member(
        &self,
        steps: &Steps,
        config: &LvmdConfig,
        observed: &mut Observed,
        lv: &LogicalVolume,
    ) -> Result<(), UnitError> {
        let v = view_of(lv);
        let class = resolve_class(config, &v.device_class)
            .map_err(|m| UnitError::permanent("UnknownDeviceClass", m.to_string()))?;
        let argv =
            cmd::lvremove_volume(&class.volume_group, &v.uid).map_err(super::context::cmd_err)?;
        self.host_step(steps, object_ref(lv), A::Lvremove, argv)
            .await?;
        self.refresh(observed, &class.name, &class.volume_group)
            .await;
        Ok(())
    }

    /// Each member's `lvcreate -s`, as the per-volume planner would run it alone; a member the
    /// planner refuses (say, no room) refuses the whole group, naming it.
    fn member_commands(
        &self,
        config: &LvmdConfig,
        observed: &Observed,
        group: &Group,
    ) -> Result<Option<Vec<Member>>, (Code, String)> {
        let all = self.volumes();
        let mut out = Vec::new();
        for lv in &group.members {
            let mut v = view_of(lv);
            v.group = None;
            let class = resolve_class(config, &v.device_class)
                .map_err(|m| (Code::NotFound, format!("{}: {m}", v.name)))?;
            let host = host_view(config, observed, &v, &all)
                .map_err(|e| (Code::Unavailable, format!("{}: {}", v.name, e.message)))?;
            let source_id = host.source_volume_id.clone();
            match plan(&v, &host) {
                Plan::Host {
                    action: A::LvcreateSnapshot,
                    argv,
                } => {
                    let Some(Ok(volume_id)) = source_id else {
                        return Err((Code::NotFound, format!("{}: no source", v.name)));
                    };
                    let dm_name = gate::lv_dm_name(&class.volume_group, &volume_id);
                    let group = view_of(lv).group.unwrap_or_default();
                    out.push((
                        lv.clone(),
                        under_hold(with_group_tag(argv, &group)),
                        Source { volume_id, dm_name },
                    ));
                }
                Plan::Status(StatusWrite::Refused { code, message }) => {
                    return Err((code, format!("member {}: {message}", v.name)));
                }
                // Its finalizer is not on yet (the store is behind the patch): the patch's
                // event brings another pass.
                _ => return Ok(None),
            }
        }
        Ok(Some(out))
    }

    async fn take(
        &self,
        steps: &Steps,
        config: &LvmdConfig,
        observed: &mut Observed,
        name: &str,
        group: &Group,
    ) -> Result<bool, UnitError> {
        let span = info_span!("group-snapshot", otel.name = format!("group snapshot {name}"), group = %name, members = group.members.len());
        if let Some(tp) = group.members.iter().find_map(|lv| {
            lv.metadata
                .annotations
                .as_ref()?
                .get(crate::telemetry::otel::TRACEPARENT_ANNOTATION)
                .cloned()
        }) {
            crate::telemetry::otel::adopt(&span, &tp);
        }
        async {
            let members = match self.member_commands(config, observed, group) {
                Ok(Some(m)) => m,
                Ok(None) => return Ok(false),
                Err((Code::Unavailable, message)) => {
                    return Err(UnitError::retryable("GroupNotReady", message));
                }
                Err((code, message)) => {
                    return self.refuse(steps, group, code, &message).await.map(|()| false);
                }
            };
            let sources: Vec<Source> = members.iter().map(|(_, _, s)| s.clone()).collect();
            let devices = NodeReads { ctx: &self.ctx }
                .dm_devices()
                .await
                .map_err(unavailable)?;
            let gates = match hold_gates(&sources, &devices) {
                Ok(g) => g,
                Err(message) => {
                    return self
                        .refuse(steps, group, Code::FailedPrecondition, &message)
                        .await
                        .map(|()| false);
                }
            };
            let names: Vec<String> = members
                .iter()
                .map(|(lv, _, _)| lv.metadata.name.clone().unwrap_or_default())
                .collect();
            if !gates.is_empty() {
                let spec = StepSpec::new(group_ref(name), A::HoldGates).args(vec![
                    format!("gates={}", gates.join(",")),
                    format!("members={}", names.join(",")),
                ]);
                steps
                    .run(spec, || async {
                        let out = self
                            .exec(&gate::suspend_argv(&gates))
                            .await
                            .map_err(host_err("dmsetup suspend"));
                        if out.is_err() {
                            // A gate that did suspend must not stay frozen.
                            let _ = self.exec(&gate::resume_argv(&gates)).await;
                        }
                        Ok(Done::default().with_fact("held_ms", out?.took.as_millis().to_string()))
                    })
                    .await?;
            }
            let started = std::time::Instant::now();
            let mut taken = Ok(());
            let mut failed = None;
            for (lv, argv, _) in &members {
                taken = self.host_step(steps, object_ref(lv.as_ref()), A::LvcreateSnapshot, argv.clone()).await;
                if taken.is_err() {
                    failed = Some(lv);
                    break;
                }
            }
            if !gates.is_empty() {
                let spec = StepSpec::new(group_ref(name), A::ReleaseGates)
                    .args(vec![format!("gates={}", gates.join(","))]);
                steps
                    .run(spec, || async {
                        self.exec(&gate::resume_argv(&gates))
                            .await
                            .map_err(host_err("dmsetup resume"))?;
                        Ok(Done::default())
                    })
                    .await?;
            }
            let held = started.elapsed();
            for c in config.device_classes.iter() {
                self.refresh(observed, &c.name, &c.volume_group).await;
            }
            if let (Err(e), Some(lv)) = (&taken, failed) {
                // A device a killed lvm2 left under the id this member was given: deleted
                // now, the group is taken again (whole) by the next pass.
                let v = view_of(lv);
                if let Ok(class) = resolve_class(config, &v.device_class) {
                    self.repair_thin(steps, &object_ref(lv.as_ref()), class, observed, A::LvcreateSnapshot, &v.uid, false, e)
                        .await?;
                }
            }
            taken?;
            info!(group = %name, members = ?names, gates = gates.len(), held_ms = held.as_millis() as u64, "group snapshot taken at one instant");
            Ok(true)
        }
        .instrument(span)
        .await
    }

    /// Refuse every member (the controller deletes them and returns the reason).
    async fn refuse(
        &self,
        steps: &Steps,
        group: &Group,
        code: Code,
        message: &str,
    ) -> Result<(), UnitError> {
        warn!(%message, "group snapshot refused");
        for lv in &group.members {
            self.write_status(
                steps,
                object_ref(lv.as_ref()),
                lv,
                StatusWrite::Refused {
                    code,
                    message: message.to_string(),
                },
            )
            .await?;
        }
        Ok(())
    }
}
