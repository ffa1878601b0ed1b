//! What every operator unit shares: the client, this process's settings, and the caches.

use std::sync::Arc;

use kube::Client;
use kube::ResourceExt;
use lvms_journal::ObjectRef;
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

/// The journal's view of a Kubernetes object.
pub fn object_ref<K: kube::Resource<DynamicType = ()>>(obj: &K) -> ObjectRef {
    ObjectRef {
        kind: K::kind(&()).into_owned(),
        namespace: obj.meta().namespace.clone().unwrap_or_default(),
        name: obj.meta().name.clone().unwrap_or_default(),
        uid: obj.meta().uid.clone().unwrap_or_default(),
        generation: obj.meta().generation.unwrap_or_default(),
    }
}

fn values<T: Serialize>(objs: impl Iterator<Item = Arc<T>>) -> Vec<Value> {
    objs.filter_map(|o| serde_json::to_value(&*o).ok())
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
    pub fn current(&self, kind: Kind, cluster: &LVMCluster) -> Vec<Value> {
        let c = &self.caches;
        let labelled =
            |o: &Arc<kube::api::DynamicObject>| owned_by(o.metadata.labels.as_ref(), cluster);
        match kind {
            Kind::LvmCluster => Vec::new(),
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
            Kind::NodeStatus => values(
                c.node_statuses
                    .state()
                    .into_iter()
                    .filter(|o| controlled_by(Some(o.owner_references()), cluster)),
            ),
            Kind::SnapshotClass => c
                .snapshot_classes
                .as_ref()
                .map(|s| values(s.state().into_iter().filter(labelled)))
                .unwrap_or_default(),
            Kind::Scc => c
                .sccs
                .as_ref()
                .map(|s| values(s.state().into_iter().filter(labelled)))
                .unwrap_or_default(),
        }
    }
}
