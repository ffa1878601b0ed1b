//! The volume-group actor on a fake host (lvm2-format fixtures) and a recording API seam: what
//! it does with a garbled report, a command that fails halfway through a teardown, each
//! action's replay, and its finalizer edits. The API seam fails every call unless a test
//! brings it up, so these tests also show which paths never reach the API.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::reflector;
use kube::runtime::watcher::Event;
use lvms_actors::{Action, Replayed, Steps, Unit, UnitError};
use lvms_journal::{Body, Intent, Journal, ObjectRef, OutcomeResult};

use super::VolumeGroupUnit;
use crate::api::LVMVolumeGroup;
use crate::node::fixture;
use crate::node::vg::actions::VolumeGroupAction as A;
use crate::vgmanager::context::{HOST_KIND, HostClock, NodeCtx};
use crate::vgmanager::fake_host::{Answer, FakeHost};
use crate::vgmanager::node_api::RecordingApi;

const VG: &str = "lvmsfix-thick";
const NODE: &str = "node-a";
const GARBLED: &str = "  WARNING: Device /dev/loop0 has size of 0 sectors\n{\"report\": [";

struct Rig {
    host: Arc<FakeHost>,
    /// The API seam: unreachable (every call fails, retryably) until a test says otherwise.
    api: Arc<RecordingApi>,
    unit: VolumeGroupUnit,
    journal: Arc<Journal>,
    _dir: tempfile::TempDir,
}

/// The fixture node: VG lvmsfix-thick on /dev/loop0 + /dev/loop1, /dev/loop2 labelled and
/// free, /dev/loop3 in another VG.
fn host_with_the_fixture_vg() -> Arc<FakeHost> {
    let host = Arc::new(FakeHost::default());
    host.stdout("pvs", fixture("pvs.json"))
        .stdout("vgs", fixture("vgs_tagged.json"))
        .stdout("lvs", fixture("lvs_empty.json"));
    host
}

fn lvmvg(deleting: bool) -> LVMVolumeGroup {
    let mut meta = serde_json::json!({
        "name": VG, "namespace": "lvms", "uid": "uid-vg", "generation": 1,
        "finalizers": [format!("cleanup.vgmanager.node.topolvm.io/{NODE}")],
    });
    if deleting {
        meta["deletionTimestamp"] = "2026-11-23T10:00:00Z".into();
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "lvm.topolvm.io/v1alpha1", "kind": "LVMVolumeGroup",
        "metadata": meta, "spec": {},
    }))
    .expect("LVMVolumeGroup")
}

async fn rig(host: Arc<FakeHost>, vg: LVMVolumeGroup) -> Rig {
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = Arc::new(Journal::open(dir.path().join("journal")).expect("journal"));
    let (volume_groups, mut writer) = reflector::store();
    writer.apply_watcher_event(&Event::Apply(vg));
    let api = Arc::new(RecordingApi::default());
    api.fail.store(true, std::sync::atomic::Ordering::SeqCst);
    let ctx = Arc::new(NodeCtx::for_tests(
        host.clone(),
        api.clone(),
        dir.path().join("lvmd.yaml"),
        volume_groups,
    ));
    let unit = VolumeGroupUnit {
        unit: format!("vg/{VG}"),
        vg: VG.into(),
        ctx,
        host_clock: HostClock::default(),
        continued_trace: Default::default(),
    };
    Rig {
        host,
        api,
        unit,
        journal,
        _dir: dir,
    }
}

impl Rig {
    fn steps(&self) -> Steps {
        Steps::detached(self.journal.clone(), &self.unit.unit)
    }

    /// (action, ok?) of every host-step outcome in the journal, in order.
    fn host_outcomes(&self) -> Vec<(String, bool)> {
        let recs: Vec<_> = self.journal.iter().map(|r| r.expect("record")).collect();
        recs.iter()
            .filter_map(|r| match &r.body {
                Body::Outcome(o) if o.object.kind == HOST_KIND => {
                    let action = recs.iter().find_map(|i| match &i.body {
                        Body::Intent(i2) if i.seq == o.intent_seq => Some(i2.action.clone()),
                        _ => None,
                    })?;
                    Some((action, matches!(o.result, OutcomeResult::Ok(_))))
                }
                _ => None,
            })
            .collect()
    }

    fn intent(&self, action: A, args: &[&str], digest: &str) -> Intent {
        Intent {
            unit: self.unit.unit.clone(),
            object: ObjectRef {
                kind: HOST_KIND.into(),
                name: format!("{NODE}/{VG}"),
                ..Default::default()
            },
            action: action.name().into(),
            args: args.iter().map(|s| s.to_string()).collect(),
            desired_digest: digest.into(),
            idempotency_key: "k".into(),
            lease_epoch: 0,
            regarding: vec![],
        }
    }
}

#[tokio::test]
async fn a_garbled_pvs_report_in_delete_keeps_the_vg_and_reports_a_retryable_error() {
    let host = host_with_the_fixture_vg();
    host.stdout("pvs", GARBLED);
    let r = rig(host, lvmvg(true)).await;
    let err = r
        .unit
        .reconcile(&r.steps())
        .await
        .expect_err("must not finish");
    assert!(err.retryable, "{err:?}");
    assert_eq!(err.reason, "PvsFailed", "{err:?}");
    assert!(r.host.mutations().is_empty(), "{:?}", r.host.mutations());
    assert!(
        r.host_outcomes().is_empty(),
        "no host step was even intended"
    );
}

#[tokio::test]
async fn a_garbled_vgs_report_in_delete_is_an_error_too() {
    let host = host_with_the_fixture_vg();
    host.stdout("vgs", "not json");
    let r = rig(host, lvmvg(true)).await;
    let err = r
        .unit
        .reconcile(&r.steps())
        .await
        .expect_err("must not finish");
    assert_eq!((err.reason.as_str(), err.retryable), ("VgsFailed", true));
    assert!(r.host.mutations().is_empty());
}

#[tokio::test]
async fn a_teardown_that_fails_halfway_resumes_from_the_host_and_its_journal() {
    let host = host_with_the_fixture_vg();
    host.answer(
        "vgremove",
        [Answer::Fails(
            5,
            "Volume group \"lvmsfix-thick\" is busy".into(),
        )],
    );
    let r = rig(host.clone(), lvmvg(true)).await;
    // The VG was built by this node: its vgcreate is in the journal (format 3: args).
    let create = r.intent(
        A::Vgcreate,
        &[
            "/usr/sbin/vgcreate",
            VG,
            "--addtag",
            "@lvms",
            "/dev/loop0",
            "/dev/loop1",
        ],
        "",
    );
    let seq = r.journal.append_intent(create, Default::default()).unwrap();
    r.journal
        .append_outcome(
            seq,
            OutcomeResult::Ok(Default::default()),
            Duration::ZERO,
            Default::default(),
        )
        .unwrap();

    let err = r
        .unit
        .reconcile(&r.steps())
        .await
        .expect_err("vgremove fails");
    assert_eq!(err.reason, "HostCommandFailed", "{err:?}");
    assert!(err.message.contains("busy"), "{err:?}");
    assert_eq!(
        host.mutations(),
        ["vgremove"],
        "nothing after the failed step (no LV: nothing to deactivate)"
    );
    let seeded = ("vgcreate".to_string(), true);
    assert_eq!(
        r.host_outcomes(),
        [seeded.clone(), ("vgremove".to_string(), false)]
    );

    // Then vgremove went through by hand; the labels stay. The next pass finds the VG gone
    // and removes only the labels of the devices its journal says it used.
    host.answer("vgremove", []);
    host.stdout(
        "pvs",
        fixture("pvs.json").replace("\"vg_name\":\"lvmsfix-thick\"", "\"vg_name\":\"\""),
    )
    .stdout("vgs", r#"{"report":[{"vg":[]}]}"#);
    let err = r
        .unit
        .reconcile(&r.steps())
        .await
        .expect_err("the API is down");
    // The host is clean; only the finalizer removal (an API call) is left, and it waits for
    // the API: the finalizer is never dropped before the host is clean.
    assert_eq!(err.reason, "ApiUnavailable", "{err:?}");
    assert_eq!(host.mutations(), ["vgremove", "pvremove"]);
    let pvremove = host
        .calls()
        .into_iter()
        .find(|c| c[0].ends_with("pvremove"))
        .unwrap();
    assert_eq!(pvremove[1..], ["/dev/loop0", "/dev/loop1"]);
    assert_eq!(
        r.host_outcomes(),
        [
            seeded,
            ("vgremove".to_string(), false),
            ("pvremove-teardown".to_string(), true)
        ]
    );
}

#[tokio::test]
async fn user_volumes_refuse_the_teardown_before_any_command() {
    let host = host_with_the_fixture_vg();
    host.stdout("lvs", fixture("lvs_linear.json"));
    let r = rig(host, lvmvg(true)).await;
    let err = r.unit.reconcile(&r.steps()).await.expect_err("refused");
    assert_eq!(err.reason, "ManualCleanupRequired");
    assert!(err.message.contains("lv1, lv2"), "{err:?}");
    assert!(r.host.mutations().is_empty());
}

/// Every action replays by reading the host, never by running anything; its verdict is the
/// effect's own (see node::replay), and journals of format 2 (argv in the digest) read the same.
#[tokio::test]
async fn each_action_replays_from_what_the_host_shows() {
    let r = rig(host_with_the_fixture_vg(), lvmvg(false)).await;
    let steps = r.steps();
    let cases: &[(A, &[&str], Replayed)] = &[
        (
            A::Vgcreate,
            &["/usr/sbin/vgcreate", VG, "/dev/loop0", "/dev/loop1"],
            Replayed::AlreadyDone,
        ),
        (
            A::Vgcreate,
            &["/usr/sbin/vgcreate", VG, "/dev/loop2"],
            Replayed::NotDone,
        ),
        (
            A::Vgextend,
            &["/usr/sbin/vgextend", VG, "/dev/loop1"],
            Replayed::AlreadyDone,
        ),
        (
            A::Vgextend,
            &["/usr/sbin/vgextend", VG, "/dev/loop2"],
            Replayed::NotDone,
        ),
        (
            A::Vgreduce,
            &["/usr/sbin/vgreduce", VG, "/dev/loop2"],
            Replayed::AlreadyDone,
        ),
        (
            A::Vgreduce,
            &["/usr/sbin/vgreduce", VG, "/dev/loop0"],
            Replayed::NotDone,
        ),
        (
            A::Pvremove,
            &["/usr/sbin/pvremove", "/dev/loop9"],
            Replayed::AlreadyDone,
        ),
        (
            A::Pvremove,
            &["/usr/sbin/pvremove", "/dev/loop2"],
            Replayed::NotDone,
        ),
        (
            A::PvremoveTeardown,
            &["/usr/sbin/pvremove", "/dev/loop2"],
            Replayed::NotDone,
        ),
        (
            A::PvremoveTeardown,
            &["/usr/sbin/pvremove", "/dev/loop8"],
            Replayed::AlreadyDone,
        ),
        (A::Vgremove, &["/usr/sbin/vgremove", VG], Replayed::NotDone),
    ];
    for (action, argv, want) in cases {
        for format_2 in [false, true] {
            let intent = if format_2 {
                r.intent(*action, &[], &argv.join(" "))
            } else {
                r.intent(*action, argv, "")
            };
            let done = r.unit.replay(&intent, &steps).await.expect("replay");
            assert_eq!(
                done.replay,
                Some(*want),
                "{action:?} {argv:?} (format 2: {format_2})"
            );
            // Only the day-2 removal that happened gets its (lost) DeviceRemoved Event.
            let event = done.event.as_ref().map(|e| e.reason.as_str());
            let want_event = (*action == A::Pvremove && *want == Replayed::AlreadyDone)
                .then_some("DeviceRemoved");
            assert_eq!(event, want_event, "{action:?} {argv:?}");
        }
    }
    // The rest cannot be read back from lvm2: left to the next pass, which decides again.
    for action in A::ALL.iter().filter(|a| {
        !matches!(
            a,
            A::Vgcreate
                | A::Vgextend
                | A::Vgreduce
                | A::Pvremove
                | A::PvremoveTeardown
                | A::Vgremove
        )
    }) {
        let done = r
            .unit
            .replay(&r.intent(*action, &["/usr/sbin/x", VG], ""), &steps)
            .await
            .expect("replay");
        assert_eq!(done.replay, Some(Replayed::NotDone), "{action:?}");
    }
    assert!(
        r.host.mutations().is_empty(),
        "replay never runs a command: {:?}",
        r.host.mutations()
    );
}

#[tokio::test]
async fn a_replay_that_cannot_read_the_host_reaches_no_verdict() {
    let host = host_with_the_fixture_vg();
    let r = rig(host.clone(), lvmvg(false)).await;
    let vgremove = r.intent(A::Vgremove, &["/usr/sbin/vgremove", VG], "");
    host.stdout("pvs", GARBLED);
    let err: UnitError = r
        .unit
        .replay(&vgremove, &r.steps())
        .await
        .expect_err("no verdict");
    assert!(err.retryable && err.reason == "PvsFailed", "{err:?}");
    host.stdout("pvs", fixture("pvs.json"))
        .answer("vgs", [Answer::Fails(5, "locking failed".into())]);
    let err = r
        .unit
        .replay(&vgremove, &r.steps())
        .await
        .expect_err("no verdict");
    assert!(
        err.retryable && err.reason == "HostCommandFailed",
        "{err:?}"
    );
    // An action this release does not know is reported, not guessed at (and not retried).
    let mut unknown = vgremove.clone();
    unknown.action = "vgsplit".into();
    host.stdout("vgs", fixture("vgs_tagged.json"));
    let err = r
        .unit
        .replay(&unknown, &r.steps())
        .await
        .expect_err("unknown");
    assert!(!err.retryable && err.reason == "UnknownAction", "{err:?}");
    assert!(err.message.contains("vgsplit"), "{err:?}");
}

#[tokio::test]
async fn a_vgcreate_lvm2_refuses_reports_the_class_failed_as_lvms_does() {
    // Two blank loop devices, no VG yet; lvm2 refuses them (a disk that shrank to nothing).
    let host = Arc::new(FakeHost::default());
    host.stdout("lsblk", fixture("lsblk_loops.json"))
        .answer("blkid", [Answer::Fails(2, String::new())])
        .stdout("losetup", fixture("losetup_back_file.json"))
        .stdout("pvs", r#"{"report":[{"pv":[]}]}"#)
        .stdout("vgs", r#"{"report":[{"vg":[]}]}"#)
        .answer(
            "vgcreate",
            [Answer::Fails(
                5,
                "Cannot use /dev/loop0: device is too small (pv_min_size)".into(),
            )],
        );
    let r = rig(host.clone(), lvmvg(false)).await;
    let err = r
        .unit
        .reconcile(&r.steps())
        .await
        .expect_err("vgcreate fails");
    assert_eq!(err.reason, "VGCreateOrExtendFailed", "{err:?}");
    assert!(err.message.contains("too small"), "{err:?}");
    assert_eq!(host.mutations(), ["vgcreate"]);
    let entry = r.unit.ctx.report.snapshot();
    let entry = entry
        .iter()
        .find(|e| e.name == VG)
        .expect("the class entry");
    assert_eq!(
        entry.status,
        Some(crate::api::VGStatusType::Failed),
        "{entry:?}"
    );
    assert!(entry.reason.contains("too small"), "{entry:?}");
}

/// With the API up, a teardown ends by removing this node's cleanup finalizer, after the host
/// is clean and lvmd.yaml no longer names the class: the last write of the pass.
#[tokio::test]
async fn a_teardown_removes_the_finalizer_last() {
    let host = host_with_the_fixture_vg();
    let r = rig(host.clone(), lvmvg(true)).await;
    r.api.fail.store(false, std::sync::atomic::Ordering::SeqCst);
    r.unit.reconcile(&r.steps()).await.expect("teardown");
    assert_eq!(host.mutations(), ["vgremove", "pvremove"]);
    assert_eq!(
        r.api.calls(),
        [format!(
            "finalizer- {VG} cleanup.vgmanager.node.topolvm.io/{NODE}"
        )]
    );
    let steps: Vec<String> = r
        .journal
        .iter()
        .filter_map(|rec| match rec.expect("record").body {
            Body::Intent(i) => Some(i.action),
            _ => None,
        })
        .collect();
    assert_eq!(
        steps.last().map(String::as_str),
        Some("remove-finalizer"),
        "{steps:?}"
    );
}

/// A class without this node's finalizer gets it before anything touches the host; with the
/// API down the pass stops there, having run nothing.
#[tokio::test]
async fn the_finalizer_comes_before_any_host_command() {
    let mut vg = lvmvg(false);
    vg.metadata.finalizers = None;
    let host = host_with_the_fixture_vg();
    let r = rig(host.clone(), vg).await;
    let err = r.unit.reconcile(&r.steps()).await.expect_err("API down");
    assert_eq!(err.reason, "ApiUnavailable", "{err:?}");
    assert_eq!(
        r.api.calls(),
        [format!(
            "finalizer+ {VG} cleanup.vgmanager.node.topolvm.io/{NODE}"
        )]
    );
    assert!(
        host.calls().is_empty(),
        "the host was touched: {:?}",
        host.calls()
    );
}

/// The fixture's loop devices, `/dev/loop0` holding `published` LVs of the VG, each with
/// lvms's gate stacked on it and mounted, as on a node running that many Pods.
fn lsblk_with_published_volumes(published: usize) -> String {
    let mut tree: serde_json::Value =
        serde_json::from_str(&fixture("lsblk_loops.json")).expect("lsblk fixture");
    let lvs: Vec<serde_json::Value> = (0..published)
        .map(|i| {
            serde_json::json!({
                "name": format!("/dev/mapper/{VG}-pvc--{i}"), "kname": format!("/dev/dm-{}", 2 * i),
                "type": "lvm", "size": "1G", "ro": false, "rota": false,
                "children": [{
                    "name": format!("/dev/mapper/lvms-pvc-{i}"),
                    "kname": format!("/dev/dm-{}", 2 * i + 1), "type": "dm", "size": "1G",
                    "ro": false, "rota": false, "fstype": null,
                    "mountpoint": format!("/var/lib/kubelet/pods/p{i}/volumes/v/mount"),
                }],
            })
        })
        .collect();
    tree["blockdevices"][0]["children"] = serde_json::Value::Array(lvs);
    tree.to_string()
}

/// A pass's host reads do not grow with the volumes mounted on the node: the gates on its LVs
/// are known by name and never probed (each `blkid -p` is a process through nsenter, in every
/// pass of every class, every 30 s).
#[tokio::test]
async fn a_pass_probes_as_many_devices_with_twenty_mounted_volumes_as_with_none() {
    let mut counts = Vec::new();
    for published in [0, 20] {
        let host = host_with_the_fixture_vg();
        host.stdout("lsblk", lsblk_with_published_volumes(published))
            .answer("blkid", [Answer::Fails(2, String::new())])
            .stdout("losetup", fixture("losetup_back_file.json"));
        let r = rig(host.clone(), lvmvg(false)).await;
        let obs = r.unit.observe(&lvmvg(false)).await.expect("observed");
        assert_eq!(obs.gates.len(), published);
        let filtered = r.unit.filter(&lvmvg(false), &obs);
        for gate in &obs.gates {
            assert!(
                filtered
                    .rejections(gate)
                    .contains(&crate::node::vg::filter::Rejection::VolumeGate),
                "{gate}: {:?}",
                filtered.rejections(gate)
            );
        }
        assert!(
            filtered
                .status_excluded()
                .iter()
                .all(|e| !e.name.contains("lvms-pvc")),
            "{:?}",
            filtered.status_excluded()
        );
        counts.push(host.calls().len());
    }
    assert_eq!(counts[0], counts[1], "host commands per pass: {counts:?}");
}
