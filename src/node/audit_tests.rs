use super::*;

fn lv(name: &str, attr: &str, tags: &[&str]) -> Lv {
    Lv {
        lv_name: name.into(),
        vg_name: "vg1".into(),
        lv_attr: attr.into(),
        lv_size: Some(1 << 30),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        ..Default::default()
    }
}

fn vol(name: &str, uid: &str, id: Option<&str>) -> VolumeRef {
    VolumeRef {
        name: name.into(),
        uid: uid.into(),
        volume_id: id.map(String::from),
        device_class: String::new(),
        deleting: false,
    }
}

fn class<'a>(lvs: &'a [Lv]) -> Vec<ClassVg<'a>> {
    vec![ClassVg {
        class: "vg1",
        vg: "vg1",
        default: true,
        lvs,
    }]
}

fn kinds(f: &[Finding]) -> Vec<(FindingKind, String)> {
    f.iter()
        .map(|f| {
            (
                f.kind,
                f.lv.clone()
                    .or(f.logical_volume.clone())
                    .unwrap_or_default(),
            )
        })
        .collect()
}

#[test]
fn a_healthy_node_has_no_finding() {
    let lvs = [
        lv("pool", "twi-aotz--", &[]),
        lv("u-a", "Vwi-aotz--", &[VOLUME_TAG]),
        // Made, status not yet written: the LogicalVolume's uid names it.
        lv("u-b", "Vwi-aotz--", &[VOLUME_TAG]),
        lv("[pool_tdata]", "Twi-ao----", &[]),
    ];
    let vols = [vol("a", "u-a", Some("u-a")), vol("b", "u-b", None)];
    let got = audit_node("n1", &class(&lvs), &vols, &JournalFacts::default(), 0, 1);
    assert_eq!(got, vec![]);
}

#[test]
fn each_lv_nobody_names_is_leaked_or_foreign_by_tag_and_journal() {
    let lvs = [
        lv("pool", "twi-aotz--", &[]),
        lv("u-tagged", "Vwi-aotz--", &[VOLUME_TAG]),
        lv("u-proven", "Vwi-aotz--", &[]),
        lv("someones", "-wi-a-----", &[]),
    ];
    let mut journal = JournalFacts::default();
    journal.volumes.insert(
        "u-proven".into(),
        VolumeHistory {
            logical_volume: "pvc-1".into(),
            created: true,
            lines: vec!["#7 lvcreate ok".into(), "#9 remove-finalizer ok".into()],
        },
    );
    let got = audit_node("n1", &class(&lvs), &[], &journal, 0, 1);
    assert_eq!(
        kinds(&got),
        vec![
            (FindingKind::ForeignLv, "someones".into()),
            (FindingKind::LeakedLv, "u-proven".into()),
            (FindingKind::LeakedLv, "u-tagged".into()),
        ]
    );
    let proven = &got[1];
    assert!(proven.repairable, "the journal proves lvms made it");
    assert_eq!(proven.logical_volume.as_deref(), Some("pvc-1"));
    assert_eq!(proven.journal.len(), 2);
    assert!(proven.detail.contains("pvc-1"), "{}", proven.detail);
    // A tag alone is not proof enough to remove data; a foreign LV never is.
    assert!(!got[2].repairable);
    assert!(!got[0].repairable);
    assert!(
        got[0].detail.contains("did not make it"),
        "{}",
        got[0].detail
    );
}

#[test]
fn an_lv_whose_step_is_in_flight_is_not_an_orphan() {
    let lvs = [lv("u-new", "Vwi-aotz--", &[VOLUME_TAG])];
    let journal = JournalFacts {
        open: vec![OpenStep {
            seq: 3,
            at_ms: 1_000,
            unit: "volumes".into(),
            action: "lvremove".into(),
            object_kind: "LogicalVolume".into(),
            object_name: "pvc-new".into(),
            object_uid: "u-new".into(),
        }],
        ..Default::default()
    };
    let got = audit_node("n1", &class(&lvs), &[], &journal, 2_000, 60_000);
    assert_eq!(got, vec![]);
    // The same step open for longer than replay takes is reported, once, as half-finished.
    let got = audit_node("n1", &class(&lvs), &[], &journal, 62_000, 60_000);
    assert_eq!(
        kinds(&got),
        vec![(FindingKind::HalfFinished, "pvc-new".into())]
    );
    assert!(
        got[0].detail.contains("open since 1970-01-01T00:00:01"),
        "{}",
        got[0].detail
    );
}

#[test]
fn a_volume_whose_lv_is_gone_is_missing_unless_it_is_being_deleted() {
    let lvs = [lv("u-a", "Vwi-aotz--", &[VOLUME_TAG])];
    let mut deleting = vol("c", "u-c", Some("u-c"));
    deleting.deleting = true;
    let mut other_class = vol("d", "u-d", Some("u-d"));
    other_class.device_class = "not-built-here".into();
    let vols = [
        vol("a", "u-a", Some("u-a")),
        vol("b", "u-b", Some("u-b")),
        deleting,
        other_class,
        // Not made yet: nothing to miss.
        vol("e", "u-e", None),
    ];
    let got = audit_node("n1", &class(&lvs), &vols, &JournalFacts::default(), 0, 1);
    assert_eq!(kinds(&got), vec![(FindingKind::MissingLv, "u-b".into())]);
    assert_eq!(got[0].logical_volume.as_deref(), Some("b"));
    assert!(!got[0].repairable);
}

#[test]
fn the_cluster_half_finds_stale_pvs_and_volumes_of_gone_nodes() {
    let vols = [
        ClusterVolume {
            name: "a".into(),
            node: "n1".into(),
            uid: "u-a".into(),
            volume_id: Some("u-a".into()),
        },
        ClusterVolume {
            name: "z".into(),
            node: "gone".into(),
            uid: "u-z".into(),
            volume_id: Some("u-z".into()),
        },
    ];
    let pvs = [
        PvRef {
            name: "pv-a".into(),
            volume_handle: "u-a".into(),
            node: Some("n1".into()),
            claim: Some("default/a".into()),
        },
        PvRef {
            name: "pv-x".into(),
            volume_handle: "u-x".into(),
            node: Some("n1".into()),
            claim: Some("default/x".into()),
        },
    ];
    let nodes = BTreeSet::from(["n1".to_string()]);
    let got = stale_volumes(&pvs, &vols, &nodes);
    assert_eq!(
        kinds(&got),
        vec![
            (FindingKind::GoneNode, "u-z".into()),
            (FindingKind::StalePv, "u-x".into()),
        ]
    );
    assert!(got[1].detail.contains("default/x"), "{}", got[1].detail);
    assert_eq!(got[1].persistent_volume.as_deref(), Some("pv-x"));
}

#[test]
fn a_published_audit_counts_everything_and_lists_a_bounded_few() {
    let lvs: Vec<Lv> = (0..REPORT_FINDINGS + 5)
        .map(|i| lv(&format!("x{i:04}"), "-wi-a-----", &[]))
        .collect();
    let found = audit_node("n1", &class(&lvs), &[], &JournalFacts::default(), 0, 1);
    let a = NodeAudit::new("n1", "2026-11-29T00:00:00Z".into(), found, vec![]);
    assert_eq!(a.findings.len(), REPORT_FINDINGS);
    assert_eq!(a.omitted, 5);
    assert_eq!(
        a.counts[&FindingKind::ForeignLv],
        REPORT_FINDINGS as u64 + 5
    );
    assert_eq!(
        a.counts[&FindingKind::MissingLv],
        0,
        "every kind has a count"
    );
    let json = serde_json::to_value(&a).unwrap();
    assert_eq!(json["counts"]["foreign-lv"], REPORT_FINDINGS as u64 + 5);
    assert_eq!(json["findings"][0]["kind"], "foreign-lv");
    let back: NodeAudit = serde_json::from_value(json).unwrap();
    assert_eq!(back, a);
}

#[test]
fn finding_keys_tell_findings_apart_and_stay_the_same() {
    let lvs = [
        lv("u-1", "Vwi-aotz--", &[VOLUME_TAG]),
        lv("u-2", "Vwi-aotz--", &[VOLUME_TAG]),
    ];
    let a = audit_node("n1", &class(&lvs), &[], &JournalFacts::default(), 0, 1);
    let b = audit_node("n1", &class(&lvs), &[], &JournalFacts::default(), 5, 1);
    assert_ne!(a[0].key(), a[1].key());
    assert_eq!(
        a.iter().map(Finding::key).collect::<Vec<_>>(),
        b.iter().map(Finding::key).collect::<Vec<_>>()
    );
}

#[test]
fn an_unread_class_is_one_finding_and_never_an_empty_one() {
    let unread = [UnreadClass {
        class: "vg1".into(),
        vg: "vg1".into(),
        reason: "HostCommandTimedOut".into(),
    }];
    let f = unreadable_findings("n1", &unread);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].kind, FindingKind::UnreadableVg);
    assert_eq!(f[0].volume_group.as_deref(), Some("vg1"));
    assert!(!f[0].repairable);
    assert!(
        f[0].detail
            .contains("could not be read (HostCommandTimedOut)"),
        "{}",
        f[0].detail
    );
    // The class left out of the join: a volume of it is not missing, its step still open is
    // still half-finished.
    let journal = JournalFacts {
        open: vec![OpenStep {
            seq: 7,
            at_ms: 0,
            unit: "volumes".into(),
            action: "lvcreate".into(),
            object_kind: "LogicalVolume".into(),
            object_name: "pvc-1".into(),
            object_uid: "u-1".into(),
        }],
        ..JournalFacts::default()
    };
    let found = audit_node(
        "n1",
        &[],
        &[vol("pvc-2", "u-2", Some("u-2"))],
        &journal,
        10_000,
        1_000,
    );
    assert_eq!(
        kinds(&found),
        vec![(FindingKind::HalfFinished, "pvc-1".into())]
    );
    assert_eq!(
        serde_json::to_value(FindingKind::UnreadableVg).unwrap(),
        "unreadable-vg"
    );
}
