//! The one table of vg-manager's units: each unit's name, the watch sources that wake it, and
//! how it is built; and what this process watches. The units of this table run for the whole
//! process; one [`VgUnit::VolumeGroup`] actor per LVMVolumeGroup on this node is started and
//! stopped by the registry. Adding a unit is its row here, its arm in [`VgUnit::child`] and its
//! own file.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::runtime::reflector::Store;
use lvms_actors::{ChildSpec, SupervisorMsg, Trigger};
use ractor::ActorRef;

use super::context::NodeCtx;
use crate::api::{LVMVolumeGroup, LVMVolumeGroupNodeStatus, LogicalVolume};
use crate::kube::caches::{Router, WatchSpec};
use crate::kube::kinds::Kind;
use crate::runtime::UnitWiring;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum VgUnit {
    /// Starts and stops one [`VgUnit::VolumeGroup`] actor per LVMVolumeGroup on this node.
    Registry,
    /// One LVMVolumeGroup's volume group on this node (`vg/<name>`): started by the registry.
    VolumeGroup,
    /// The LogicalVolumes of this node: lvcreate, resize, snapshots, removal, capacity.
    Volumes,
    /// Writes what the volume groups report into this node's LVMVolumeGroupNodeStatus.
    NodeStatus,
    /// The CSI node service's unit: its RPCs journal their steps, it replays what a crash left.
    CsiNode,
    /// The orphan audit: lvm2, the LogicalVolumes and the journal joined, on an interval and
    /// on request.
    Audit,
}

impl VgUnit {
    /// The units that run for the whole process (the volume groups' come and go).
    pub const FIXED: [VgUnit; 5] = [
        VgUnit::Registry,
        VgUnit::Volumes,
        VgUnit::NodeStatus,
        VgUnit::CsiNode,
        VgUnit::Audit,
    ];

    /// The journal's unit name (`vg/<name>` for a volume group: see [`VgUnit::volume_group`]).
    pub const fn name(self) -> &'static str {
        match self {
            VgUnit::Registry => super::registry::UNIT,
            VgUnit::VolumeGroup => super::volume_group::UNIT_PREFIX,
            VgUnit::Volumes => super::volumes::UNIT,
            VgUnit::NodeStatus => super::node_status_unit::UNIT,
            VgUnit::CsiNode => crate::csi::node::actions::UNIT,
            VgUnit::Audit => super::audit_unit::UNIT,
        }
    }

    /// The unit name of the volume group `vg`.
    pub fn volume_group(vg: &str) -> String {
        super::volume_group::unit_name(vg)
    }

    /// Watch sources whose changes wake this unit. Level-based: a woken unit re-reads all it
    /// needs; this only avoids waking units for nothing.
    pub const fn watches(self) -> &'static [Kind] {
        use Kind::*;
        match self {
            // A class selected or no longer selected by this node's labels.
            VgUnit::Registry | VgUnit::VolumeGroup => &[VolumeGroup, Node],
            // Every change that can move a volume or the node's capacity: its volumes, a class
            // built or torn down (the node status follows each volume-group pass), the Node's
            // annotations.
            VgUnit::Volumes => &[LogicalVolume, NodeStatus, VolumeGroup, Node],
            // The object the operator created and vg-manager writes into (its own writes come
            // back and find nothing to do); the volume groups' reports wake it too.
            VgUnit::NodeStatus => &[NodeStatus],
            VgUnit::CsiNode => &[],
            // A request is an annotation on this node's status (its own writes come back
            // and find the audit not due).
            VgUnit::Audit => &[NodeStatus],
        }
    }

    pub fn woken_by(self, source: Kind) -> bool {
        self.watches().contains(&source)
    }
}

/// What vg-manager watches, as data: the class objects in its namespace, its own Node and node
/// status, and its own node's LogicalVolumes (`spec.nodeName` is a selectable field of the CRD).
pub fn watches(node: &str) -> [WatchSpec; 4] {
    [
        WatchSpec::of(Kind::VolumeGroup),
        WatchSpec::of(Kind::Node).named(node),
        WatchSpec::of(Kind::NodeStatus).named(node),
        WatchSpec::of(Kind::LogicalVolume).fields(format!("spec.nodeName={node}")),
    ]
}

/// The fixed units' triggers and the volume groups' (by VG name, kept by the registry).
#[derive(Clone)]
pub struct Triggers {
    pub fixed: BTreeMap<VgUnit, Trigger>,
    pub volume_groups: Arc<Mutex<BTreeMap<String, Trigger>>>,
}

impl Triggers {
    /// The node-status unit's trigger is the node report's: the volume groups' reports wake it.
    pub fn new(node_status: Trigger) -> Self {
        let fixed = VgUnit::FIXED
            .into_iter()
            .map(|u| {
                let t = match u {
                    VgUnit::NodeStatus => node_status.clone(),
                    _ => Trigger::new(),
                };
                (u, t)
            })
            .collect();
        Triggers {
            fixed,
            volume_groups: Arc::default(),
        }
    }

    pub fn of(&self, unit: VgUnit) -> Trigger {
        self.fixed.get(&unit).cloned().unwrap_or_default()
    }

    /// The watch router: a change wakes each unit the table says it matters to.
    pub fn router(&self) -> Router {
        let t = self.clone();
        Arc::new(move |source, _change, _traceparent: Option<&str>| {
            let why = format!("{source:?}");
            for (unit, trigger) in &t.fixed {
                if unit.woken_by(source) {
                    trigger.bump(&why);
                }
            }
            if VgUnit::VolumeGroup.woken_by(source)
                && let Ok(m) = t.volume_groups.lock()
            {
                m.values().for_each(|tr| tr.bump(&why));
            }
        })
    }
}

/// What vg-manager's units are built from.
pub struct UnitDeps {
    pub ctx: Arc<NodeCtx>,
    pub client: Client,
    pub namespace: String,
    pub volume_groups: Store<LVMVolumeGroup>,
    pub nodes: Store<Node>,
    pub node_statuses: Store<LVMVolumeGroupNodeStatus>,
    pub logical_volumes: Store<LogicalVolume>,
    /// The supervisor, once it runs: the registry starts volume groups through it.
    pub supervisor: Arc<OnceLock<ActorRef<SupervisorMsg>>>,
    pub audit: super::audit_unit::AuditConfig,
}

impl VgUnit {
    /// A fixed unit as a supervisor child of `wiring`; a volume group's is built by the
    /// registry (`None` here).
    pub fn child(
        self,
        deps: &UnitDeps,
        wiring: &UnitWiring,
        triggers: &Triggers,
    ) -> Option<ChildSpec> {
        let (name, trigger, ctx) = (self.name(), triggers.of(self), deps.ctx.clone());
        Some(match self {
            VgUnit::Registry => wiring.child(
                name,
                trigger,
                super::registry::Registry {
                    node_name: ctx.node.clone(),
                    volume_groups: deps.volume_groups.clone(),
                    nodes: deps.nodes.clone(),
                    supervisor: deps.supervisor.clone(),
                    spec_for: volume_group_spec(wiring, &ctx),
                    triggers: triggers.volume_groups.clone(),
                    report: ctx.report.clone(),
                },
            ),
            VgUnit::VolumeGroup => return None,
            VgUnit::Volumes => wiring.child(
                name,
                trigger,
                super::volumes::VolumesUnit::new(
                    ctx,
                    deps.logical_volumes.clone(),
                    deps.nodes.clone(),
                ),
            ),
            VgUnit::NodeStatus => wiring.child(
                name,
                trigger,
                super::node_status_unit::NodeStatusUnit::new(
                    deps.client.clone(),
                    deps.namespace.clone(),
                    ctx.node.clone(),
                    ctx.report.clone(),
                    deps.node_statuses.clone(),
                ),
            ),
            VgUnit::CsiNode => {
                wiring.child(name, trigger, super::csi_node_unit::CsiNodeUnit { ctx })
            }
            VgUnit::Audit => wiring.child(
                name,
                trigger,
                super::audit_unit::AuditUnit::new(
                    ctx,
                    deps.logical_volumes.clone(),
                    deps.audit.clone(),
                ),
            ),
        })
    }
}

/// How the registry builds the actor of one volume group.
fn volume_group_spec(wiring: &UnitWiring, ctx: &Arc<NodeCtx>) -> super::registry::SpecFor {
    let (wiring, ctx) = (wiring.clone(), ctx.clone());
    Arc::new(move |vg: &str, trigger: Trigger| {
        let name = VgUnit::volume_group(vg);
        let unit = super::volume_group::VolumeGroupUnit {
            unit: name.clone(),
            vg: vg.to_string(),
            ctx: ctx.clone(),
            host_clock: Default::default(),
            continued_trace: Default::default(),
        };
        wiring.child(&name, trigger, unit)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_follows_the_table() {
        let woken = |source| -> Vec<VgUnit> {
            [
                VgUnit::Registry,
                VgUnit::VolumeGroup,
                VgUnit::Volumes,
                VgUnit::NodeStatus,
                VgUnit::CsiNode,
                VgUnit::Audit,
            ]
            .into_iter()
            .filter(|u| u.woken_by(source))
            .collect()
        };
        assert_eq!(woken(Kind::LogicalVolume), [VgUnit::Volumes]);
        assert_eq!(
            woken(Kind::NodeStatus),
            [VgUnit::Volumes, VgUnit::NodeStatus, VgUnit::Audit]
        );
        assert_eq!(
            woken(Kind::VolumeGroup),
            [VgUnit::Registry, VgUnit::VolumeGroup, VgUnit::Volumes]
        );
        assert_eq!(
            woken(Kind::Node),
            [VgUnit::Registry, VgUnit::VolumeGroup, VgUnit::Volumes]
        );
        assert!(woken(Kind::LvmCluster).is_empty());
        assert_eq!(VgUnit::volume_group("vg1"), "vg/vg1");
    }

    #[test]
    fn every_watched_kind_wakes_someone_and_each_watch_is_this_nodes() {
        for spec in watches("node-a") {
            assert!(
                VgUnit::FIXED.iter().any(|u| u.woken_by(spec.kind)),
                "{:?} wakes nobody",
                spec.kind
            );
        }
        let [vgs, node, status, lvs] = watches("node-a");
        assert_eq!(vgs.fields, None);
        assert_eq!(node.fields.as_deref(), Some("metadata.name=node-a"));
        assert_eq!(status.fields.as_deref(), Some("metadata.name=node-a"));
        assert_eq!(lvs.fields.as_deref(), Some("spec.nodeName=node-a"));
    }
}
