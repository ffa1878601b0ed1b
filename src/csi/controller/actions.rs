//! The steps the CSI controller journals: writes of LogicalVolumes on behalf of an RPC.

use lvms_journal::Action;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CsiAction {
    /// Create a LogicalVolume (a volume, or with a source a snapshot or clone).
    /// Args: node, device class, size in bytes, source, access type.
    CreateLogicalVolume,
    /// Delete a LogicalVolume (DeleteVolume, DeleteSnapshot, or a failed create).
    /// Args: the volume id.
    DeleteLogicalVolume,
    /// Raise a LogicalVolume's `spec.size` (ControllerExpandVolume). Args: size in bytes.
    ResizeLogicalVolume,
    /// A group snapshot taken: its Event on the VolumeGroupSnapshot (object), once.
    /// Args: group, note.
    ReportGroupSnapshot,
}

impl Action for CsiAction {
    const ALL: &'static [Self] = &[
        Self::CreateLogicalVolume,
        Self::DeleteLogicalVolume,
        Self::ResizeLogicalVolume,
        Self::ReportGroupSnapshot,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::CreateLogicalVolume => "create-logical-volume",
            Self::DeleteLogicalVolume => "delete-logical-volume",
            Self::ResizeLogicalVolume => "resize-logical-volume",
            Self::ReportGroupSnapshot => "report-group-snapshot",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_parses_back_from_its_stored_name() {
        for a in CsiAction::ALL {
            assert_eq!(CsiAction::parse(a.name()), Some(*a));
        }
    }
}
