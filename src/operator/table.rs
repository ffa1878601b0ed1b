//! The one table of the operator's reconcile units: each unit's name, the kind it writes, the
//! watch sources that wake it, the API it needs, whether ResourcesAvailable waits for it, and
//! where it stands in teardown. Adding a unit is adding a row here.

use crate::kube::caches::Change;
use crate::kube::discovery::Capabilities;
use crate::kube::kinds::Kind;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UnitId {
    /// Singleton rules, finalizer, deletion (teardown in [`TEARDOWN`] order).
    Lifecycle,
    CsiDriver,
    VgManager,
    VolumeGroups,
    NodeStatuses,
    StorageClasses,
    Scc,
    SnapshotClasses,
    /// VolumeGroupSnapshotClasses for thin classes (lvms's own: LVMS has no group snapshots).
    GroupSnapshotClasses,
    /// Waits for kubelet's CSI registration (and its removal before teardown ends).
    CsiNodes,
    /// The status projector.
    Status,
    /// LVMS's PV helper (claim reference removed, hostname label).
    PersistentVolumes,
    /// LVMS's PVC helper (NotEnoughCapacity).
    PersistentVolumeClaims,
    /// TopoLVM's Node finalizer (a deleted Node's claims and LogicalVolumes).
    TopolvmNodes,
    /// The CSI controller's unit: its RPCs journal LogicalVolume writes, it replays what a
    /// crash left open. Woken by nothing but its start.
    CsiController,
}

/// The optional API a unit needs; without it the unit does not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    Nothing,
    /// `security.openshift.io` SecurityContextConstraints.
    Scc,
    /// `snapshot.storage.k8s.io` VolumeSnapshotClass.
    Snapshots,
    /// `groupsnapshot.storage.k8s.io/v1` VolumeGroupSnapshotClass.
    GroupSnapshots,
}

/// LVMS's teardown order (`EnsureDeleted` in sequence), by the unit owning each kind; lvms's
/// VolumeGroupSnapshotClasses go last, after the VolumeSnapshotClasses.
pub const TEARDOWN_UNITS: [UnitId; 8] = [
    UnitId::VolumeGroups,
    UnitId::VgManager,
    UnitId::NodeStatuses,
    UnitId::StorageClasses,
    UnitId::CsiDriver,
    UnitId::Scc,
    UnitId::SnapshotClasses,
    UnitId::GroupSnapshotClasses,
];

/// The kinds teardown deletes, in order.
pub const TEARDOWN: [Kind; 8] = {
    let mut kinds = [Kind::LvmCluster; 8];
    let mut i = 0;
    while i < TEARDOWN_UNITS.len() {
        kinds[i] = match TEARDOWN_UNITS[i].writes() {
            Some(k) => k,
            None => panic!("a teardown unit writes no kind"),
        };
        i += 1;
    }
    kinds
};

impl UnitId {
    pub const ALL: [UnitId; 15] = [
        UnitId::Lifecycle,
        UnitId::CsiDriver,
        UnitId::VgManager,
        UnitId::VolumeGroups,
        UnitId::NodeStatuses,
        UnitId::StorageClasses,
        UnitId::Scc,
        UnitId::SnapshotClasses,
        UnitId::GroupSnapshotClasses,
        UnitId::CsiNodes,
        UnitId::Status,
        UnitId::PersistentVolumes,
        UnitId::PersistentVolumeClaims,
        UnitId::TopolvmNodes,
        UnitId::CsiController,
    ];

    /// LVMS's `GetName()` (journal, Events, logs, metrics); lvms's own for lifecycle/status.
    pub const fn name(self) -> &'static str {
        match self {
            UnitId::Lifecycle => "lvmcluster",
            UnitId::CsiDriver => "topolvm-csi-driver",
            UnitId::VgManager => "vg-manager",
            UnitId::VolumeGroups => "lvmvg-manager",
            UnitId::NodeStatuses => "lvmvgnodestatus",
            UnitId::StorageClasses => "topolvm-storageclass",
            UnitId::Scc => "topolvm-scc",
            UnitId::SnapshotClasses => "topolvm-volumeSnapshotClass",
            UnitId::GroupSnapshotClasses => "topolvm-volumeGroupSnapshotClass",
            UnitId::CsiNodes => "topolvm-csi-node-registrations",
            UnitId::Status => "status",
            UnitId::PersistentVolumes => "persistent-volume",
            UnitId::PersistentVolumeClaims => "persistent-volume-claim",
            UnitId::TopolvmNodes => "topolvm-node",
            UnitId::CsiController => "csi-controller",
        }
    }

    pub fn from_name(name: &str) -> Option<UnitId> {
        UnitId::ALL.into_iter().find(|u| u.name() == name)
    }

    /// The kind an object unit writes (desired → plan → apply/delete).
    pub const fn writes(self) -> Option<Kind> {
        match self {
            UnitId::CsiDriver => Some(Kind::CsiDriver),
            UnitId::VgManager => Some(Kind::DaemonSet),
            UnitId::VolumeGroups => Some(Kind::VolumeGroup),
            UnitId::NodeStatuses => Some(Kind::NodeStatus),
            UnitId::StorageClasses => Some(Kind::StorageClass),
            UnitId::Scc => Some(Kind::Scc),
            UnitId::SnapshotClasses => Some(Kind::SnapshotClass),
            UnitId::GroupSnapshotClasses => Some(Kind::GroupSnapshotClass),
            UnitId::Lifecycle
            | UnitId::CsiNodes
            | UnitId::Status
            | UnitId::PersistentVolumes
            | UnitId::PersistentVolumeClaims
            | UnitId::TopolvmNodes
            | UnitId::CsiController => None,
        }
    }

    /// Watch sources whose changes wake this unit, besides the LVMCluster (which wakes every
    /// unit but the volume helpers). Level-based: a woken unit re-reads all it needs; this
    /// only avoids waking units for nothing. `None` = every source.
    pub const fn watches(self) -> Option<&'static [Kind]> {
        use Kind::*;
        match self {
            UnitId::Lifecycle => None,
            UnitId::CsiDriver => Some(&[CsiDriver]),
            UnitId::VgManager => Some(&[DaemonSet]),
            UnitId::VolumeGroups => Some(&[VolumeGroup]),
            UnitId::NodeStatuses => Some(&[NodeStatus, Node]),
            UnitId::StorageClasses => Some(&[StorageClass]),
            UnitId::Scc => Some(&[Scc]),
            UnitId::SnapshotClasses => Some(&[SnapshotClass]),
            UnitId::GroupSnapshotClasses => Some(&[GroupSnapshotClass]),
            UnitId::CsiNodes => Some(&[CsiNode, Node]),
            UnitId::Status => Some(&[NodeStatus, Node]),
            UnitId::PersistentVolumes => Some(&[PersistentVolume]),
            // Capacity annotations move on Nodes.
            UnitId::PersistentVolumeClaims => Some(&[PersistentVolumeClaim, Node]),
            UnitId::TopolvmNodes => Some(&[Node]),
            UnitId::CsiController => Some(&[]),
        }
    }

    pub const fn needs(self) -> Needs {
        match self {
            UnitId::Scc => Needs::Scc,
            UnitId::SnapshotClasses => Needs::Snapshots,
            UnitId::GroupSnapshotClasses => Needs::GroupSnapshots,
            _ => Needs::Nothing,
        }
    }

    /// Whether ResourcesAvailable waits for this unit's first successful pass (LVMS's
    /// resource units; lifecycle and status are the operator's own machinery).
    pub const fn expected(self) -> bool {
        !matches!(
            self,
            UnitId::Lifecycle | UnitId::Status | UnitId::CsiController
        ) && !self.volume_helper()
    }

    /// Whether the LVMCluster matters to this unit: not to the volume helpers (they serve
    /// users' volumes whether or not a cluster exists) nor to the CSI controller's unit (it
    /// only replays its RPCs' writes).
    pub const fn reads_cluster(self) -> bool {
        !self.volume_helper() && !matches!(self, UnitId::CsiController)
    }

    /// The helpers for users' volumes (LVMS's PV/PVC controllers, TopoLVM's Node finalizer):
    /// they run whether or not an LVMCluster exists, and their health is not the cluster's.
    pub const fn volume_helper(self) -> bool {
        matches!(
            self,
            UnitId::PersistentVolumes | UnitId::PersistentVolumeClaims | UnitId::TopolvmNodes
        )
    }

    pub fn runs_with(self, c: &Capabilities) -> bool {
        match self.needs() {
            Needs::Nothing => true,
            Needs::Scc => c.scc,
            Needs::Snapshots => c.snapshots,
            Needs::GroupSnapshots => c.group_snapshots,
        }
    }

    /// Whether the unit reads what another writer reports into a `source` object without
    /// touching its generation or metadata: vg-manager into node statuses (their spec), the
    /// status unit into the LVMCluster's status. The others are not woken by a report, only
    /// by an object created, deleted, edited or relabelled.
    pub const fn reads_reports(self, source: Kind) -> bool {
        match self {
            UnitId::Status => true,
            // A rejected second LVMCluster's Failed status is the lifecycle's to keep.
            UnitId::Lifecycle => matches!(source, Kind::LvmCluster),
            _ => false,
        }
    }

    /// Does a change in `source` matter to this unit? The LVMCluster matters to every unit
    /// but the volume helpers, which never read it (they serve users' volumes whether or not
    /// a cluster exists): at 1000 nodes an edit woke three passes over every Node and claim
    /// for nothing.
    pub fn woken_by(self, source: Kind, change: Change) -> bool {
        let cluster = source == Kind::LvmCluster && self.reads_cluster();
        (cluster || self.watches().is_none_or(|w| w.contains(&source)))
            && (change == Change::Object || self.reads_reports(source))
    }
}

/// The units that run on a cluster with these APIs, in table order.
pub fn units(c: &Capabilities) -> impl Iterator<Item = UnitId> + '_ {
    UnitId::ALL.into_iter().filter(|u| u.runs_with(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        let mut names: Vec<&str> = UnitId::ALL.iter().map(|u| u.name()).collect();
        for u in UnitId::ALL {
            assert_eq!(UnitId::from_name(u.name()), Some(u));
        }
        names.sort();
        names.dedup();
        assert_eq!(names.len(), UnitId::ALL.len());
        assert_eq!(UnitId::from_name("nope"), None);
    }

    #[test]
    fn teardown_follows_lvms_order() {
        assert_eq!(
            TEARDOWN,
            [
                Kind::VolumeGroup,
                Kind::DaemonSet,
                Kind::NodeStatus,
                Kind::StorageClass,
                Kind::CsiDriver,
                Kind::Scc,
                Kind::SnapshotClass,
                Kind::GroupSnapshotClass,
            ]
        );
        // Every object unit is torn down.
        for u in UnitId::ALL.into_iter().filter(|u| u.writes().is_some()) {
            assert!(TEARDOWN_UNITS.contains(&u), "{u:?} is never torn down");
        }
    }

    #[test]
    fn optional_apis_decide_which_units_run() {
        let none = Capabilities::default();
        let all = Capabilities {
            scc: true,
            snapshots: true,
            group_snapshots: true,
        };
        assert_eq!(units(&none).count(), 12);
        assert_eq!(units(&all).count(), 15);
        assert!(!units(&none).any(|u| matches!(
            u,
            UnitId::Scc | UnitId::SnapshotClasses | UnitId::GroupSnapshotClasses
        )));
        // Each snapshot API brings its own unit.
        let snapshots_only = Capabilities {
            snapshots: true,
            ..Capabilities::default()
        };
        assert!(units(&snapshots_only).any(|u| u == UnitId::SnapshotClasses));
        assert!(!units(&snapshots_only).any(|u| u == UnitId::GroupSnapshotClasses));
        let groups_only = Capabilities {
            group_snapshots: true,
            ..Capabilities::default()
        };
        assert!(units(&groups_only).any(|u| u == UnitId::GroupSnapshotClasses));
        assert!(!units(&groups_only).any(|u| u == UnitId::SnapshotClasses));
    }

    #[test]
    fn routing_is_narrow_but_the_cluster_wakes_every_unit_that_reads_it() {
        use Change::Object;
        assert!(UnitId::StorageClasses.woken_by(Kind::LvmCluster, Object));
        assert!(UnitId::StorageClasses.woken_by(Kind::StorageClass, Object));
        assert!(!UnitId::StorageClasses.woken_by(Kind::Node, Object));
        assert!(UnitId::NodeStatuses.woken_by(Kind::Node, Object));
        assert!(UnitId::Status.woken_by(Kind::NodeStatus, Object));
        assert!(UnitId::Lifecycle.woken_by(Kind::CsiNode, Object));
    }

    #[test]
    fn a_node_report_wakes_only_the_units_that_read_it() {
        let woken: Vec<UnitId> = UnitId::ALL
            .into_iter()
            .filter(|u| u.woken_by(Kind::NodeStatus, Change::Report))
            .collect();
        assert_eq!(woken, [UnitId::Status]);
        // A node status created, deleted or relabelled still wakes its writer and lifecycle.
        assert!(UnitId::NodeStatuses.woken_by(Kind::NodeStatus, Change::Object));
        assert!(UnitId::Lifecycle.woken_by(Kind::NodeStatus, Change::Object));
    }

    #[test]
    fn a_cluster_status_write_wakes_only_status_and_lifecycle() {
        let woken: Vec<UnitId> = UnitId::ALL
            .into_iter()
            .filter(|u| u.woken_by(Kind::LvmCluster, Change::Report))
            .collect();
        assert_eq!(woken, [UnitId::Lifecycle, UnitId::Status]);
        // A spec edit or a metadata change wakes every unit that reads the cluster.
        for u in UnitId::ALL {
            assert_eq!(
                u.woken_by(Kind::LvmCluster, Change::Object),
                u.reads_cluster(),
                "{u:?}"
            );
        }
        // The CSI controller's unit is woken by no watch at all.
        for source in Kind::ALL {
            assert!(!UnitId::CsiController.woken_by(source, Change::Object));
        }
    }
}
