//! Volume group snapshots on a real kernel, through the upstream snapshot-controller and
//! csi-snapshotter with `CSIVolumeGroupSnapshot` on: two claims labelled for one group (xfs
//! data, ext4 wal), published in the guest, while a writer appends numbered records to them
//! alternately (record n+1 goes to one volume only after record n is durable on the other).
//! Each VolumeGroupSnapshot's members are restored into new claims and read in the guest: the
//! pair is consistent when no record on one is missing its predecessor on the other. Then a
//! Retain class keeps its members after the group is deleted, and vg-manager is SIGKILLed at
//! each step of the group operation (hold, first member taken, before the release): every
//! gate is thawed, both filesystems are writable, the retried group is whole and consistent.
//! Last, a member's lvcreate that never returns: killed at vg-manager's deadline, the hold
//! released (writes flow again), the group retried whole.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, ListParams};
use kube::api::{Patch, PatchParams, PostParams};
use lvms::api::LogicalVolume;
use lvms_journal::{Body, Journal};
use lvms_testkit::consistency::consistent;
use lvms_testkit::eventually;
use lvms_testkit::fixtures::csi::claim;
use lvms_testkit::snapshots;
use serde_json::{Value, json};

use crate::csi::{SLOW, bound_handle, run_thin_csi};
use crate::group::Ctx;
use crate::node::HostCtx;

/// Group snapshots taken while the writer runs (`LVMS_GROUP_ROUNDS`, a multiple of [`BATCH`],
/// 20 by default), five at a time; a batch's groups are deleted before the next is taken.
fn rounds() -> usize {
    std::env::var("LVMS_GROUP_ROUNDS")
        .ok()
        .and_then(|r| r.parse::<usize>().ok())
        .filter(|r| *r > 0 && r % BATCH == 0)
        .unwrap_or(20)
}
const BATCH: usize = 5;

/// What the scenario adds to its guest's deadline. Measured on 6.1 under emulation: 20 groups
/// and three kills took 27 min, ~50 s per group and ~150 s per kill on ~10 min of setup,
/// Retain and teardown; this allows ~1.5 times that.
pub fn budget() -> Duration {
    Duration::from_secs(
        900 + 75 * rounds() as u64
            + 240 * crashes().len() as u64
            + hang().map_or(0, |s| 240 + 2 * s),
    )
}
/// Where vg-manager is killed during a group snapshot: after the hold (gates suspended), after
/// the first member's snapshot (a partial group), before the release (all taken, still held).
const CRASHES: [(&str, &str); 3] = [
    ("hold", "applied:volumes#hold-gates"),
    ("snap", "applied:volumes#lvcreate-snapshot"),
    ("release", "intent-durable:volumes#release-gates"),
];

/// The kills this run makes (`LVMS_GROUP_KILLS`, names from [`CRASHES`] separated by commas;
/// all of them by default). A name that is not one of them fails the run rather than testing
/// less than asked.
fn crashes() -> Vec<(&'static str, &'static str)> {
    let Ok(wanted) = std::env::var("LVMS_GROUP_KILLS") else {
        return CRASHES.to_vec();
    };
    wanted
        .split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .map(|w| {
            *CRASHES.iter().find(|(k, _)| *k == w).unwrap_or_else(|| {
                panic!("LVMS_GROUP_KILLS: unknown kill {w:?}; known: hold, snap, release")
            })
        })
        .collect()
}
/// The deadline (`--host-command-timeout`) of the step where a member's lvcreate never
/// returns (`LVMS_GROUP_HANG`, seconds; `0` leaves the step out; 30 by default: lvm2 under
/// emulation takes a few seconds, never near it).
fn hang() -> Option<u64> {
    match std::env::var("LVMS_GROUP_HANG") {
        Err(_) => Some(30),
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(0) => None,
            Ok(s) => Some(s),
            Err(_) => panic!("LVMS_GROUP_HANG: {v:?} is not a number of seconds (0: no hang step)"),
        },
    }
}
fn hangs() -> usize {
    usize::from(hang().is_some())
}
const WAL_SIZE: &str = "64Mi";

/// In the guest, once the class is Ready.
const GUEST: &str = include_str!("scripts/group-snapshot.sh");

fn group_class(name: &str, policy: &str) -> Value {
    json!({
        "apiVersion": "groupsnapshot.storage.k8s.io/v1", "kind": "VolumeGroupSnapshotClass",
        "metadata": {"name": name},
        "driver": "topolvm.io", "deletionPolicy": policy,
    })
}

fn group_snapshot(name: &str, class: &str) -> Value {
    json!({
        "apiVersion": "groupsnapshot.storage.k8s.io/v1", "kind": "VolumeGroupSnapshot",
        "metadata": {"name": name},
        "spec": {"volumeGroupSnapshotClassName": class,
                 "source": {"selector": {"matchLabels": {"app": "db"}}}},
    })
}

struct Apis {
    groups: Api<DynamicObject>,
    contents: Api<DynamicObject>,
    snaps: Api<DynamicObject>,
    snap_contents: Api<DynamicObject>,
    pvcs: Api<PersistentVolumeClaim>,
    lvs: Api<LogicalVolume>,
}

/// Takes group snapshot `name` and waits until it is ready; returns the group snapshot id
/// (the driver's handle) and each member VolumeSnapshot by the claim it was taken from.
async fn take(
    a: &Apis,
    name: String,
    class: &str,
    peers: &[lvms_testkit::dev::csi_peers::Sidecar],
) -> (String, Vec<(String, String)>) {
    let name = name.as_str();
    let pp = PatchParams::apply("lvms-test").force();
    a.groups
        .patch(name, &pp, &Patch::Apply(&group_snapshot(name, class)))
        .await
        .expect("VolumeGroupSnapshot");
    let ready = eventually(SLOW, || async {
        let g = a.groups.get(name).await.ok()?;
        let st = g.data.get("status")?;
        (st["readyToUse"] == true).then(|| {
            (
                g.metadata.uid.clone().unwrap_or_default(),
                st["boundVolumeGroupSnapshotContentName"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
    })
    .await;
    let Some((uid, content)) = ready else {
        let now = a.groups.get(name).await.ok().map(|g| g.data);
        let log = lvms_testkit::process::tail(&peers[1].log_text(), 30);
        panic!("group snapshot {name} never ready: {now:?}\ncsi-snapshotter log:\n{log}");
    };
    let handle = a
        .contents
        .get(&content)
        .await
        .expect("the group's content")
        .data["status"]["volumeGroupSnapshotHandle"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let members = eventually(SLOW, || async {
        let list = a.snaps.list(&ListParams::default()).await.ok()?;
        let m: Vec<(String, String)> = list
            .items
            .iter()
            .filter(|s| {
                s.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.uid == uid)
            })
            .map(|s| {
                (
                    s.data["spec"]["source"]["persistentVolumeClaimName"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    s.metadata.name.clone().unwrap_or_default(),
                )
            })
            .collect();
        (m.len() == 2).then_some(m)
    })
    .await
    .unwrap_or_else(|| panic!("group snapshot {name}: two member VolumeSnapshots never appeared"));
    (handle, members)
}

/// The LogicalVolumes of group `handle`.
async fn members_on_node(a: &Apis, handle: &str) -> usize {
    a.lvs
        .list(&ListParams::default())
        .await
        .expect("LogicalVolumes")
        .items
        .iter()
        .filter(|lv| {
            lv.metadata
                .annotations
                .as_ref()
                .and_then(|x| x.get("lvms.topolvm.io/group-snapshot"))
                .map(String::as_str)
                == Some(handle)
        })
        .count()
}

/// Restore claims `r<tag>-data` and `r<tag>-wal` from a group's members.
async fn restore(h: &HostCtx<'_>, a: &Apis, tag: &str, members: &[(String, String)]) {
    for (claim_name, snap) in members {
        let (class, size) = match claim_name.as_str() {
            "data" => (format!("lvms-{}", h.vg), crate::csi::SIZE),
            _ => (format!("ext4-{}", h.vg), WAL_SIZE),
        };
        let source =
            json!({"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": snap});
        let c = claim(
            &format!("r{tag}-{claim_name}"),
            &class,
            size,
            &h.node,
            Some(source),
        );
        a.pvcs
            .create(&PostParams::default(), &c)
            .await
            .expect("restore claim");
    }
}

async fn delete_restores(a: &Apis, tag: &str) {
    for v in ["data", "wal"] {
        a.pvcs
            .delete(&format!("r{tag}-{v}"), &DeleteParams::default())
            .await
            .expect("delete restore");
    }
}

fn host(h: HostCtx<'_>) -> futures::future::BoxFuture<'_, ()> {
    Box::pin(async move {
        let client = h.s.client.clone();
        let ns = h.s.ns.name.clone();
        snapshots::install_api(&client).await;
        let pp = PatchParams::apply("lvms-test").force();
        let classes = snapshots::group_api(
            &client,
            "volumegroupsnapshotclasses",
            "VolumeGroupSnapshotClass",
            None,
        );
        let (delete_class, retain_class) = (format!("group-{}", h.vg), format!("keep-{}", h.vg));
        for (name, policy) in [(&delete_class, "Delete"), (&retain_class, "Retain")] {
            classes
                .patch(name, &pp, &Patch::Apply(&group_class(name, policy)))
                .await
                .expect("VolumeGroupSnapshotClass");
        }
        // Member VolumeSnapshots need a VolumeSnapshotClass of the driver to be restored.
        snapshots::apply_class(&client, &format!("snap-{}", h.vg)).await;
        let ext4 = format!("ext4-{}", h.vg);
        let scs: Api<StorageClass> = Api::all(client.clone());
        scs.create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                "metadata": {"name": ext4},
                "provisioner": "topolvm.io",
                "parameters": {"topolvm.io/device-class": h.vg, "csi.storage.k8s.io/fstype": "ext4"},
                "volumeBindingMode": "WaitForFirstConsumer",
            }))
            .expect("StorageClass"),
        )
        .await
        .expect("the ext4 StorageClass");
        let kubeconfig = &lvms_testkit::env::env().cp.kubeconfig;
        let peers = snapshots::controllers(&h.socket, kubeconfig, &h.s.dir, "240s");
        let a = Apis {
            groups: snapshots::group_api(
                &client,
                "volumegroupsnapshots",
                "VolumeGroupSnapshot",
                Some(&ns),
            ),
            contents: snapshots::group_api(
                &client,
                "volumegroupsnapshotcontents",
                "VolumeGroupSnapshotContent",
                None,
            ),
            snaps: snapshots::api(&client, "volumesnapshots", "VolumeSnapshot", Some(&ns)),
            snap_contents: snapshots::api(
                &client,
                "volumesnapshotcontents",
                "VolumeSnapshotContent",
                None,
            ),
            pvcs: Api::namespaced(client.clone(), &ns),
            lvs: Api::all(client.clone()),
        };
        for (name, class, size) in [
            ("data", format!("lvms-{}", h.vg), crate::csi::SIZE),
            ("wal", ext4.clone(), WAL_SIZE),
        ] {
            let mut c = claim(name, &class, size, &h.node, None);
            c.metadata.labels = Some([("app".to_string(), "db".to_string())].into());
            a.pvcs.create(&PostParams::default(), &c).await.expect(name);
        }
        bound_handle(&h, "data", &peers).await;
        h.guest.mark("writing").await;

        let mut handles = Vec::new();
        for last in (BATCH..=rounds()).step_by(BATCH) {
            // A batch's groups are asked for at once (the writer runs on); the node takes them
            // one after another, each at its own instant.
            let batch: Vec<usize> = (last + 1 - BATCH..=last).collect();
            let taken = futures::future::join_all(
                batch
                    .iter()
                    .map(|i| take(&a, format!("g{i}"), &delete_class, &peers)),
            )
            .await;
            let members = &taken[taken.len() - 1].1;
            restore(&h, &a, &last.to_string(), members).await;
            handles.extend(taken.into_iter().map(|(handle, _)| handle));
            h.guest.mark(&format!("checked-{last}")).await;
            delete_restores(&a, &last.to_string()).await;
            for i in &batch {
                a.groups
                    .delete(&format!("g{i}"), &DeleteParams::default())
                    .await
                    .expect("delete group snapshot");
            }
        }
        // Deletion policy Delete: the members' snapshots, contents and volumes go with it.
        for handle in &handles {
            let gone = eventually(SLOW, || async {
                (members_on_node(&a, handle).await == 0).then_some(())
            })
            .await;
            assert!(
                gone.is_some(),
                "group {handle}: members stayed after a Delete-policy group was deleted"
            );
        }
        // One GroupSnapshotTaken Event per group, on its VolumeGroupSnapshot.
        let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), &ns);
        let taken_events = eventually(SLOW, || async {
            let list = events.list(&ListParams::default()).await.ok()?;
            let mut per: std::collections::BTreeMap<String, i32> = Default::default();
            for e in list.items.iter().filter(|e| {
                e.reason.as_deref() == Some("GroupSnapshotTaken")
                    && e.involved_object.kind.as_deref() == Some("VolumeGroupSnapshot")
            }) {
                *per.entry(e.involved_object.name.clone().unwrap_or_default())
                    .or_default() += e.count.unwrap_or(1);
            }
            (per.len() == rounds()).then_some(per)
        })
        .await;
        let per = taken_events.expect("a GroupSnapshotTaken Event for every group");
        assert!(
            per.values().all(|c| *c == 1),
            "each group's Event published once: {per:?}"
        );
        // snapshot-controller removes the member VolumeSnapshots after their contents.
        let snaps_gone = eventually(SLOW, || async {
            let left = a.snaps.list(&ListParams::default()).await.ok()?.items.len();
            (left == 0).then_some(())
        })
        .await;
        assert!(
            snaps_gone.is_some(),
            "member VolumeSnapshots stayed after their groups were deleted"
        );

        for (k, _) in crashes() {
            h.guest.mark(&format!("armed-{k}")).await;
            let (_, members) = take(&a, format!("c{k}"), &delete_class, &peers).await;
            restore(&h, &a, &format!("c{k}"), &members).await;
            h.guest.mark(&format!("crashed-{k}")).await;
            delete_restores(&a, &format!("c{k}")).await;
            a.groups
                .delete(&format!("c{k}"), &DeleteParams::default())
                .await
                .expect("delete group snapshot");
        }

        if hang().is_some() {
            h.guest.mark("armed-hang").await;
            let (_, members) = take(&a, "chang".to_string(), &delete_class, &peers).await;
            restore(&h, &a, "chang", &members).await;
            h.guest.mark("hung-hang").await;
            delete_restores(&a, "chang").await;
            a.groups
                .delete("chang", &DeleteParams::default())
                .await
                .expect("delete group snapshot");
        }

        // Deletion policy Retain: the group's volumes outlive the VolumeGroupSnapshot.
        let (kept, _) = take(&a, "keep".to_string(), &retain_class, &peers).await;
        a.groups
            .delete("keep", &DeleteParams::default())
            .await
            .expect("delete the kept group");
        let deleted = eventually(SLOW, || async {
            let g = a.groups.get_opt("keep").await.ok()?;
            g.is_none().then_some(())
        })
        .await;
        assert!(
            deleted.is_some(),
            "the Retain group snapshot was never deleted"
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(
            members_on_node(&a, &kept).await,
            2,
            "Retain keeps the members' volumes"
        );
        // A user releasing retained contents: policy Delete, then delete them.
        let to_delete = json!({"spec": {"deletionPolicy": "Delete"}});
        for api in [&a.contents, &a.snap_contents] {
            for c in api
                .list(&ListParams::default())
                .await
                .expect("contents")
                .items
            {
                let name = c.metadata.name.clone().unwrap_or_default();
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&to_delete))
                    .await
                    .expect("policy Delete");
                api.delete(&name, &DeleteParams::default())
                    .await
                    .expect("delete content");
            }
        }
        let released = eventually(SLOW, || async {
            (members_on_node(&a, &kept).await == 0).then_some(())
        })
        .await;
        assert!(
            released.is_some(),
            "the retained members were never removed after their contents were deleted with policy Delete"
        );
        h.guest.mark("checked").await;
        record_operator_writes(&h.s.journal_dir.join("operator"));
        for name in ["data", "wal"] {
            a.pvcs
                .delete(name, &DeleteParams::default())
                .await
                .expect(name);
        }
        let pvs: Api<PersistentVolume> = Api::all(client.clone());
        let gone = eventually(SLOW, || async {
            pvs.list(&ListParams::default())
                .await
                .ok()?
                .items
                .is_empty()
                .then_some(())
        })
        .await;
        assert!(gone.is_some(), "PVs stayed after their claims were deleted");
        drop(peers);
        for name in [&delete_class, &retain_class] {
            let _ = classes.delete(name, &DeleteParams::default()).await;
        }
        snapshots::remove_api(&client).await;
        scs.delete(&ext4, &DeleteParams::default())
            .await
            .expect("delete the ext4 class");
    })
}

/// The operator's LogicalVolume writes by trace id (its journal, read while it runs), for the
/// check that each group snapshot is one trace from the RPC to the node's steps.
static OPERATOR_WRITES: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

fn record_operator_writes(dir: &std::path::Path) {
    let j = Journal::open_copy(dir).expect("the operator's journal");
    let writes: Vec<(String, String)> = j
        .iter()
        .filter_map(Result::ok)
        .filter_map(|r| match r.body {
            Body::Intent(i) if i.object.kind == "LogicalVolume" => {
                Some((r.trace.trace_id.to_string(), i.object.name))
            }
            _ => None,
        })
        .collect();
    *OPERATOR_WRITES.lock().unwrap() = writes;
}

/// Each group snapshot the node took is one trace: its hold, its members' `lvcreate -s` and its
/// release carry one trace id, the id of the CreateVolumeGroupSnapshot call that wrote its member
/// LogicalVolumes (the operator's journal), and no two groups share one. Returns how many groups.
fn one_trace_per_group(node_journal: &Journal) -> usize {
    const NONE: &str = "00000000000000000000000000000000";
    let mut by_group: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    let records: Vec<(String, lvms_journal::Intent)> = node_journal
        .iter()
        .filter_map(Result::ok)
        .filter_map(|r| match r.body {
            Body::Intent(i) if i.unit == "volumes" => Some((r.trace.trace_id.to_string(), i)),
            _ => None,
        })
        .collect();
    for (_, i) in &records {
        if i.action == "hold-gates" && i.object.kind == "VolumeGroupSnapshot" {
            by_group.entry(i.object.name.clone()).or_default();
        }
    }
    for (trace, i) in &records {
        let group = match (i.action.as_str(), i.object.kind.as_str()) {
            ("hold-gates" | "release-gates", "VolumeGroupSnapshot") => Some(i.object.name.clone()),
            ("lvcreate-snapshot", "LogicalVolume") => by_group
                .keys()
                .find(|g| i.object.name.starts_with(&format!("{g}-")))
                .cloned(),
            _ => None,
        };
        if let Some(g) = group {
            by_group.entry(g).or_default().insert(trace.clone());
        }
    }
    let writes = OPERATOR_WRITES.lock().unwrap().clone();
    assert!(
        !writes.is_empty(),
        "the operator's journal has no LogicalVolume writes"
    );
    let mut seen = std::collections::BTreeSet::new();
    for (group, traces) in &by_group {
        assert_eq!(
            traces.len(),
            1,
            "group {group}: hold, snapshots and release in one trace, got {traces:?}"
        );
        let trace = traces.first().unwrap();
        assert_ne!(trace, NONE, "group {group}: its steps carry no trace");
        assert!(
            writes
                .iter()
                .any(|(t, name)| t == trace && name.starts_with(&format!("{group}-"))),
            "group {group}: trace {trace} is not the trace of the call that wrote its members"
        );
        assert!(seen.insert(trace.clone()), "two groups share trace {trace}");
    }
    by_group.len()
}

/// Twenty group snapshots of two volumes under a writer, each restored and consistent; the
/// Delete and Retain policies; SIGKILL at each step of the group operation.
pub async fn group_snapshots_are_consistent_follow_their_policy_and_survive_kills(ctx: Ctx) {
    let vg = format!("g{}", std::process::id());
    let kills: Vec<String> = crashes()
        .iter()
        .map(|(k, at)| format!("{k}={at}"))
        .collect();
    let env = vec![
        ("ROUNDS", rounds().to_string()),
        ("BATCH", BATCH.to_string()),
        ("CRASHES", kills.join(" ")),
        ("HANG", hang().map(|s| s.to_string()).unwrap_or_default()),
    ];
    let r = run_thin_csi(ctx, "group-snapshot", &vg, ("grp0", 1024), GUEST, env, host).await;
    let out = &r.out;
    let published = out.read("gates-published.txt");
    assert_eq!(
        published.lines().count(),
        2,
        "each published filesystem has its gate: {published}"
    );
    let mounts = out.read("mounts-published.txt");
    assert!(
        mounts.contains("/dev/mapper/lvms-"),
        "mounted through the gates: {mounts}"
    );
    let lines = out.read("rounds.txt");
    let results: Vec<Result<(i64, i64), String>> = lines.lines().map(consistent).collect();
    let bad: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(bad.is_empty(), "inconsistent pairs: {bad:#?}");
    let of = |prefix: &str| lines.lines().filter(|l| l.starts_with(prefix)).count();
    let skipped = std::fs::read_to_string(out.out.join("direct-skipped.txt"))
        .unwrap_or_default()
        .lines()
        .count();
    assert!(
        skipped <= crashes().len() + hangs(),
        "only a kill's (or the hang's) group may need its log replayed before it is read: {skipped} skipped"
    );
    assert_eq!(
        (of("group:") + skipped, of("restore:")),
        (
            rounds() + crashes().len() + hangs(),
            rounds() / BATCH + crashes().len() + hangs()
        ),
        "every group read on the node, one per batch and each kill's restored into claims: {lines}"
    );
    let writer_failed = out.out.join("writer-failed");
    assert!(
        !writer_failed.exists(),
        "the writer failed: {:?}",
        std::fs::read_to_string(&writer_failed)
    );
    for (k, _) in crashes() {
        assert_eq!(
            out.read(&format!("status-{k}")).trim(),
            "137",
            "vg-manager SIGKILLed at {k}"
        );
        let held = out.read(&format!("held-{k}.txt"));
        assert_eq!(
            held.matches("Suspended").count(),
            2,
            "the kill at {k} came during the hold: {held}"
        );
        assert_eq!(out.read(&format!("writable-{k}")).trim(), "ok");
    }
    if let Some(deadline) = hang() {
        let held = out.read("held-hang.txt");
        assert_eq!(
            held.matches("Suspended").count(),
            2,
            "the lvcreate that never returns hung under the hold: {held}"
        );
        let thawed: u64 = out
            .read("thawed-after-hang")
            .trim()
            .parse()
            .expect("seconds from the hang to the thaw");
        assert!(
            thawed + 3 >= deadline && thawed <= deadline + 60,
            "the gates thawed {thawed} s after lvcreate hung, not at the {deadline} s deadline"
        );
        assert_eq!(out.read("writable-hang").trim(), "ok");
        let timed_out = out.read("timed-out.log");
        assert!(
            timed_out.contains("lvcreate") && timed_out.contains("--host-command-timeout"),
            "vg-manager says which command it killed at the deadline: {timed_out:?}"
        );
        println!(
            "group-snapshot: a member's lvcreate hung under the hold; killed at the {deadline} s deadline, gates thawed {thawed} s after it hung, the group retried whole"
        );
    }
    assert_eq!(
        out.read("gates-after.txt").trim(),
        "",
        "unpublish removes the gates"
    );
    let taken = out.read("taken.log");
    let held_ms: Vec<u64> = taken
        .lines()
        .filter_map(|l| {
            let after = l.split("held_ms").nth(1)?;
            let digits: String = after
                .trim_start_matches(|c: char| !c.is_ascii_digit())
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        })
        .collect();
    let records = out.read("records");
    let mut sorted = held_ms.clone();
    sorted.sort_unstable();
    println!(
        "group-snapshot: {} pairs consistent ({} groups taken: {} under the writer + {} after kills + {} after a hung lvcreate; {} read on the node, {skipped} read only through their restores; {} restored pairs), {} records written, hold (ms) min {} median {} max {}",
        results.len(),
        rounds() + crashes().len() + hangs(),
        rounds(),
        crashes().len(),
        hangs(),
        of("group:"),
        of("restore:"),
        records.trim(),
        sorted.first().copied().unwrap_or(0),
        sorted.get(sorted.len() / 2).copied().unwrap_or(0),
        sorted.last().copied().unwrap_or(0),
    );
    // The journal: every hold released, the kills' holds thawed at restart, nothing open.
    let (j, intents) = crate::node::journal_intents(&out.out, "volumes");
    let count = |action: &str, kind: &str| {
        intents
            .iter()
            .filter(|i| i.action == action && i.object.kind == kind)
            .count()
    };
    assert!(
        count("hold-gates", "VolumeGroupSnapshot") >= rounds() + crashes().len() + 2 * hangs(),
        "a hold per group taken: {}",
        count("hold-gates", "VolumeGroupSnapshot")
    );
    assert_eq!(
        count("release-gates", "Node"),
        crashes().len(),
        "each killed hold thawed once at the next start"
    );
    assert!(j.open_intents().expect("open intents").is_empty());
    let traced = one_trace_per_group(&j);
    assert!(
        traced >= rounds() + crashes().len() + hangs(),
        "every group taken is traced: {traced}"
    );
    println!(
        "group-snapshot: {traced} groups, each one trace from the RPC to the node's hold, snapshots and release"
    );
    // A group's story in the journal, as a user asks for it.
    let group = intents
        .iter()
        .find(|i| i.action == "hold-gates")
        .map(|i| i.object.name.clone())
        .expect("a hold");
    let shown = std::process::Command::new(env!("CARGO_BIN_EXE_lvms"))
        .args(["journal", "inspect", "-o", "jsonl", "--object"])
        .arg(format!("VolumeGroupSnapshot/{group}"))
        .arg(out.out.join("journal/vg-manager"))
        .output()
        .expect("lvms journal inspect");
    let shown = String::from_utf8_lossy(&shown.stdout);
    for action in ["hold-gates", "release-gates"] {
        assert!(
            shown.contains(action),
            "`lvms journal inspect --object VolumeGroupSnapshot/{group}` shows {action}: {shown}"
        );
    }
}
