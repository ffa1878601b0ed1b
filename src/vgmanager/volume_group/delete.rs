//! A volume group being deleted (LVMS `processDelete`): refuse while users' volumes remain,
//! else pool → VG → PVs → lvmd.yaml → status entry → finalizer. A VG a crash already removed
//! is torn down from the devices the journal recorded.

use std::collections::BTreeSet;

use lvms_actors::{EventNote, Pass, StepSpec, Steps, UnitError};

use super::VolumeGroupUnit;
use crate::api::LVMVolumeGroup;
use crate::node::lvmd_config;
use crate::node::vg::actions::{VolumeGroupAction as A, recorded_argv};
use crate::node::vg::events::EventReason;
use crate::node::vg::replay;
use crate::node::vg::teardown::{self, Teardown, TeardownView, lvmd_after_removal};
use crate::vgmanager::context::{HOST_KIND, cmd_err, warn};

impl VolumeGroupUnit {
    /// The devices this node put into the volume group, from its own journal (for a teardown
    /// that finds the VG already gone).
    fn devices_from_journal(&self, steps: &Steps) -> Result<BTreeSet<String>, UnitError> {
        let mut recorded = Vec::new();
        for rec in steps.journal().iter() {
            // A corrupt record is reported, not skipped: it may be one of ours.
            let rec = rec.map_err(UnitError::journal)?;
            if let lvms_journal::Body::Intent(i) = rec.body
                && i.unit == self.unit
                && i.object.kind == HOST_KIND
            {
                let action = i
                    .action_as::<A>()
                    .map_err(|e| UnitError::permanent("UnknownAction", e.to_string()))?;
                recorded.push((action, recorded_argv(&i.args, &i.desired_digest)));
            }
        }
        Ok(replay::devices_from_journal(&recorded))
    }

    /// LVMS processDelete: refuse while user volumes exist, else pool → VG → PVs → lvmd.yaml
    /// → status entry → finalizer.
    pub(super) async fn delete(
        &self,
        steps: &Steps,
        vg: &LVMVolumeGroup,
    ) -> Result<Pass, UnitError> {
        if !self.has_finalizer(vg) {
            self.ctx.report.remove(&self.vg);
            return Ok(Pass {
                summary: "not ours to clean up".into(),
                requeue_after: None,
            });
        }
        let (pvs, existing) = self.read_pvs_and_vg().await?;
        let pool = vg.spec.thin_pool_config.as_ref().map(|t| t.name.as_str());
        let plan = match &existing {
            Some(existing) => {
                let lvs = self.read_lvs().await?;
                teardown::plan(
                    &self.vg,
                    pool,
                    TeardownView::Present {
                        vg: existing,
                        lvs: &lvs,
                    },
                )
            }
            // Gone already (a kill after vgremove): its former devices may still be labelled.
            None => {
                let recorded = self.devices_from_journal(steps)?;
                teardown::plan(
                    &self.vg,
                    pool,
                    TeardownView::Gone {
                        recorded: &recorded,
                        pvs: &pvs,
                    },
                )
            }
        }
        .map_err(cmd_err)?;
        match plan {
            Teardown::Refuse { volumes } => {
                return Err(warn(
                    EventReason::ManualCleanupRequired,
                    teardown::refusal_message(&self.vg, &volumes),
                ));
            }
            Teardown::Steps(host_steps) => {
                for (action, argv) in host_steps {
                    self.host_step(steps, action, argv, None).await?;
                }
            }
        }
        {
            let _guard = self.ctx.lvmd_lock.lock().await;
            let existing = self.read_lvmd()?;
            let removal = lvmd_config::remove_volume_group(existing.as_ref(), &self.vg);
            let text = match lvmd_after_removal(removal) {
                None => None,
                Some((config, reason, note)) => {
                    let text = config
                        .map(|c| lvmd_config::render(&c))
                        .transpose()
                        .map_err(|e| UnitError::permanent("LVMDConfigInvalid", e.to_string()))?;
                    Some((text, reason, note))
                }
            };
            if let Some((text, reason, note)) = text {
                let spec = StepSpec::new(self.host_object("lvmd.yaml"), A::WriteLvmdConfig)
                    .args(vec!["remove".into(), self.vg.clone()]);
                steps
                    .run(spec, || async {
                        Ok(self
                            .write_file(text.as_deref())?
                            .with_event(EventNote::normal(reason.as_str(), note)))
                    })
                    .await?;
            }
        }
        self.ctx.report.remove(&self.vg);
        self.ctx
            .metrics
            .forget_volume_group(&self.vg, &self.ctx.node);
        self.set_finalizer(steps, vg, false).await?;
        // Removal is told by its steps' Events (LVMDConfig*), not as VolumeGroupReady.
        steps.quiet();
        Ok(Pass {
            summary: format!("volume group {} removed from this node", self.vg),
            requeue_after: None,
        })
    }
}
