//! The CSI controller's unit: its RPCs journal LogicalVolume writes outside any pass, and this
//! unit, supervised like every other, replays what a crash left open. It reads the API server
//! first and redoes only what is missing; a create that never happened is left to
//! csi-provisioner, which retries every RPC until it succeeds.

use kube::Api;
use lvms_actors::{Action, Done, Pass, Replayed, Steps, Unit, UnitError};
use lvms_journal::Intent;

use crate::api::LogicalVolume;
use crate::api::quantity::parse_quantity_bytes;
use crate::csi::controller::actions::{CsiAction, CsiStep};
use crate::csi::controller::writes::{UNIT, delete_lv};

pub struct CsiControllerUnit {
    pub client: kube::Client,
}

/// The intent's step; one whose args are short of what its action needs is reported on it.
fn step_of(action: CsiAction, intent: &Intent) -> Result<CsiStep, UnitError> {
    CsiStep::parse(action, &intent.args)
        .map_err(|e| UnitError::permanent("CorruptIntent", e.to_string()))
}

impl Unit for CsiControllerUnit {
    fn name(&self) -> &str {
        UNIT
    }

    /// The CSI RPCs journal their steps under this unit: replay only what earlier processes
    /// left, never an RPC of this one still in flight.
    fn serves_requests(&self) -> bool {
        true
    }

    async fn reconcile(&self, _steps: &Steps) -> Result<Pass, UnitError> {
        Ok(Pass {
            summary: "serving the CSI controller".into(),
            requeue_after: None,
        })
    }

    async fn replay(&self, intent: &Intent, _steps: &Steps) -> Result<Done, UnitError> {
        if CsiAction::parse(&intent.action) == Some(CsiAction::ReportGroupSnapshot) {
            // The report is its Event: published from this outcome, once.
            let note = match step_of(CsiAction::ReportGroupSnapshot, intent)? {
                CsiStep::ReportGroupSnapshot { note, .. } => note,
                _ => String::new(),
            };
            return Ok(Done::replayed(Replayed::Redone)
                .with_event(crate::csi::controller::writes::group_snapshot_event(&note)));
        }
        let api: Api<LogicalVolume> = Api::all(self.client.clone());
        let name = intent.object.name.as_str();
        let seen = api.get_opt(name).await.map_err(|e| {
            crate::kube::apply::unit_error(&format!("reading LogicalVolume {name}"), e)
        })?;
        let ours = |lv: &LogicalVolume| {
            intent.object.uid.is_empty() || lv.metadata.uid.as_deref() == Some(&intent.object.uid)
        };
        match CsiAction::parse(&intent.action) {
            Some(CsiAction::CreateLogicalVolume) => Ok(Done::replayed(match seen {
                Some(_) => Replayed::AlreadyDone,
                // csi-provisioner calls CreateVolume again; that call creates it.
                None => Replayed::NotDone,
            })),
            Some(CsiAction::DeleteLogicalVolume) => match seen {
                Some(lv) if ours(&lv) && lv.metadata.deletion_timestamp.is_none() => {
                    delete_lv(&api, name, &intent.object.uid).await?;
                    Ok(Done::replayed(Replayed::Redone))
                }
                _ => Ok(Done::replayed(Replayed::AlreadyDone)),
            },
            Some(CsiAction::ResizeLogicalVolume) => {
                let wanted = match step_of(CsiAction::ResizeLogicalVolume, intent)? {
                    CsiStep::Resize { size } => parse_quantity_bytes(&size).ok(),
                    _ => None,
                };
                let has = seen
                    .as_ref()
                    .filter(|lv| ours(lv))
                    .and_then(|lv| parse_quantity_bytes(&lv.spec.size.0).ok());
                Ok(Done::replayed(match (wanted, has) {
                    (Some(w), Some(h)) if h >= w => Replayed::AlreadyDone,
                    // Gone, or not raised: csi-resizer calls ControllerExpandVolume again.
                    _ => Replayed::NotDone,
                }))
            }
            Some(CsiAction::ReportGroupSnapshot) => Ok(Done::replayed(Replayed::Rechecked)),
            None => Err(UnitError::permanent(
                "UnknownAction",
                format!(
                    "{} is not a CSI controller action of this release",
                    intent.action
                ),
            )),
        }
    }
}
