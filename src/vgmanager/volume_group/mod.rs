//! One actor per LVMVolumeGroup on this node (LVMS's vg-manager reconcile): observe the host
//! (lsblk, pvs, vgs), decide with the pure `node::vg` functions, and run each host mutation as a
//! journaled step. After a crash an open intent is resolved by reading the host first: a
//! vgcreate that happened is seen in `vgs` and never repeated.
//!
//! [`observe`] reads the host, [`present`] builds a volume group that should exist, [`delete`]
//! tears one down; this file holds the unit, its steps and its replay.

mod delete;
mod observe;
mod present;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use lvms_actors::{Action, Done, EventNote, Pass, StepSpec, Steps, Unit, UnitError};
use lvms_journal::{Intent, ObjectRef};

use super::context::{HOST_KIND, HostClock, NodeCtx, cmd_err, host_err};
use crate::api::{LVMVolumeGroup, NODE_CLEANUP_FINALIZER_PREFIX};
use crate::node::commands;
use crate::node::lvmd_config;
use crate::node::report::{
    ExistingVg, LvReport, PhysicalVolume, find_vg, join_vgs, parse_lvs, parse_pvs, parse_vgs,
};
use crate::node::vg::actions::{VolumeGroupAction as A, recorded_argv};
use crate::node::vg::discovery;
use crate::node::vg::events::EventReason;
use crate::node::vg::replay;
use crate::objects::object_ref;

/// The journal unit of a volume group's actor is this prefix and the VG's name.
pub const UNIT_PREFIX: &str = "vg/";

/// The journal unit of the volume group `vg`.
pub fn unit_name(vg: &str) -> String {
    format!("{UNIT_PREFIX}{vg}")
}

pub struct VolumeGroupUnit {
    pub unit: String,
    pub vg: String,
    pub ctx: Arc<NodeCtx>,
    /// Time spent in host commands during the current pass (passes of one actor are serial).
    pub host_clock: HostClock,
    /// The operator traceparent last continued: a pass joins the operator's trace once per
    /// change, not on every later requeue.
    pub continued_trace: std::sync::Mutex<Option<String>>,
}

/// The digest that marks an autoextend's lvextend (see [`VolumeGroupUnit::host_step_marked`]).
pub(crate) const AUTOEXTEND_MARK: &str = "autoextend";

impl VolumeGroupUnit {
    fn finalizer(&self) -> String {
        format!("{NODE_CLEANUP_FINALIZER_PREFIX}{}", self.ctx.node)
    }

    fn host_object(&self, what: &str) -> ObjectRef {
        ObjectRef {
            kind: HOST_KIND.into(),
            namespace: String::new(),
            name: format!("{}/{what}", self.ctx.node),
            uid: String::new(),
            generation: 0,
        }
    }

    /// Every host command of this actor goes through here (timed for the pass figures).
    async fn exec(
        &self,
        argv: &[String],
        ok_codes: &[i32],
    ) -> Result<super::host::HostOutput, super::host::HostError> {
        let started = std::time::Instant::now();
        let out = self.ctx.host.run(argv, ok_codes).await;
        self.host_clock.add(started.elapsed());
        out
    }

    async fn run_host(&self, argv: &[String]) -> Result<String, UnitError> {
        self.exec(argv, &[])
            .await
            .map(|o| o.stdout)
            .map_err(host_err(
                argv.first().map(String::as_str).unwrap_or("command"),
            ))
    }

    /// LVMS's 30 s requeue, or the node's `--reconcile-interval` in its place.
    fn requeue(&self, after: Option<Duration>) -> Option<Duration> {
        after.map(|d| {
            if d == discovery::RECONCILE_INTERVAL {
                self.ctx.reconcile_interval
            } else {
                d
            }
        })
    }

    /// One host mutation under a write-ahead intent; the argv is the intent's args.
    async fn host_step(
        &self,
        steps: &Steps,
        action: A,
        argv: Vec<String>,
        event: Option<EventNote>,
    ) -> Result<(), UnitError> {
        self.host_step_with(steps, action, argv, event, Vec::new())
            .await
    }

    /// A host step whose outcome also records `facts` (sizes it was planned from, say), so a
    /// post-mortem reads why it ran.
    async fn host_step_with(
        &self,
        steps: &Steps,
        action: A,
        argv: Vec<String>,
        event: Option<EventNote>,
        facts: Vec<(&'static str, String)>,
    ) -> Result<(), UnitError> {
        self.host_step_marked(steps, action, argv, event, facts, "")
            .await
    }

    /// [`Self::host_step_with`], the intent marked (its digest; the argv stays in its args) so
    /// replay can tell steps of one action apart: an autoextend's lvextend from a sizePercent
    /// growth's, say.
    async fn host_step_marked(
        &self,
        steps: &Steps,
        action: A,
        argv: Vec<String>,
        event: Option<EventNote>,
        facts: Vec<(&'static str, String)>,
        mark: &str,
    ) -> Result<(), UnitError> {
        let spec = StepSpec::new(self.host_object(&self.vg), action)
            .args(argv.clone())
            .digest(mark);
        steps
            .run(spec, || async {
                let out = self
                    .exec(&argv, &[])
                    .await
                    .map_err(host_err(action.name()))?;
                let mut done = Done {
                    event,
                    ..Done::default()
                }
                .with_fact("host_ms", out.took.as_millis().to_string());
                for (k, v) in facts {
                    done = done.with_fact(k, v);
                }
                Ok(done)
            })
            .await?;
        Ok(())
    }

    fn has_finalizer(&self, vg: &LVMVolumeGroup) -> bool {
        let fin = self.finalizer();
        vg.metadata.finalizers.iter().flatten().any(|f| *f == fin)
    }

    /// Add or remove this node's cleanup finalizer, as one journaled step.
    async fn set_finalizer(
        &self,
        steps: &Steps,
        vg: &LVMVolumeGroup,
        present: bool,
    ) -> Result<(), UnitError> {
        let fin = self.finalizer();
        let action = if present {
            A::AddFinalizer
        } else {
            A::RemoveFinalizer
        };
        let spec = StepSpec::new(object_ref(vg), action).args(vec![fin.clone()]);
        steps
            .run(spec, || self.ctx.api.set_finalizer(&self.vg, &fin, present))
            .await?;
        Ok(())
    }

    /// The node's PVs and this volume group joined with its PVs (when it exists), from one
    /// `pvs` and one `vgs`. Unreadable is an error to retry, never "no PVs" or "no VG".
    async fn read_pvs_and_vg(
        &self,
    ) -> Result<(Vec<PhysicalVolume>, Option<ExistingVg>), UnitError> {
        let pvs = parse_pvs(&self.run_host(&commands::pvs(None)).await?)
            .map_err(|e| UnitError::retryable("PvsFailed", e.to_string()))?;
        let vgs = self.read_vgs().await?;
        let existing = find_vg(&join_vgs(&vgs, &pvs), &self.vg).cloned();
        Ok((pvs, existing))
    }

    /// `vgs` of the node. Unreadable is an error to retry, never "no VGs".
    async fn read_vgs(&self) -> Result<Vec<crate::node::report::VolumeGroupRow>, UnitError> {
        parse_vgs(&self.run_host(&commands::vgs(true)).await?)
            .map_err(|e| UnitError::retryable("VgsFailed", e.to_string()))
    }

    /// `lvs` of this volume group.
    async fn read_lvs(&self) -> Result<LvReport, UnitError> {
        let out = self
            .run_host(&commands::lvs(&self.vg).map_err(cmd_err)?)
            .await?;
        parse_lvs(&out).map_err(|e| UnitError::retryable("LvsFailed", e.to_string()))
    }

    fn read_lvmd(&self) -> Result<Option<lvmd_config::LvmdConfig>, UnitError> {
        self.ctx.read_lvmd()
    }

    /// Written atomically (temp file + rename): a crash never leaves a half-written lvmd.yaml.
    fn write_file(&self, text: Option<&str>) -> Result<Done, UnitError> {
        let path = &self.ctx.lvmd_path;
        let io = |e: std::io::Error| {
            UnitError::retryable("LVMDConfigWriteFailed", format!("{}: {e}", path.display()))
        };
        match text {
            Some(t) => self
                .ctx
                .host
                .write_atomic(path, t, lvmd_config::FILE_MODE)
                .map_err(io)?,
            None => self.ctx.host.remove_file(path).map_err(io)?,
        }
        Ok(Done::default().with_fact("path", path.display().to_string()))
    }
}

impl Unit for VolumeGroupUnit {
    fn name(&self) -> &str {
        &self.unit
    }

    fn traceparent(&self) -> Option<String> {
        let vg = self
            .ctx
            .volume_groups
            .state()
            .into_iter()
            .find(|v| v.metadata.name.as_deref() == Some(self.vg.as_str()))?;
        let tp = vg
            .metadata
            .annotations
            .as_ref()?
            .get(crate::telemetry::otel::TRACEPARENT_ANNOTATION)?
            .clone();
        // Tracing only: a poisoned lock just means the pass starts its own trace.
        let mut last = self.continued_trace.lock().ok()?;
        if last.as_deref() == Some(tp.as_str()) {
            return None;
        }
        *last = Some(tp.clone());
        Some(tp)
    }

    async fn reconcile(&self, steps: &Steps) -> Result<Pass, UnitError> {
        let Some(vg) = self
            .ctx
            .volume_groups
            .state()
            .into_iter()
            .find(|v| v.metadata.name.as_deref() == Some(self.vg.as_str()))
        else {
            self.ctx.report.remove(&self.vg);
            return Ok(Pass {
                summary: "LVMVolumeGroup gone".into(),
                requeue_after: None,
            });
        };
        steps.begin(object_ref(vg.as_ref()));
        // The node status and LVMCluster as they are now: this pass's Events go to them even
        // if they are published after a restart, when newer objects may carry their names.
        let node_status = self
            .ctx
            .node_statuses
            .state()
            .into_iter()
            .find(|n| n.metadata.name.as_deref() == Some(self.ctx.node.as_str()));
        steps.regard(super::events::regarded(&vg, node_status.as_deref()));
        self.host_clock.reset();
        let started = std::time::Instant::now();
        let result = if vg.metadata.deletion_timestamp.is_some() {
            self.delete(steps, &vg).await
        } else {
            self.reconcile_present(steps, &vg).await
        };
        let took = started.elapsed();
        let (host, commands) = self.host_clock.read();
        // The split the benchmark reports: lvm2 and friends vs lvms itself (journal, API,
        // decisions).
        tracing::debug!(
            volume_group = %self.vg,
            took_us = took.as_micros() as u64,
            host_us = host.as_micros() as u64,
            lvms_us = took.saturating_sub(host).as_micros() as u64,
            host_commands = commands,
            ok = result.is_ok(),
            "volume group pass"
        );
        result
    }

    /// Read the host before anything is redone: a VG change that happened is recorded as
    /// done (`already-done`); one that did not is left to the next pass, which decides again
    /// from the host (`not-done`).
    async fn replay(&self, intent: &Intent, _steps: &Steps) -> Result<Done, UnitError> {
        // An action this release does not know is reported on the intent, never guessed at.
        let action = intent
            .action_as::<A>()
            .map_err(|e| UnitError::permanent("UnknownAction", e.to_string()))?;
        let argv = recorded_argv(&intent.args, &intent.desired_digest);
        // An autoextend that happened is done, and its Event still goes out (the outcome that
        // would have carried it was lost with the process); its target is absolute, so one that
        // did not happen is the next pass's to decide again, never a second growth.
        if let Some((pool, target)) = replay::pool_extension(action, &argv) {
            let lvs = self.read_lvs().await?;
            let name = pool.rsplit('/').next().unwrap_or(pool);
            let have = lvs.find(name).and_then(|lv| match action {
                A::LvextendThinPool => lv.lv_size,
                _ => lv.lv_metadata_size,
            });
            if have.is_none_or(|h| h < target) {
                return Ok(Done::replayed(replay::Verdict::NotDone.into()));
            }
            let mut done = Done::replayed(replay::Verdict::AlreadyDone.into());
            // Only an autoextend had an Event to lose; a sizePercent growth has none.
            if intent.desired_digest == AUTOEXTEND_MARK {
                let part = if action == A::LvextendThinPool {
                    "data"
                } else {
                    "metadata"
                };
                done.event = Some(EventNote::normal(
                    "ThinPoolAutoExtended",
                    format!(
                        "thin pool {pool} {part} grown to {target} bytes by autoExtend (recorded after a restart: the use it was grown at was not kept)"
                    ),
                ));
            }
            return Ok(done);
        }
        let (pvs, existing) = self.read_pvs_and_vg().await?;
        let verdict = replay::verdict(action, &argv, &self.vg, &pvs, existing.as_ref());
        let mut done = Done::replayed(verdict.into());
        // A day-2 device removal that happened still gets its Event (the outcome that would
        // have carried it was lost with the process).
        if verdict == replay::Verdict::AlreadyDone && action == A::Pvremove {
            let devices: Vec<String> = replay::devices_in(&argv)
                .into_iter()
                .map(String::from)
                .collect();
            done.event = Some(EventNote::normal(
                EventReason::DeviceRemoved.as_str(),
                crate::node::vg::events::device_removed_message(&devices),
            ));
        }
        Ok(done)
    }
}
