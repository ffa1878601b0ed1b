//! Crash recovery of a LogicalVolume's host steps (pure): whether an interrupted lvcreate,
//! lvresize or lvremove took effect, read from `lvs` of its VG before anything is redone.
//! An lvcreate that happened is adopted by the next pass, never run a second time.

use lvms_journal::Replayed;

use crate::node::report::LogicalVolume;
use crate::node::volume::actions::VolumeAction as A;

/// The VG an lvm2 argv of this module acts on: the `vg/` of its first `vg/lv` argument, or
/// (a thick lvcreate) its last argument.
pub fn vg_of(argv: &[String]) -> Option<&str> {
    let args = argv.get(1..)?;
    args.iter()
        .filter(|a| !a.starts_with('/') && !a.starts_with('-'))
        .find_map(|a| a.split_once('/').map(|(vg, _)| vg))
        .or_else(|| args.last().map(String::as_str))
        .filter(|vg| !vg.is_empty() && !vg.starts_with('-'))
}

/// The bytes of an `-L <n>b` argument.
fn size_arg(argv: &[String]) -> Option<u64> {
    let i = argv.iter().position(|a| a == "-L")?;
    argv.get(i + 1)?.strip_suffix('b')?.parse().ok()
}

/// The verdict for `action` on LV `lv` (the LogicalVolume's uid), given `lvs` of its VG now.
/// Steps the pass recomputes from the API every time (finalizers, status, capacity, access)
/// are `Rechecked`.
pub fn verdict(action: A, argv: &[String], lv: &str, lvs: &[LogicalVolume]) -> Replayed {
    let on_disk = lvs.iter().find(|l| l.lv_name == lv);
    let done = match action {
        A::Lvcreate | A::LvcreateSnapshot => on_disk.is_some(),
        A::Lvremove => on_disk.is_none(),
        A::Lvresize => match (on_disk.and_then(|l| l.lv_size), size_arg(argv)) {
            (Some(have), Some(want)) => have >= want,
            _ => false,
        },
        A::Lvchange
        | A::AddFinalizer
        | A::WriteStatus
        | A::RemoveFinalizer
        | A::AnnotateCapacity
        // Every pass thaws any gate left suspended before it does anything else.
        | A::HoldGates
        | A::ReleaseGates
        // Deleting a device again is harmless, and the next lvcreate finds any stray anew.
        | A::DeleteThinDevice => return Replayed::Rechecked,
    };
    if done {
        Replayed::AlreadyDone
    } else {
        Replayed::NotDone
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::volume::commands::{self as cmd, CreateOptions};

    fn lv(name: &str, size: u64) -> LogicalVolume {
        LogicalVolume {
            lv_name: name.into(),
            lv_size: Some(size),
            ..Default::default()
        }
    }

    #[test]
    fn the_vg_is_read_from_every_command_shape() {
        let o = CreateOptions::default();
        let thick = cmd::lvcreate_thick("vg1", "u", 4096, &o).unwrap();
        let thin = cmd::lvcreate_thin("vg2", "pool", "u", 4096, &o).unwrap();
        let snap = cmd::lvcreate_snapshot("vg3", "src", "u").unwrap();
        let resize = cmd::lvresize("vg4", "u", 8192).unwrap();
        let remove = cmd::lvremove_volume("vg5", "u").unwrap();
        let got: Vec<_> = [thick, thin, snap, resize, remove]
            .iter()
            .map(|a| vg_of(a).map(String::from))
            .collect();
        assert_eq!(
            got,
            ["vg1", "vg2", "vg3", "vg4", "vg5"].map(|s| Some(s.to_string()))
        );
        assert_eq!(vg_of(&[]), None);
    }

    #[test]
    fn an_effect_in_lvs_is_already_done_and_a_missing_one_is_not() {
        let create = cmd::lvcreate_thick("vg", "u", 4096, &CreateOptions::default()).unwrap();
        assert_eq!(
            verdict(A::Lvcreate, &create, "u", &[lv("u", 4096)]),
            Replayed::AlreadyDone
        );
        assert_eq!(
            verdict(A::Lvcreate, &create, "u", &[lv("x", 1)]),
            Replayed::NotDone
        );
        let grow = cmd::lvresize("vg", "u", 8192).unwrap();
        assert_eq!(
            verdict(A::Lvresize, &grow, "u", &[lv("u", 4096)]),
            Replayed::NotDone
        );
        assert_eq!(
            verdict(A::Lvresize, &grow, "u", &[lv("u", 8192)]),
            Replayed::AlreadyDone
        );
        let rm = cmd::lvremove_volume("vg", "u").unwrap();
        assert_eq!(verdict(A::Lvremove, &rm, "u", &[]), Replayed::AlreadyDone);
        assert_eq!(
            verdict(A::Lvremove, &rm, "u", &[lv("u", 1)]),
            Replayed::NotDone
        );
        assert_eq!(verdict(A::WriteStatus, &[], "u", &[]), Replayed::Rechecked);
    }
}
