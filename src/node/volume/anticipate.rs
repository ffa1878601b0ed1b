//! What a host step that succeeded did to its class's VG, as far as the other volumes of the
//! same pass need to know before the VG is read again. The volumes actor runs a pass's lvm2
//! steps back to back and reads each changed VG once after them; between the step and that read
//! the planner sees the class as this says. Only space decisions of *other* volumes read it: the
//! volume that took the step waits for the real read before its next decision (its status, a
//! grown size, its access), so nothing is written from an anticipated figure.

use crate::node::lvmd_config::{LvmdDeviceClass, LvmdDeviceType};
use crate::node::report::LogicalVolume as LvRow;
use crate::node::volume::actions::VolumeAction;
use crate::node::volume::capacity::ClassObservation;
use crate::node::volume::plan::VolumeView;

/// The class as `action` on `view` (succeeded) left it: a new LV counted in its pool or taken
/// from the VG's free bytes, a resized one at its new size, a removed one gone with its
/// extents back. `source_id`: a snapshot's source LV (its size and pool are the snapshot's).
/// Steps that move no space (access, a thin device deleted by number) change nothing.
pub fn anticipate(
    obs: &mut ClassObservation,
    class: &LvmdDeviceClass,
    action: VolumeAction,
    view: &VolumeView,
    source_id: Option<&str>,
) {
    let thick = class.device_type == LvmdDeviceType::Thick;
    match action {
        VolumeAction::Lvcreate => {
            let Some(size) = view.size else { return };
            let pool = match (&class.thin_pool, thick) {
                (Some(tp), false) => Some(tp.name.clone()),
                _ => None,
            };
            if thick {
                obs.vg_free = obs.vg_free.saturating_sub(size);
            }
            add(obs, view, size, pool);
        }
        VolumeAction::LvcreateSnapshot => {
            let Some(src) = source_id.and_then(|id| obs.lvs.iter().find(|l| l.lv_name == id))
            else {
                return;
            };
            let (size, pool) = (src.lv_size.unwrap_or(0), src.pool_lv.clone());
            add(obs, view, size, pool);
        }
        VolumeAction::Lvresize => {
            let Some(want) = view.size else { return };
            // A volume with an id is resized under its id; a snapshot being finished, under
            // its uid (the same name).
            let name = view.volume_id.as_deref().unwrap_or(&view.uid);
            if let Some(lv) = obs.lvs.iter_mut().find(|l| l.lv_name == name) {
                let before = lv.lv_size.unwrap_or(0);
                lv.lv_size = Some(want.max(before));
                if thick {
                    obs.vg_free = obs.vg_free.saturating_sub(want.saturating_sub(before));
                }
            }
        }
        VolumeAction::Lvremove => {
            let Some(i) = obs.lvs.iter().position(|l| l.lv_name == view.uid) else {
                return;
            };
            let gone = obs.lvs.remove(i);
            if thick {
                obs.vg_free = obs.vg_free.saturating_add(gone.lv_size.unwrap_or(0));
            }
        }
        _ => {}
    }
}

/// A row for an LV lvcreate made: enough for the space arithmetic (name, size, pool); its
/// attributes are unknown until the VG is read, so it claims none.
fn add(obs: &mut ClassObservation, view: &VolumeView, size: u64, pool: Option<String>) {
    if obs.lvs.iter().any(|l| l.lv_name == view.uid) {
        return;
    }
    obs.lvs.push(LvRow {
        lv_name: view.uid.clone(),
        pool_lv: pool,
        lv_attr: String::new(),
        lv_size: Some(size),
        ..LvRow::default()
    });
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;
    use crate::node::lvmd_config::{LvmdConfig, LvmdThinPool};
    use crate::node::volume::plan::{HostView, Plan, StatusWrite, plan};
    use crate::node::volume::space::free_for_create;

    const MIB: u64 = 1 << 20;

    fn thick() -> LvmdDeviceClass {
        LvmdDeviceClass {
            name: "thick".into(),
            volume_group: "vg1".into(),
            device_type: LvmdDeviceType::Thick,
            ..LvmdDeviceClass::default()
        }
    }

    fn thin() -> LvmdDeviceClass {
        LvmdDeviceClass {
            name: "thin".into(),
            volume_group: "vg2".into(),
            device_type: LvmdDeviceType::Thin,
            thin_pool: Some(LvmdThinPool {
                name: "pool".into(),
                overprovision_ratio: 2.0,
            }),
            ..LvmdDeviceClass::default()
        }
    }

    fn row(name: &str, size: u64, pool: Option<&str>, attr: &str) -> LvRow {
        LvRow {
            lv_name: name.into(),
            vg_name: "vg".into(),
            pool_lv: pool.map(str::to_string),
            lv_attr: attr.into(),
            lv_size: Some(size),
            ..LvRow::default()
        }
    }

    fn new_volume(name: &str, class: &str, size: u64) -> VolumeView {
        VolumeView {
            name: name.into(),
            uid: format!("uid-{name}"),
            size: Some(size),
            device_class: class.into(),
            finalized: true,
            labelled: true,
            ..VolumeView::default()
        }
    }

    fn host(class: &LvmdDeviceClass, obs: &ClassObservation) -> HostView<'static> {
        HostView {
            config: Cow::Owned(LvmdConfig {
                device_classes: vec![class.clone()],
                ..LvmdConfig::default()
            }),
            lvs: Cow::Owned(obs.lvs.clone()),
            vg_free: obs.vg_free,
            source_volume_id: None,
        }
    }

    /// Room for two volumes, three asked in one pass: the third is refused from the
    /// anticipated figure, as it would be after a read of the VG.
    #[test]
    fn a_batch_of_thick_creates_refuses_what_the_vg_cannot_hold() {
        let class = thick();
        let mut obs = ClassObservation {
            vg_free: 100 * MIB,
            lvs: vec![],
        };
        let mut planned = vec![];
        for name in ["a", "b", "c"] {
            let v = new_volume(name, "thick", 40 * MIB);
            let p = plan(&v, &host(&class, &obs));
            if matches!(
                p,
                Plan::Host {
                    action: VolumeAction::Lvcreate,
                    ..
                }
            ) {
                anticipate(&mut obs, &class, VolumeAction::Lvcreate, &v, None);
            }
            planned.push(p);
        }
        assert!(matches!(planned[0], Plan::Host { .. }));
        assert!(matches!(planned[1], Plan::Host { .. }));
        match &planned[2] {
            Plan::Status(StatusWrite::Refused { message, .. }) => {
                assert!(
                    message.contains(&format!("{} bytes free", 20 * MIB)),
                    "{message}"
                )
            }
            other => panic!("third create: {other:?}"),
        }
        assert_eq!(obs.vg_free, 20 * MIB);
    }

    #[test]
    fn thin_creates_count_against_the_overprovisioned_pool() {
        let class = thin();
        let mut obs = ClassObservation {
            vg_free: 0,
            lvs: vec![row("pool", 100 * MIB, None, "twi-a-tz--")],
        };
        for name in ["a", "b"] {
            let v = new_volume(name, "thin", 80 * MIB);
            anticipate(&mut obs, &class, VolumeAction::Lvcreate, &v, None);
        }
        // 2 × 100 MiB less 160 MiB virtual.
        assert_eq!(
            free_for_create(&class, obs.vg_free, &obs.lvs),
            Some(40 * MIB)
        );
        let third = new_volume("c", "thin", 80 * MIB);
        assert!(matches!(
            plan(&third, &host(&class, &obs)),
            Plan::Status(StatusWrite::Refused { .. })
        ));
    }

    #[test]
    fn a_snapshot_takes_its_sources_size_in_its_pool() {
        let class = thin();
        let mut obs = ClassObservation {
            vg_free: 0,
            lvs: vec![
                row("pool", 100 * MIB, None, "twi-a-tz--"),
                row("src", 30 * MIB, Some("pool"), "Vwi-a-tz--"),
            ],
        };
        let snap = new_volume("s", "thin", 30 * MIB);
        anticipate(
            &mut obs,
            &class,
            VolumeAction::LvcreateSnapshot,
            &snap,
            Some("src"),
        );
        let made = obs.lvs.iter().find(|l| l.lv_name == "uid-s").unwrap();
        assert_eq!(made.lv_size, Some(30 * MIB));
        assert_eq!(made.pool_lv.as_deref(), Some("pool"));
        assert_eq!(free_for_create(&class, 0, &obs.lvs), Some(140 * MIB));
        // Twice (a replayed pass): counted once.
        anticipate(
            &mut obs,
            &class,
            VolumeAction::LvcreateSnapshot,
            &snap,
            Some("src"),
        );
        assert_eq!(obs.lvs.len(), 3);
    }

    #[test]
    fn a_thick_resize_takes_the_difference_and_a_remove_gives_it_back() {
        let class = thick();
        let mut obs = ClassObservation {
            vg_free: 100 * MIB,
            lvs: vec![row("vol", 10 * MIB, None, "-wi-a-----")],
        };
        let mut v = new_volume("v", "thick", 30 * MIB);
        v.volume_id = Some("vol".into());
        anticipate(&mut obs, &class, VolumeAction::Lvresize, &v, None);
        assert_eq!(obs.vg_free, 80 * MIB);
        assert_eq!(obs.lvs[0].lv_size, Some(30 * MIB));
        let mut gone = new_volume("v", "thick", 30 * MIB);
        gone.uid = "vol".into();
        anticipate(&mut obs, &class, VolumeAction::Lvremove, &gone, None);
        assert_eq!(obs.vg_free, 110 * MIB);
        assert!(obs.lvs.is_empty());
    }

    /// A removal frees room for a create later in the same pass, as a read would show.
    #[test]
    fn a_remove_in_the_pass_makes_room_for_a_create_after_it() {
        let class = thick();
        let mut obs = ClassObservation {
            vg_free: 10 * MIB,
            lvs: vec![row("old", 50 * MIB, None, "-wi-a-----")],
        };
        let mut old = new_volume("old", "thick", 50 * MIB);
        old.uid = "old".into();
        anticipate(&mut obs, &class, VolumeAction::Lvremove, &old, None);
        let v = new_volume("n", "thick", 40 * MIB);
        assert!(matches!(
            plan(&v, &host(&class, &obs)),
            Plan::Host {
                action: VolumeAction::Lvcreate,
                ..
            }
        ));
    }

    #[test]
    fn steps_that_move_no_space_change_nothing() {
        let class = thin();
        let before = ClassObservation {
            vg_free: 5,
            lvs: vec![row("pool", 100 * MIB, None, "twi-a-tz--")],
        };
        let mut obs = before.clone();
        let v = new_volume("v", "thin", MIB);
        for a in [
            VolumeAction::Lvchange,
            VolumeAction::DeleteThinDevice,
            VolumeAction::AddFinalizer,
            VolumeAction::WriteStatus,
        ] {
            anticipate(&mut obs, &class, a, &v, None);
        }
        assert_eq!(obs, before);
        // A size that does not parse, or a source not in the report: nothing guessed.
        let mut bad = v.clone();
        bad.size = None;
        anticipate(&mut obs, &class, VolumeAction::Lvcreate, &bad, None);
        anticipate(
            &mut obs,
            &class,
            VolumeAction::LvcreateSnapshot,
            &v,
            Some("nope"),
        );
        assert_eq!(obs, before);
    }
}
