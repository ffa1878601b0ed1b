//! The steps the CSI controller journals: writes of LogicalVolumes on behalf of an RPC. A step
//! is built as a [`CsiStep`] and stored as its action and `key=value` args.

use lvms_journal::Action;

use crate::csi::step_args::{MissingArg, get, pair};

/// One controller step with what it acts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CsiStep {
    /// Create a LogicalVolume (`source`: a snapshot's or clone's source volume, or empty).
    Create {
        node: String,
        device_class: String,
        /// `spec.size` as written (a quantity).
        size: String,
        source: String,
        access_type: String,
    },
    Delete {
        volume_id: String,
    },
    /// `spec.size` raised to `size` (a quantity).
    Resize {
        size: String,
    },
    ReportGroupSnapshot {
        group: String,
        note: String,
    },
}

impl CsiStep {
    pub fn action(&self) -> CsiAction {
        match self {
            CsiStep::Create { .. } => CsiAction::CreateLogicalVolume,
            CsiStep::Delete { .. } => CsiAction::DeleteLogicalVolume,
            CsiStep::Resize { .. } => CsiAction::ResizeLogicalVolume,
            CsiStep::ReportGroupSnapshot { .. } => CsiAction::ReportGroupSnapshot,
        }
    }

    /// The intent's args, as every release has stored them.
    pub fn args(&self) -> Vec<String> {
        match self {
            CsiStep::Create {
                node,
                device_class,
                size,
                source,
                access_type,
            } => vec![
                pair("node", node),
                pair("deviceClass", device_class),
                pair("size", size),
                pair("source", source),
                pair("accessType", access_type),
            ],
            CsiStep::Delete { volume_id } => vec![pair("volumeID", volume_id)],
            CsiStep::Resize { size } => vec![pair("size", size)],
            CsiStep::ReportGroupSnapshot { group, note } => {
                vec![pair("group", group), pair("note", note)]
            }
        }
    }

    /// Read back from a stored intent (replay).
    pub fn parse(action: CsiAction, args: &[String]) -> Result<CsiStep, MissingArg> {
        let a = action.name();
        Ok(match action {
            CsiAction::CreateLogicalVolume => CsiStep::Create {
                node: get(args, a, "node")?,
                device_class: get(args, a, "deviceClass")?,
                size: get(args, a, "size")?,
                source: get(args, a, "source")?,
                access_type: get(args, a, "accessType")?,
            },
            CsiAction::DeleteLogicalVolume => CsiStep::Delete {
                volume_id: get(args, a, "volumeID")?,
            },
            CsiAction::ResizeLogicalVolume => CsiStep::Resize {
                size: get(args, a, "size")?,
            },
            CsiAction::ReportGroupSnapshot => CsiStep::ReportGroupSnapshot {
                group: get(args, a, "group")?,
                note: get(args, a, "note")?,
            },
        })
    }
}

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
    fn steps_round_trip_through_the_journals_args_as_stored_before() {
        let create = CsiStep::Create {
            node: "n1".into(),
            device_class: "thin".into(),
            size: "1Gi".into(),
            source: String::new(),
            access_type: "mount".into(),
        };
        // The stored form every release writes and reads.
        assert_eq!(
            create.args(),
            [
                "node=n1",
                "deviceClass=thin",
                "size=1Gi",
                "source=",
                "accessType=mount"
            ]
        );
        for step in [
            create,
            CsiStep::Delete {
                volume_id: "v".into(),
            },
            CsiStep::Resize { size: "2Gi".into() },
            CsiStep::ReportGroupSnapshot {
                group: "g".into(),
                note: "taken: a=b".into(),
            },
        ] {
            assert_eq!(CsiStep::parse(step.action(), &step.args()), Ok(step));
        }
        let e = CsiStep::parse(CsiAction::ResizeLogicalVolume, &[]).unwrap_err();
        assert_eq!(e.key, "size");
    }

    #[test]
    fn every_action_parses_back_from_its_stored_name() {
        for a in CsiAction::ALL {
            assert_eq!(CsiAction::parse(a.name()), Some(*a));
        }
    }
}
