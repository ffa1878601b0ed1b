use lvms::api::{RaidHealthStatus, VGStatus, VGStatusType};
use serde_json::{Value, json};

use crate::group::Ctx;
use crate::node::{NodeRun, by_id, run_node};

/// What TopoLVM does with the class's lvmd.yaml `lvcreate-options`: an LV made with exactly
/// those options on the VG vg-manager built, recorded; then removed again, so the teardown can
/// run (it refuses while user volumes exist).
const RAID_LV: &str = include_str!("scripts/raid-lv.sh");

fn raid_class(vg: &str, disks: &[&str], raid: Value) -> Value {
    let paths: Vec<String> = disks.iter().map(|d| by_id(d)).collect();
    json!([{
        "name": vg, "default": true,
        "deviceSelector": {"paths": paths},
        "raidConfig": raid
    }])
}

/// The `lvs -a` rows of the RAID LV's legs (`raidlv_rimage_N`) and the PV each sits on.
fn legs(lvs: &Value) -> Vec<String> {
    lvs["report"][0]["lv"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["lv_name"].as_str().unwrap_or_default().contains("rimage"))
        .map(|r| {
            let dev = r["devices"].as_str().unwrap_or_default();
            dev.split('(').next().unwrap_or_default().to_string()
        })
        .collect()
}

fn layout(lvs: &Value) -> String {
    lvs["report"][0]["lv"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["lv_name"] == "raidlv")
        .and_then(|r| r["lv_layout"].as_str())
        .unwrap_or_else(|| panic!("no raidlv in {lvs}"))
        .to_string()
}

/// A raid1 class on a real kernel: vg-manager builds the VG on both member disks and writes the
/// raid lvcreate options into lvmd.yaml; an LV made with them mirrors across the two PVs (two
/// rimage legs on different devices); the class reports Healthy RAID and tears down.
pub async fn a_raid1_class_builds_a_vg_whose_lvmd_options_make_a_mirrored_lv(ctx: Ctx) {
    let vg = format!("r{}", std::process::id());
    let r = run_node(
        ctx,
        NodeRun {
            after_ready: RAID_LV,
            ..NodeRun::new(
                "raid1",
                &vg,
                raid_class(&vg, &["r1a", "r1b"], json!({"type": "raid1", "mirrors": 1})),
                vec![("r1a", 128), ("r1b", 128)],
            )
        },
    )
    .await;
    assert_eq!(r.ready.devices.len(), 2, "{:?}", r.ready.devices);
    let opts = r.out.read("lvcreate-options.txt");
    assert_eq!(opts.trim(), "--type raid1 -m 1", "lvmd.yaml's raid options");
    let lvs: Value = serde_json::from_str(&r.out.read("lvs-raid.json")).expect("lvs json");
    assert!(layout(&lvs).contains("raid1"), "{lvs}");
    let legs = legs(&lvs);
    assert_eq!(legs.len(), 2, "two mirror legs: {lvs}");
    assert_ne!(legs[0], legs[1], "the legs sit on different PVs: {legs:?}");
}

/// A striped RAID level with parity: raid5 over three disks (two data stripes), its options
/// (`--type raid5 --stripes 2 --stripesize 64k`) in lvmd.yaml; an LV made with them has three
/// legs on three different PVs.
pub async fn a_raid5_class_stripes_an_lv_with_parity_across_three_pvs(ctx: Ctx) {
    let vg = format!("p{}", std::process::id());
    let r = run_node(
        ctx,
        NodeRun {
            after_ready: RAID_LV,
            env: vec![("RAID_MODULE", "raid456".into())],
            ..NodeRun::new(
                "raid5",
                &vg,
                raid_class(
                    &vg,
                    &["r5a", "r5b", "r5c"],
                    json!({"type": "raid5", "stripes": 2, "stripeSize": "64Ki"}),
                ),
                vec![("r5a", 128), ("r5b", 128), ("r5c", 128)],
            )
        },
    )
    .await;
    assert_eq!(r.ready.devices.len(), 3, "{:?}", r.ready.devices);
    assert_eq!(
        r.out.read("lvcreate-options.txt").trim(),
        "--type raid5 --stripes 2 --stripesize 64k",
        "lvmd.yaml's raid options"
    );
    let lvs: Value = serde_json::from_str(&r.out.read("lvs-raid.json")).expect("lvs json");
    assert!(layout(&lvs).contains("raid5"), "{lvs}");
    let mut legs = legs(&lvs);
    assert_eq!(legs.len(), 3, "two data stripes and parity: {lvs}");
    legs.sort();
    legs.dedup();
    assert_eq!(legs.len(), 3, "on three different PVs: {lvs}");
}

/// After Ready, with a raid1 LV on the class (raid-lv.sh's, kept): one member disk is removed from the guest at run
/// time (its PCI device removed, the kernel path of a hot-unplug); the RAID LV goes partial and
/// vg-manager's next pass fails the RAID health check and waits.
const LOSE_A_DISK: &str = concat!(
    include_str!("scripts/raid-lv.sh"),
    include_str!("scripts/raid-lose-disk.sh")
);

/// The node reports the loss as LVMS would, by either of its two checks, whichever the pass
/// meets (it depends on whether lvm2 already flags the PV missing): checkRAIDVGHealth (the PV is
/// missing: the reason names the VG and how to repair it) or buildRAIDStatus (the LV is partial:
/// the RAID status Degraded). Degraded while the VG exists, Failed when it does not. A pass that
/// runs while the disk is going can first see only its by-id link dangling ("failed to resolve
/// symlink", no RAID verdict yet); that is not it.
fn failed_raid(e: &VGStatus) -> bool {
    let left_ready = matches!(
        e.status,
        Some(VGStatusType::Degraded) | Some(VGStatusType::Failed)
    );
    let missing_pvs = e.reason.contains("has missing physical volumes");
    let raid_degraded = e
        .raid_status
        .as_ref()
        .is_some_and(|r| r.status != RaidHealthStatus::Healthy);
    left_ready && (missing_pvs || raid_degraded)
}

/// LVMS's RAID health reporting on a real failure: a member disk of a raid1 class is removed
/// from the guest while the class is Ready; the node's entry leaves Ready with a RAID verdict
/// (see `failed_raid`) and a `RAIDHealthCheckFailed` Warning is published. The class is not torn down: a VG with a missing PV needs a person.
pub async fn a_member_disk_removed_at_run_time_fails_the_raid_health_check(ctx: Ctx) {
    let vg = format!("l{}", std::process::id());
    let r = run_node(
        ctx,
        NodeRun {
            after_ready: LOSE_A_DISK,
            env: vec![("KEEP_LV", "1".into()), ("LOST_DISK", by_id("lost1"))],
            until: Some(failed_raid),
            event: Some("RAIDHealthCheckFailed"),
            teardown: false,
            ..NodeRun::new(
                "raid-lost",
                &vg,
                raid_class(&vg, &["lost0", "lost1"], json!({"type": "raid1"})),
                vec![("lost0", 128), ("lost1", 128)],
            )
        },
    )
    .await;
    let raid = r.ready.raid_status.as_ref().map(|h| h.status);
    assert_eq!(
        raid,
        Some(RaidHealthStatus::Healthy),
        "Ready and healthy first: {:?}",
        r.ready
    );
    let lost: Value = serde_json::from_str(&r.out.read("lvs-lost.json")).expect("lvs json");
    let health = lost["report"][0]["lv"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|row| row["lv_name"] == "raidlv")
        .and_then(|row| row["lv_health_status"].as_str())
        .unwrap_or_default()
        .to_string();
    assert_eq!(health, "partial", "lvm2 sees the RAID LV partial: {lost}");
    let e = r.until.expect("the entry after the loss");
    assert!(e.reason.contains(&vg), "the reason names the VG: {e:?}");
    let warning = r
        .event
        .expect("run_node waited for the RAIDHealthCheckFailed Event");
    assert_eq!(warning.type_.as_deref(), Some("Warning"), "{warning:?}");
    // LVMS's RAID gauges, scraped as Prometheus does: healthy with both members at Ready, not
    // healthy with one gone (what LVMSRAIDDegraded and LVMSRAIDFailed fire on).
    let at = [("device_class", vg.as_str()), ("node", "guest-raid-lost")];
    let gauge = |file: &str, name: &str| {
        let text = r.out.read(file);
        let m = lvms::telemetry::metrics::exposition::parse(&text)
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        m.value(name, &at)
            .unwrap_or_else(|| panic!("no {name} for {at:?} in {file}:\n{text}"))
    };
    assert_eq!(gauge("metrics-ready.txt", "lvms_raid_health_status"), 0.0);
    assert_eq!(gauge("metrics-ready.txt", "lvms_raid_member_count"), 2.0);
    assert_eq!(gauge("metrics-ready.txt", "lvms_raid_degraded_count"), 0.0);
    assert!(gauge("metrics-lost.txt", "lvms_raid_health_status") >= 1.0);
}
