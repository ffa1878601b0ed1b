//! The operator's reconcile units and which watch sources wake which unit.

pub mod csi_nodes;
pub mod desired_values;
pub mod events;
pub mod lifecycle;
pub mod objects;
pub mod status_projector;

use crate::kube::caches::Source;
use crate::kube::kinds::Kind;
use crate::operator::status as names;

/// The object units: (LVMS unit name, kind written).
pub fn object_units(scc: bool, snapshots: bool) -> Vec<(&'static str, Kind)> {
    let mut units = vec![
        (names::UNIT_CSI_DRIVER, Kind::CsiDriver),
        (names::UNIT_VG_MANAGER, Kind::DaemonSet),
        (names::UNIT_VOLUME_GROUPS, Kind::VolumeGroup),
        (names::UNIT_NODE_STATUSES, Kind::NodeStatus),
        (names::UNIT_STORAGE_CLASSES, Kind::StorageClass),
    ];
    if scc {
        units.push((names::UNIT_SCC, Kind::Scc));
    }
    if snapshots {
        units.push((names::UNIT_SNAPSHOT_CLASSES, Kind::SnapshotClass));
    }
    units
}

/// Does a change in `source` matter to `unit`? (Level-based: a unit then re-reads all it
/// needs from the caches; this only avoids waking units for nothing.)
pub fn wakes(source: Source, unit: &str) -> bool {
    use Source::*;
    if source == Cluster || unit == lifecycle::UNIT {
        return true;
    }
    let watched: &[Source] = match unit {
        u if u == names::UNIT_CSI_DRIVER => &[CsiDriver],
        u if u == names::UNIT_VG_MANAGER => &[DaemonSet],
        u if u == names::UNIT_VOLUME_GROUPS => &[VolumeGroup],
        u if u == names::UNIT_NODE_STATUSES => &[NodeStatus, Node],
        u if u == names::UNIT_STORAGE_CLASSES => &[StorageClass],
        u if u == names::UNIT_SCC => &[Scc],
        u if u == names::UNIT_SNAPSHOT_CLASSES => &[SnapshotClass],
        u if u == csi_nodes::UNIT => &[CsiNode, Node],
        u if u == status_projector::UNIT => &[NodeStatus, Node],
        _ => &[],
    };
    watched.contains(&source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_is_narrow_but_the_cluster_wakes_everyone() {
        assert!(wakes(Source::Cluster, names::UNIT_STORAGE_CLASSES));
        assert!(wakes(Source::StorageClass, names::UNIT_STORAGE_CLASSES));
        assert!(!wakes(Source::Node, names::UNIT_STORAGE_CLASSES));
        assert!(wakes(Source::Node, names::UNIT_NODE_STATUSES));
        assert!(wakes(Source::NodeStatus, status_projector::UNIT));
        assert!(wakes(Source::CsiNode, lifecycle::UNIT));
    }
}
