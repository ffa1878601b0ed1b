//! What every operator unit shares: the client, this process's settings, and the caches.

use std::sync::Arc;

use kube::Client;
use kube::ResourceExt;
use serde::Serialize;
use serde_json::Value;

use super::owner::{controlled_by, owned_by};
use super::singleton::{Selection, select};
use super::world::{Capabilities, OperatorSettings, World};
use crate::api::LVMCluster;
use crate::kube::caches::Caches;
use crate::kube::kinds::Kind;

pub struct Ctx {
    pub client: Client,
    pub settings: OperatorSettings,
    pub capabilities: Capabilities,
    pub caches: Caches,
}

pub use crate::objects::object_ref;

/// An object that cannot be turned into JSON is an error, never left out: the planner would
/// take it for gone (re-create it, or let teardown finish while it still exists).
fn values<T: Serialize>(
    objs: impl Iterator<Item = Arc<T>>,
) -> Result<Vec<Value>, lvms_actors::UnitError> {
    objs.map(|o| {
        serde_json::to_value(&*o)
            .map_err(|e| lvms_actors::UnitError::retryable("CacheObjectUnreadable", e.to_string()))
    })
    .collect()
}

/// Like [`values`], but each object as `{apiVersion, kind, metadata}` only.
fn metadata_values<K: kube::Resource<DynamicType = ()>>(
    objs: impl Iterator<Item = Arc<K>>,
) -> Result<Vec<Value>, lvms_actors::UnitError> {
    objs.map(|o| {
        let metadata = serde_json::to_value(o.meta()).map_err(|e| {
            lvms_actors::UnitError::retryable("CacheObjectUnreadable", e.to_string())
        })?;
        Ok(serde_json::json!({
            "apiVersion": K::api_version(&()),
            "kind": K::kind(&()),
            "metadata": metadata,
        }))
    })
    .collect()
}

impl Ctx {
    pub fn selection(&self) -> Selection {
        select(&self.caches.clusters.state(), &self.settings.namespace)
    }

    /// The LVMCluster this operator reconciles, if any.
    pub fn primary(&self) -> Option<Arc<LVMCluster>> {
        self.selection().primary
    }

    pub fn world(&self) -> World {
        World {
            settings: self.settings.clone(),
            capabilities: self.capabilities,
            nodes: self.caches.nodes.state(),
            node_statuses: self.caches.node_statuses.state(),
            storage_classes: self.caches.storage_classes.state(),
            csi_nodes: self.caches.csi_nodes.state(),
        }
    }

    /// The objects of `kind` that `cluster` owns (owner labels for cluster-scoped kinds,
    /// a controller reference for namespaced ones), as JSON for the planner.
    pub fn current(
        &self,
        kind: Kind,
        cluster: &LVMCluster,
    ) -> Result<Vec<Value>, lvms_actors::UnitError> {
        let c = &self.caches;
        let labelled =
            |o: &Arc<kube::api::DynamicObject>| owned_by(o.metadata.labels.as_ref(), cluster);
        match kind {
            // Kinds no unit writes: the operator owns none of them.
            Kind::LvmCluster
            | Kind::Node
            | Kind::CsiNode
            | Kind::LogicalVolume
            | Kind::PersistentVolume
            | Kind::PersistentVolumeClaim => Ok(Vec::new()),
            Kind::CsiDriver => values(
                c.csi_drivers
                    .state()
                    .into_iter()
                    .filter(|o| owned_by(o.metadata.labels.as_ref(), cluster)),
            ),
            Kind::StorageClass => values(
                c.storage_classes
                    .state()
                    .into_iter()
                    .filter(|o| owned_by(o.metadata.labels.as_ref(), cluster)),
            ),
            Kind::DaemonSet => values(
                c.daemonsets
                    .state()
                    .into_iter()
                    .filter(|o| controlled_by(Some(o.owner_references()), cluster)),
            ),
            Kind::VolumeGroup => values(
                c.volume_groups
                    .state()
                    .into_iter()
                    .filter(|o| controlled_by(Some(o.owner_references()), cluster)),
            ),
            // The operator owns a node status's metadata only (vg-manager writes its spec):
            // the planner gets just that, not 1000 nodes' reports re-encoded per pass.
            Kind::NodeStatus => metadata_values(
                c.node_statuses
                    .state()
                    .into_iter()
                    .filter(|o| controlled_by(Some(o.owner_references()), cluster)),
            ),
            // No store: discovery found the API not served, so there are none of these.
            Kind::SnapshotClass => c
                .snapshot_classes
                .as_ref()
                .map(|s| values(s.state().into_iter().filter(labelled)))
                .unwrap_or(Ok(Vec::new())),
            Kind::GroupSnapshotClass => c
                .group_snapshot_classes
                .as_ref()
                .map(|s| values(s.state().into_iter().filter(labelled)))
                .unwrap_or(Ok(Vec::new())),
            Kind::Scc => c
                .sccs
                .as_ref()
                .map(|s| values(s.state().into_iter().filter(labelled)))
                .unwrap_or(Ok(Vec::new())),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    #[test]
    fn an_object_that_cannot_be_read_is_an_error_not_left_out() {
        let fine = Arc::new(BTreeMap::from([("a".to_string(), 1)]));
        assert_eq!(super::values([fine].into_iter()).unwrap().len(), 1);
        // JSON objects need string keys: this one cannot be turned into JSON.
        let unreadable = Arc::new(BTreeMap::from([((1u8, 2u8), 1)]));
        let fine = Arc::new(BTreeMap::new());
        assert_eq!(super::values([fine.clone()].into_iter()).unwrap().len(), 1);
        assert!(super::values([fine, unreadable].into_iter()).is_err());
    }
}
