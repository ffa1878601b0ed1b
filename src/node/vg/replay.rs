//! Pure decisions for crash recovery of volume-group host steps: whether an interrupted step
//! already took effect (its verdict), and which devices a volume group that is already gone
//! was built from (so teardown still removes their PV labels).
//!
//! Each verdict tests the step's own effect on the host, never a proxy: "this PV is not in the
//! VG" is as true after `vgremove` as after `pvremove`, so a `pvremove` is done only when its
//! devices carry no LVM label at all.

use std::collections::BTreeSet;

use crate::node::report::{ExistingVg, PhysicalVolume};
use crate::node::vg::actions::VolumeGroupAction as A;

/// Whether an interrupted step already happened on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    AlreadyDone,
    NotDone,
}

impl From<Verdict> for lvms_journal::Replayed {
    fn from(v: Verdict) -> Self {
        match v {
            Verdict::AlreadyDone => lvms_journal::Replayed::AlreadyDone,
            Verdict::NotDone => lvms_journal::Replayed::NotDone,
        }
    }
}

/// Device arguments of a recorded argv (`/dev/...` words).
pub fn devices_in(argv: &[String]) -> Vec<&str> {
    argv.iter()
        .map(String::as_str)
        .filter(|a| a.starts_with("/dev/"))
        .collect()
}

/// What an autoextend step asked lvm2 for: the pool (`vg/pool`, the argv's last word) and the
/// absolute size it extends the data (`-L <n>b`) or the metadata (`--poolmetadatasize <n>b`) to.
/// `None` for any other step or an argv this release did not write.
pub fn pool_extension(action: A, argv: &[String]) -> Option<(&str, u64)> {
    let flag = match action {
        A::LvextendThinPool => "-L",
        A::LvextendPoolMetadata => "--poolmetadatasize",
        _ => return None,
    };
    let at = argv.iter().position(|a| a == flag)?;
    let bytes = argv.get(at + 1)?.strip_suffix('b')?.parse().ok()?;
    let target = argv.last().filter(|t| t.contains('/'))?;
    Some((target.as_str(), bytes))
}

/// The verdict for step `action` with argv `argv` on volume group `vg`, given what
/// `pvs`/`vgs` report now (`existing`: the VG joined with its PVs, when it exists). Steps
/// whose effect cannot be read back from lvm2 are `NotDone`: the next pass decides again.
pub fn verdict(
    action: A,
    argv: &[String],
    vg: &str,
    pvs: &[PhysicalVolume],
    existing: Option<&ExistingVg>,
) -> Verdict {
    let done = match action {
        A::Vgcreate | A::Vgextend => existing.is_some_and(|e| {
            devices_in(argv)
                .iter()
                .all(|d| e.pvs.iter().any(|p| p.pv_name == *d))
        }),
        A::Vgremove => existing.is_none(),
        A::Vgreduce => devices_in(argv).iter().all(|d| {
            !pvs.iter()
                .any(|p| p.pv_name == *d && p.vg_name.as_deref() == Some(vg))
        }),
        // The label itself is gone (a pvremove is the only step that removes it).
        A::Pvremove | A::PvremoveTeardown => devices_in(argv)
            .iter()
            .all(|d| !pvs.iter().any(|p| p.pv_name == *d)),
        _ => false,
    };
    if done {
        Verdict::AlreadyDone
    } else {
        Verdict::NotDone
    }
}

/// The devices of the volume group as this node built it, from its own journal: the
/// `(action, argv)` of every host-step intent of the VG's unit, oldest first. The last
/// `vgcreate` starts the set, `vgextend` adds, `vgreduce` removes. Used when the VG is gone
/// but teardown may not have removed the PV labels (a kill between `vgremove` and
/// `pvremove`): only devices this node itself put into the VG qualify.
pub fn devices_from_journal(steps: &[(A, Vec<String>)]) -> BTreeSet<String> {
    let mut devices = BTreeSet::new();
    for (action, argv) in steps {
        match action {
            A::Vgcreate => {
                devices = devices_in(argv).into_iter().map(String::from).collect();
            }
            A::Vgextend => devices.extend(devices_in(argv).into_iter().map(String::from)),
            A::Vgreduce => {
                for d in devices_in(argv) {
                    devices.remove(d);
                }
            }
            _ => {}
        }
    }
    devices
}

/// Of `devices`, those that still carry a PV label but belong to no volume group: what a
/// teardown that lost track of its VG still has to `pvremove`.
pub fn orphaned_labels(devices: &BTreeSet<String>, pvs: &[PhysicalVolume]) -> Vec<String> {
    pvs.iter()
        .filter(|p| devices.contains(&p.pv_name))
        .filter(|p| p.vg_name.as_deref().is_none_or(str::is_empty))
        .map(|p| p.pv_name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An argv from its words.
    fn w(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn pv(name: &str, vg: Option<&str>) -> PhysicalVolume {
        PhysicalVolume {
            pv_name: name.into(),
            vg_name: vg.map(String::from),
            ..Default::default()
        }
    }

    fn vg(name: &str, pvs: Vec<PhysicalVolume>) -> ExistingVg {
        ExistingVg {
            name: name.into(),
            size: None,
            free: None,
            tags: vec![],
            pvs,
        }
    }

    #[test]
    fn pvremove_is_done_only_when_the_label_is_gone() {
        // Right after vgremove: the PV is in no VG but still labelled (issue 12.3a).
        let labelled = [pv("/dev/loop1", None)];
        assert_eq!(
            verdict(
                A::PvremoveTeardown,
                &w("pvremove /dev/loop1"),
                "vg1",
                &labelled,
                None
            ),
            Verdict::NotDone
        );
        assert_eq!(
            verdict(
                A::Pvremove,
                &w("pvremove /dev/loop1 -y"),
                "vg1",
                &labelled,
                None
            ),
            Verdict::NotDone
        );
        assert_eq!(
            verdict(
                A::PvremoveTeardown,
                &w("pvremove /dev/loop1"),
                "vg1",
                &[],
                None
            ),
            Verdict::AlreadyDone
        );
        // Several devices: all must be unlabelled.
        assert_eq!(
            verdict(
                A::PvremoveTeardown,
                &w("pvremove /dev/loop1 /dev/loop2"),
                "vg1",
                &[pv("/dev/loop2", None)],
                None
            ),
            Verdict::NotDone
        );
    }

    #[test]
    fn vg_steps_read_their_own_effect() {
        let in_vg = vg("vg1", vec![pv("/dev/loop1", Some("vg1"))]);
        let pvs = in_vg.pvs.clone();
        assert_eq!(
            verdict(
                A::Vgcreate,
                &w("vgcreate vg1 /dev/loop1"),
                "vg1",
                &pvs,
                Some(&in_vg)
            ),
            Verdict::AlreadyDone
        );
        assert_eq!(
            verdict(A::Vgcreate, &w("vgcreate vg1 /dev/loop1"), "vg1", &[], None),
            Verdict::NotDone
        );
        assert_eq!(
            verdict(
                A::Vgextend,
                &w("vgextend vg1 /dev/loop2"),
                "vg1",
                &pvs,
                Some(&in_vg)
            ),
            Verdict::NotDone
        );
        assert_eq!(
            verdict(A::Vgremove, &w("vgremove vg1"), "vg1", &pvs, Some(&in_vg)),
            Verdict::NotDone
        );
        assert_eq!(
            verdict(A::Vgremove, &w("vgremove vg1"), "vg1", &[], None),
            Verdict::AlreadyDone
        );
        assert_eq!(
            verdict(
                A::Vgreduce,
                &w("vgreduce vg1 /dev/loop1"),
                "vg1",
                &pvs,
                Some(&in_vg)
            ),
            Verdict::NotDone
        );
        assert_eq!(
            verdict(
                A::Vgreduce,
                &w("vgreduce vg1 /dev/loop1"),
                "vg1",
                &[pv("/dev/loop1", None)],
                None
            ),
            Verdict::AlreadyDone
        );
        assert_eq!(
            verdict(
                A::LvcreateThinPool,
                &w("lvcreate ..."),
                "vg1",
                &pvs,
                Some(&in_vg)
            ),
            Verdict::NotDone
        );
    }

    #[test]
    fn the_journal_knows_which_devices_the_vg_had() {
        let steps = [
            (A::Vgcreate, w("vgcreate vg1 /dev/loop0 --addtag @lvms")), // an earlier life of vg1
            (A::Vgremove, w("vgremove vg1")),
            (A::Vgcreate, w("vgcreate vg1 /dev/loop1 --addtag @lvms")),
            (A::Vgextend, w("vgextend vg1 /dev/loop2 /dev/loop3")),
            (A::Vgreduce, w("vgreduce vg1 /dev/loop2")),
            (A::Pvremove, w("pvremove /dev/loop2")),
        ];
        let devices = devices_from_journal(&steps);
        assert_eq!(
            devices.into_iter().collect::<Vec<_>>(),
            vec!["/dev/loop1", "/dev/loop3"]
        );
    }

    #[test]
    fn only_unattached_labels_of_our_devices_are_orphans() {
        let ours: BTreeSet<String> = ["/dev/loop1", "/dev/loop3"]
            .into_iter()
            .map(String::from)
            .collect();
        let pvs = [
            pv("/dev/loop1", None),          // ours, left behind
            pv("/dev/loop3", Some("other")), // ours once, now someone else's VG
            pv("/dev/loop9", None),          // never ours
            pv("/dev/loop1x", Some("")),     // not ours (exact names only)
        ];
        assert_eq!(orphaned_labels(&ours, &pvs), vec!["/dev/loop1"]);
    }

    #[test]
    fn an_autoextend_step_names_its_pool_and_absolute_target() {
        let data = w("lvextend -L 536870912b vg1/thin-pool-1");
        assert_eq!(
            pool_extension(A::LvextendThinPool, &data),
            Some(("vg1/thin-pool-1", 536_870_912))
        );
        let meta = w("lvextend --poolmetadatasize 8388608b vg1/thin-pool-1");
        assert_eq!(
            pool_extension(A::LvextendPoolMetadata, &meta),
            Some(("vg1/thin-pool-1", 8_388_608))
        );
        assert_eq!(pool_extension(A::LvextendPoolMetadata, &data), None);
        assert_eq!(pool_extension(A::Vgcreate, &data), None);
        assert_eq!(
            pool_extension(A::LvextendThinPool, &w("lvextend -L 12G vg1/p")),
            None,
            "not an argv this release writes"
        );
    }
}
