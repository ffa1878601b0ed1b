//! The steps a volume-group actor journals: host commands, its file and its own edits of the
//! LVMVolumeGroup. Stored by name in each intent; replay parses the name back.

use lvms_journal::Action;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumeGroupAction {
    AddFinalizer,
    RemoveFinalizer,
    AnnotateWiped,
    DmsetupRemove,
    Wipefs,
    Vgcreate,
    Vgextend,
    Vgreduce,
    /// `pvremove` after a `vgreduce` (day-2 device removal, with its `DeviceRemoved` Event).
    Pvremove,
    Vgremove,
    /// `pvremove` after `vgremove` (teardown).
    PvremoveTeardown,
    LvcreateThinPool,
    LvextendThinPool,
    LvchangeActivate,
    LvextendPoolMetadata,
    /// `lvchange -an` of the thin pool before its removal (teardown).
    LvchangeDeactivate,
    LvremoveThinPool,
    /// `vgchange -an` before `vgremove` (teardown).
    VgchangeDeactivate,
    WriteLvmdConfig,
}

impl Action for VolumeGroupAction {
    const ALL: &'static [Self] = &[
        Self::AddFinalizer,
        Self::RemoveFinalizer,
        Self::AnnotateWiped,
        Self::DmsetupRemove,
        Self::Wipefs,
        Self::Vgcreate,
        Self::Vgextend,
        Self::Vgreduce,
        Self::Pvremove,
        Self::Vgremove,
        Self::PvremoveTeardown,
        Self::LvcreateThinPool,
        Self::LvextendThinPool,
        Self::LvchangeActivate,
        Self::LvextendPoolMetadata,
        Self::LvchangeDeactivate,
        Self::LvremoveThinPool,
        Self::VgchangeDeactivate,
        Self::WriteLvmdConfig,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::AddFinalizer => "add-finalizer",
            Self::RemoveFinalizer => "remove-finalizer",
            Self::AnnotateWiped => "annotate-wiped",
            Self::DmsetupRemove => "dmsetup-remove",
            Self::Wipefs => "wipefs",
            Self::Vgcreate => "vgcreate",
            Self::Vgextend => "vgextend",
            Self::Vgreduce => "vgreduce",
            Self::Pvremove => "pvremove",
            Self::Vgremove => "vgremove",
            Self::PvremoveTeardown => "pvremove-teardown",
            Self::LvcreateThinPool => "lvcreate-thin-pool",
            Self::LvextendThinPool => "lvextend-thin-pool",
            Self::LvchangeActivate => "lvchange-activate",
            Self::LvextendPoolMetadata => "lvextend-pool-metadata",
            Self::LvchangeDeactivate => "lvchange-deactivate",
            Self::LvremoveThinPool => "lvremove-thin-pool",
            Self::VgchangeDeactivate => "vgchange-deactivate",
            Self::WriteLvmdConfig => "write-lvmd-config",
        }
    }
}

impl VolumeGroupAction {
    /// Steps whose args are a host command's argv.
    pub fn runs_a_command(self) -> bool {
        !matches!(
            self,
            Self::AddFinalizer
                | Self::RemoveFinalizer
                | Self::AnnotateWiped
                | Self::WriteLvmdConfig
        )
    }
}

/// The argv of a recorded host step: its args, or, in journals of format 2 and older, which
/// kept the argv in the digest, the digest's words.
pub fn recorded_argv(args: &[String], digest: &str) -> Vec<String> {
    if args.is_empty() {
        digest.split_whitespace().map(String::from).collect()
    } else {
        args.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_parses_back_from_its_stored_name() {
        for a in VolumeGroupAction::ALL {
            assert_eq!(VolumeGroupAction::parse(a.name()), Some(*a));
        }
        let mut names: Vec<_> = VolumeGroupAction::ALL.iter().map(|a| a.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(
            names.len(),
            VolumeGroupAction::ALL.len(),
            "names are unique"
        );
        assert_eq!(VolumeGroupAction::parse("vgcreat"), None);
    }

    #[test]
    fn format_2_argv_comes_from_the_digest() {
        let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            recorded_argv(&[], "/usr/sbin/vgextend vg1 /dev/loop9"),
            argv(&["/usr/sbin/vgextend", "vg1", "/dev/loop9"])
        );
        assert_eq!(
            recorded_argv(&argv(&["/usr/sbin/vgextend", "vg1"]), "ignored"),
            argv(&["/usr/sbin/vgextend", "vg1"])
        );
    }
}
