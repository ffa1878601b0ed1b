//! The node service's unit: its RPCs journal format / mount / unmount / resize steps outside
//! any pass, and this unit, supervised like every other, resolves what a crash left open by
//! looking at the node. Nothing is redone but an unmount: kubelet calls NodePublishVolume and
//! NodeExpandVolume again until they succeed, and that call finds the node as the crash left it
//! (a filesystem already made is never made again: the format step checks the signature).

use lvms_actors::{Action, Done, Pass, Replayed, Steps, Unit, UnitError};
use lvms_journal::Intent;

use super::context::NodeCtx;
use super::node_volumes::{NodeReads, sweep_idle_gates};
use crate::csi::node::actions::{NodeAction, NodeStep, UNIT};
use crate::csi::node::mountinfo;
use crate::node::volume::gate;
use std::sync::Arc;

pub struct CsiNodeUnit {
    pub ctx: Arc<NodeCtx>,
}

fn unit_err(e: crate::csi::errors::CsiError) -> UnitError {
    UnitError::retryable("NodeReadFailed", e.message)
}

impl Unit for CsiNodeUnit {
    fn name(&self) -> &str {
        UNIT
    }

    /// The CSI RPCs journal their steps under this unit: replay only what earlier processes
    /// left, never an RPC of this one still in flight.
    fn serves_requests(&self) -> bool {
        true
    }

    /// After replay: the gates a stop left idle go (see [`sweep_idle_gates`]).
    async fn reconcile(&self, steps: &Steps) -> Result<Pass, UnitError> {
        let removed = sweep_idle_gates(&self.ctx, steps).await.map_err(unit_err)?;
        Ok(Pass {
            summary: if removed.is_empty() {
                "serving the CSI node service".into()
            } else {
                format!("removed idle gates {}", removed.join(", "))
            },
            requeue_after: None,
        })
    }

    async fn replay(&self, intent: &Intent, _steps: &Steps) -> Result<Done, UnitError> {
        let Some(action) = NodeAction::parse(&intent.action) else {
            return Err(UnitError::permanent(
                "UnknownAction",
                format!("{} is not a CSI node action of this release", intent.action),
            ));
        };
        let step = NodeStep::parse(action, &intent.args)
            .map_err(|e| UnitError::permanent("CorruptIntent", e.to_string()))?;
        let reads = NodeReads { ctx: &self.ctx };
        let how = match step {
            NodeStep::Format { device, .. } => {
                match reads.signature(&device).await.map_err(unit_err)? {
                    Some(_) => Replayed::AlreadyDone,
                    None => Replayed::NotDone,
                }
            }
            NodeStep::Mount { target, .. } => {
                let mounts = reads.mounts().await.map_err(unit_err)?;
                match mountinfo::at(&mounts, &target) {
                    Some(_) => Replayed::AlreadyDone,
                    None => Replayed::NotDone,
                }
            }
            NodeStep::Unmount { target, .. } => {
                let mounts = reads.mounts().await.map_err(unit_err)?;
                if mountinfo::at(&mounts, &target).is_none() {
                    Replayed::AlreadyDone
                } else {
                    // Kubelet is tearing the pod down: finish what it asked.
                    self.ctx
                        .host
                        .run(&["umount".into(), target], &[])
                        .await
                        .map_err(|e| UnitError::retryable("NodeCommandFailed", e.to_string()))?;
                    Replayed::Redone
                }
            }
            // Growing is idempotent and kubelet retries it; so is activation, which kubelet's
            // retried publish does again when the LV is still inactive.
            NodeStep::ResizeFilesystem { .. } | NodeStep::Activate { .. } => Replayed::NotDone,
            NodeStep::GateCreate { gate, .. } | NodeStep::GateRemove { gate } => {
                let present = reads
                    .dm_devices()
                    .await
                    .map_err(unit_err)?
                    .iter()
                    .any(|d| d.name == gate);
                if present == (action == NodeAction::GateCreate) {
                    Replayed::AlreadyDone
                } else {
                    // Kubelet's retried publish / unpublish makes or removes it.
                    Replayed::NotDone
                }
            }
            NodeStep::GateReload { gate, .. } => {
                // A crash between suspend and resume left the filesystem frozen: thaw it (the
                // retried NodeExpandVolume loads the table again).
                let gates = reads.dm_devices().await.map_err(unit_err)?;
                if gates.iter().any(|d| d.name == gate && d.suspended) {
                    self.ctx
                        .host
                        .run(&gate::resume_argv(&[gate]), &[])
                        .await
                        .map_err(|e| UnitError::retryable("NodeCommandFailed", e.to_string()))?;
                    Replayed::Redone
                } else {
                    Replayed::NotDone
                }
            }
        };
        Ok(Done::replayed(how))
    }
}
