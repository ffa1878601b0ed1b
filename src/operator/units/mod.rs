//! The operator's reconcile units and which watch sources wake which unit.

pub mod csi_nodes;
pub mod desired_values;
pub mod events;
pub mod generations;
pub mod lifecycle;
pub mod objects;
pub mod persistent_volume_claims;
pub mod persistent_volumes;
pub mod status_projector;
pub mod topolvm_nodes;

use std::sync::Arc;

use lvms_actors::{ChildSpec, Trigger};

use crate::csi::controller::volumes::Volumes;
use crate::operator::context::Ctx;
use crate::operator::table::UnitId;
use crate::runtime::UnitWiring;
use generations::PassedGenerations;

/// The watch router: a change wakes each unit the table says it matters to.
pub fn router(
    triggers: &std::collections::BTreeMap<UnitId, Trigger>,
) -> crate::kube::caches::Router {
    let triggers = triggers.clone();
    Arc::new(move |source, change, traceparent: Option<&str>| {
        for (unit, t) in &triggers {
            if unit.woken_by(source, change) {
                t.bump_traced(&format!("{source:?}"), traceparent);
            }
        }
    })
}

/// What the operator's units are built from.
pub struct UnitDeps {
    pub ctx: Arc<Ctx>,
    /// The generations each unit's passes reached (the status unit holds a status for them).
    pub passed: Arc<PassedGenerations>,
    /// The CSI controller's LogicalVolume index (TopoLVM's Node finalizer reads it).
    pub volumes: Arc<Volumes>,
}

/// A table row that names no way to build its unit (a unit that writes objects but no kind).
#[derive(Debug, thiserror::Error)]
#[error("unit {0} has no constructor in the operator's unit table")]
pub struct Unbuildable(&'static str);

impl UnitId {
    /// This unit as a supervisor child of `wiring`, woken by `trigger`: adding a unit is its
    /// row in the table, its arm here and its own file.
    pub fn child(
        self,
        deps: &UnitDeps,
        wiring: &UnitWiring,
        trigger: Trigger,
    ) -> Result<ChildSpec, Unbuildable> {
        let (name, ctx) = (self.name(), deps.ctx.clone());
        Ok(match self {
            UnitId::Lifecycle => wiring.child(name, trigger, lifecycle::LifecycleUnit { ctx }),
            UnitId::CsiNodes => wiring.child(name, trigger, csi_nodes::CsiNodesUnit { ctx }),
            UnitId::Status => wiring.child(
                name,
                trigger,
                status_projector::StatusUnit::new(ctx, deps.passed.clone()),
            ),
            UnitId::PersistentVolumes => wiring.child(
                name,
                trigger,
                persistent_volumes::PersistentVolumesUnit { ctx },
            ),
            UnitId::PersistentVolumeClaims => wiring.child(
                name,
                trigger,
                persistent_volume_claims::PersistentVolumeClaimsUnit { ctx },
            ),
            UnitId::TopolvmNodes => wiring.child(
                name,
                trigger,
                topolvm_nodes::TopolvmNodesUnit {
                    ctx,
                    volumes: deps.volumes.clone(),
                },
            ),
            UnitId::CsiController => wiring.child(
                name,
                trigger,
                crate::csi::controller::replay::CsiControllerUnit {
                    client: ctx.client.clone(),
                },
            ),
            UnitId::CsiDriver
            | UnitId::VgManager
            | UnitId::VolumeGroups
            | UnitId::NodeStatuses
            | UnitId::StorageClasses
            | UnitId::Scc
            | UnitId::SnapshotClasses
            | UnitId::GroupSnapshotClasses => {
                let kind = self.writes().ok_or(Unbuildable(name))?;
                wiring.child(name, trigger, objects::ObjectsUnit::new(name, kind, ctx))
            }
        })
    }
}

/// A volume helper's pass: its subject is no one object (each step regards the PV, claim or
/// Node it writes, and tells that object's story), so the pass itself is not news.
pub fn begin_volume_helper_pass(steps: &lvms_actors::Steps, kind: &str) {
    steps.begin(lvms_journal::ObjectRef {
        kind: kind.into(),
        ..lvms_journal::ObjectRef::default()
    });
    steps.quiet();
}
