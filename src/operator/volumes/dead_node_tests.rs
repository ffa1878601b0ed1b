use super::*;
use serde_json::{Value, json};

const GRACE: Duration = Duration::from_secs(60);

fn now() -> Timestamp {
    "2026-11-29T12:00:00Z".parse().unwrap()
}

fn ago(secs: i64) -> String {
    (now() - k8s_openapi::jiff::SignedDuration::from_secs(secs)).to_string()
}

/// A Node: `deleting` with TopoLVM's finalizer, `tainted` out of service, and its Ready
/// condition (`None`: no kubelet ever reported).
fn node(deleting: bool, tainted: bool, ready: Option<(&str, i64)>, record: Option<Value>) -> Node {
    let mut v = json!({"metadata": {"name": "w1", "finalizers": [NODE_FINALIZER]}});
    if deleting {
        v["metadata"]["deletionTimestamp"] = json!(ago(5));
    }
    if tainted {
        v["spec"] = json!({"taints": [{"key": OUT_OF_SERVICE_TAINT, "value": "nodeshutdown", "effect": "NoExecute"}]});
    }
    if let Some((status, since)) = ready {
        v["status"] = json!({"conditions": [
            {"type": "MemoryPressure", "status": "False", "lastTransitionTime": ago(9999)},
            {"type": "Ready", "status": status, "lastTransitionTime": ago(since)},
        ]});
    }
    if let Some(r) = record {
        v["metadata"]["annotations"] = json!({WRITTEN_OFF_ANNOTATION: r.to_string()});
    }
    serde_json::from_value(v).unwrap()
}

#[test]
fn a_live_node_is_left_alone() {
    assert_eq!(
        verdict(&node(false, false, Some(("True", 100)), None), now(), GRACE),
        Verdict::Alive
    );
    assert_eq!(
        verdict(
            &node(false, false, Some(("Unknown", 999)), None),
            now(),
            GRACE
        ),
        Verdict::Alive,
        "NotReady alone is not gone: a reboot is NotReady too"
    );
}

#[test]
fn a_node_still_ready_is_never_written_off() {
    for (deleting, tainted, trigger) in [
        (true, false, Trigger::Deleted),
        (false, true, Trigger::OutOfService),
    ] {
        assert_eq!(
            verdict(
                &node(deleting, tainted, Some(("True", 999)), None),
                now(),
                GRACE
            ),
            Verdict::StillReady(trigger)
        );
    }
}

#[test]
fn a_gone_node_waits_out_the_grace_from_when_it_stopped_being_ready() {
    assert_eq!(
        verdict(
            &node(false, true, Some(("Unknown", 10)), None),
            now(),
            GRACE
        ),
        Verdict::Wait {
            trigger: Trigger::OutOfService,
            after: Duration::from_secs(50)
        }
    );
    assert_eq!(
        verdict(&node(false, true, Some(("False", 60)), None), now(), GRACE),
        Verdict::WriteOff(Trigger::OutOfService)
    );
    assert_eq!(
        verdict(
            &node(true, false, Some(("Unknown", 600)), None),
            now(),
            GRACE
        ),
        Verdict::WriteOff(Trigger::Deleted)
    );
    // Grace 0: as soon as it is not Ready (the node lifecycle controller's own grace has run).
    assert_eq!(
        verdict(
            &node(true, false, Some(("Unknown", 0)), None),
            now(),
            Duration::ZERO
        ),
        Verdict::WriteOff(Trigger::Deleted)
    );
    // A clock behind the condition's time: the full grace, not an underflow.
    assert_eq!(
        verdict(&node(false, true, Some(("False", -30)), None), now(), GRACE),
        Verdict::Wait {
            trigger: Trigger::OutOfService,
            after: GRACE
        }
    );
}

#[test]
fn a_node_no_kubelet_ever_reported_on_is_written_off_at_once() {
    assert_eq!(
        verdict(&node(true, false, None, None), now(), GRACE),
        Verdict::WriteOff(Trigger::Deleted)
    );
}

#[test]
fn a_deleted_node_without_topolvms_finalizer_is_not_ours() {
    let mut n = node(true, false, None, None);
    n.metadata.finalizers = Some(vec!["other".into()]);
    assert_eq!(verdict(&n, now(), GRACE), Verdict::Alive);
}

fn written(at_ago: i64) -> Value {
    json!({"at": ago(at_ago), "trigger": "out-of-service", "count": 1,
        "volumes": [{"logicalVolume": "pvc-1", "volumeId": "v1", "deviceClass": "vg1", "size": "1Gi"}]})
}

#[test]
fn a_node_ready_again_since_its_record_is_back() {
    assert_eq!(
        verdict(
            &node(false, false, Some(("True", 10)), Some(written(100))),
            now(),
            GRACE
        ),
        Verdict::Back
    );
    // Ready in the record's own second (conditions carry whole seconds): back.
    let mut same = written(100);
    same["at"] =
        json!((now() - k8s_openapi::jiff::SignedDuration::from_millis(99_600)).to_string());
    assert_eq!(
        verdict(
            &node(false, false, Some(("True", 100)), Some(same)),
            now(),
            GRACE
        ),
        Verdict::Back
    );
    // Ready since before the record (the cache has not seen it go down): not back.
    assert_eq!(
        verdict(
            &node(false, false, Some(("True", 200)), Some(written(100))),
            now(),
            GRACE
        ),
        Verdict::Alive
    );
    // Still tainted: out of service, whatever its condition says.
    assert_eq!(
        verdict(
            &node(false, true, Some(("True", 10)), Some(written(100))),
            now(),
            GRACE
        ),
        Verdict::StillReady(Trigger::OutOfService)
    );
    // A record that does not parse goes once the node is Ready.
    assert_eq!(
        verdict(
            &node(
                false,
                false,
                Some(("True", 10)),
                Some(json!("not a record"))
            ),
            now(),
            GRACE
        ),
        Verdict::Back
    );
}

fn vol(name: &str) -> WrittenOffVolume {
    WrittenOffVolume {
        logical_volume: name.into(),
        volume_id: Some(format!("id-{name}")),
        device_class: "vg1".into(),
        size: "1Gi".into(),
    }
}

#[test]
fn the_record_adds_only_new_volumes_and_counts_them_all() {
    let first = merged(None, &[vol("b"), vol("a")], Trigger::OutOfService, now()).unwrap();
    assert_eq!(first.count, 2);
    assert_eq!(first.volumes, [vol("a"), vol("b")].to_vec());
    assert_eq!(
        merged(Some(&first), &[vol("a")], Trigger::OutOfService, now()),
        None,
        "nothing new: no write, no second Warning"
    );
    let second = merged(Some(&first), &[vol("a"), vol("c")], Trigger::Deleted, now()).unwrap();
    assert_eq!(second.count, 3);
    assert_eq!(second.trigger, Trigger::Deleted);
    assert_eq!(second.volumes.len(), 3);

    let many: Vec<WrittenOffVolume> = (0..250).map(|i| vol(&format!("v{i:03}"))).collect();
    let big = merged(None, &many, Trigger::Deleted, now()).unwrap();
    assert_eq!(big.count, 250);
    assert_eq!(big.volumes.len(), RECORD_VOLUMES);
    let round: WrittenOff = serde_json::from_str(&serde_json::to_string(&big).unwrap()).unwrap();
    assert_eq!(round, big);
}

#[test]
fn the_warning_names_the_volumes_and_what_happens_if_the_node_comes_back() {
    let vols: Vec<WrittenOffVolume> = (0..12).map(|i| vol(&format!("v{i:02}"))).collect();
    let note = written_off_note("w1", &vols, Trigger::OutOfService);
    assert!(note.starts_with("node w1 was tainted node.kubernetes.io/out-of-service and not Ready: its claims were deleted and 12 LogicalVolume(s) released: v00 (LV id-v00, vg1, 1Gi)"), "{note}");
    assert!(note.contains("and 2 more"), "{note}");
    assert!(note.contains("leaked-lv"), "{note}");
}

#[test]
fn the_digest_tells_sets_of_volumes_apart_and_stays_the_same() {
    let ab = volumes_digest(&[vol("a"), vol("b")]);
    assert_eq!(ab, volumes_digest(&[vol("a"), vol("b")]));
    assert_ne!(ab, volumes_digest(&[vol("ab")]));
    assert_ne!(ab, volumes_digest(&[vol("a"), vol("c")]));
    // Fixed across builds and releases: it keys journal records.
    assert_eq!(volumes_digest(&[]), "0xcbf29ce484222325");
}

#[test]
fn a_grace_reads_as_its_flag_takes_it() {
    for (ms, text) in [
        (0, "0s"),
        (500, "500ms"),
        (90_000, "90s"),
        (300_000, "5m"),
        (7_200_000, "2h"),
    ] {
        assert_eq!(grace_text(Duration::from_millis(ms)), text);
    }
}

/// The record is an annotation: anyone who may edit the Node may write it. What lvms reads
/// from it stays bounded and never reports another node's volume as written off here.
#[test]
fn a_hostile_record_is_bounded_and_never_blames_another_nodes_volume() {
    // A record dated ahead of this clock on a Ready node goes (it could never be compared).
    let mut ahead = written(0);
    ahead["at"] = json!("2099-01-01T00:00:00Z");
    assert_eq!(
        verdict(
            &node(false, false, Some(("True", 5000)), Some(ahead)),
            now(),
            GRACE
        ),
        Verdict::Back
    );

    // 5000 listed volumes, a count that says fewer, two of them live on node w2.
    let vols: Vec<Value> = (0..5000)
        .map(|i| json!({"logicalVolume": format!("pvc-{i:04}"), "deviceClass": "vg1", "size": "1Gi"}))
        .collect();
    let text =
        json!({"at": ago(100), "trigger": "deleted", "count": 3, "volumes": vols}).to_string();
    assert!(text.len() > 200_000, "as large as an annotation may be");
    let n = node(
        true,
        false,
        None,
        Some(serde_json::from_str(&text).unwrap()),
    );
    let r = record(&n).unwrap().unwrap();
    let live_on = |lv: &str| matches!(lv, "pvc-0000" | "pvc-0007").then(|| "w2".to_string());
    let f = written_off_findings("w1", &r, live_on);
    assert_eq!(f.len(), RECORD_VOLUMES - 2 + 1, "{:?}", f.last());
    assert!(
        f.iter()
            .all(|x| x.logical_volume.as_deref() != Some("pvc-0000")
                && x.logical_volume.as_deref() != Some("pvc-0007"))
    );
    let odd = f.last().unwrap();
    assert!(
        odd.detail
            .contains("lists 2 LogicalVolume(s) that live on other nodes")
            && odd.detail.contains("pvc-0000 (on node w2)")
            && odd.detail.contains(&format!(
                "kubectl annotate node w1 {WRITTEN_OFF_ANNOTATION}-"
            )),
        "{}",
        odd.detail
    );
    // Its own volume, still there (the write-off's release not yet made): still reported.
    let mine = written_off_findings("w1", &r, |lv| (lv == "pvc-0001").then(|| "w1".into()));
    assert!(
        mine.iter()
            .any(|x| x.logical_volume.as_deref() == Some("pvc-0001"))
    );

    // The next write-off's record keeps at most RECORD_VOLUMES, whatever the earlier held,
    // and its count never wraps.
    let mut huge = r.clone();
    huge.count = u64::MAX;
    let next = merged(Some(&huge), &[vol("zzz")], Trigger::Deleted, now()).unwrap();
    assert_eq!(next.volumes.len(), RECORD_VOLUMES);
    assert_eq!(next.count, u64::MAX);
}
