use lvms_journal::{Body, Journal};
use serde_json::json;

use crate::group::Ctx;
use crate::node::{NodeRun, by_id, run_node};

/// forceWipeDevicesAndDestroyAllData on a disk that a device-mapper device holds: vg-manager
/// removes the dm child (`dmsetup remove`), wipes the disk and builds the VG on it.
pub async fn force_wipe_removes_a_device_mapper_child_and_builds_the_vg(ctx: Ctx) {
    let vg = format!("w{}", std::process::id());
    let r = run_node(
        ctx,
        NodeRun {
            // A device-mapper device over the disk: the disk now has a holder.
            prepare: include_str!("scripts/wipe-prepare.sh"),
            env: vec![("WIPE_DISK", by_id("wipe0"))],
            ..NodeRun::new(
                "wipe",
                &vg,
                json!([{
                    "name": vg, "default": true,
                    "deviceSelector": {
                        "paths": [by_id("wipe0")],
                        "forceWipeDevicesAndDestroyAllData": true
                    }
                }]),
                vec![("wipe0", 256)],
            )
        },
    )
    .await;
    assert!(
        r.out.read("holders-before.txt").contains("dm-"),
        "the disk had a device-mapper holder before vg-manager ran: {}",
        r.out.read("holders-before.txt")
    );
    let ready = r.out.read("dmsetup-ready.txt");
    assert!(
        !ready.contains("lvmstest-child"),
        "the dm child was removed before the VG was built:\n{ready}"
    );
    assert_eq!(r.ready.devices.len(), 1, "{:?}", r.ready.devices);
    let j = Journal::open_copy(r.out.out.join("journal/vg-manager")).expect("the guest's journal");
    let actions: Vec<String> = j
        .iter()
        .filter_map(Result::ok)
        .filter_map(|r| match r.body {
            Body::Intent(i) => Some(i.action),
            _ => None,
        })
        .collect();
    let at = |a: &str| actions.iter().position(|x| x == a);
    assert!(
        matches!((at("dmsetup-remove"), at("wipefs"), at("vgcreate")), (Some(d), Some(w), Some(v)) if d < w && w < v),
        "dmsetup remove, then wipefs, then vgcreate, each journaled: {actions:?}"
    );
}
