//! A volume group that should exist: finalizer, the one-time wipe, discovery's plan (create,
//! extend, reduce or refuse), the thin pool and its validation, lvmd.yaml, then the status and
//! gauges from a fresh look at the host.

use std::time::Duration;

use lvms_actors::{Done, EventNote, Pass, StepSpec, Steps, UnitError};

use super::VolumeGroupUnit;
use super::observe::Observed;
use crate::api::{LVMVolumeGroup, RaidStatus};
use crate::node::commands;
use crate::node::lvmd_config;
use crate::node::report::LvReport;
use crate::node::vg::actions::VolumeGroupAction as A;
use crate::node::vg::discovery::{self, DiscoveryInput, Plan, VgAction};
use crate::node::vg::events::EventReason;
use crate::node::vg::filter::FilteredDevices;
use crate::node::vg::gauges;
use crate::node::vg::status::{Phase, raid_status, raid_warning, refusal_reason, vg_status};
use crate::node::vg::{thin, validate, wipe};
use crate::objects::object_ref;
use crate::vgmanager::context::{cmd_err, warn};

impl VolumeGroupUnit {
    /// Thin pool create/extend + validateLVs (thick classes: nothing). Returns the validated
    /// `lvs` report of a thin class (the pool's figures for the metrics).
    async fn thin_pool(
        &self,
        steps: &Steps,
        vg: &LVMVolumeGroup,
    ) -> Result<Option<LvReport>, UnitError> {
        let Some(tp) = &vg.spec.thin_pool_config else {
            return Ok(None);
        };
        let lvs = self.read_lvs().await?;
        let vgs = self.read_vgs().await?;
        let space = thin::VgSpace::of(vgs.iter().find(|v| v.vg_name == self.vg));
        match thin::plan_thin_pool(&self.vg, tp, &lvs, space)
            .map_err(|e| warn(EventReason::ThinPoolCreateOrExtendFailed, e.to_string()))?
        {
            thin::ThinPoolAction::Create(argv) => self
                .host_step(steps, A::LvcreateThinPool, argv, None)
                .await
                .map_err(|e| warn(EventReason::ThinPoolCreateOrExtendFailed, e.message))?,
            thin::ThinPoolAction::Extend { argv, from, to } => self
                .host_step_with(
                    steps,
                    A::LvextendThinPool,
                    argv,
                    None,
                    vec![
                        ("pool_bytes", from.to_string()),
                        ("target_bytes", to.to_string()),
                        ("vg_bytes", space.size.unwrap_or(0).to_string()),
                    ],
                )
                .await
                .map_err(|e| warn(EventReason::ThinPoolCreateOrExtendFailed, e.message))?,
            // At its share of the VG: past the autoextend threshold, it grows beyond it.
            thin::ThinPoolAction::UpToDate => {
                if let Some(cfg) = &tp.auto_extend {
                    self.auto_extend(steps, tp, cfg, &lvs, space).await?;
                }
            }
        }
        let inconsistent =
            |e: validate::ValidateError| warn(EventReason::InconsistentLVs, e.status_message());
        let mut lvs = self.read_lvs().await?;
        let mut v = validate::validate_lvs(&self.vg, tp, &lvs).map_err(inconsistent)?;
        if v.activate {
            let activation_failed = |lvs: &LvReport| {
                inconsistent(validate::ValidateError::ActivationFailed {
                    lv_attr: lvs
                        .all()
                        .find(|lv| lv.lv_name == tp.name)
                        .map(|lv| lv.lv_attr.clone())
                        .unwrap_or_default(),
                })
            };
            let argv = commands::lvchange_activate(&self.vg, &tp.name).map_err(cmd_err)?;
            if let Err(e) = self.host_step(steps, A::LvchangeActivate, argv, None).await {
                tracing::warn!(error = %e, "lvchange -ay of the thin pool failed");
                return Err(activation_failed(&lvs));
            }
            // The metadata fill can only be read from the active pool.
            lvs = self.read_lvs().await?;
            v = validate::validate_lvs(&self.vg, tp, &lvs).map_err(inconsistent)?;
            if v.activate {
                return Err(activation_failed(&lvs));
            }
        }
        if let Some(bytes) = v.extend_metadata_to {
            let argv =
                commands::lvextend_pool_metadata(&self.vg, &tp.name, bytes).map_err(cmd_err)?;
            self.host_step(steps, A::LvextendPoolMetadata, argv, None)
                .await?;
        }
        Ok(Some(lvs))
    }

    /// The pool past its autoextend threshold grown from the VG's free space, data then
    /// metadata, each a journaled `lvextend` with a Normal Event saying why. Replay of an
    /// interrupted one re-checks; the next pass decides again from the pool's new use.
    async fn auto_extend(
        &self,
        steps: &Steps,
        tp: &crate::api::ThinPoolConfig,
        cfg: &crate::api::ThinPoolAutoExtend,
        lvs: &LvReport,
        space: thin::VgSpace,
    ) -> Result<(), UnitError> {
        let Some(pool) = lvs.find(&tp.name) else {
            return Ok(());
        };
        let failed = |m: String| warn(EventReason::ThinPoolCreateOrExtendFailed, m);
        let plan = thin::auto_extend(cfg, pool, space).map_err(|e| failed(e.to_string()))?;
        let used = |p: Option<f64>| p.map_or_else(|| "?".into(), |p| format!("{p:.1}%"));
        let why = |part: &str, from: u64, to: u64| {
            EventNote::normal(
                "ThinPoolAutoExtended",
                format!(
                    "thin pool {}/{} {part} grown from {from} to {to} bytes: data {}, metadata {} used, autoExtend at {}% by {}%",
                    self.vg,
                    tp.name,
                    used(pool.data_percent),
                    used(pool.metadata_percent),
                    cfg.threshold_percent,
                    cfg.extend_percent
                ),
            )
        };
        // Data, then metadata: (part, target, (its facts' key, current size), step, argv, what
        // the use was).
        let parts = [
            (
                "data",
                plan.data_to,
                ("pool_bytes", pool.lv_size),
                A::LvextendThinPool,
                plan.data_to
                    .map(|to| commands::lvextend_pool(&self.vg, &tp.name, to)),
                ("data_percent", used(pool.data_percent)),
            ),
            (
                "metadata",
                plan.metadata_to,
                ("metadata_bytes", pool.lv_metadata_size),
                A::LvextendPoolMetadata,
                plan.metadata_to
                    .map(|to| commands::lvextend_pool_metadata(&self.vg, &tp.name, to)),
                ("metadata_percent", used(pool.metadata_percent)),
            ),
        ];
        for (part, to, (from_key, from), action, argv, use_fact) in parts {
            let (Some(to), Some(argv)) = (to, argv) else {
                continue;
            };
            let from = from.unwrap_or_default();
            self.host_step_marked(
                steps,
                action,
                argv.map_err(cmd_err)?,
                Some(why(part, from, to)),
                vec![
                    (from_key, from.to_string()),
                    ("target_bytes", to.to_string()),
                    use_fact,
                ],
                super::AUTOEXTEND_MARK,
            )
            .await
            .map_err(|e| failed(e.message))?;
        }
        Ok(())
    }

    async fn write_lvmd(&self, steps: &Steps, vg: &LVMVolumeGroup) -> Result<(), UnitError> {
        let _guard = self.ctx.lvmd_lock.lock().await;
        let existing = self.read_lvmd()?;
        let applied = lvmd_config::apply_volume_group(existing.as_ref(), &self.vg, &vg.spec)
            .map_err(|e| UnitError::permanent("LVMDConfigInvalid", e.to_string()))?;
        if !applied.changed {
            return Ok(());
        }
        let text = lvmd_config::render(&applied.config)
            .map_err(|e| UnitError::permanent("LVMDConfigInvalid", e.to_string()))?;
        let spec = StepSpec::new(self.host_object("lvmd.yaml"), A::WriteLvmdConfig).digest(
            crate::objects::digest(&serde_json::Value::String(text.clone())),
        );
        steps
            .run(spec, || async {
                Ok(self.write_file(Some(&text))?.with_event(EventNote::normal(
                    EventReason::LVMDConfigUpdated.as_str(),
                    crate::node::vg::events::MSG_LVMD_CONFIG_UPDATED,
                )))
            })
            .await?;
        Ok(())
    }

    fn set_raid_gauges(&self, raid: Option<&RaidStatus>) {
        self.ctx.metrics.set_raid(
            &self.vg,
            &self.ctx.node,
            raid.map(gauges::raid_gauges).as_ref(),
        );
    }

    fn set_status(
        &self,
        vg: &LVMVolumeGroup,
        phase: Phase,
        obs: &Observed,
        devices: &FilteredDevices,
    ) {
        self.set_status_raid(vg, phase, obs, devices, None);
    }

    fn set_status_raid(
        &self,
        vg: &LVMVolumeGroup,
        phase: Phase,
        obs: &Observed,
        devices: &FilteredDevices,
        raid: Option<RaidStatus>,
    ) {
        self.ctx.report.set(vg_status(
            &self.vg,
            &vg.spec,
            phase,
            obs.existing.as_ref(),
            devices,
            raid,
        ));
    }

    /// LVMS `buildRAIDStatus` for RAID classes: `lvs` health of the RAID LVs and missing PVs.
    async fn raid_health(
        &self,
        vg: &LVMVolumeGroup,
        obs: &Observed,
    ) -> Result<Option<RaidStatus>, UnitError> {
        let (Some(rc), Some(existing)) = (&vg.spec.raid_config, &obs.existing) else {
            return Ok(None);
        };
        let lvs = self.read_lvs().await?;
        let all: Vec<_> = lvs.all().cloned().collect();
        raid_status(&all, &existing.pvs, rc.raid_type)
            .map_err(|e| UnitError::retryable("LvsFailed", format!("lvs of {}: {e}", self.vg)))
    }

    /// forceWipeDevicesAndDestroyAllData, once per node (LVMS): dmsetup remove of mappings
    /// under the selected devices, wipefs of each, then the per-node annotation that stops it
    /// from ever happening again. Returns whether it wiped (the next pass creates the VG).
    async fn wipe(
        &self,
        steps: &Steps,
        vg: &LVMVolumeGroup,
        obs: &Observed,
    ) -> Result<bool, UnitError> {
        let annotations = vg.metadata.annotations.clone().unwrap_or_default();
        if !wipe::should_wipe(&vg.spec, &annotations, &self.ctx.node) {
            return Ok(false);
        }
        let plan = wipe::wipe_plan(&vg.spec, &obs.resolved, &obs.devices)
            .map_err(|e| UnitError::retryable("DeviceWipeFailed", e.to_string()))?;
        for (dev, why) in &plan.refused {
            tracing::warn!(device = %dev, reason = %why, "not wiped");
        }
        for step in &plan.steps {
            match step {
                wipe::WipeStep::DmsetupRemove(dev) => {
                    let argv = commands::dmsetup_remove(dev).map_err(cmd_err)?;
                    let spec = StepSpec::new(self.host_object(&self.vg), A::DmsetupRemove)
                        .args(argv.clone());
                    steps
                        .run(spec, || async {
                            match self.exec(&argv, &[]).await {
                                Ok(_) => Ok(Done::default()),
                                // Nothing mapped there is what we want.
                                Err(e) if commands::dmsetup_reference_not_found(&e.to_string()) => {
                                    Ok(Done::default().with_fact("not-found", "true"))
                                }
                                Err(e) => {
                                    Err(UnitError::retryable("DeviceWipeFailed", e.to_string()))
                                }
                            }
                        })
                        .await?;
                }
                wipe::WipeStep::Wipefs(dev) => {
                    let argv = commands::wipefs(dev).map_err(cmd_err)?;
                    self.host_step(steps, A::Wipefs, argv, None).await?;
                }
            }
        }
        if !plan.wipes_anything() {
            return Ok(false);
        }
        let key = wipe::wiped_annotation_key(&self.ctx.node);
        let value = wipe::wiped_annotation_value(&k8s_openapi::jiff::Timestamp::now().to_string());
        let spec = StepSpec::new(object_ref(vg), A::AnnotateWiped).args(vec![key.clone()]);
        steps
            .run(spec, || self.ctx.api.annotate(&self.vg, &key, &value))
            .await?;
        Ok(true)
    }

    pub(super) async fn reconcile_present(
        &self,
        steps: &Steps,
        vg: &LVMVolumeGroup,
    ) -> Result<Pass, UnitError> {
        if !self.has_finalizer(vg) {
            self.set_finalizer(steps, vg, true).await?;
        }
        let obs = self.observe(vg).await?;
        if self.wipe(steps, vg, &obs).await? {
            return Ok(Pass {
                summary: format!("devices of {} wiped", self.vg),
                requeue_after: Some(Duration::from_millis(200)),
            });
        }
        let filtered = self.filter(vg, &obs);
        let input = DiscoveryInput {
            node: &self.ctx.node,
            vg_name: &self.vg,
            spec: &vg.spec,
            resolved: &obs.resolved,
            existing_vg: obs.existing.as_ref(),
            vgcreate_assume_yes: false,
        };
        let decision = discovery::plan(&input, filtered);
        match decision.plan {
            Plan::Fail {
                event,
                error,
                requeue_after,
            } => {
                self.set_status(
                    vg,
                    Phase::Failed(error.to_string()),
                    &obs,
                    &decision.devices,
                );
                // A RAID class refused for a missing member still has its array: its gauges
                // say so (LVMSRAIDDegraded). An lvs that fails leaves them as they were.
                if let Ok(Some(raid)) = self.raid_health(vg, &obs).await {
                    self.set_raid_gauges(Some(&raid));
                }
                let mut err = UnitError::retryable(refusal_reason(event), error.to_string());
                err.retry_after = requeue_after;
                Err(err)
            }
            Plan::Grow {
                action,
                requeue_after,
            } => {
                self.set_status(vg, Phase::Progressing, &obs, &decision.devices);
                let (name, argv) = match &action {
                    VgAction::Create {
                        devices,
                        assume_yes,
                    } => (
                        A::Vgcreate,
                        commands::vgcreate(&self.vg, devices, *assume_yes),
                    ),
                    VgAction::Extend { devices } => {
                        (A::Vgextend, commands::vgextend(&self.vg, devices))
                    }
                };
                let argv = argv.map_err(cmd_err)?;
                // LVMS reports a failed vgcreate/vgextend as the class's Failed status, not
                // only as an Event: a device lvm2 refuses (e.g. one that shrank to nothing)
                // must not leave the node Progressing for good.
                self.host_step(steps, name, argv, None).await.map_err(|e| {
                    self.set_status(
                        vg,
                        Phase::Failed(e.message.clone()),
                        &obs,
                        &decision.devices,
                    );
                    warn(EventReason::VGCreateOrExtendFailed, e.message)
                })?;
                self.finish(steps, vg, self.requeue(Some(requeue_after)))
                    .await
            }
            Plan::Steady {
                remove,
                requeue_after,
            } => {
                for pv in &remove {
                    let reduce = commands::vgreduce(&self.vg, pv).map_err(cmd_err)?;
                    self.host_step(steps, A::Vgreduce, reduce, None)
                        .await
                        .map_err(|e| warn(EventReason::DeviceRemovalFailed, e.message))?;
                    let pvremove = commands::pvremove(std::slice::from_ref(pv)).map_err(cmd_err)?;
                    let note =
                        crate::node::vg::events::device_removed_message(std::slice::from_ref(pv));
                    self.host_step(
                        steps,
                        A::Pvremove,
                        pvremove,
                        Some(EventNote::normal(EventReason::DeviceRemoved.as_str(), note)),
                    )
                    .await
                    .map_err(|e| warn(EventReason::DeviceRemovalFailed, e.message))?;
                }
                self.finish(steps, vg, self.requeue(requeue_after)).await
            }
        }
    }

    /// Thin pool, lvmd.yaml, then Ready with a fresh look at the host.
    async fn finish(
        &self,
        steps: &Steps,
        vg: &LVMVolumeGroup,
        requeue_after: Option<Duration>,
    ) -> Result<Pass, UnitError> {
        let lvs = match self.thin_pool(steps, vg).await {
            Ok(lvs) => lvs,
            Err(e) => {
                let obs = self.observe(vg).await?;
                self.set_status(
                    vg,
                    Phase::Failed(e.message.clone()),
                    &obs,
                    &Default::default(),
                );
                return Err(e);
            }
        };
        self.write_lvmd(steps, vg).await?;
        let obs = self.observe(vg).await?;
        let filtered = self.filter(vg, &obs);
        let raid = self.raid_health(vg, &obs).await?;
        // Gauges first: whoever sees the Ready status can scrape this pass's figures.
        if let Some(existing) = &obs.existing {
            let thin = vg.spec.thin_pool_config.as_ref().zip(lvs.as_ref());
            self.ctx.metrics.set_volume_group(
                &self.vg,
                &self.ctx.node,
                &gauges::volume_group_gauges(existing, thin),
            );
        }
        self.set_raid_gauges(raid.as_ref());
        self.set_status_raid(vg, Phase::Ready, &obs, &filtered, raid.clone());
        if let Some((reason, note)) = raid_warning(&self.vg, raid.as_ref()) {
            // One Event object with a growing count, every RAID requeue until it heals.
            return Err(warn(reason, note).with_retry_after(discovery::RAID_RECONCILE_INTERVAL));
        }
        Ok(Pass {
            summary: format!("volume group {} ready", self.vg),
            requeue_after,
        })
    }
}
