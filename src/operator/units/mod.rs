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

use crate::kube::caches::Change;
use crate::kube::discovery::Capabilities;
use crate::kube::kinds::Kind;
use crate::operator::table::{self, UnitId};

/// The object units that run on this cluster: (LVMS unit name, kind written).
pub fn object_units(capabilities: &Capabilities) -> Vec<(&'static str, Kind)> {
    table::units(capabilities)
        .filter_map(|u| Some((u.name(), u.writes()?)))
        .collect()
}

/// Does a change in `source` matter to the unit named `unit`? Unknown names: no.
pub fn wakes(source: Kind, change: Change, unit: &str) -> bool {
    UnitId::from_name(unit).is_some_and(|u| u.woken_by(source, change))
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
