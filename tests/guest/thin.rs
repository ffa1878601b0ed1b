use std::time::Duration;

use serde_json::{Value, json};

use crate::group::Ctx;
use crate::node::{HostCtx, NodeRun, by_id, bytes, lv, one_step_after_the_crash, run_node};

pub const POOL: &str = "thin-pool-1";

pub fn thin_class(vg: &str, paths: &[&str]) -> Value {
    let paths: Vec<String> = paths.iter().map(|s| by_id(s)).collect();
    json!([{
        "name": vg, "default": true,
        "deviceSelector": {"paths": paths},
        "thinPoolConfig": {
            "name": POOL, "sizePercent": 80, "overprovisionRatio": 10,
            "chunkSizeCalculationPolicy": "Static", "chunkSize": "256Ki",
            "metadataSizeCalculationPolicy": "Static", "metadataSize": "8Mi"
        }
    }])
}

/// The pool's size as lvm2 reports it (bytes), waited for until it changes after the day-2
/// edit adds a second disk, then recorded with the gauges vg-manager exports.
const AFTER_GROWTH: &str = include_str!("scripts/thin-grow.sh");

/// A writer filling a thin volume past the pool's first size, each write waited for.
const AUTOEXTEND_WRITER: &str = include_str!("scripts/thin-autoextend.sh");

/// A thin class whose pool starts at 40 % of the VG and grows by half when 60 % used, and
/// whose published capacity follows the pool's real use.
fn autoextend_class(vg: &str, paths: &[&str]) -> Value {
    let mut c = thin_class(vg, paths);
    c[0]["thinPoolConfig"]["sizePercent"] = json!(40);
    c[0]["thinPoolConfig"]["autoExtend"] = json!({"thresholdPercent": 60, "extendPercent": 50});
    c[0]["thinPoolConfig"]["capacityFollowsUsage"] = json!(true);
    c
}

/// Wakes the node's volume-group actors every 3 s (a Node label change) until the guest marks
/// its teardown: the writer fills the pool faster than the 30 s reconcile interval would look.
fn nudge_while_writing(h: HostCtx<'_>) -> futures::future::BoxFuture<'_, ()> {
    Box::pin(async move {
        let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(h.s.client.clone());
        let teardown = h.guest.mark("teardown");
        tokio::pin!(teardown);
        for n in 0u32.. {
            tokio::select! {
                () = &mut teardown => return,
                () = tokio::time::sleep(std::time::Duration::from_secs(3)) => {}
            }
            let patch = json!({"metadata": {"labels": {"lvms.test/nudge": n.to_string()}}});
            nodes
                .patch(
                    &h.node,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&patch),
                )
                .await
                .expect("nudge the node");
        }
    })
}

/// [`nudge_while_writing`], and once the guest marks `pool-full` (the VG has nothing left for
/// the pool and it is 95 % full): with `capacityFollowsUsage`, the class publishes no capacity
/// and the controller refuses a new volume for it, naming the pool's real use (published beside
/// the capacity); then, the class switched back to TopoLVM's
/// formula (the published capacity is GiBs again), the node itself refuses it,
/// ResourceExhausted, with a message naming the pool's real use, rather than making it and
/// leaving it to fail writes.
fn nudge_and_ask_when_full(h: HostCtx<'_>) -> futures::future::BoxFuture<'_, ()> {
    Box::pin(async move {
        let (node, vg, socket, guest) = (h.node.clone(), h.vg.clone(), h.socket.clone(), h.guest);
        let (client, clusters) = (h.s.client.clone(), h.s.clusters());
        let ask = async move {
            guest.mark("pool-full").await;
            let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
            let key = format!("capacity.topolvm.io/{vg}");
            let capacity = || async {
                let n = nodes.get(&node).await.ok()?;
                n.metadata.annotations?.get(&key)?.parse::<u64>().ok()
            };
            // The 1 GiB writer against 10 × a pool of at most the 512 MiB disk: TopoLVM's
            // formula says GiBs; the pool's real use, nothing past 95 %.
            let formula_floor: u64 = 1 << 30;
            let channel = lvms::csi::client::connect(&socket)
                .await
                .expect("the operator's CSI socket");
            let mut ctl = lvms::csi::proto::controller_client::ControllerClient::new(channel);
            let req =
                lvms_testkit::fixtures::csi::create_volume("pvc-past-full", &node, &vg, 64 << 20);

            let zero = lvms_testkit::eventually(Duration::from_secs(60), || async {
                (capacity().await? == 0).then_some(())
            })
            .await;
            assert!(
                zero.is_some(),
                "{key} is {:?} with the pool 95 % full and capacityFollowsUsage",
                capacity().await
            );
            let err = ctl
                .create_volume(req.clone())
                .await
                .expect_err("a volume where the class publishes no capacity");
            assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{err:?}");
            assert!(
                err.message().contains("% full (data)")
                    && err.message().contains("capacityFollowsUsage"),
                "the controller's refusal names the pool's real use: {}",
                err.message()
            );
            println!(
                "thin-autoextend: capacity 0 at 95 % full; refused: {}",
                err.message()
            );

            let mut classes = autoextend_class(&vg, &["auto0"]);
            classes[0]["thinPoolConfig"]["capacityFollowsUsage"] = json!(false);
            clusters
                .patch(
                    "my-lvmcluster",
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(
                        json!({"spec": {"storage": {"deviceClasses": classes}}}),
                    ),
                )
                .await
                .expect("capacityFollowsUsage switched off");
            let formula = lvms_testkit::eventually(Duration::from_secs(180), || async {
                capacity().await.filter(|c| *c >= formula_floor)
            })
            .await;
            assert!(
                formula.is_some(),
                "{key} is {:?}, not TopoLVM's formula, with capacityFollowsUsage off",
                capacity().await
            );
            let err = ctl
                .create_volume(req)
                .await
                .expect_err("a new thin volume in a 95 % full pool");
            assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{err:?}");
            assert!(
                err.message().contains("% full (data)")
                    && err
                        .message()
                        .contains("new and larger thin volumes are refused"),
                "{}",
                err.message()
            );
            println!("thin-autoextend: refused past full: {}", err.message());
        };
        tokio::join!(nudge_while_writing(h), ask);
    })
}

/// Issue 40.2 on real device-mapper: a writer fills a thin volume 4 MiB a second until it has
/// written 1.8× the pool's first size; vg-manager (autoExtend at 60 % by 50 %) extends the pool
/// from the VG's free space before it fills, so every write completes, and says so in a
/// `ThinPoolAutoExtended` Event. Then, with the VG spent and the pool 95 % full, a new volume
/// is refused: by the controller while the class's capacity follows the pool's real use
/// (`capacityFollowsUsage`: none left), and by the node, naming that use, once the class is
/// switched back to TopoLVM's formula.
pub async fn a_pool_under_a_writer_is_extended_before_writes_fail(ctx: Ctx) {
    let vg = format!("a{}", std::process::id());
    let r = run_node(
        ctx,
        NodeRun {
            pool: Some(POOL),
            after_ready: AUTOEXTEND_WRITER,
            host: Some(nudge_and_ask_when_full),
            event: Some("ThinPoolAutoExtended"),
            ..NodeRun::new(
                "thin-autoextend",
                &vg,
                autoextend_class(&vg, &["auto0"]),
                vec![("auto0", 512)],
            )
        },
    )
    .await;
    let got = r.out.read("autoextend.txt");
    let f: Vec<u64> = got
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let [first, last, written] = f[..] else {
        panic!("autoextend.txt: {got:?}")
    };
    assert!(
        written << 20 > first && last > first,
        "{written} MiB written through a pool of {first} bytes, now {last}:\n{}",
        r.out.read("autoextend-trace.txt")
    );
    let note = r.event.and_then(|e| e.note).unwrap_or_default();
    assert!(
        note.contains("grown from") || note.contains("grown to"),
        "{note}"
    );
    // The life killed after its first autoextend's lvextend ran: replay found it done, and every
    // autoextend, that one too, carries its Event; nothing is left open.
    assert_eq!(r.out.read("extend-kill-status").trim(), "137");
    let (j, _) = crate::node::journal_intents(&r.out.out, &format!("vg/{vg}"));
    assert!(j.open_intents().expect("open intents").is_empty());
    let recs: Vec<lvms_journal::Record> = j.iter().filter_map(Result::ok).collect();
    let extends: Vec<(u64, String)> = recs
        .iter()
        .filter_map(|rec| match &rec.body {
            // The autoextends (marked so); a sizePercent growth has no Event.
            lvms_journal::Body::Intent(i)
                if i.action.starts_with("lvextend-") && i.desired_digest == "autoextend" =>
            {
                Some((rec.seq, i.action.clone()))
            }
            _ => None,
        })
        .collect();
    let story: Vec<String> = recs
        .iter()
        .filter_map(|rec| match &rec.body {
            lvms_journal::Body::Intent(i) if i.action.starts_with("lvextend-") => {
                Some(format!("#{} intent {} {:?}", rec.seq, i.action, i.args))
            }
            lvms_journal::Body::Outcome(o) if extends.iter().any(|(s, _)| *s == o.intent_seq) => {
                Some(format!(
                    "#{} outcome of #{}: {:?}",
                    rec.seq, o.intent_seq, o.result
                ))
            }
            _ => None,
        })
        .collect();
    assert!(!extends.is_empty(), "no autoextend journaled");
    let mut replayed = 0;
    for (seq, action) in &extends {
        let done = recs
            .iter()
            .find_map(|rec| match &rec.body {
                lvms_journal::Body::Outcome(o) if o.intent_seq == *seq => o.result.done(),
                _ => None,
            })
            .unwrap_or_else(|| {
                panic!(
                    "{action} at #{seq} has no successful outcome:\n{}",
                    story.join("\n")
                )
            });
        assert!(
            done.event.is_some(),
            "{action} at #{seq}: no Event:\n{}\nvg-manager:\n{}",
            story.join("\n"),
            r.out
                .read("vg-manager.log")
                .lines()
                .filter(|l| l.contains("replay") || l.contains("LVMS_CRASH_AT"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        if done.replay.map(|v| v.as_str().to_string()).as_deref() == Some("already-done") {
            replayed += 1;
        }
    }
    assert_eq!(
        replayed,
        1,
        "the killed extension, replayed as done:\n{}",
        story.join("\n")
    );
    println!(
        "thin-autoextend: {written} MiB written without a failed write; pool {first} → {last} bytes"
    );
}

/// A thin device class end to end on a real kernel: vg-manager (in the guest, activation on)
/// creates the VG and an active thin pool with the class's sizePercent, chunk size and static
/// metadata size, reports Ready with `topolvm_thinpool_*` gauges read from the real pool,
/// extends the pool when a second disk joins the VG, and on deletion deactivates and removes
/// pool and VG, leaving no device-mapper device behind.
pub async fn a_thin_class_gets_an_active_pool_sized_as_configured_and_is_torn_down(ctx: Ctx) {
    let vg = format!("g{}", std::process::id());
    let r = run_node(
        ctx,
        NodeRun {
            pool: Some(POOL),
            edit: Some((thin_class(&vg, &["thin0", "thin1"]), 2)),
            after_ready: AFTER_GROWTH,
            ..NodeRun::new(
                "thin",
                &vg,
                thin_class(&vg, &["thin0"]),
                vec![("thin0", 256), ("thin1", 256)],
            )
        },
    )
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
    // lvcreate -l 80%FREE of a VG that was empty: 80 % of the free extents left after the 8Mi
    // metadata LV and its spare; the next pass extends it to 80 % of the VG as LVMS does (in
    // whole 4 MiB extents, rounded up). Either may be what this moment shows.
    assert!(
        (0.70..=0.81).contains(&ratio),
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
    assert_gauges(out, "metrics-ready.txt", &vg, &r.node, bytes(&p, "lv_size"));

    // Day 2: the second disk joins the VG and the pool grows to 80 % of the bigger VG.
    let grown: Value = serde_json::from_str(&out.read("lvs-grown.json")).expect("lvs json");
    let grown_vg: Value = serde_json::from_str(&out.read("vgs-grown.json")).expect("vgs json");
    let g = lv(&grown, POOL);
    let grown_vg_size = bytes(&grown_vg["report"][0]["vg"][0], "vg_size");
    assert!(
        grown_vg_size > vg_size,
        "the VG grew: {vg_size} → {grown_vg_size}"
    );
    let ratio = bytes(&g, "lv_size") as f64 / grown_vg_size as f64;
    // lvextend -l 80%VG, in whole 4 MiB extents (lvm2 rounds up).
    assert!(
        (0.78..=0.81).contains(&ratio),
        "the extended pool is {ratio:.3} of the grown VG, sizePercent 80"
    );
    assert_gauges(out, "metrics-grown.txt", &vg, &r.node, bytes(&g, "lv_size"));
}

/// vg-manager's `topolvm_thinpool_*` gauges for the class agree with the real pool: its size,
/// an empty pool's data usage, some metadata in use, and ratio × size available to overprovision.
fn assert_gauges(
    out: &lvms_testkit::guest::Outcome,
    file: &str,
    vg: &str,
    node: &str,
    pool_size: u64,
) {
    let text = out.read(file);
    let m = lvms::telemetry::metrics::exposition::parse(&text)
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    let at = [("device_class", vg), ("node", node)];
    let gauge = |name: &str| {
        m.value(name, &at)
            .unwrap_or_else(|| panic!("no {name} for {at:?} in {file}:\n{text}"))
    };
    assert_eq!(
        gauge("topolvm_thinpool_size_bytes"),
        pool_size as f64,
        "{file}"
    );
    assert_eq!(
        gauge("topolvm_thinpool_data_percent"),
        0.0,
        "{file}: nothing written yet"
    );
    let meta = gauge("topolvm_thinpool_metadata_percent");
    assert!(meta > 0.0 && meta < 100.0, "{file}: metadata {meta} %");
    assert_eq!(
        gauge("topolvm_thinpool_overprovisioned_available"),
        10.0 * pool_size as f64,
        "{file}: overprovisionRatio 10 × the pool, nothing allocated"
    );
}

/// SIGKILL between the thin pool's `lvcreate` and its outcome, with activation on: the restarted
/// vg-manager finds the pool on the host, never runs `lvcreate` again, and converges.
pub async fn sigkill_between_the_thin_pool_lvcreate_and_its_outcome_never_creates_it_twice(
    ctx: Ctx,
) {
    let vg = format!("k{}", std::process::id());
    let r = run_node(
        ctx,
        NodeRun {
            pool: Some(POOL),
            crash_at: Some(format!("applied:vg/{vg}#lvcreate-thin-pool")),
            ..NodeRun::new(
                "thin-crash",
                &vg,
                thin_class(&vg, &["tcrash0"]),
                vec![("tcrash0", 256)],
            )
        },
    )
    .await;
    let replay = one_step_after_the_crash(&r.out, "lvcreate-thin-pool");
    // Replay cannot read a pool back from `pvs`/`vgs`, so it closes the open lvcreate as
    // not-done and leaves the decision to the next pass, which reads `lvs`, finds the pool and
    // plans no second lvcreate.
    assert_eq!(
        replay.as_deref(),
        Some("not-done"),
        "the open lvcreate was closed by replay"
    );
    let lvs: Value = serde_json::from_str(&r.out.read("lvs.json")).expect("lvs json");
    let pools = lvs["report"][0]["lv"]
        .as_array()
        .map(|rows| rows.iter().filter(|r| r["lv_name"] == POOL).count());
    assert_eq!(pools, Some(1));
}

/// After Ready: the pool is deactivated behind vg-manager's back (as after a reboot without
/// autoactivation) while vg-manager is down; the restarted vg-manager's first pass validates the
/// pool (LVMS `validateLVs`), finds it inactive and activates it.
const REACTIVATE: &str = include_str!("scripts/thin-reactivate.sh");

/// validateLVs on a real pool: an inactive pool is found by the next pass and activated with
/// one journaled `lvchange -ay`; the class stays Ready and tears down.
pub async fn an_inactive_pool_is_validated_and_activated_by_the_next_pass(ctx: Ctx) {
    let vg = format!("v{}", std::process::id());
    let r = run_node(
        ctx,
        NodeRun {
            pool: Some(POOL),
            after_ready: REACTIVATE,
            ..NodeRun::new(
                "thin-validate",
                &vg,
                thin_class(&vg, &["valid0"]),
                vec![("valid0", 256)],
            )
        },
    )
    .await;
    let inactive = r.out.read("attr-inactive");
    assert!(
        inactive.starts_with('t') && inactive.chars().nth(4) == Some('-'),
        "the pool was inactive before vg-manager came back: {inactive}"
    );
    let pool_dm = format!("{vg}-{}", POOL.replace('-', "--"));
    assert!(
        !r.out.read("dmsetup-inactive.txt").contains(&pool_dm),
        "no live pool device while inactive:\n{}",
        r.out.read("dmsetup-inactive.txt")
    );
    let active = r.out.read("attr-active");
    assert_eq!(active.chars().nth(4), Some('a'), "active again: {active}");
    let j = lvms_journal::Journal::open_copy(r.out.out.join("journal/vg-manager"))
        .expect("the guest's journal");
    let activations: Vec<_> = j
        .iter()
        .filter_map(Result::ok)
        .filter(|rec| {
            matches!(&rec.body, lvms_journal::Body::Intent(i) if i.action == "lvchange-activate")
        })
        .collect();
    assert_eq!(
        activations.len(),
        1,
        "one journaled activation: {activations:#?}"
    );
}
