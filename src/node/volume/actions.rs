//! The steps a LogicalVolume actor journals on its node. Stored by name; replay parses it back.

use lvms_journal::Action;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumeAction {
    /// TopoLVM's finalizer and created-by label on the LogicalVolume.
    AddFinalizer,
    Lvcreate,
    /// `lvcreate -s` of a snapshot, clone or restore.
    LvcreateSnapshot,
    Lvresize,
    /// A snapshot's access (`-p r`) or a clone's activation.
    Lvchange,
    Lvremove,
    /// The LogicalVolume's status: volume id and size, or a refusal's code and message.
    WriteStatus,
    RemoveFinalizer,
    /// The node's `capacity.topolvm.io/*` annotations (object: the Node).
    AnnotateCapacity,
    /// A volume group snapshot's hold: its members' gates suspended (object: the group).
    /// Args: gates, members.
    HoldGates,
    /// The hold released: the gates resumed (object: the group, or the Node for a hold a
    /// crash left). Args: gates.
    ReleaseGates,
    /// A thin device a killed lvm2 left in the pool under no LV, deleted by number so the
    /// next lvcreate can have its id (object: the LogicalVolume whose create it blocked).
    DeleteThinDevice,
}

impl Action for VolumeAction {
    const ALL: &'static [Self] = &[
        Self::AddFinalizer,
        Self::Lvcreate,
        Self::LvcreateSnapshot,
        Self::Lvresize,
        Self::Lvchange,
        Self::Lvremove,
        Self::WriteStatus,
        Self::RemoveFinalizer,
        Self::AnnotateCapacity,
        Self::HoldGates,
        Self::ReleaseGates,
        Self::DeleteThinDevice,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::AddFinalizer => "add-finalizer",
            Self::Lvcreate => "lvcreate",
            Self::LvcreateSnapshot => "lvcreate-snapshot",
            Self::Lvresize => "lvresize",
            Self::Lvchange => "lvchange",
            Self::Lvremove => "lvremove",
            Self::WriteStatus => "write-status",
            Self::RemoveFinalizer => "remove-finalizer",
            Self::AnnotateCapacity => "annotate-capacity",
            Self::HoldGates => "hold-gates",
            Self::ReleaseGates => "release-gates",
            Self::DeleteThinDevice => "delete-thin-device",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_parses_back_from_its_stored_name() {
        for a in VolumeAction::ALL {
            assert_eq!(VolumeAction::parse(a.name()), Some(*a));
        }
    }
}
