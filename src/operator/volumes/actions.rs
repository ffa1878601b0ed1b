//! The steps the volume helpers journal.

use lvms_journal::Action;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumeHelperAction {
    /// No write: a Warning `ClaimReferenceRemoved` on a PV (the Event is the effect).
    ReportClaimReferenceRemoved,
    /// No write: a Warning `NotEnoughCapacity` on a Pending claim. Args: the message.
    ReportNotEnoughCapacity,
    /// Label a PV `kubernetes.io/hostname=<node>`. Args: the node.
    LabelHostname,
    /// Delete a claim whose node is being deleted (TopoLVM's Node finalizer).
    DeleteClaim,
    /// Strip `topolvm.io/logicalvolume` from a deleted Node's LogicalVolume and delete it.
    ReleaseLogicalVolume,
    /// Remove `topolvm.io/node` from a Node once its volumes are cleaned up.
    RemoveNodeFinalizer,
    /// Write the record of a node's written-off volumes on the Node (the Warning
    /// `VolumesWrittenOff` is the step's Event). Args: the trigger, the Event's note.
    RecordWrittenOff,
    /// No write: a Warning `NodeStillReady` on a deleted or out-of-service Node whose kubelet
    /// still reports Ready. Args: the trigger, the note.
    ReportNodeStillReady,
    /// A node back: its record removed and its vg-manager asked for an audit (the Warning
    /// `WrittenOffVolumesOnDisk`). Args: the note.
    ForgetWrittenOff,
    /// Remove TopoLVM's legacy claim finalizers (`topolvm.io/pvc`, `topolvm.cybozu.com/pvc`).
    /// Args: the finalizers.
    RemoveLegacyClaimFinalizer,
    /// Annotate a Pod `topolvm.io/last-resizefs-requested-at` so kubelet grows the filesystem
    /// of a claim it mounts now. Args: the claim.
    NudgeResizeFs,
}

impl Action for VolumeHelperAction {
    const ALL: &'static [Self] = &[
        Self::ReportClaimReferenceRemoved,
        Self::ReportNotEnoughCapacity,
        Self::LabelHostname,
        Self::DeleteClaim,
        Self::ReleaseLogicalVolume,
        Self::RemoveNodeFinalizer,
        Self::RecordWrittenOff,
        Self::ReportNodeStillReady,
        Self::ForgetWrittenOff,
        Self::RemoveLegacyClaimFinalizer,
        Self::NudgeResizeFs,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::ReportClaimReferenceRemoved => "report-claim-reference-removed",
            Self::ReportNotEnoughCapacity => "report-not-enough-capacity",
            Self::LabelHostname => "label-hostname",
            Self::DeleteClaim => "delete-claim",
            Self::ReleaseLogicalVolume => "release-logical-volume",
            Self::RemoveNodeFinalizer => "remove-node-finalizer",
            Self::RecordWrittenOff => "record-written-off",
            Self::ReportNodeStillReady => "report-node-still-ready",
            Self::ForgetWrittenOff => "forget-written-off",
            Self::RemoveLegacyClaimFinalizer => "remove-legacy-claim-finalizer",
            Self::NudgeResizeFs => "nudge-resizefs",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_parses_back_from_its_stored_name() {
        for a in VolumeHelperAction::ALL {
            assert_eq!(VolumeHelperAction::parse(a.name()), Some(*a));
        }
    }
}
