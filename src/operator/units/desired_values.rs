//! The desired objects of each owned kind, as JSON for the planner.

use serde::Serialize;
use serde_json::Value;

use crate::api::LVMCluster;
use crate::kube::kinds::Kind;
use crate::operator::desired;
use crate::operator::world::World;

fn json<T: Serialize>(objs: impl IntoIterator<Item = T>) -> Result<Vec<Value>, String> {
    objs.into_iter()
        .map(|o| serde_json::to_value(o).map_err(|e| format!("serializing a desired object: {e}")))
        .collect()
}

pub fn desired_values(
    kind: Kind,
    cluster: &LVMCluster,
    world: &World,
) -> Result<Vec<Value>, String> {
    match kind {
        // Kinds no unit writes: nothing of them is desired.
        Kind::LvmCluster
        | Kind::Node
        | Kind::CsiNode
        | Kind::LogicalVolume
        | Kind::PersistentVolume
        | Kind::PersistentVolumeClaim => Ok(Vec::new()),
        Kind::CsiDriver => json([desired::csi_driver::csi_driver(cluster)]),
        Kind::DaemonSet => json([desired::daemonset::vg_manager_daemonset(cluster, world)]),
        Kind::VolumeGroup => json(desired::volume_groups::volume_groups(cluster, world)),
        Kind::NodeStatus => json(desired::node_statuses::node_statuses(cluster, world)),
        Kind::StorageClass => json(desired::storage_classes::storage_classes(cluster, world)),
        Kind::SnapshotClass => json(desired::snapshot_classes::snapshot_classes(cluster, world)),
        Kind::GroupSnapshotClass => json(desired::group_snapshot_classes::group_snapshot_classes(
            cluster, world,
        )),
        Kind::Scc => json(desired::scc::vg_manager_scc(cluster, world)),
    }
}
