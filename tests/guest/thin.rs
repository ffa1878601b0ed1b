use lvms_journal::{Body, Journal};
use serde_json::{Value, json};

use crate::node::{NodeRun, bytes, lv, run_node};

const POOL: &str = "thin-pool-1";

fn thin_class(vg: &str) -> Value {
    json!([{
        "name": vg, "default": true,
        "deviceSelector": {"paths": ["/dev/disk/by-id/virtio-scratch0"]},
        "thinPoolConfig": {
            "name": POOL, "sizePercent": 80, "overprovisionRatio": 10,
            "chunkSizeCalculationPolicy": "Static", "chunkSize": "256Ki",
            "metadataSizeCalculationPolicy": "Static", "metadataSize": "8Mi"
        }
    }])
}

/// A thin device class end to end on a real kernel: vg-manager (in the guest, activation on)
/// creates the VG and an active thin pool with the class's sizePercent, chunk size and static
/// metadata size, reports Ready, and on deletion deactivates and removes pool and VG, leaving
/// no device-mapper device behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thin_class_gets_an_active_pool_sized_as_configured_and_is_torn_down() {
    let vg = format!("g{}", std::process::id());
    let r = run_node(NodeRun {
        name: "thin",
        vg: vg.clone(),
        pool: Some(POOL),
        classes: thin_class(&vg),
        prepare: "",
        crash_at: None,
        disks: vec![("scratch0", 512)],
    })
    .await;
    assert!(
        r.ready.devices.len() == 1 && r.ready.devices[0].starts_with("/dev/vd"),
        "the class's one virtio disk: {:?}",
        r.ready.devices
    );
    let out = &r.out;
    let lvs: Value = serde_json::from_str(&out.read("lvs.json")).expect("lvs json");
    let vgs: Value = serde_json::from_str(&out.read("vgs.json")).expect("vgs json");
    let p = lv(&lvs, POOL);
    let attr = p["lv_attr"].as_str().unwrap_or_default().to_string();
    assert!(
        attr.starts_with('t') && attr.chars().nth(4) == Some('a'),
        "an active thin pool (lv_attr t...a): {attr}"
    );
    assert_eq!(bytes(&p, "chunk_size"), 256 << 10, "chunkSize 256Ki");
    assert_eq!(bytes(&p, "lv_metadata_size"), 8 << 20, "metadataSize 8Mi");
    let vg_size = bytes(&vgs["report"][0]["vg"][0], "vg_size");
    let ratio = bytes(&p, "lv_size") as f64 / vg_size as f64;
    // lvcreate -l 80%FREE of a VG that was empty: 80 % of its extents, rounded down.
    assert!(
        (0.76..=0.80).contains(&ratio),
        "pool is {ratio:.3} of the VG, sizePercent 80"
    );
    assert!(
        out.read("dmsetup-ready.txt")
            .contains(&format!("{vg}-{}", POOL.replace('-', "--"))),
        "the pool is a live device-mapper device:\n{}",
        out.read("dmsetup-ready.txt")
    );
    let lvmd = out.read("lvmd.yaml");
    assert!(
        lvmd.contains(&format!("volume-group: {vg}")) && lvmd.contains(POOL),
        "lvmd.yaml names the VG and its pool:\n{lvmd}"
    );
}

/// SIGKILL between the thin pool's `lvcreate` and its outcome, with activation on: the restarted
/// vg-manager finds the pool on the host, never runs `lvcreate` again, and converges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_between_the_thin_pool_lvcreate_and_its_outcome_never_creates_it_twice() {
    let vg = format!("k{}", std::process::id());
    let r = run_node(NodeRun {
        name: "thin-crash",
        vg: vg.clone(),
        pool: Some(POOL),
        classes: thin_class(&vg),
        prepare: "",
        crash_at: Some(format!("applied:vg/{vg}#lvcreate-thin-pool")),
        disks: vec![("scratch0", 512)],
    })
    .await;
    assert_eq!(
        r.out.read("first-life-status").trim(),
        "137",
        "the first vg-manager life ends in SIGKILL at the crash point"
    );
    let j = Journal::open_copy(r.out.out.join("journal/vg-manager")).expect("the guest's journal");
    let recs: Vec<_> = j.iter().filter_map(Result::ok).collect();
    let creates: Vec<_> = recs
        .iter()
        .filter(|r| matches!(&r.body, Body::Intent(i) if i.action == "lvcreate-thin-pool"))
        .collect();
    assert_eq!(creates.len(), 1, "lvcreate journaled once: {creates:#?}");
    let replay = recs.iter().find_map(|o| match &o.body {
        Body::Outcome(out) if out.intent_seq == creates[0].seq => out
            .result
            .done()
            .and_then(|d| d.replay)
            .map(|v| v.as_str().to_string()),
        _ => None,
    });
    // Replay cannot read a pool back from `pvs`/`vgs`, so it closes the open lvcreate as
    // not-done and leaves the decision to the next pass, which reads `lvs`, finds the pool and
    // plans no second lvcreate.
    assert_eq!(
        replay.as_deref(),
        Some("not-done"),
        "the open lvcreate was closed by replay"
    );
    assert!(j.open_intents().expect("open intents").is_empty());
    let lvs: Value = serde_json::from_str(&r.out.read("lvs.json")).expect("lvs json");
    let pools = lvs["report"][0]["lv"]
        .as_array()
        .map(|rows| rows.iter().filter(|r| r["lv_name"] == POOL).count());
    assert_eq!(pools, Some(1));
}
