//! One node in the guest: the operator on the host, `lvms vg-manager` in the guest (activation
//! on), one LVMCluster created, waited Ready, deleted and waited gone; the guest records what
//! lvm2 and device-mapper show at Ready and after the teardown. Scenarios share the group's
//! guest, each with its own node, namespace, VG, disks and vg-manager.

use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use lvms::api::{LVMStateType, VGStatus};
use lvms_journal::{Body, Journal};
use serde_json::Value;

use lvms_testkit::fixtures::lvm_cluster;
use lvms_testkit::guest::{Job, Outcome};
use lvms_testkit::kubelet::{create_node, register_csi_node};
use lvms_testkit::{Scenario, eventually};

use crate::group::Ctx;
use crate::script::Script;

/// Software emulation is slow: each lvm2 command takes ~0.5–1 s in the guest, and the group's
/// scenarios share one vCPU.
pub const T: Duration = Duration::from_secs(300);

/// What one guest node scenario does.
pub struct NodeRun<'a> {
    pub name: &'a str,
    /// The VG (device class) name.
    pub vg: String,
    /// The class's thin pool, when it is a thin class: the guest waits for it instead of the VG.
    pub pool: Option<&'a str>,
    /// The device classes of the LVMCluster (a JSON array).
    pub classes: Value,
    /// Shell run in the guest before vg-manager starts (e.g. a device-mapper child to wipe): a
    /// script file's text, node.sh's `prepare`.
    pub prepare: &'a str,
    /// `LVMS_CRASH_AT` for a first vg-manager life that must end in SIGKILL; a second life
    /// without it then converges.
    pub crash_at: Option<String>,
    /// A seeded random-kill soak: SIGKILL of vg-manager at random moments, each life restarted,
    /// once its LVMVolumeGroup has arrived and again during the teardown.
    pub kills: Option<Kills>,
    /// Scratch disks (serial, unique in the group; MiB).
    pub disks: Vec<(&'a str, u64)>,
    /// Day 2, once Ready: the device classes the host edits the LVMCluster to, and how many
    /// devices the class then reports Ready with.
    pub edit: Option<(Value, usize)>,
    /// Shell the guest runs once the class is Ready and recorded (e.g. wait for the edit's
    /// effect and record it), before it marks `teardown` and waits for it: script files' text,
    /// node.sh's `after_ready`.
    pub after_ready: &'a str,
    /// Variables the scenario's `prepare` and `after_ready` read, exported before node.sh.
    pub env: Vec<(&'static str, String)>,
    /// Host side after Ready: wake the node every few seconds (a Node label change wakes
    /// every volume-group actor) until its entry satisfies this, e.g. a RAID turning Degraded.
    pub until: Option<fn(&VGStatus) -> bool>,
    /// An Event reason the scenario's namespace must show before the teardown.
    pub event: Option<&'a str>,
    /// Delete the LVMCluster and check that pool, VG and lvmd.yaml are gone. Off for a class
    /// that cannot be torn down (a RAID VG with a member gone).
    pub teardown: bool,
    /// Host side once Ready (before the teardown mark): e.g. CSI calls on the operator's
    /// socket, in step with the guest's marks.
    pub host: Option<HostHook>,
}

/// What a host hook gets: the operator's CSI socket, the node, the guest job (for its marks).
pub struct HostCtx<'a> {
    pub socket: std::path::PathBuf,
    pub node: String,
    /// The scenario's VG (its device class).
    pub vg: String,
    pub guest: &'a lvms_testkit::guest::JobHandle,
    /// The scenario (its client, namespace and log directory).
    pub s: &'a Scenario,
}

pub type HostHook = for<'a> fn(HostCtx<'a>) -> futures::future::BoxFuture<'a, ()>;

impl<'a> NodeRun<'a> {
    /// A scenario that creates `classes` on `disks`, waits Ready and tears down; the fields
    /// left at their defaults (no pool, preparation, crash, edit, day-2 shell or variables) are
    /// set with struct update syntax.
    pub fn new(name: &'a str, vg: &str, classes: Value, disks: Vec<(&'a str, u64)>) -> Self {
        Self {
            name,
            vg: vg.to_string(),
            pool: None,
            classes,
            prepare: "",
            crash_at: None,
            kills: None,
            disks,
            edit: None,
            after_ready: "",
            env: Vec::new(),
            until: None,
            event: None,
            teardown: true,
            host: None,
        }
    }
}

/// How many random SIGKILLs, from which seed.
#[derive(Clone, Copy, Debug)]
pub struct Kills {
    pub seed: u64,
    /// Kills from the first pass on the class until it is Ready.
    pub creating: u32,
    /// Kills after the host deletes the LVMCluster.
    pub deleting: u32,
}

/// The finished scenario: the guest's outcome (status already checked), the Ready entry, the
/// entry `until` waited for, and the scenario's node.
pub struct NodeResult {
    pub out: Outcome,
    pub ready: VGStatus,
    pub until: Option<VGStatus>,
    pub node: String,
    /// The Event `event` waited for.
    pub event: Option<Event>,
}

/// A scratch disk's stable path in the guest.
pub fn by_id(serial: &str) -> String {
    format!("/dev/disk/by-id/virtio-{serial}")
}

/// Each vg-manager in a guest serves its probes and its metrics on ports of its own
/// (probes 9100 up, metrics 1000 above).
fn diagnostics_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(9100);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// What the guest's scraper sends (a ServiceAccount of `default` bound to
/// `lvms-metrics-reader`): made once, before any job is submitted, as a scenario's namespace
/// exists only from its host side's turn on.
async fn metrics_token() -> String {
    static TOKEN: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    TOKEN
        .get_or_init(|| async {
            lvms_testkit::metrics::token(
                &lvms_testkit::env::client().await,
                "default",
                "guest-metrics-scraper",
                Some(lvms_testkit::metrics::READER_ROLE),
            )
            .await
        })
        .await
        .clone()
}

/// The guest's half: `scripts/node.sh` (what it expects is named at its top).
const NODE: &str = include_str!("scripts/node.sh");

/// The guest script: node.sh after the scenario's variables and its `prepare` and
/// `after_ready`.
fn script(r: &NodeRun<'_>, ns: &str, node: &str, diag: u16, token: &str) -> String {
    // The soak's seeds: one per phase, each replaying its delays.
    let (creating, deleting) = match r.kills {
        Some(k) => (
            (k.creating.to_string(), (k.seed * 2 + 1).to_string()),
            (k.deleting.to_string(), (k.seed * 2 + 2).to_string()),
        ),
        None => Default::default(),
    };
    let mut s = Script::new()
        .var("NODE", node)
        .var("NS", ns)
        .var("VG", &r.vg)
        .var("POOL", r.pool.unwrap_or_default())
        .var("DIAG_PORT", diag)
        .var("METRICS_PORT", diag + 1000)
        .var("METRICS_TOKEN", token)
        .var("CRASH_AT", r.crash_at.as_deref().unwrap_or_default())
        .var("KILLS_CREATING", creating.0)
        .var("KILL_SEED_CREATING", creating.1)
        .var("KILLS_DELETING", deleting.0)
        .var("KILL_SEED_DELETING", deleting.1)
        .var("TEARDOWN", u8::from(r.teardown));
    for (name, value) in &r.env {
        s = s.var(name, value);
    }
    s.func("prepare", r.prepare)
        .func("after_ready", r.after_ready)
        .then(NODE)
}

/// Runs the scenario in the group's guest and fails the test, with the job's console lines,
/// when the guest script did not get through Ready (and teardown).
pub async fn run_node(ctx: Ctx, r: NodeRun<'_>) -> NodeResult {
    // Named before the scenario's turn: the guest job starts with the group's boot.
    let node = format!("guest-{}", r.name);
    let ns = format!("{node}-{}", std::process::id());
    let token = metrics_token().await;
    let mut job = Job::new(r.name, &script(&r, &ns, &node, diagnostics_port(), &token));
    for (serial, mib) in &r.disks {
        job = job.disk(serial, *mib);
    }
    let relay = ctx.relay.clone();
    let guest = ctx.member.submit(job);

    let s = Scenario::named(&ns).await;
    create_node(&s.client, &node, false).await;
    // As kubelet registers vg-manager's node plugin: with TopoLVM's topology key.
    lvms_testkit::kubelet::register_with_topology(&s.client, &node).await;
    let _op = s.operator(&[], &[]);
    // Host sides take turns: while this one runs, the guest's relay reaches its controller.
    relay.point_at(&_op.csi_socket);
    s.create_cluster(lvm_cluster("my-lvmcluster", r.classes.clone()))
        .await;
    // A job that ends before Ready fails the test now, not after the timeout. Its own lines are
    // in the streamed console (prefixed `[job]`).
    let ready = tokio::select! {
        biased;
        ready = s.ready_vg_entry(&node, &r.vg, T, |_| true) => ready,
        status = guest.exited() => panic!(
            "the guest job {} ended (status {status}) before {node}/{} was Ready:\n{}",
            r.name, r.vg, guest.outcome().await.tail(40)
        ),
    };
    s.wait_state("my-lvmcluster", LVMStateType::Ready, T).await;
    if let Some((classes, devices)) = &r.edit {
        let patch = serde_json::json!({"spec": {"storage": {"deviceClasses": classes}}});
        s.patch_cluster("my-lvmcluster", &patch).await;
        s.ready_vg_entry(&node, &r.vg, T, |e| e.devices.len() == *devices)
            .await;
    }
    let until = match r.until {
        Some(pred) => Some(nudge_until(&s, &node, &r.vg, pred).await),
        None => None,
    };
    if let Some(hook) = r.host {
        hook(HostCtx {
            socket: _op.csi_socket.clone(),
            node: node.clone(),
            vg: r.vg.clone(),
            guest: &guest,
            s: &s,
        })
        .await;
    }
    // Biased: a job without teardown marks and exits at once; the mark comes first.
    tokio::select! {
        biased;
        () = guest.mark("teardown") => {}
        status = guest.exited() => panic!(
            "the guest job {} ended (status {status}) before its teardown:\n{}",
            r.name, guest.outcome().await.tail(40)
        ),
    }
    let event = match r.event {
        Some(reason) => Some(
            eventually(T, || async {
                s.events()
                    .await
                    .into_iter()
                    .find(|e| e.reason.as_deref() == Some(reason))
            })
            .await
            .unwrap_or_else(|| panic!("no {reason} Event in {}", s.ns.name)),
        ),
        None => None,
    };

    if r.teardown {
        s.clusters()
            .delete("my-lvmcluster", &DeleteParams::default())
            .await
            .expect("delete");
        register_csi_node(&s.client, &node, false).await;
        eventually(T, || async {
            s.cluster("my-lvmcluster").await.is_none().then_some(())
        })
        .await
        .expect("LVMCluster deleted after vg-manager cleaned up in the guest");
    }

    let out = guest.outcome().await;
    assert_eq!(
        out.status,
        0,
        "guest scenario failed; its console:\n{}",
        out.tail(40)
    );
    if r.teardown {
        let dm = out.read("dmsetup-after.txt");
        assert!(
            !dm.contains(&r.vg),
            "device-mapper devices of {} left after deletion:\n{dm}",
            r.vg
        );
        assert!(
            !out.out.join("lvmd-kept").exists(),
            "lvmd.yaml kept after its last class was removed"
        );
    }
    println!(
        "guest scenario {} ended {:.1} s after boot (kernel {})",
        r.name,
        out.elapsed.as_secs_f64(),
        ctx.image.release()
    );
    NodeResult {
        out,
        ready,
        until,
        node,
        event,
    }
}

/// Patches a label on `node` every 3 s (each change wakes every volume-group actor of its
/// vg-manager, as any Node update does) until its `vg` entry satisfies `pred`.
async fn nudge_until(s: &Scenario, node: &str, vg: &str, pred: fn(&VGStatus) -> bool) -> VGStatus {
    let nodes: Api<Node> = Api::all(s.client.clone());
    let started = std::time::Instant::now();
    let mut n = 0u32;
    loop {
        n += 1;
        if let Some(e) = s.vg_entry(node, vg).await.filter(pred) {
            return e;
        }
        assert!(
            started.elapsed() < T,
            "{node}/{vg} never reached the expected state; last: {:#?}",
            s.vg_entry(node, vg).await
        );
        let patch = serde_json::json!({"metadata": {"labels": {"lvms.test/nudge": n.to_string()}}});
        nodes
            .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("nudge the node");
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
}

/// The row of `lvs --reportformat json` for `lv`.
pub fn lv(report: &Value, lv: &str) -> Value {
    report["report"][0]["lv"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["lv_name"] == lv))
        .cloned()
        .unwrap_or_else(|| panic!("no {lv} in {report}"))
}

pub fn bytes(row: &Value, field: &str) -> u64 {
    row[field]
        .as_str()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} is not a byte count in {row}"))
}

/// After a crash scenario: the first vg-manager life ended in SIGKILL, the guest's journal
/// holds exactly one intent of `action`, nothing is left open, and this is how replay closed
/// that intent (its recorded replay verdict, if any).
pub fn one_step_after_the_crash(out: &Outcome, action: &str) -> Option<String> {
    assert_eq!(
        out.read("first-life-status").trim(),
        "137",
        "the first vg-manager life ends in SIGKILL at the crash point"
    );
    let j = Journal::open_copy(out.out.join("journal/vg-manager")).expect("the guest's journal");
    let recs: Vec<_> = j.iter().filter_map(Result::ok).collect();
    let steps: Vec<_> = recs
        .iter()
        .filter(|r| matches!(&r.body, Body::Intent(i) if i.action == action))
        .collect();
    assert_eq!(steps.len(), 1, "{action} journaled once: {steps:#?}");
    assert!(j.open_intents().expect("open intents").is_empty());
    recs.iter().find_map(|o| match &o.body {
        Body::Outcome(done) if done.intent_seq == steps[0].seq => done
            .result
            .done()
            .and_then(|d| d.replay)
            .map(|v| v.as_str().to_string()),
        _ => None,
    })
}

/// The guest vg-manager's journal (copied out at the scenario's end) and the intents of `unit`.
pub fn journal_intents(out: &std::path::Path, unit: &str) -> (Journal, Vec<lvms_journal::Intent>) {
    let j = Journal::open_copy(out.join("journal/vg-manager")).expect("the guest's journal");
    let intents = j
        .iter()
        .filter_map(Result::ok)
        .filter_map(|r| match r.body {
            Body::Intent(i) if i.unit == unit => Some(i),
            _ => None,
        })
        .collect();
    (j, intents)
}
