//! The steps the node service journals: what it does to a node's devices and mount table on
//! behalf of kubelet's calls. Each is about the volume (journal object kind [`VOLUME_KIND`],
//! named by its volume id), so `lvms journal inspect --object` tells one volume's node story.

use lvms_journal::{Action, ObjectRef};

/// The journal unit of the node service's steps (and of their replay, in vg-manager).
pub const UNIT: &str = "csi-node";

/// The journal object kind of a CSI volume on its node.
pub const VOLUME_KIND: &str = "CSIVolume";

pub fn volume_ref(volume_id: &str) -> ObjectRef {
    ObjectRef {
        kind: VOLUME_KIND.into(),
        name: volume_id.into(),
        ..ObjectRef::default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeAction {
    /// mkfs on a device that carried no signature. Args: device, fs_type, target.
    Format,
    /// Mount the volume at a target (a filesystem, or a block device bind-mounted on a file).
    /// Args: device, target, options.
    Mount,
    /// Unmount a target. Args: target.
    Unmount,
    /// Grow the filesystem mounted at a path to its device. Args: target, argv.
    ResizeFilesystem,
    /// Create the volume's gate ([`crate::node::volume::gate`]) over its LV. Args: gate, table.
    GateCreate,
    /// Load the gate with its LV's new size (suspend, reload, resume). Args: gate, table.
    GateReload,
    /// Remove a gate nothing holds open any more. Args: gate.
    GateRemove,
}

impl Action for NodeAction {
    const ALL: &'static [Self] = &[
        Self::Format,
        Self::Mount,
        Self::Unmount,
        Self::ResizeFilesystem,
        Self::GateCreate,
        Self::GateReload,
        Self::GateRemove,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Format => "format",
            Self::Mount => "mount",
            Self::Unmount => "unmount",
            Self::ResizeFilesystem => "resize-filesystem",
            Self::GateCreate => "gate-create",
            Self::GateReload => "gate-reload",
            Self::GateRemove => "gate-remove",
        }
    }
}

/// `key=value` from a step's args.
pub fn arg<'a>(args: &'a [String], key: &str) -> Option<&'a str> {
    args.iter()
        .find_map(|a| a.strip_prefix(key)?.strip_prefix('='))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_parses_back_from_its_stored_name() {
        for a in NodeAction::ALL {
            assert_eq!(NodeAction::parse(a.name()), Some(*a));
        }
        assert_eq!(
            arg(&["device=/dev/a".into(), "target=/t".into()], "target"),
            Some("/t")
        );
    }
}
