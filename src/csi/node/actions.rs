//! The steps the node service journals: what it does to a node's devices and mount table on
//! behalf of kubelet's calls. Each is about the volume (journal object kind [`VOLUME_KIND`],
//! named by its volume id), so `lvms journal inspect --object` tells one volume's node story.

use lvms_journal::{Action, ObjectRef};

use crate::csi::step_args::{MissingArg, get, pair};

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
    /// Activate a volume's LV that is inactive (after a node's reboot nothing activates thin
    /// LVs where no udev/systemd autoactivation runs). Args: lv (`vg/lv`).
    Activate,
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
        Self::Activate,
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
            Self::Activate => "activate",
        }
    }
}

/// One node step with what it acts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeStep {
    Format {
        device: String,
        fs_type: String,
        target: String,
    },
    /// `argv`: the mount command, space-joined.
    Mount {
        device: String,
        target: String,
        argv: String,
    },
    /// `source`: what was mounted there.
    Unmount {
        target: String,
        source: String,
    },
    ResizeFilesystem {
        target: String,
        argv: String,
    },
    GateCreate {
        gate: String,
        table: String,
    },
    GateReload {
        gate: String,
        table: String,
    },
    GateRemove {
        gate: String,
    },
    /// `lv`: `vg/lv`.
    Activate {
        lv: String,
    },
}

impl NodeStep {
    pub fn action(&self) -> NodeAction {
        match self {
            NodeStep::Format { .. } => NodeAction::Format,
            NodeStep::Mount { .. } => NodeAction::Mount,
            NodeStep::Unmount { .. } => NodeAction::Unmount,
            NodeStep::ResizeFilesystem { .. } => NodeAction::ResizeFilesystem,
            NodeStep::GateCreate { .. } => NodeAction::GateCreate,
            NodeStep::GateReload { .. } => NodeAction::GateReload,
            NodeStep::GateRemove { .. } => NodeAction::GateRemove,
            NodeStep::Activate { .. } => NodeAction::Activate,
        }
    }

    /// The intent's args, as every release has stored them.
    pub fn args(&self) -> Vec<String> {
        match self {
            NodeStep::Format {
                device,
                fs_type,
                target,
            } => vec![
                pair("device", device),
                pair("fsType", fs_type),
                pair("target", target),
            ],
            NodeStep::Mount {
                device,
                target,
                argv,
            } => vec![
                pair("device", device),
                pair("target", target),
                pair("argv", argv),
            ],
            NodeStep::Unmount { target, source } => {
                vec![pair("target", target), pair("source", source)]
            }
            NodeStep::ResizeFilesystem { target, argv } => {
                vec![pair("target", target), pair("argv", argv)]
            }
            NodeStep::GateCreate { gate, table } | NodeStep::GateReload { gate, table } => {
                vec![pair("gate", gate), pair("table", table)]
            }
            NodeStep::GateRemove { gate } => vec![pair("gate", gate)],
            NodeStep::Activate { lv } => vec![pair("lv", lv)],
        }
    }

    /// Read back from a stored intent (replay). Only what replay needs is required: an
    /// Unmount written before it recorded its source still reads.
    pub fn parse(action: NodeAction, args: &[String]) -> Result<NodeStep, MissingArg> {
        let a = action.name();
        let opt = |key| {
            crate::csi::step_args::lookup(args, key)
                .unwrap_or_default()
                .to_string()
        };
        Ok(match action {
            NodeAction::Format => NodeStep::Format {
                device: get(args, a, "device")?,
                fs_type: opt("fsType"),
                target: opt("target"),
            },
            NodeAction::Mount => NodeStep::Mount {
                device: opt("device"),
                target: get(args, a, "target")?,
                argv: opt("argv"),
            },
            NodeAction::Unmount => NodeStep::Unmount {
                target: get(args, a, "target")?,
                source: opt("source"),
            },
            NodeAction::ResizeFilesystem => NodeStep::ResizeFilesystem {
                target: opt("target"),
                argv: opt("argv"),
            },
            NodeAction::GateCreate => NodeStep::GateCreate {
                gate: get(args, a, "gate")?,
                table: opt("table"),
            },
            NodeAction::GateReload => NodeStep::GateReload {
                gate: get(args, a, "gate")?,
                table: opt("table"),
            },
            NodeAction::GateRemove => NodeStep::GateRemove {
                gate: get(args, a, "gate")?,
            },
            NodeAction::Activate => NodeStep::Activate {
                lv: get(args, a, "lv")?,
            },
        })
    }

    /// The step about volume `volume_id`, ready to run.
    pub fn spec(&self, volume_id: &str) -> lvms_actors::StepSpec {
        lvms_actors::StepSpec::new(volume_ref(volume_id), self.action()).args(self.args())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_parses_back_from_its_stored_name() {
        for a in NodeAction::ALL {
            assert_eq!(NodeAction::parse(a.name()), Some(*a));
        }
        let steps = [
            NodeStep::Format {
                device: "/dev/a".into(),
                fs_type: "xfs".into(),
                target: "/t".into(),
            },
            NodeStep::Mount {
                device: "/dev/a".into(),
                target: "/t".into(),
                argv: "mount /dev/a /t".into(),
            },
            NodeStep::Unmount {
                target: "/t".into(),
                source: "/dev/a".into(),
            },
            NodeStep::ResizeFilesystem {
                target: "/t".into(),
                argv: "xfs_growfs /t".into(),
            },
            NodeStep::GateCreate {
                gate: "lvms-v".into(),
                table: "0 8 linear 253:1 0".into(),
            },
            NodeStep::GateReload {
                gate: "lvms-v".into(),
                table: "0 16 linear 253:1 0".into(),
            },
            NodeStep::GateRemove {
                gate: "lvms-v".into(),
            },
            NodeStep::Activate { lv: "vg1/v".into() },
        ];
        for step in steps {
            assert_eq!(NodeStep::parse(step.action(), &step.args()), Ok(step));
        }
        // The stored form is unchanged; replay needs only what it reads.
        assert_eq!(
            NodeStep::Format {
                device: "/dev/a".into(),
                fs_type: "ext4".into(),
                target: "/t".into()
            }
            .args(),
            ["device=/dev/a", "fsType=ext4", "target=/t"]
        );
        assert_eq!(
            NodeStep::parse(NodeAction::Unmount, &["target=/t".into()]),
            Ok(NodeStep::Unmount {
                target: "/t".into(),
                source: String::new()
            })
        );
        assert_eq!(
            NodeStep::parse(NodeAction::Mount, &[]).unwrap_err().key,
            "target"
        );
    }
}
