//! A volume group snapshot on its node (pure): when the group is taken, what a crash left
//! behind is removed, and which gates the hold suspends.
//!
//! The group is one instant: every member's source is held (its gate suspended: the
//! filesystem on it flushed and frozen, its I/O queued), every member's thin snapshot is taken
//! under the hold, and the gates resume. Any write a snapshot holds was acknowledged before
//! the hold began, and any write acknowledged before the hold is in its snapshot: so a record
//! found on one member implies every record acknowledged before it on the others. A crash
//! leaves either every member on disk (all taken under one hold) or some: those are removed
//! and the group is taken again from the start, never completed from a later instant.

use crate::node::volume::gate::{self, DmDevice};

/// One member LogicalVolume as the group sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberState {
    pub name: String,
    /// Its LV's name on disk.
    pub uid: String,
    pub on_disk: bool,
    /// Its status says taken (a volume id) or refused (a code): the per-volume steps own it.
    pub settled: bool,
    pub deleting: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupPlan {
    /// Not every member's object is here yet (the controller writes them one by one).
    Wait(Vec<String>),
    /// Taken or refused: each member's own steps finish it (access, status, deletion).
    Settled,
    /// A crash took some members and not the others: remove these LVs, then take all again.
    RemovePartial(Vec<String>),
    /// Hold, snapshot every member, release.
    Take,
}

/// `expected`: the members the group names; `present`: those this node has.
pub fn plan_group(expected: &[String], present: &[MemberState]) -> GroupPlan {
    if present.iter().any(|m| m.deleting || m.settled) {
        return GroupPlan::Settled;
    }
    let missing: Vec<String> = expected
        .iter()
        .filter(|n| !present.iter().any(|m| &m.name == *n))
        .cloned()
        .collect();
    if !missing.is_empty() {
        return GroupPlan::Wait(missing);
    }
    let on_disk: Vec<String> = present
        .iter()
        .filter(|m| m.on_disk)
        .map(|m| m.uid.clone())
        .collect();
    if on_disk.is_empty() {
        GroupPlan::Take
    } else if on_disk.len() == present.len() {
        GroupPlan::Settled
    } else {
        GroupPlan::RemovePartial(on_disk)
    }
}

/// A member's source as the hold sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The source volume's id (its LV name).
    pub volume_id: String,
    /// device-mapper's name of the source LV.
    pub dm_name: String,
}

/// The gates to suspend for the hold (sorted): each source's gate. A source in use without a
/// gate (a raw block volume, or a filesystem mounted before gates) cannot be held, and a
/// group is refused rather than taken inconsistently; a source nobody has open needs none.
pub fn hold_gates(sources: &[Source], devices: &[DmDevice]) -> Result<Vec<String>, String> {
    let mut gates = Vec::new();
    let mut unheld = Vec::new();
    for s in sources {
        let name = gate::name(&s.volume_id);
        if devices.iter().any(|d| d.name == name) {
            gates.push(name);
        } else if devices.iter().any(|d| d.name == s.dm_name && d.open > 0) {
            unheld.push(s.volume_id.clone());
        }
    }
    if !unheld.is_empty() {
        return Err(format!(
            "volume {} is in use without an lvms gate (a raw block volume, or a filesystem published before lvms made gates: republish it by restarting its pod), so it cannot be held at one instant with the others",
            unheld.join(", ")
        ));
    }
    gates.sort();
    gates.dedup();
    Ok(gates)
}

/// Devices a crash left suspended, in the order they are resumed: the LVs of lvms's VGs
/// (`vgs`; a killed `lvcreate -s` leaves its origin suspended, a killed pool reload its pool:
/// lvm2 does not resume them by itself), the pool's own devices first, then the gates (a
/// crash during a hold or a gate reload). Each is thawed before anything else, so no
/// filesystem stays frozen.
pub fn held_devices(devices: &[DmDevice], vgs: &[&str]) -> Vec<String> {
    let of_vg = |name: &str| {
        vgs.iter().any(|vg| {
            name.strip_prefix(&format!("{}-", vg.replace('-', "--")))
                .is_some_and(|rest| !rest.is_empty() && !rest.starts_with('-'))
        })
    };
    let pool_part = |name: &str| {
        name.ends_with("-tpool") || name.ends_with("_tdata") || name.ends_with("_tmeta")
    };
    let suspended = || {
        devices
            .iter()
            .filter(|d| d.suspended)
            .map(|d| d.name.as_str())
    };
    let mut out: Vec<String> = Vec::new();
    out.extend(
        suspended()
            .filter(|n| of_vg(n) && pool_part(n))
            .map(String::from),
    );
    out.extend(
        suspended()
            .filter(|n| of_vg(n) && !pool_part(n))
            .map(String::from),
    );
    out.extend(
        suspended()
            .filter(|n| gate::volume_of(n).is_some())
            .map(String::from),
    );
    out
}

/// The lvcreate of a member under the hold: lvm2 must not scan the suspended gates (a read of
/// a suspended device waits for its resume).
pub fn under_hold(mut lvcreate: Vec<String>) -> Vec<String> {
    lvcreate.splice(
        1..1,
        [
            "--config".to_string(),
            "devices{ignore_suspended_devices=1}".to_string(),
        ],
    );
    lvcreate
}

/// The LV tag naming a member's group: `lvs @lvms-group.<group>` lists a group's snapshots.
pub fn group_tag(group: &str) -> String {
    format!("lvms-group.{group}")
}

/// A member's `lvcreate -s` with its group's tag.
pub fn with_group_tag(mut lvcreate: Vec<String>, group: &str) -> Vec<String> {
    lvcreate.extend(["--addtag".to_string(), group_tag(group)]);
    lvcreate
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(name: &str, on_disk: bool) -> MemberState {
        MemberState {
            name: name.into(),
            uid: format!("u-{name}"),
            on_disk,
            settled: false,
            deleting: false,
        }
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_group_is_taken_once_every_member_is_here_and_none_is_on_disk() {
        let all = names(&["a", "b"]);
        assert_eq!(
            plan_group(&all, &[m("a", false)]),
            GroupPlan::Wait(names(&["b"]))
        );
        assert_eq!(
            plan_group(&all, &[m("a", false), m("b", false)]),
            GroupPlan::Take
        );
        assert_eq!(
            plan_group(&all, &[m("a", true), m("b", true)]),
            GroupPlan::Settled,
            "all taken under one hold"
        );
    }

    #[test]
    fn a_partial_group_is_removed_never_completed() {
        let all = names(&["a", "b", "c"]);
        assert_eq!(
            plan_group(&all, &[m("a", true), m("b", false), m("c", true)]),
            GroupPlan::RemovePartial(names(&["u-a", "u-c"]))
        );
    }

    #[test]
    fn a_settled_or_deleted_member_leaves_the_group_to_per_volume_steps() {
        let all = names(&["a", "b"]);
        let mut a = m("a", true);
        a.settled = true;
        assert_eq!(plan_group(&all, &[a, m("b", false)]), GroupPlan::Settled);
        let mut b = m("b", false);
        b.deleting = true;
        assert_eq!(plan_group(&all, &[m("a", true), b]), GroupPlan::Settled);
    }

    fn dev(name: &str, open: u32, suspended: bool) -> DmDevice {
        DmDevice {
            name: name.into(),
            open,
            suspended,
        }
    }

    fn src(id: &str) -> Source {
        Source {
            volume_id: id.into(),
            dm_name: format!("vg-{id}"),
        }
    }

    #[test]
    fn the_hold_suspends_gates_and_refuses_a_source_in_use_without_one() {
        let devices = [
            dev("lvms-b", 1, false),
            dev("vg-b", 1, false),
            dev("lvms-a", 1, false),
            dev("vg-a", 1, false),
            dev("vg-c", 0, false),
            dev("vg-d", 1, false),
        ];
        assert_eq!(
            hold_gates(&[src("b"), src("a"), src("c")], &devices).unwrap(),
            ["lvms-a", "lvms-b"],
            "c is not in use: nothing to hold"
        );
        let e = hold_gates(&[src("a"), src("d")], &devices).unwrap_err();
        assert!(e.contains("volume d is in use without an lvms gate"), "{e}");
        assert!(!e.contains("volume a"), "{e}");
    }

    #[test]
    fn only_suspended_gates_are_thawed() {
        let devices = [
            dev("lvms-a", 1, true),
            dev("lvms-b", 1, false),
            dev("vg-x", 1, true),
        ];
        assert_eq!(held_devices(&devices, &[]), ["lvms-a"]);
    }

    #[test]
    fn suspended_lvs_of_lvms_vgs_are_thawed_pool_first_then_gates() {
        let devices = [
            dev("lvms-a", 1, true),
            dev("vg1-origin", 1, true),
            dev("vg1-pool-tpool", 1, true),
            dev("vg1-other", 1, false),
            // Another VG ("vg1-x": escaped "vg1--x") and a VG lvms does not manage.
            dev("vg1--x-lv", 1, true),
            dev("data-lv", 1, true),
        ];
        assert_eq!(
            held_devices(&devices, &["vg1"]),
            ["vg1-pool-tpool", "vg1-origin", "lvms-a"]
        );
        assert_eq!(held_devices(&devices, &["vg1-x"]), ["vg1--x-lv", "lvms-a"]);
    }

    #[test]
    fn members_carry_their_groups_tag() {
        assert_eq!(
            with_group_tag(names(&["lvcreate", "-s", "vg/a"]), "groupsnapshot-1"),
            [
                "lvcreate",
                "-s",
                "vg/a",
                "--addtag",
                "lvms-group.groupsnapshot-1"
            ]
        );
    }

    #[test]
    fn lvcreate_under_the_hold_ignores_suspended_devices() {
        let argv = under_hold(names(&["/usr/sbin/lvcreate", "-s", "vg/a"]));
        assert_eq!(
            argv,
            [
                "/usr/sbin/lvcreate",
                "--config",
                "devices{ignore_suspended_devices=1}",
                "-s",
                "vg/a"
            ]
        );
        assert_eq!(crate::node::volume::replay::vg_of(&argv), Some("vg"));
    }
}
