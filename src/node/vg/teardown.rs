//! LVMS processDelete as a pure plan: what removing a device class from a node does to the
//! host, decided from `pvs`/`vgs`/`lvs` (or, when the VG is already gone, from the devices
//! this node's journal says it put into it). The actor runs the steps in order.

use std::collections::BTreeSet;

use crate::node::commands::{self, CommandError};
use crate::node::lvmd_config::{LvmdConfig, Removal};
use crate::node::report::{ExistingVg, LogicalVolume, LvAttr, LvReport, PhysicalVolume};
use crate::node::vg::actions::VolumeGroupAction;
use crate::node::vg::events::{
    EventReason, MSG_LVMD_CONFIG_DELETED, MSG_LVMD_CONFIG_UPDATED_AFTER_REMOVAL,
};
use crate::node::vg::replay::orphaned_labels;

/// The host as a teardown sees it.
pub enum TeardownView<'a> {
    /// The VG exists: its PVs and its logical volumes.
    Present {
        vg: &'a ExistingVg,
        lvs: &'a LvReport,
    },
    /// The VG is gone (a kill after `vgremove`): the devices this node put into it, from its
    /// journal, and the node's PVs now.
    Gone {
        recorded: &'a BTreeSet<String>,
        pvs: &'a [PhysicalVolume],
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Teardown {
    /// User volumes are still in the VG: nothing is removed (LVMS ManualCleanupRequired).
    Refuse { volumes: Vec<String> },
    /// Host steps in order (possibly none: nothing left on the host).
    Steps(Vec<(VolumeGroupAction, Vec<String>)>),
}

/// Pool, then VG, then PV labels; when the VG is gone, only the labels of its former
/// devices that no VG holds now.
pub fn plan(
    vg: &str,
    pool: Option<&str>,
    view: TeardownView<'_>,
) -> Result<Teardown, CommandError> {
    let mut steps = Vec::new();
    match view {
        TeardownView::Present { vg: existing, lvs } => {
            // Hidden LVs (`[pool_tmeta]`) belong to the pool.
            let volumes: Vec<String> = lvs
                .all()
                .filter(|lv| Some(lv.lv_name.as_str()) != pool && !lv.lv_name.starts_with('['))
                .map(|lv| lv.lv_name.clone())
                .collect();
            if !volumes.is_empty() {
                return Ok(Teardown::Refuse { volumes });
            }
            let pool_lv = pool.and_then(|p| lvs.find(p));
            if let (Some(pool), Some(pool_lv)) = (pool, pool_lv) {
                // As LVMS: deactivate first; `lvremove` of an active pool would prompt.
                let [deactivate, remove] = commands::delete_lv(vg, pool)?;
                if may_be_active(pool_lv) {
                    steps.push((VolumeGroupAction::LvchangeDeactivate, deactivate));
                }
                steps.push((VolumeGroupAction::LvremoveThinPool, remove));
            }
            // LVMS deactivates the whole VG before `vgremove`. Planned from what the host shows,
            // a step is taken only while it is still needed: after a crash between this and
            // `vgremove`, the next pass does not deactivate again what already is.
            let pool_part =
                |name: &str| pool.is_some_and(|p| name == p || name.starts_with(&format!("[{p}_")));
            if lvs
                .all()
                .any(|lv| !pool_part(&lv.lv_name) && may_be_active(lv))
            {
                steps.push((
                    VolumeGroupAction::VgchangeDeactivate,
                    commands::vgchange_deactivate(vg)?,
                ));
            }
            steps.push((VolumeGroupAction::Vgremove, commands::vgremove(vg)?));
            steps.push((
                VolumeGroupAction::PvremoveTeardown,
                commands::pvremove(&existing.pv_names())?,
            ));
        }
        TeardownView::Gone { recorded, pvs } => {
            let orphans = orphaned_labels(recorded, pvs);
            if !orphans.is_empty() {
                steps.push((
                    VolumeGroupAction::PvremoveTeardown,
                    commands::pvremove(&orphans)?,
                ));
            }
        }
    }
    Ok(Teardown::Steps(steps))
}

/// Only lvm2's `-` says an LV is inactive; `X` (activation off: unknown) or an attr that does
/// not parse counts as active, the safe side (deactivating an inactive LV is harmless).
fn may_be_active(lv: &LogicalVolume) -> bool {
    LvAttr::parse(&lv.lv_attr).map_or(true, |a| a.state != '-')
}

/// The ManualCleanupRequired message (the user's fix in it).
pub fn refusal_message(vg: &str, volumes: &[String]) -> String {
    format!(
        "volume group {vg} still holds logical volumes {}; delete their PersistentVolumes (or remove the volumes by hand) before deleting the device class",
        volumes.join(", ")
    )
}

/// What a deleted class does to lvmd.yaml, and the Event that tells it (LVMS: LVMDConfigUpdated
/// when other classes remain, LVMDConfigDeleted with the last); `None`: the file stays as it is.
pub fn lvmd_after_removal(
    removal: Removal,
) -> Option<(Option<LvmdConfig>, EventReason, &'static str)> {
    match removal {
        Removal::NoConfig | Removal::Unchanged => None,
        Removal::Save(c) => Some((
            Some(c),
            EventReason::LVMDConfigUpdated,
            MSG_LVMD_CONFIG_UPDATED_AFTER_REMOVAL,
        )),
        Removal::Delete => Some((
            None,
            EventReason::LVMDConfigDeleted,
            MSG_LVMD_CONFIG_DELETED,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::fixture;

    use crate::node::report::{find_vg, join_vgs, parse_lvs, parse_pvs, parse_vgs};
    use VolumeGroupAction as A;

    #[test]
    fn the_last_class_deletes_lvmd_yaml_and_others_keep_it() {
        assert_eq!(lvmd_after_removal(Removal::NoConfig), None);
        assert_eq!(lvmd_after_removal(Removal::Unchanged), None);
        let (file, reason, _) = lvmd_after_removal(Removal::Delete).unwrap();
        assert_eq!((file, reason), (None, EventReason::LVMDConfigDeleted));
        let kept = LvmdConfig::default();
        let (file, reason, note) = lvmd_after_removal(Removal::Save(kept.clone())).unwrap();
        assert_eq!((file, reason), (Some(kept), EventReason::LVMDConfigUpdated));
        assert_eq!(note, MSG_LVMD_CONFIG_UPDATED_AFTER_REMOVAL);
    }

    fn thick() -> ExistingVg {
        let pvs = parse_pvs(&fixture("pvs.json")).unwrap();
        let vgs = parse_vgs(&fixture("vgs_tagged.json")).unwrap();
        find_vg(&join_vgs(&vgs, &pvs), "lvmsfix-thick")
            .cloned()
            .expect("fixture VG")
    }

    fn actions(t: &Teardown) -> Vec<A> {
        match t {
            Teardown::Steps(s) => s.iter().map(|(a, _)| *a).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn user_volumes_refuse_the_teardown_and_name_themselves() {
        let lvs = parse_lvs(&fixture("lvs_linear.json")).unwrap();
        let vg = thick();
        let t = plan(
            "lvmsfix-thick",
            None,
            TeardownView::Present { vg: &vg, lvs: &lvs },
        )
        .unwrap();
        assert_eq!(
            t,
            Teardown::Refuse {
                volumes: vec!["lv1".into(), "lv2".into()]
            }
        );
        let msg = refusal_message("lvmsfix-thick", &["lv1".into(), "lv2".into()]);
        assert!(
            msg.contains("lv1, lv2") && msg.contains("PersistentVolumes"),
            "{msg}"
        );
    }

    #[test]
    fn the_pool_alone_is_removed_before_the_vg_and_its_labels() {
        // The thin fixture has the pool and one thin volume: a user volume, so refused.
        let lvs = parse_lvs(&fixture("lvs_thin.json")).unwrap();
        let vg = thick();
        assert!(matches!(
            plan("vg1", Some("thin-pool-1"), TeardownView::Present { vg: &vg, lvs: &lvs }),
            Ok(Teardown::Refuse { volumes }) if volumes.len() == 1
        ));
        // Only the pool (and its hidden LVs) left: pool, VG, labels of every PV.
        let only_pool = LvReport {
            reports: vec![
                lvs.all()
                    .filter(|lv| lv.lv_name == "thin-pool-1")
                    .cloned()
                    .chain(lvs.all().take(1).cloned().map(|mut lv| {
                        lv.lv_name = "[thin-pool-1_tmeta]".into();
                        lv
                    }))
                    .collect(),
            ],
        };
        let t = plan(
            "vg1",
            Some("thin-pool-1"),
            TeardownView::Present {
                vg: &vg,
                lvs: &only_pool,
            },
        )
        .unwrap();
        // The active pool is deactivated; nothing else in the VG is active, so no vgchange.
        assert_eq!(
            actions(&t),
            [
                A::LvchangeDeactivate,
                A::LvremoveThinPool,
                A::Vgremove,
                A::PvremoveTeardown
            ]
        );
        let Teardown::Steps(steps) = t else {
            unreachable!()
        };
        assert_eq!(steps[0].1[1..], ["-an", "vg1/thin-pool-1"]);
        assert_eq!(steps[3].1[1..], ["/dev/loop0", "/dev/loop1"]);
    }

    /// Issue 41: after a crash between a deactivation and what follows it, the next pass plans
    /// from the host again and does not deactivate twice; an LV lvm2 cannot tell the state of
    /// (`X`, activation off) or an unreadable attr is deactivated, the safe side.
    #[test]
    fn deactivation_is_planned_only_while_something_may_be_active() {
        let lvs = parse_lvs(&fixture("lvs_thin.json")).unwrap();
        let vg = thick();
        let with = |name: &str, attr: &str| {
            let mut lv = lvs.find("thin-pool-1").cloned().unwrap();
            lv.lv_name = name.into();
            lv.lv_attr = attr.into();
            lv
        };
        let plan_of = |lvs: Vec<crate::node::report::LogicalVolume>| {
            let lvs = LvReport { reports: vec![lvs] };
            actions(
                &plan(
                    "vg1",
                    Some("thin-pool-1"),
                    TeardownView::Present { vg: &vg, lvs: &lvs },
                )
                .unwrap(),
            )
        };
        // The pool deactivated before a crash: only its removal is left.
        assert_eq!(
            plan_of(vec![with("thin-pool-1", "twi---tz--")]),
            [A::LvremoveThinPool, A::Vgremove, A::PvremoveTeardown]
        );
        // Unknown state or a garbled attr: deactivated.
        for attr in ["twi-X-tz--", "twi"] {
            assert_eq!(
                plan_of(vec![with("thin-pool-1", attr)])[0],
                A::LvchangeDeactivate,
                "{attr}"
            );
        }
        // An active LV outside the pool (the pool's spare) is deactivated with the VG; an
        // inactive one is not.
        assert!(
            plan_of(vec![with("[lvol0_pmspare]", "ewi-a-----")]).contains(&A::VgchangeDeactivate)
        );
        assert!(
            !plan_of(vec![with("[lvol0_pmspare]", "ewi-------")]).contains(&A::VgchangeDeactivate)
        );
        assert!(
            !plan_of(vec![with("[thin-pool-1_tdata]", "Twi-ao----")])
                .contains(&A::VgchangeDeactivate)
        );
    }

    #[test]
    fn a_thick_vg_without_volumes_is_removed_with_its_labels() {
        let empty = parse_lvs(&fixture("lvs_empty.json")).unwrap();
        let vg = thick();
        let t = plan(
            "lvmsfix-thick",
            None,
            TeardownView::Present {
                vg: &vg,
                lvs: &empty,
            },
        )
        .unwrap();
        // No LV at all: nothing to deactivate.
        assert_eq!(actions(&t), [A::Vgremove, A::PvremoveTeardown]);
    }

    #[test]
    fn a_gone_vg_leaves_only_its_own_unattached_labels() {
        let pvs = parse_pvs(&fixture("pvs.json")).unwrap();
        // loop2 is labelled and in no VG; loop3 is in another VG; loop9 is not a PV.
        let recorded: BTreeSet<String> = ["/dev/loop2", "/dev/loop3", "/dev/loop9"]
            .into_iter()
            .map(String::from)
            .collect();
        let t = plan(
            "lvmsfix-thick",
            None,
            TeardownView::Gone {
                recorded: &recorded,
                pvs: &pvs,
            },
        )
        .unwrap();
        let Teardown::Steps(steps) = t else {
            panic!("{t:?}")
        };
        assert_eq!(steps.len(), 1);
        assert_eq!(steps[0].0, A::PvremoveTeardown);
        assert_eq!(steps[0].1[1..], ["/dev/loop2"]);
        // Nothing of ours left: nothing to do.
        let none = BTreeSet::new();
        assert_eq!(
            plan(
                "lvmsfix-thick",
                None,
                TeardownView::Gone {
                    recorded: &none,
                    pvs: &pvs
                }
            )
            .unwrap(),
            Teardown::Steps(vec![])
        );
    }
}
