use super::*;
use crate::node::lvmd_config::{LvcreateOptionClass, LvmdThinPool};

fn config() -> LvmdConfig {
    LvmdConfig {
        device_classes: vec![
            LvmdDeviceClass {
                name: "ssd".into(),
                volume_group: "vg1".into(),
                default: true,
                spare_gb: Some(0),
                ..Default::default()
            },
            LvmdDeviceClass {
                name: "thin".into(),
                volume_group: "vg2".into(),
                device_type: LvmdDeviceType::Thin,
                thin_pool: Some(LvmdThinPool {
                    name: "pool".into(),
                    overprovision_ratio: 10.0,
                }),
                ..Default::default()
            },
        ],
        lvcreate_option_classes: Some(vec![LvcreateOptionClass {
            name: "mirror".into(),
            options: Some(vec!["--type=raid1".into()]),
        }]),
        ..Default::default()
    }
}

fn view(size: u64) -> VolumeView {
    VolumeView {
        name: "pvc-1".into(),
        uid: "uid-1".into(),
        size: Some(size),
        finalized: true,
        labelled: true,
        ..Default::default()
    }
}

fn row(name: &str, attr: &str, size: u64, pool: Option<&str>) -> LvRow {
    LvRow {
        lv_name: name.into(),
        vg_name: "vg".into(),
        lv_attr: attr.into(),
        lv_size: Some(size),
        pool_lv: pool.map(String::from),
        ..Default::default()
    }
}

fn host_view(lvs: Vec<LvRow>, vg_free: u64) -> HostView<'static> {
    HostView {
        config: Cow::Owned(config()),
        lvs: Cow::Owned(lvs),
        vg_free,
        source_volume_id: None,
    }
}

fn argv_of(p: &Plan) -> String {
    match p {
        Plan::Host { argv, .. } => argv.join(" "),
        other => panic!("not a host step: {other:?}"),
    }
}

#[test]
fn a_new_volume_is_finalized_then_created_in_the_default_class_then_reported() {
    let mut v = view(1 << 30);
    v.finalized = false;
    assert_eq!(plan(&v, &host_view(vec![], 10 << 30)), Plan::AddFinalizer);
    v.finalized = true;
    let p = plan(&v, &host_view(vec![], 10 << 30));
    assert_eq!(
        argv_of(&p),
        "/usr/sbin/lvcreate -n uid-1 -L 1073741824b -W y -y --addtag lvms-volume vg1"
    );
    // lvm2 rounded it up to whole extents: the status says what is on disk.
    let made = row("uid-1", "-wi-a-----", (1 << 30) + (4 << 20), None);
    assert_eq!(
        plan(&v, &host_view(vec![made.clone()], 0)),
        Plan::Status(StatusWrite::Ready {
            volume_id: "uid-1".into(),
            current_size: (1 << 30) + (4 << 20)
        })
    );
    v.volume_id = Some("uid-1".into());
    v.current_size = Some((1 << 30) + (4 << 20));
    assert_eq!(plan(&v, &host_view(vec![made], 0)), Plan::Done);
}

#[test]
fn no_room_unknown_classes_and_option_classes_are_refused_in_the_status() {
    let v = view(2 << 30);
    match plan(&v, &host_view(vec![], 1 << 30)) {
        Plan::Status(StatusWrite::Refused { code, message }) => {
            assert_eq!(code, Code::ResourceExhausted);
            assert!(message.contains("1073741824 bytes free"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let mut nvme = view(1);
    nvme.device_class = "nvme".into();
    assert!(matches!(
        plan(&nvme, &host_view(vec![], 1 << 30)),
        Plan::Status(StatusWrite::Refused {
            code: Code::NotFound,
            ..
        })
    ));
    let mut opt = view(4096);
    opt.option_class = "mirror".into();
    assert!(argv_of(&plan(&opt, &host_view(vec![], 1 << 30))).contains("--type=raid1"));
    opt.option_class = "nope".into();
    assert!(matches!(
        plan(&opt, &host_view(vec![], 1 << 30)),
        Plan::Status(StatusWrite::Refused {
            code: Code::Internal,
            ..
        })
    ));
    // Once refused, nothing more happens on the node: the controller deletes the object.
    let mut refused = view(2 << 30);
    refused.code = Code::ResourceExhausted as i32;
    assert_eq!(plan(&refused, &host_view(vec![], 1 << 30)), Plan::Done);
}

#[test]
fn thin_volumes_come_from_the_pool_within_the_overprovision_ratio() {
    let mut v = view(3 << 30);
    v.device_class = "thin".into();
    let pool = row("pool", "twi-a-tz--", 1 << 30, None);
    let p = plan(&v, &host_view(vec![pool.clone()], 0));
    assert_eq!(
        argv_of(&p),
        "/usr/sbin/lvcreate -T vg2/pool -n uid-1 -V 3221225472b -W y -y --addtag lvms-volume"
    );
    let used = row("big", "Vwi-a-tz--", 9 << 30, Some("pool"));
    assert!(matches!(
        plan(&v, &host_view(vec![pool, used], 0)),
        Plan::Status(StatusWrite::Refused {
            code: Code::ResourceExhausted,
            ..
        })
    ));
}

#[test]
fn a_grown_spec_is_resized_and_then_reported() {
    let mut v = view(2 << 30);
    v.volume_id = Some("uid-1".into());
    v.current_size = Some(1 << 30);
    let small = row("uid-1", "-wi-a-----", 1 << 30, None);
    assert_eq!(
        argv_of(&plan(&v, &host_view(vec![small.clone()], 5 << 30))),
        "/usr/sbin/lvresize -L 2147483648b vg1/uid-1"
    );
    assert!(matches!(
        plan(&v, &host_view(vec![small.clone()], 1 << 20)),
        Plan::Status(StatusWrite::Refused {
            code: Code::ResourceExhausted,
            ..
        })
    ));
    // A refusal is written once, not on every pass; with room again the resize runs.
    v.code = Code::ResourceExhausted as i32;
    assert_eq!(
        plan(&v, &host_view(vec![small.clone()], 1 << 20)),
        Plan::Done
    );
    assert!(matches!(
        plan(&v, &host_view(vec![small], 5 << 30)),
        Plan::Host {
            action: VolumeAction::Lvresize,
            ..
        }
    ));
    let big = row("uid-1", "-wi-a-----", 2 << 30, None);
    assert_eq!(
        plan(&v, &host_view(vec![big], 0)),
        Plan::Status(StatusWrite::Ready {
            volume_id: "uid-1".into(),
            current_size: 2 << 30
        })
    );
}

#[test]
fn a_volume_lost_from_disk_is_reported_not_recreated() {
    let mut v = view(1 << 30);
    v.volume_id = Some("uid-1".into());
    assert!(matches!(
        plan(&v, &host_view(vec![], 5 << 30)),
        Plan::Missing(_)
    ));
}

#[test]
fn deletion_removes_the_lv_then_the_finalizer() {
    let mut v = view(1 << 30);
    v.deleting = true;
    v.volume_id = Some("uid-1".into());
    let lv = row("uid-1", "-wi-a-----", 1 << 30, None);
    assert_eq!(
        argv_of(&plan(&v, &host_view(vec![lv], 0))),
        "/usr/sbin/lvremove -f vg1/uid-1"
    );
    assert_eq!(plan(&v, &host_view(vec![], 0)), Plan::RemoveFinalizer);
    v.finalized = false;
    assert_eq!(plan(&v, &host_view(vec![], 0)), Plan::Done);
    let mut pending = view(1);
    pending.pending_deletion = true;
    pending.finalized = false;
    assert_eq!(plan(&pending, &host_view(vec![], 0)), Plan::Done);
}

#[test]
fn snapshots_need_a_thin_source_on_this_node_and_get_their_access() {
    let mut v = view(1 << 30);
    v.device_class = "thin".into();
    v.source = Some("pvc-src".into());
    v.access_type = Some("ro".into());
    let pool = row("pool", "twi-a-tz--", 1 << 30, None);
    let src = row("src-uid", "Vwi-aotz--", 1 << 30, Some("pool"));
    let mut h = host_view(vec![pool.clone(), src.clone()], 0);
    h.source_volume_id = Some(Ok("src-uid".into()));
    assert_eq!(
        argv_of(&plan(&v, &h)),
        "/usr/sbin/lvcreate -s -k n -n uid-1 vg2/src-uid --addtag lvms-volume"
    );
    // Made: a read-only snapshot gets -p r, then its status.
    h.lvs
        .to_mut()
        .push(row("uid-1", "Vwi---tz-k", 1 << 30, Some("pool")));
    assert_eq!(argv_of(&plan(&v, &h)), "/usr/sbin/lvchange -p r vg2/uid-1");
    h.lvs.to_mut().pop();
    // Read-only but inactive in an active pool: activated first (a killed lvcreate's LV
    // without its device would fail here, not in the Pod's publish), then reported.
    h.lvs
        .to_mut()
        .push(row("uid-1", "Vri---tz-k", 1 << 30, Some("pool")));
    assert_eq!(
        argv_of(&plan(&v, &h)),
        "/usr/sbin/lvchange -a y -K vg2/uid-1"
    );
    h.lvs.to_mut().pop();
    h.lvs
        .to_mut()
        .push(row("uid-1", "Vri-a-tz-k", 1 << 30, Some("pool")));
    assert!(matches!(
        plan(&v, &h),
        Plan::Status(StatusWrite::Ready { .. })
    ));
    // A bigger restore is grown, then activated where its pool is active.
    let mut restore = v.clone();
    restore.access_type = Some("rw".into());
    restore.size = Some(2 << 30);
    h.lvs.to_mut().pop();
    h.lvs
        .to_mut()
        .push(row("uid-1", "Vwi---tz--", 1 << 30, Some("pool")));
    assert_eq!(
        argv_of(&plan(&restore, &h)),
        "/usr/sbin/lvresize -L 2147483648b vg2/uid-1"
    );
    h.lvs.to_mut().pop();
    h.lvs
        .to_mut()
        .push(row("uid-1", "Vwi---tz--", 2 << 30, Some("pool")));
    assert_eq!(
        argv_of(&plan(&restore, &h)),
        "/usr/sbin/lvchange -k n -a y vg2/uid-1"
    );
    // With activation off (the pool inactive) the status is written without it.
    h.lvs.to_mut()[0] = row("pool", "twi---tz--", 1 << 30, None);
    assert!(matches!(
        plan(&restore, &h),
        Plan::Status(StatusWrite::Ready { .. })
    ));
}

#[test]
fn snapshots_of_thick_or_missing_sources_are_refused() {
    let mut v = view(1 << 30);
    v.source = Some("pvc-src".into());
    v.access_type = Some("ro".into());
    let mut h = host_view(vec![], 0);
    h.source_volume_id = Some(Ok("src".into()));
    assert!(matches!(
        plan(&v, &h),
        Plan::Status(StatusWrite::Refused {
            code: Code::Unimplemented,
            ..
        })
    ));
    v.device_class = "thin".into();
    h.source_volume_id = Some(Err(SourceError::NoVolume {
        name: "pvc-src".into(),
    }));
    assert!(matches!(
        plan(&v, &h),
        Plan::Status(StatusWrite::Refused {
            code: Code::NotFound,
            ..
        })
    ));
    v.access_type = Some("x".into());
    assert!(matches!(
        plan(&v, &h),
        Plan::Status(StatusWrite::Refused {
            code: Code::InvalidArgument,
            ..
        })
    ));
}

#[test]
fn a_thin_volume_found_inactive_is_activated_before_it_is_handed_out() {
    let mut v = view(1 << 30);
    v.device_class = "thin".into();
    let pool = row("pool", "twi-aotz--", 4 << 30, None);
    // What a killed lvcreate may leave: the LV in lvm2's metadata, not active.
    let left = row("uid-1", "Vwi---tz--", 1 << 30, Some("pool"));
    let mut h = host_view(vec![pool, left], 0);
    let p = plan(&v, &h);
    assert!(matches!(
        p,
        Plan::Host {
            action: VolumeAction::Lvchange,
            ..
        }
    ));
    assert_eq!(argv_of(&p), "/usr/sbin/lvchange -a y -K vg2/uid-1");
    // Active: adopted as it is.
    h.lvs.to_mut()[1] = row("uid-1", "Vwi-a-tz--", 1 << 30, Some("pool"));
    assert_eq!(
        plan(&v, &h),
        Plan::Status(StatusWrite::Ready {
            volume_id: "uid-1".into(),
            current_size: 1 << 30
        })
    );
    // Activation off (the pool inactive): nothing to ask, adopted as it is.
    h.lvs.to_mut()[0] = row("pool", "twi---tz--", 4 << 30, None);
    h.lvs.to_mut()[1] = row("uid-1", "Vwi---tz--", 1 << 30, Some("pool"));
    assert!(matches!(
        plan(&v, &h),
        Plan::Status(StatusWrite::Ready { .. })
    ));
    // A volume already handed out is never re-planned this way.
    v.volume_id = Some("uid-1".into());
    v.current_size = Some(1 << 30);
    h.lvs.to_mut()[0] = row("pool", "twi-aotz--", 4 << 30, None);
    assert_eq!(plan(&v, &h), Plan::Done);
}

/// A thin pool past its real-use limits refuses a new volume and a larger one with a message
/// naming the pool and its use, though the overprovision formula still has room.
#[test]
fn a_full_thin_pool_refuses_new_and_larger_volumes_naming_its_real_use() {
    let mut pool = row("pool", "twi-aotz--", 10 << 30, None);
    pool.data_percent = Some(96.5);
    pool.metadata_percent = Some(20.0);
    let mut v = view(1 << 30);
    v.device_class = "thin".into();
    let refused = |p: Plan| match p {
        Plan::Status(StatusWrite::Refused { code, message }) => {
            assert_eq!(code, Code::ResourceExhausted);
            message
        }
        other => panic!("not refused: {other:?}"),
    };
    let msg = refused(plan(&v, &host_view(vec![pool.clone()], 0)));
    assert!(
        msg.contains("vg/pool") && msg.contains("96.5% full (data)"),
        "{msg}"
    );
    // Below the limits the same request is made.
    let mut roomy = pool.clone();
    roomy.data_percent = Some(50.0);
    assert!(argv_of(&plan(&v, &host_view(vec![roomy], 0))).contains("lvcreate -T vg2/pool"));
    // Growing a volume of the full pool is refused the same way.
    let made = row("uid-1", "Vwi-aotz--", 1 << 30, Some("pool"));
    v.volume_id = Some("uid-1".into());
    v.current_size = Some(1 << 30);
    v.size = Some(2 << 30);
    let msg = refused(plan(&v, &host_view(vec![pool, made], 0)));
    assert!(msg.contains("96.5% full (data)"), "{msg}");
}
