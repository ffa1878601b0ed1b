use serde_json::{Value, json};

use crate::node::{NodeRun, run_node};

/// What TopoLVM does with the class's lvmd.yaml `lvcreate-options` (`--type raid1 -m 1`): a
/// raid1 LV on the VG vg-manager built, recorded, then removed again so the teardown can run
/// (it refuses while user volumes exist, and retries).
const RAID_LV: &str = r#"
modprobe dm-raid
lvcreate -y --type raid1 -m 1 -L 16m -n raidlv "$VG" >"$GUEST_OUT/lvcreate.txt" 2>&1 \
  || fail "lvcreate of a raid1 LV with the class's options failed: $(cat "$GUEST_OUT/lvcreate.txt")" 16
lvs -a --reportformat json -o lv_name,lv_layout,lv_attr,devices "$VG" >"$GUEST_OUT/lvs-raid.json"
lvremove -y "$VG/raidlv" >/dev/null
"#;

/// A raid1 class on a real kernel: vg-manager builds the VG on both member disks and writes the
/// raid lvcreate options into lvmd.yaml; a raid1 LV made with them mirrors across the two PVs
/// (two rimage legs on different devices); the class tears down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raid1_class_builds_a_vg_whose_lvmd_options_make_a_mirrored_lv() {
    let vg = format!("r{}", std::process::id());
    let after = format!("VG={vg}\n{RAID_LV}");
    let r = run_node(NodeRun {
        after_ready: &after,
        ..NodeRun::new(
            "raid1",
            &vg,
            json!([{
                "name": vg, "default": true,
                "deviceSelector": {"paths": [
                    "/dev/disk/by-id/virtio-scratch0", "/dev/disk/by-id/virtio-scratch1"
                ]},
                "raidConfig": {"type": "raid1", "mirrors": 1}
            }]),
            vec![("scratch0", 128), ("scratch1", 128)],
        )
    })
    .await;
    assert_eq!(r.ready.devices.len(), 2, "{:?}", r.ready.devices);
    let lvmd = r.out.read("lvmd.yaml");
    assert!(
        lvmd.contains("lvcreate-options") && lvmd.contains("raid1"),
        "lvmd.yaml carries the raid options TopoLVM passes to lvcreate:\n{lvmd}"
    );
    let lvs: Value = serde_json::from_str(&r.out.read("lvs-raid.json")).expect("lvs json");
    let rows = lvs["report"][0]["lv"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let raid = rows
        .iter()
        .find(|r| r["lv_name"] == "raidlv")
        .unwrap_or_else(|| panic!("no raidlv in {lvs}"));
    assert!(
        raid["lv_layout"]
            .as_str()
            .unwrap_or_default()
            .contains("raid1"),
        "{raid}"
    );
    let legs: Vec<String> = rows
        .iter()
        .filter(|r| r["lv_name"].as_str().unwrap_or_default().contains("rimage"))
        .map(|r| r["devices"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(legs.len(), 2, "two mirror legs: {lvs}");
    assert_ne!(
        legs[0].split('(').next(),
        legs[1].split('(').next(),
        "the legs sit on different PVs: {legs:?}"
    );
}
