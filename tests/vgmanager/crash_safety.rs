//! Issue 12's regression tests: each defect the random-kill soak found, pinned at the fault
//! point (or restart) that shows it. Each failed on the code before the fix.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use lvms::api::{LVMCluster, LVMStateType, LVMVolumeGroupNodeStatus};
use lvms_journal::{Body, Journal, OutcomeResult, PublishKind};
use lvms_testkit::dev::operator::OperatorProcess;
use serde_json::{Value, json};

use lvms_testkit::disks::{Disk, labelled, require_prerequisites, vg_names};
use lvms_testkit::events::{assert_no_duplicate_events, series_count};
use lvms_testkit::fixtures::{lvm_cluster, thick_class};
use lvms_testkit::kubelet::{create_node, register_csi_node};
use lvms_testkit::{Scenario, eventually};

const T: Duration = Duration::from_secs(60);

fn cluster(vg: &str, disk: &Disk) -> Value {
    lvm_cluster("my-lvmcluster", json!([thick_class(vg, &disk.link)]))
}

/// One node (`node-a`, a Kubelet-registered Node) with the operator running, a volume group
/// name and one 128 MiB disk, both tagged `tag`; what every test here starts from.
struct OneNode {
    s: Scenario,
    vg: String,
    d1: Disk,
    _op: OperatorProcess,
}

async fn one_node(scenario: &str, tag: &str) -> OneNode {
    require_prerequisites();
    let s = Scenario::new(scenario).await;
    let vg = format!("{tag}{}", std::process::id());
    let d1 = Disk::new(&s.dir.join("disks"), &format!("{tag}1"), 128);
    create_node(&s.client, "node-a", false).await;
    register_csi_node(&s.client, "node-a", true).await;
    let op = s.operator(&[], &[]);
    OneNode { s, vg, d1, _op: op }
}

/// Wait for the vg-manager armed with crash point `point` to SIGKILL itself there.
fn wait_killed(mut crashing: OperatorProcess, point: &str) {
    let status = crashing.wait_exit(T).unwrap_or_else(|| {
        panic!(
            "vg-manager did not crash at {point}:\n{}",
            crashing.log_text()
        )
    });
    assert!(OperatorProcess::killed_by_sigkill(&status), "{status:?}");
}

/// Wait for the vg-manager armed with a crash point to SIGKILL itself there, then start it
/// again without one.
fn restart_after_crash(s: &Scenario, crashing: OperatorProcess, point: &str) -> OperatorProcess {
    wait_killed(crashing, point);
    s.vg_manager("node-a", &[])
}

/// Delete the LVMCluster, playing kubelet (no kubelet here: the CSI registration goes when
/// the operator has removed the DaemonSet), and wait until it is gone.
async fn delete_and_wait_gone(s: &Scenario) {
    s.clusters()
        .delete("my-lvmcluster", &DeleteParams::default())
        .await
        .expect("delete LVMCluster");
    register_csi_node(&s.client, "node-a", false).await;
    wait_gone(s).await;
}

async fn wait_gone(s: &Scenario) {
    let gone = eventually(T, || async {
        s.cluster("my-lvmcluster").await.is_none().then_some(())
    })
    .await;
    if gone.is_none() {
        panic!(
            "the LVMCluster was never torn down:\n{}",
            s.diagnosis().await
        );
    }
}

fn vg_journal(s: &Scenario, node: &str) -> Journal {
    Journal::open_copy(s.vg_manager_journal(node)).expect("journal")
}

/// (key → number of Published Event records) over one journal.
fn published_events(j: &Journal) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for rec in j.iter() {
        if let Body::Published(p) = rec.expect("journal record").body
            && p.kind == PublishKind::Event
        {
            *out.entry(p.dedupe_key).or_default() += 1;
        }
    }
    out
}

/// Where an Event written from `journal` shows another count than the journal's Published
/// records for its key.
fn event_count_mismatches(events: &[Event], journal: &Journal) -> Vec<String> {
    let by_name: BTreeMap<String, &Event> = events.iter().map(|e| (e.name_any(), e)).collect();
    let mut out = Vec::new();
    for (key, n) in published_events(journal) {
        let suffix = format!(".{:016x}", lvms_actors::fnv1a(key.as_bytes()));
        let found: Vec<&&Event> = by_name
            .iter()
            .filter(|(name, _)| name.ends_with(&suffix))
            .map(|(_, e)| e)
            .collect();
        // An Event whose namespace is gone is not listed here; ours all live in the test's.
        if let [e] = found.as_slice()
            && series_count(e) != n
        {
            out.push(format!(
                "Event {} ({:?}) shows count {} but the journal has {n} Published records for {key}",
                e.name_any(),
                e.reason,
                series_count(e)
            ));
        }
    }
    out
}

/// Every Event the node's vg-manager wrote shows as many occurrences as its journal has
/// Published records for the key, once the publisher is at rest: a Published record is
/// appended just after its Event write and reaches the files behind a journal copy with
/// sled's next flush, so a copy taken in between may lag by one.
async fn assert_event_counts_follow_the_journal(s: &Scenario, node: &str) {
    let mut last = Vec::new();
    for _ in 0..30 {
        last = event_count_mismatches(&s.events().await, &vg_journal(s, node));
        if last.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    panic!(
        "Event counts disagree with the journal:\n{}",
        last.join("\n")
    );
}

fn reasons_on(events: &[Event], uid: &str) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = events
        .iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid))
        .map(|e| (e.reason.clone().unwrap_or_default(), series_count(e)))
        .collect();
    out.sort();
    out
}

/// 12.3: a kill inside teardown never leaves a PV label behind: (a) after the pvremove intent
/// is durable but before it runs (replay used to say `already-done` because the PV was in no
/// VG), (b) after vgremove ran but before its outcome (the restarted pass found no VG and
/// skipped pvremove). Also 12.5: the teardown is told as LVMDConfigDeleted, not as a second
/// VolumeGroupReady, and the status unit ends without a failed NotFound pass.
async fn teardown_kill_leaves_no_label(tag: &str, point: &str, action: &str) {
    let OneNode { s, vg, d1, _op } = one_node(&format!("vgm-teardown-{tag}"), tag).await;
    let crash = format!("{point}:vg/{vg}#{action}");
    let crashing = s.vg_manager("node-a", &[("LVMS_CRASH_AT", &crash)]);
    let created = s.create_cluster(cluster(&vg, &d1)).await;
    s.wait_state("my-lvmcluster", LVMStateType::Ready, T).await;
    let vg_uid = eventually(T, || async {
        Api::<lvms::api::LVMVolumeGroup>::namespaced(s.client.clone(), &s.ns.name)
            .get_opt(&vg)
            .await
            .ok()?
            .and_then(|v| v.metadata.uid)
    })
    .await
    .expect("LVMVolumeGroup");
    s.clusters()
        .delete("my-lvmcluster", &DeleteParams::default())
        .await
        .expect("delete");
    register_csi_node(&s.client, "node-a", false).await;
    let _vm = restart_after_crash(&s, crashing, &crash);
    wait_gone(&s).await;
    assert!(!vg_names().contains(&vg), "volume group {vg} left behind");
    assert!(
        !labelled(&d1.loop_dev),
        "{} still carries a PV label after teardown (crash at {crash})",
        d1.loop_dev
    );
    lvms_testkit::journal::settled(&s.vg_manager_journal("node-a"), T);
    tokio::time::sleep(Duration::from_millis(800)).await;
    let events = s.events().await;
    let on_vg = reasons_on(&events, &vg_uid);
    assert!(
        on_vg.iter().any(|(r, _)| r == "LVMDConfigDeleted"),
        "teardown's LVMDConfigDeleted missing: {on_vg:?}"
    );
    assert!(
        on_vg
            .iter()
            .all(|(r, n)| r != "VolumeGroupReady" || *n == 1),
        "the delete was published as VolumeGroupReady: {on_vg:?}"
    );
    let on_cluster = reasons_on(&events, created.metadata.uid.as_deref().unwrap_or_default());
    assert!(
        on_cluster.iter().any(|(r, _)| r == "LVMDConfigDeleted"),
        "{on_cluster:?}"
    );
    assert_event_counts_follow_the_journal(&s, "node-a").await;
    // The status unit's last pass after the finalizer went is a normal end.
    let op = Journal::open_copy(s.operator_journal()).expect("operator journal");
    let failed_status: Vec<String> = op
        .iter()
        .filter_map(|r| match r.expect("record").body {
            Body::Outcome(o) if o.unit == "status" => match o.result {
                OutcomeResult::Err {
                    reason, message, ..
                } => Some(format!("{reason}: {message}")),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert!(
        failed_status.iter().all(|m| !m.starts_with("NotFound")),
        "status pass failed on the deleted LVMCluster: {failed_status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_before_teardown_pvremove_runs_still_removes_the_label() {
    teardown_kill_leaves_no_label("p", "intent-durable", "pvremove-teardown").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_after_vgremove_before_its_outcome_still_removes_the_label() {
    teardown_kill_leaves_no_label("r", "applied", "vgremove").await;
}

/// 12.2: the operator deletes the node status during teardown; a vg-manager restarted then
/// must not create it again (server-side apply did, ownerless, and the next LVMCluster adopted
/// it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_vg_manager_never_recreates_a_deleted_node_status() {
    let OneNode { s, vg, d1, _op } = one_node("vgm-ns-gone", "n").await;
    let mut vm = s.vg_manager("node-a", &[]);
    s.create_cluster(cluster(&vg, &d1)).await;
    s.wait_state("my-lvmcluster", LVMStateType::Ready, T).await;
    delete_and_wait_gone(&s).await;
    let statuses: Api<LVMVolumeGroupNodeStatus> = Api::namespaced(s.client.clone(), &s.ns.name);
    let gone = eventually(T, || async {
        statuses
            .get_opt("node-a")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "the operator did not delete the node status"
    );
    vm.kill();
    drop(vm);
    let _vm = s.vg_manager("node-a", &[]);
    // Give the restarted vg-manager time for its first passes (it writes within ~100 ms).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let back = statuses.get_opt("node-a").await.expect("get node status");
    assert!(
        back.is_none(),
        "the deleted node status came back: {:?}",
        back.map(|n| (n.metadata.uid, n.metadata.owner_references))
    );
}

/// 12.1: after create/delete cycles a restarted vg-manager publishes nothing old: each
/// outcome's Events went to the objects of its own cycle (recorded with their UIDs), so the
/// restart finds them all published and re-aims none at today's objects. The first cycle
/// fails (a path that does not exist), so its Warning is news no later cycle repeats: before
/// the fix the restart sent it again, to today's LVMCluster and node status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_after_cycles_re_aims_no_old_event_at_new_objects() {
    let OneNode { s, vg, d1, _op } = one_node("vgm-cycles", "y").await;
    let mut vm = s.vg_manager("node-a", &[]);
    let mut bad = cluster(&vg, &d1);
    bad["spec"]["storage"]["deviceClasses"][0]["deviceSelector"]["paths"] =
        json!([format!("/dev/lvms-test-missing-{}", std::process::id())]);
    let failed = s.create_cluster(bad).await;
    let failed_uid = failed.metadata.uid.clone().expect("uid");
    let warned = eventually(T, || async {
        s.events().await.into_iter().find(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(failed_uid.as_str())
                && e.note.as_deref().is_some_and(|n| n.contains("node-a"))
        })
    })
    .await;
    assert!(
        warned.is_some(),
        "the failing cycle reported no Warning from node-a"
    );
    delete_and_wait_gone(&s).await;
    register_csi_node(&s.client, "node-a", true).await;
    s.create_cluster(cluster(&vg, &d1)).await;
    s.wait_state("my-lvmcluster", LVMStateType::Ready, T).await;
    delete_and_wait_gone(&s).await;
    register_csi_node(&s.client, "node-a", true).await;
    let current: LVMCluster = s.create_cluster(cluster(&vg, &d1)).await;
    s.wait_state("my-lvmcluster", LVMStateType::Ready, T).await;
    let statuses: Api<LVMVolumeGroupNodeStatus> = Api::namespaced(s.client.clone(), &s.ns.name);
    let ns_uid = statuses
        .get("node-a")
        .await
        .expect("node status")
        .metadata
        .uid
        .expect("uid");
    let cluster_uid = current.metadata.uid.clone().expect("uid");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before_c = reasons_on(&s.events().await, &cluster_uid);
    let before_ns = reasons_on(&s.events().await, &ns_uid);
    assert!(
        before_c
            .iter()
            .any(|(r, n)| r == "VolumeGroupReady" && *n == 1),
        "this cycle's VolumeGroupReady on the LVMCluster: {before_c:?}"
    );
    vm.kill();
    drop(vm);
    let _vm = s.vg_manager("node-a", &[]);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let events = s.events().await;
    assert_eq!(
        reasons_on(&events, &cluster_uid),
        before_c,
        "a restart published old Events onto today's LVMCluster"
    );
    assert_eq!(
        reasons_on(&events, &ns_uid),
        before_ns,
        "a restart published old Events onto today's node status"
    );
    assert_event_counts_follow_the_journal(&s, "node-a").await;
}

/// 12.4: a day-2 device removal killed after its pvremove ran but before the outcome that
/// carried `DeviceRemoved`: replay finds the label gone and still tells it, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_after_a_day_2_pvremove_still_publishes_device_removed_once() {
    require_prerequisites();
    let s = Scenario::new("vgm-reduce").await;
    let vg = format!("x{}", std::process::id());
    let disks = s.dir.join("disks");
    let d1 = Disk::new(&disks, "x1", 128);
    let d2 = Disk::new(&disks, "x2", 128);
    create_node(&s.client, "node-a", false).await;
    register_csi_node(&s.client, "node-a", true).await;
    let _op = s.operator(&[], &[]);
    let crash = format!("applied:vg/{vg}#pvremove");
    let crashing = s.vg_manager("node-a", &[("LVMS_CRASH_AT", &crash)]);
    let paths = |p: Vec<&String>| {
        json!({"spec": {"storage": {"deviceClasses": [
            {"name": vg, "default": true, "deviceSelector": {"paths": p}}]}}})
    };
    let mut both = cluster(&vg, &d1);
    both["spec"] = paths(vec![&d1.link, &d2.link])["spec"].clone();
    let created = s.create_cluster(both).await;
    s.wait_state("my-lvmcluster", LVMStateType::Ready, T).await;
    s.clusters()
        .patch(
            "my-lvmcluster",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&paths(vec![&d1.link])),
        )
        .await
        .expect("remove a path");
    wait_killed(crashing, &crash);
    assert!(!labelled(&d2.loop_dev), "pvremove ran before the kill");
    let _vm = s.vg_manager("node-a", &[]);
    let reported = eventually(T, || async {
        s.events().await.into_iter().find(|e| {
            e.reason.as_deref() == Some("DeviceRemoved")
                && e.regarding.as_ref().and_then(|r| r.uid.as_deref())
                    == created.metadata.uid.as_deref()
        })
    })
    .await;
    let reported = reported.expect("DeviceRemoved lost with the killed outcome");
    assert_eq!(series_count(&reported), 1);
    lvms_testkit::journal::settled(&s.vg_manager_journal("node-a"), T);
    assert_event_counts_follow_the_journal(&s, "node-a").await;
}

/// 12.4: a kill right after the pass outcome (before its Events) loses no Event, and a kill
/// right after an Event write (before its Published record) sends none twice: the restart
/// recomputes the same Events and counts from the journal alone.
async fn event_window_kill(tag: &str, point: &str) {
    let OneNode { s, vg, d1, _op } = one_node(&format!("vgm-evt-{tag}"), tag).await;
    let crashing = s.vg_manager("node-a", &[("LVMS_CRASH_AT", point)]);
    let created = s.create_cluster(cluster(&vg, &d1)).await;
    let _vm = restart_after_crash(&s, crashing, point);
    s.wait_state("my-lvmcluster", LVMStateType::Ready, T).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let events = s.events().await;
    assert_no_duplicate_events(&events);
    let on_cluster = reasons_on(&events, created.metadata.uid.as_deref().unwrap_or_default());
    assert!(
        on_cluster
            .iter()
            .any(|(r, n)| r == "VolumeGroupReady" && *n == 1),
        "VolumeGroupReady once on the LVMCluster: {on_cluster:?}"
    );
    lvms_testkit::journal::settled(&s.vg_manager_journal("node-a"), T);
    assert_event_counts_follow_the_journal(&s, "node-a").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_between_the_pass_outcome_and_its_events_loses_none() {
    let vg = format!("o{}", std::process::id());
    event_window_kill("o", &format!("outcome:vg/{vg}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_between_an_event_write_and_its_record_sends_it_once() {
    event_window_kill("e", "event-written").await;
}
