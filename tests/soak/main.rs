//! Seeded random-kill soak: `lvms operator` + two `lvms vg-manager`s (node-a, node-b, one
//! loop-device disk each, real lvm2 with activation off) on a real kube-apiserver. Each cycle
//! creates an LVMCluster with one thick class per node, waits for Ready, edits the classes'
//! StorageClass labels, deletes the cluster and waits until it is gone, while a seeded RNG
//! SIGKILLs the three processes at random moments (sometimes two in quick succession,
//! sometimes the same one again during its replay) and arms `LVMS_CRASH_AT` fault points to
//! hit narrow windows. After each cycle, at rest, it collects violations (never stopping at
//! the first): convergence, leftovers on the host and in the API, journal integrity and open
//! intents, one vgcreate effect per VG, Events aimed at objects of another cycle, and Event
//! series counts against the journals' Published records.
//!
//! `cargo test --test soak` runs 10 cycles with seed 1; `LVMS_SOAK_SEED=<n>` and
//! `LVMS_SOAK_CYCLES=100` for other seeds and the long run (root, lvm2, loop devices).

#[path = "../acceptance/support.rs"]
#[allow(dead_code)]
mod support;

#[path = "../operator/common.rs"]
#[allow(dead_code)]
mod common;

#[path = "../vgmanager/disks.rs"]
#[allow(dead_code)]
mod disks;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use lvms::api::{LVMCluster, LVMStateType, LVMVolumeGroup, LVMVolumeGroupNodeStatus};
use lvms::dev::operator::{NO_DM_LVM_CONFIG, OperatorProcess};
use lvms_actors::{EventSpec, EventType};
use lvms_journal::{Body, Journal, OutcomeResult, PublishKind, Record};
use serde_json::{Value, json};

use crate::common::{Scenario, create_node, register_csi_node};
use crate::disks::{Disk, require_prerequisites, vg_names};

/// A cycle that has not converged (Ready, edited, gone) within this is a violation.
const CYCLE_TIMEOUT: Duration = Duration::from_secs(90);
/// After a cycle: processes up and ready, then this long for publishers and sled to settle.
const SETTLE: Duration = Duration::from_secs(3);
const NODES: [&str; 2] = ["node-a", "node-b"];
/// kube-apiserver's default --event-ttl is 1 h: older Events may legitimately be gone.
const EVENT_TTL_MARGIN_MS: u64 = 55 * 60 * 1000;

// ---------------------------------------------------------------------------------------------
// Seeded randomness

/// splitmix64: tiny, seedable, no crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn ms(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi.saturating_sub(lo) + 1))
    }

    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize].clone()
    }
}

fn env_u64(name: &str) -> Option<u64> {
    let raw = std::env::var(name).ok()?;
    Some(
        raw.trim()
            .parse()
            .unwrap_or_else(|e| panic!("{name}={raw:?} is not a number: {e}")),
    )
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn clip(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= max {
        return s.to_string();
    }
    let head: String = s.chars().take(max).collect();
    format!("{head}…")
}

// ---------------------------------------------------------------------------------------------
// The plan of one cycle

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Who {
    Operator,
    NodeA,
    NodeB,
}

impl Who {
    const ALL: [Who; 3] = [Who::Operator, Who::NodeA, Who::NodeB];

    fn idx(self) -> usize {
        match self {
            Who::Operator => 0,
            Who::NodeA => 1,
            Who::NodeB => 2,
        }
    }

    fn node(self) -> Option<&'static str> {
        match self {
            Who::Operator => None,
            Who::NodeA => Some("node-a"),
            Who::NodeB => Some("node-b"),
        }
    }
}

impl fmt::Display for Who {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.node().unwrap_or("operator"))
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Create,
    Edit,
    Delete,
}

#[derive(Clone, Debug)]
enum Follow {
    None,
    /// Another process is killed `after` the first one.
    Other {
        who: Who,
        after: Duration,
        restart_after: Duration,
    },
    /// The same process is killed again `after` its restart (during its replay).
    DuringReplay {
        after: Duration,
        restart_after: Duration,
    },
}

#[derive(Clone, Debug)]
struct RandomKill {
    phase: Phase,
    after: Duration,
    who: Who,
    restart_after: Duration,
    follow: Follow,
}

#[derive(Clone, Debug)]
struct FaultKill {
    phase: Phase,
    who: Who,
    spec: String,
}

#[derive(Clone, Debug)]
struct CyclePlan {
    kills: Vec<RandomKill>,
    fault: Option<FaultKill>,
    edit_value: String,
}

impl CyclePlan {
    fn draw(rng: &mut Rng, vga: &str, vgb: &str) -> CyclePlan {
        let n = match rng.below(10) {
            0..=1 => 0,
            2..=6 => 1,
            _ => 2,
        };
        let mut kills = Vec::new();
        for _ in 0..n {
            let phase = rng.pick(&[Phase::Create, Phase::Edit, Phase::Delete]);
            // Unperturbed, a cycle here takes ~1 s to Ready, ~0.1 s to edit and ~1 s to
            // delete: the windows cover those phases (a kill still due when its phase ends
            // lands in the next one).
            let after = match phase {
                Phase::Create => rng.ms(0, 1500),
                Phase::Edit => rng.ms(0, 400),
                Phase::Delete => rng.ms(0, 1200),
            };
            let who = rng.pick(&Who::ALL);
            let restart_after = rng.ms(0, 1000);
            let follow = match rng.below(100) {
                0..=19 => {
                    let others: Vec<Who> = Who::ALL.into_iter().filter(|w| *w != who).collect();
                    Follow::Other {
                        who: rng.pick(&others),
                        after: rng.ms(0, 300),
                        restart_after: rng.ms(0, 1000),
                    }
                }
                20..=39 => Follow::DuringReplay {
                    after: rng.ms(50, 1500),
                    restart_after: rng.ms(0, 1000),
                },
                _ => Follow::None,
            };
            kills.push(RandomKill {
                phase,
                after,
                who,
                restart_after,
                follow,
            });
        }
        let fault = rng.chance(60).then(|| {
            let who = rng.pick(&Who::ALL);
            let (phase, spec) = match who.node() {
                Some(node) => {
                    let vg = if node == "node-a" { vga } else { vgb };
                    let u = format!("vg/{vg}");
                    rng.pick(&[
                        (Phase::Create, format!("intent-durable:{u}#vgcreate")),
                        (Phase::Create, format!("applied:{u}#vgcreate")),
                        (Phase::Create, format!("step-outcome:{u}#vgcreate")),
                        (Phase::Create, format!("applied:{u}#write-lvmd-config")),
                        (Phase::Create, format!("applied:{u}#add-finalizer")),
                        (Phase::Create, format!("outcome:{u}")),
                        (Phase::Create, "event-written".to_string()),
                        (Phase::Delete, format!("intent-durable:{u}#vgremove")),
                        (Phase::Delete, format!("applied:{u}#vgremove")),
                        (
                            Phase::Delete,
                            format!("intent-durable:{u}#pvremove-teardown"),
                        ),
                        (Phase::Delete, format!("applied:{u}#pvremove-teardown")),
                        (Phase::Delete, format!("step-outcome:{u}#pvremove-teardown")),
                        (Phase::Delete, format!("applied:{u}#write-lvmd-config")),
                        (
                            Phase::Delete,
                            format!("intent-durable:{u}#remove-finalizer"),
                        ),
                        (Phase::Delete, format!("applied:{u}#remove-finalizer")),
                        (Phase::Delete, "event-written".to_string()),
                    ])
                }
                None => rng.pick(&[
                    (
                        Phase::Create,
                        "intent-durable:topolvm-storageclass".to_string(),
                    ),
                    (Phase::Create, "applied:lvmvg-manager".to_string()),
                    (Phase::Create, "applied:lvmvgnodestatus".to_string()),
                    (Phase::Create, "step-outcome:vg-manager".to_string()),
                    (Phase::Create, "outcome:topolvm-csi-driver".to_string()),
                    (Phase::Create, "event-written".to_string()),
                    (
                        Phase::Edit,
                        "intent-durable:topolvm-storageclass".to_string(),
                    ),
                    (Phase::Edit, "applied:topolvm-storageclass".to_string()),
                    (Phase::Edit, "outcome:topolvm-storageclass".to_string()),
                    (Phase::Edit, "event-written".to_string()),
                    (Phase::Delete, "intent-durable:lvmvg-manager".to_string()),
                    (Phase::Delete, "applied:lvmvgnodestatus".to_string()),
                    (Phase::Delete, "applied:lvmcluster".to_string()),
                    (Phase::Delete, "outcome:lvmcluster".to_string()),
                    (Phase::Delete, "applied:topolvm-storageclass".to_string()),
                ]),
            };
            FaultKill { phase, who, spec }
        });
        CyclePlan {
            kills,
            fault,
            edit_value: format!("e{:08x}", rng.next() as u32),
        }
    }

    fn fault_in(&self, phase: Phase) -> Option<&FaultKill> {
        self.fault.as_ref().filter(|f| f.phase == phase)
    }
}

// ---------------------------------------------------------------------------------------------
// The three processes and the killer

#[derive(Default)]
struct Slot {
    proc: Option<OperatorProcess>,
    /// The LVMS_CRASH_AT this process was started with (until it fires or the process dies).
    armed: Option<String>,
    restart_at: Option<Instant>,
    /// Kill again this long after the next restart (then restart after the second value).
    kill_after_restart: Option<(Duration, Duration)>,
}

struct PendingKill {
    at: Instant,
    who: Who,
    restart_after: Duration,
    again_after_restart: Option<(Duration, Duration)>,
}

/// True once `pid` has exited (a zombie waiting to be reaped, or gone).
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    }
}

fn log_tail(p: &OperatorProcess, lines: usize) -> String {
    let text = p.log_text();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

struct Chaos<'a> {
    s: &'a Scenario,
    slots: [Slot; 3],
    pending: Vec<PendingKill>,
    /// Start of the current phase (for the cycle log).
    phase_start: Instant,
    phase: &'static str,
    random_kills: u32,
    fault_kills: u32,
    /// Fault points armed (a point whose step never comes again does not fire).
    faults_armed: u32,
    cycle_random: u32,
    cycle_fault: u32,
    /// What happened this cycle, for its log line.
    notes: Vec<String>,
    /// Exits nobody asked for: reported as violations by the cycle.
    unexpected: Vec<String>,
}

impl<'a> Chaos<'a> {
    fn new(s: &'a Scenario) -> Chaos<'a> {
        let mut c = Chaos {
            s,
            slots: Default::default(),
            pending: Vec::new(),
            phase_start: Instant::now(),
            phase: "setup",
            random_kills: 0,
            fault_kills: 0,
            faults_armed: 0,
            cycle_random: 0,
            cycle_fault: 0,
            notes: Vec::new(),
            unexpected: Vec::new(),
        };
        for who in Who::ALL {
            c.start(who, None);
        }
        c
    }

    fn start(&mut self, who: Who, crash_at: Option<&str>) {
        let env: Vec<(&str, &str)> = crash_at.map(|c| ("LVMS_CRASH_AT", c)).into_iter().collect();
        let p = match who.node() {
            None => self.s.operator(&env, &[]),
            Some(node) => self
                .s
                .vg_manager_as(node, &crate::support::env().cp.kubeconfig, &env),
        };
        let slot = &mut self.slots[who.idx()];
        slot.proc = Some(p);
        slot.armed = crash_at.map(str::to_string);
        slot.restart_at = None;
    }

    fn begin_cycle(&mut self) {
        self.cycle_random = 0;
        self.cycle_fault = 0;
        self.notes.clear();
        self.unexpected.clear();
    }

    fn begin_phase(&mut self, name: &'static str) {
        self.phase = name;
        self.phase_start = Instant::now();
    }

    fn at(&self) -> String {
        format!(
            "{}+{:.1}s",
            self.phase,
            self.phase_start.elapsed().as_secs_f64()
        )
    }

    /// Schedules this phase's random kills, from now.
    fn schedule(&mut self, plan: &CyclePlan, phase: Phase) {
        let now = Instant::now();
        for k in plan.kills.iter().filter(|k| k.phase == phase) {
            let again = match k.follow {
                Follow::DuringReplay {
                    after,
                    restart_after,
                } => Some((after, restart_after)),
                _ => None,
            };
            self.pending.push(PendingKill {
                at: now + k.after,
                who: k.who,
                restart_after: k.restart_after,
                again_after_restart: again,
            });
            if let Follow::Other {
                who,
                after,
                restart_after,
            } = k.follow
            {
                self.pending.push(PendingKill {
                    at: now + k.after + after,
                    who,
                    restart_after,
                    again_after_restart: None,
                });
            }
        }
    }

    /// Reaps processes that died on their own (fault points), runs due kills and restarts.
    fn tick(&mut self) {
        let now = Instant::now();
        for who in Who::ALL {
            let at = self.at();
            let slot = &mut self.slots[who.idx()];
            let Some(p) = slot.proc.as_mut() else {
                continue;
            };
            if !exited(p.pid()) {
                continue;
            }
            let status = p.wait_exit(Duration::from_millis(500));
            let by_sigkill = status
                .as_ref()
                .is_some_and(OperatorProcess::killed_by_sigkill);
            match (by_sigkill, slot.armed.take()) {
                (true, Some(spec)) => {
                    self.fault_kills += 1;
                    self.cycle_fault += 1;
                    self.notes
                        .push(format!("{who} hit fault point {spec} at {at}"));
                }
                (_, armed) => {
                    self.unexpected.push(format!(
                        "{who} exited on its own at {at} ({status:?}, LVMS_CRASH_AT {armed:?}); log tail:\n{}",
                        log_tail(p, 12)
                    ));
                }
            }
            slot.proc = None;
            slot.restart_at = Some(now + Duration::from_millis(200));
        }

        let due: Vec<PendingKill> = {
            let (due, later) = std::mem::take(&mut self.pending)
                .into_iter()
                .partition(|k| k.at <= now);
            self.pending = later;
            due
        };
        for k in due {
            let at = self.at();
            let slot = &mut self.slots[k.who.idx()];
            let Some(mut p) = slot.proc.take() else {
                self.notes.push(format!("{} already down at {at}", k.who));
                continue;
            };
            p.kill();
            drop(p);
            slot.armed = None;
            slot.restart_at = Some(now + k.restart_after);
            slot.kill_after_restart = k.again_after_restart;
            self.random_kills += 1;
            self.cycle_random += 1;
            self.notes.push(format!(
                "SIGKILL {} at {at} (restart in {} ms{})",
                k.who,
                k.restart_after.as_millis(),
                if k.again_after_restart.is_some() {
                    ", again during replay"
                } else {
                    ""
                }
            ));
        }

        for who in Who::ALL {
            let slot = &self.slots[who.idx()];
            if slot.proc.is_some() || slot.restart_at.is_none_or(|t| t > now) {
                continue;
            }
            self.start(who, None);
            if let Some((after, restart_after)) = self.slots[who.idx()].kill_after_restart.take() {
                self.pending.push(PendingKill {
                    at: now + after,
                    who,
                    restart_after,
                    again_after_restart: None,
                });
            }
        }
    }

    /// Polls `f` (running the killer between polls) until it returns Some or `deadline`.
    async fn until<T, F, Fut>(&mut self, deadline: Instant, mut f: F) -> Option<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        loop {
            self.tick();
            if let Some(v) = f().await {
                return Some(v);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn ready(&self, who: Who) -> bool {
        self.slots[who.idx()].proc.as_ref().is_some_and(|p| {
            tokio::task::block_in_place(|| p.diagnostics_get("/readyz"))
                .is_ok_and(|(code, _)| code == 200)
        })
    }

    /// Restart `who` gracefully (SIGTERM) with `LVMS_CRASH_AT=spec` and wait until it is ready.
    async fn arm(&mut self, who: Who, spec: &str) {
        if let Some(mut p) = self.slots[who.idx()].proc.take() {
            tokio::task::block_in_place(|| p.terminate(Duration::from_secs(10)));
        }
        self.slots[who.idx()].kill_after_restart = None;
        self.pending.retain(|k| k.who != who);
        self.start(who, Some(spec));
        self.faults_armed += 1;
        self.notes
            .push(format!("{who} restarted with LVMS_CRASH_AT={spec}"));
        // A fault point may fire before /readyz answers: that is fine, tick restarts it.
        self.until_ready(&[who], Instant::now() + Duration::from_secs(30))
            .await;
    }

    /// Runs the killer until every one of `whos` answers /readyz (false at `deadline`).
    async fn until_ready(&mut self, whos: &[Who], deadline: Instant) -> bool {
        loop {
            self.tick();
            if whos.iter().all(|w| self.ready(*w)) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// No more kills; every process up and ready, then a quiet moment.
    async fn quiesce(&mut self) -> bool {
        self.pending.clear();
        for slot in &mut self.slots {
            slot.kill_after_restart = None;
            if slot.proc.is_none() {
                slot.restart_at = Some(Instant::now());
            }
        }
        for _ in 0..3 {
            let deadline = Instant::now() + Duration::from_secs(45);
            if !self.until_ready(&Who::ALL, deadline).await {
                return false;
            }
            let quiet_until = Instant::now() + SETTLE;
            self.until(quiet_until, || async { None::<()> }).await;
            if Who::ALL.iter().all(|w| self.ready(*w)) {
                return true;
            }
        }
        false
    }
}

// ---------------------------------------------------------------------------------------------
// What the soak saw: cycle boundaries and every object UID

#[derive(Clone, Debug)]
struct SeenObj {
    kind: &'static str,
    name: String,
    first_ms: u64,
}

type SeenMap = Arc<Mutex<BTreeMap<String, SeenObj>>>;

fn record_seen(seen: &SeenMap, kind: &'static str, meta: &ObjectMeta) {
    let (Some(uid), Some(name)) = (meta.uid.clone(), meta.name.clone()) else {
        return;
    };
    if let Ok(mut m) = seen.lock() {
        m.entry(uid).or_insert(SeenObj {
            kind,
            name,
            first_ms: now_ms(),
        });
    }
}

fn watch_uids<K>(api: Api<K>, kind: &'static str, seen: SeenMap) -> tokio::task::JoinHandle<()>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + fmt::Debug
        + Send
        + 'static,
{
    tokio::spawn(async move {
        let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::Apply(o))
                | Ok(watcher::Event::InitApply(o))
                | Ok(watcher::Event::Delete(o)) => record_seen(&seen, kind, o.meta()),
                _ => {}
            }
        }
    })
}

/// Wall-clock boundaries: cycle 0 is the setup, cycle k starts at `starts[k]`.
#[derive(Default)]
struct Timeline {
    starts: Vec<u64>,
    /// When the cycle's LVMCluster was created and when its delete was issued.
    live: Vec<(Option<u64>, Option<u64>)>,
}

impl Timeline {
    fn begin(&mut self) -> usize {
        self.starts.push(now_ms());
        self.live.push((None, None));
        self.starts.len() - 1
    }

    fn cycle_of(&self, ms: u64) -> usize {
        self.starts.partition_point(|s| *s <= ms).saturating_sub(1)
    }

    fn offset(&self, ms: u64) -> String {
        let c = self.cycle_of(ms);
        format!(
            "cycle {c} +{:.1}s",
            ms.saturating_sub(self.starts[c]) as f64 / 1000.0
        )
    }

    /// The cycles whose objects an object first seen at `ms` may be: its own, and for one
    /// created while no cluster was live (e.g. a node status a restarted vg-manager wrote
    /// between cycles, reported on its own) also the next, whose cluster adopts it.
    fn object_cycles(&self, ms: u64) -> std::ops::RangeInclusive<usize> {
        let c = self.cycle_of(ms);
        if self.cluster_live_at(ms) {
            c..=c
        } else {
            c..=c + 1
        }
    }

    /// Was a cluster of the cycle containing `ms` live (created, delete not yet issued)?
    fn cluster_live_at(&self, ms: u64) -> bool {
        match self.live.get(self.cycle_of(ms)) {
            Some((Some(created), teardown)) => *created <= ms && teardown.is_none_or(|t| ms < t),
            _ => false,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Violations

struct Violation {
    cycle: usize,
    kind: &'static str,
    detail: String,
}

#[derive(Default)]
struct Report {
    list: Vec<Violation>,
    seen_keys: BTreeSet<String>,
}

impl Report {
    /// Adds a violation unless one with the same `key` was reported already.
    fn add(&mut self, cycle: usize, kind: &'static str, key: &str, detail: String) {
        if self.seen_keys.insert(format!("{kind}|{key}")) {
            println!("  VIOLATION cycle {cycle} [{kind}] {detail}");
            self.list.push(Violation {
                cycle,
                kind,
                detail,
            });
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Host and journal helpers

fn lvm(cmd: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(cmd)
        .arg("--config")
        .arg(NO_DM_LVM_CONFIG)
        .args(args)
        .env("LVM_SUPPRESS_FD_WARNINGS", "1")
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e} (install lvm2: apt-get install -y lvm2)"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// Every PV label lvm2 sees: (device, VG name or "").
fn pvs() -> Vec<(String, String)> {
    let (ok, out) = lvm("pvs", &["--reportformat", "json", "-o", "pv_name,vg_name"]);
    assert!(ok, "pvs --reportformat json failed: {out}");
    let start = out.find('{').unwrap_or(0);
    let v: Value = serde_json::Deserializer::from_str(&out[start..])
        .into_iter::<Value>()
        .next()
        .and_then(Result::ok)
        .unwrap_or_else(|| panic!("pvs json: {out}"));
    v["report"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["pv"].as_array().cloned().unwrap_or_default())
        .map(|pv| {
            (
                pv["pv_name"].as_str().unwrap_or_default().to_string(),
                pv["vg_name"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn journal_dir(s: &Scenario, who: Who) -> PathBuf {
    match who.node() {
        None => s.journal_dir.join("operator"),
        Some(node) => s.dir.join(node).join("journal").join("vg-manager"),
    }
}

fn read_journal(s: &Scenario, who: Who) -> Result<Vec<Record>, String> {
    let dir = journal_dir(s, who);
    let j = Journal::open_copy(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    j.iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", dir.display()))
}

fn lvms_cli(args: &[&str], dir: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lvms"))
        .args(args)
        .arg(dir)
        .output()
        .unwrap_or_else(|e| panic!("running lvms {args:?}: {e}"))
}

fn lvmd_path(s: &Scenario, node: &str) -> PathBuf {
    s.dir.join(node).join("lvmd.yaml")
}

// ---------------------------------------------------------------------------------------------
// One cycle

fn selector(node: &str) -> Value {
    json!({"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]})
}

struct Cycle {
    k: usize,
    name: String,
    vga: String,
    vgb: String,
}

impl Cycle {
    fn classes(&self, a: &Disk, b: &Disk, labels: &Value) -> Value {
        json!([
            {"name": self.vga, "default": true, "nodeSelector": selector("node-a"),
             "deviceSelector": {"paths": [a.link]},
             "storageClassOptions": {"additionalLabels": labels}},
            {"name": self.vgb, "nodeSelector": selector("node-b"),
             "deviceSelector": {"paths": [b.link]},
             "storageClassOptions": {"additionalLabels": labels}}
        ])
    }

    fn vg_of(&self, node: &str) -> &str {
        if node == "node-a" {
            &self.vga
        } else {
            &self.vgb
        }
    }
}

struct Soak<'a> {
    s: &'a Scenario,
    disks: [&'a Disk; 2],
    chaos: Chaos<'a>,
    seen: SeenMap,
    timeline: Timeline,
    report: Report,
    not_converged_in_a_row: u32,
}

impl Soak<'_> {
    /// Runs cycle `k`; returns false when the soak should stop.
    async fn run_cycle(&mut self, k: usize, plan: &CyclePlan) -> bool {
        let pid = std::process::id();
        let c = Cycle {
            k,
            name: format!("soak-{k}"),
            vga: format!("a{pid}k{k}"),
            vgb: format!("b{pid}k{k}"),
        };
        let cycle_started = Instant::now();
        let tk = self.timeline.begin();
        assert_eq!(tk, k, "cycle numbering");
        self.chaos.begin_cycle();
        self.chaos.begin_phase("arm");
        for n in NODES {
            register_csi_node(&self.s.client, n, true).await;
        }
        if let Some(f) = plan.fault_in(Phase::Create) {
            self.chaos.arm(f.who, &f.spec).await;
        }

        // Create → Ready.
        let mut deadline = Instant::now() + CYCLE_TIMEOUT;
        let labels = json!({"soak-cycle": k.to_string()});
        let body = json!({
            "apiVersion": "lvm.topolvm.io/v1alpha1", "kind": "LVMCluster",
            "metadata": {"name": c.name},
            "spec": {"storage": {"deviceClasses": c.classes(self.disks[0], self.disks[1], &labels)}}
        });
        self.timeline.live[k].0 = Some(now_ms());
        let created = self.s.create_cluster(body).await;
        record_seen(&self.seen, "LVMCluster", &created.metadata);
        self.chaos.begin_phase("create");
        self.chaos.schedule(plan, Phase::Create);
        let ready_in = Instant::now();
        let reached_ready = self
            .until_state(deadline, &c.name, Some(LVMStateType::Ready))
            .await;
        let ready_took = ready_in.elapsed();
        if !reached_ready {
            let last = self
                .s
                .clusters()
                .get_opt(&c.name)
                .await
                .ok()
                .flatten()
                .and_then(|c| c.status);
            self.report.add(
                k,
                "not-converged",
                &format!("{k}/ready"),
                format!(
                    "{} never reached Ready within {}s; last status: {}",
                    c.name,
                    CYCLE_TIMEOUT.as_secs(),
                    clip(&format!("{last:?}"), 900)
                ),
            );
        }

        // Edit: the StorageClasses follow a label change.
        let mut edit_took = Duration::ZERO;
        if reached_ready {
            if let Some(f) = plan.fault_in(Phase::Edit) {
                let t = Instant::now();
                self.chaos.arm(f.who, &f.spec).await;
                deadline += t.elapsed();
            }
            self.chaos.begin_phase("edit");
            self.chaos.schedule(plan, Phase::Edit);
            let t = Instant::now();
            let labels = json!({"soak-cycle": k.to_string(), "soak-edit": plan.edit_value});
            let patch = json!({"spec": {"storage": {
                "deviceClasses": c.classes(self.disks[0], self.disks[1], &labels)}}});
            self.s
                .clusters()
                .patch(&c.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("editing the LVMCluster's StorageClass labels");
            let scs: Api<StorageClass> = Api::all(self.s.client.clone());
            let want = plan.edit_value.clone();
            let names = [format!("lvms-{}", c.vga), format!("lvms-{}", c.vgb)];
            let followed = self
                .chaos
                .until(deadline, || async {
                    for n in &names {
                        let sc = scs.get_opt(n).await.ok().flatten()?;
                        if sc.labels().get("soak-edit") != Some(&want) {
                            return None;
                        }
                    }
                    Some(())
                })
                .await
                .is_some();
            edit_took = t.elapsed();
            if !followed {
                let got: Vec<String> = {
                    let mut v = Vec::new();
                    for n in &names {
                        let sc = scs.get_opt(n).await.ok().flatten();
                        v.push(format!("{n}: {:?}", sc.map(|s| s.labels().clone())));
                    }
                    v
                };
                self.report.add(
                    k,
                    "not-converged",
                    &format!("{k}/edit"),
                    format!(
                        "StorageClasses did not follow the label edit soak-edit={want} within the cycle timeout: {}",
                        got.join("; ")
                    ),
                );
            }
        }

        // Delete → gone.
        if let Some(f) = plan.fault_in(Phase::Delete) {
            let t = Instant::now();
            self.chaos.arm(f.who, &f.spec).await;
            deadline += t.elapsed();
        }
        self.chaos.begin_phase("delete");
        self.timeline.live[k].1 = Some(now_ms());
        let t = Instant::now();
        self.s
            .clusters()
            .delete(&c.name, &DeleteParams::default())
            .await
            .expect("deleting the LVMCluster");
        // kubelet unregisters the driver once the DaemonSet's pods are gone (no kubelet here).
        for n in NODES {
            register_csi_node(&self.s.client, n, false).await;
        }
        self.chaos.schedule(plan, Phase::Delete);
        // Late cycles still get 30 s to tear down before they are cleaned up by force.
        let delete_deadline = deadline.max(Instant::now() + Duration::from_secs(30));
        let gone = self.until_state(delete_deadline, &c.name, None).await;
        let delete_took = t.elapsed();
        let in_time = Instant::now() <= deadline;
        if !gone {
            let left = self.s.clusters().get_opt(&c.name).await.ok().flatten();
            self.report.add(
                k,
                "not-converged",
                &format!("{k}/delete"),
                format!(
                    "{} not gone after delete; finalizers {:?}, status {}",
                    c.name,
                    left.as_ref().map(|c| c.finalizers().to_vec()),
                    clip(&format!("{:?}", left.and_then(|c| c.status)), 600)
                ),
            );
        } else if !in_time && reached_ready {
            self.report.add(
                k,
                "not-converged",
                &format!("{k}/slow"),
                format!(
                    "converged, but after the {}s cycle timeout",
                    CYCLE_TIMEOUT.as_secs()
                ),
            );
        }
        let converged = reached_ready && gone;

        // At rest: every process up and ready, nothing scheduled.
        self.chaos.begin_phase("rest");
        if !self.chaos.quiesce().await {
            let who: Vec<String> = Who::ALL
                .iter()
                .filter(|w| !self.chaos.ready(**w))
                .map(|w| w.to_string())
                .collect();
            self.report.add(
                k,
                "not-converged",
                &format!("{k}/rest"),
                format!("processes not ready at rest: {}", who.join(", ")),
            );
        }
        for u in std::mem::take(&mut self.chaos.unexpected) {
            self.report.add(k, "unexpected-exit", &u, u.clone());
        }

        let leftovers = self.check_at_rest(&c).await;
        println!(
            "cycle {k}: {} in {:.1}s (ready {:.1}s, edit {:.1}s, delete {:.1}s); kills: {} random, {} fault-point; {}",
            if converged {
                "converged"
            } else {
                "NOT converged"
            },
            cycle_started.elapsed().as_secs_f64(),
            ready_took.as_secs_f64(),
            edit_took.as_secs_f64(),
            delete_took.as_secs_f64(),
            self.chaos.cycle_random,
            self.chaos.cycle_fault,
            if self.chaos.notes.is_empty() {
                "no kills".to_string()
            } else {
                self.chaos.notes.join("; ")
            }
        );
        if leftovers || !converged {
            self.force_clean(&c).await;
        }
        if converged {
            self.not_converged_in_a_row = 0;
        } else {
            self.not_converged_in_a_row += 1;
        }
        if self.not_converged_in_a_row >= 2 {
            self.report.add(
                k,
                "not-converged",
                "stopped",
                format!("two cycles in a row did not converge: soak stopped after cycle {k}"),
            );
            return false;
        }
        true
    }

    /// Waits (killing as planned) until the cluster has `state`, or is gone when None.
    async fn until_state(
        &mut self,
        deadline: Instant,
        name: &str,
        state: Option<LVMStateType>,
    ) -> bool {
        let api = self.s.clusters();
        self.chaos
            .until(deadline, || async {
                let c = api.get_opt(name).await.ok()?;
                match (state, c) {
                    (None, None) => Some(()),
                    (Some(want), Some(c)) => {
                        (c.status.and_then(|s| s.state) == Some(want)).then_some(())
                    }
                    _ => None,
                }
            })
            .await
            .is_some()
    }

    /// Checks 2-6 for cycle `c`; returns true when something was left behind.
    async fn check_at_rest(&mut self, c: &Cycle) -> bool {
        let k = c.k;
        let mut left = false;

        // 2. Nothing left on the host.
        let vgs = vg_names();
        for vg in [&c.vga, &c.vgb] {
            if vgs.contains(vg) {
                left = true;
                self.report.add(
                    k,
                    "left-vg",
                    vg,
                    format!("volume group {vg} still in vgs after delete"),
                );
            }
        }
        let labels = pvs();
        for d in self.disks {
            if let Some((_, vg)) = labels.iter().find(|(pv, _)| *pv == d.loop_dev) {
                left = true;
                self.report.add(
                    k,
                    "left-pv-label",
                    &format!("{k}/{}", d.loop_dev),
                    format!(
                        "{} ({}) still carries an LVM label after delete (vg {:?})",
                        d.loop_dev, d.link, vg
                    ),
                );
            }
        }
        for node in NODES {
            if let Ok(text) = std::fs::read_to_string(lvmd_path(self.s, node)) {
                left = true;
                let vg = c.vg_of(node);
                let what = if text.contains(vg) {
                    format!("still has an entry for {vg}")
                } else {
                    "kept after its last class was removed".to_string()
                };
                self.report.add(
                    k,
                    "left-lvmd-config",
                    &format!("{k}/{node}"),
                    format!("{node}'s lvmd.yaml {what}: {}", clip(&text, 300)),
                );
            }
        }

        // 2. No owned objects left; a node status created outside a live cluster.
        let ns = &self.s.ns.name;
        let client = &self.s.client;
        let lp = ListParams::default();
        let mut objects: Vec<(String, String)> = Vec::new();
        for o in Api::<LVMVolumeGroup>::namespaced(client.clone(), ns)
            .list_metadata(&lp)
            .await
            .expect("listing LVMVolumeGroups")
            .items
        {
            objects.push((
                format!("LVMVolumeGroup/{}", o.name_any()),
                o.uid().unwrap_or_default(),
            ));
        }
        let statuses = Api::<LVMVolumeGroupNodeStatus>::namespaced(client.clone(), ns)
            .list_metadata(&lp)
            .await
            .expect("listing LVMVolumeGroupNodeStatuses")
            .items;
        for o in &statuses {
            record_seen(&self.seen, "LVMVolumeGroupNodeStatus", &o.metadata);
        }
        for o in Api::<StorageClass>::all(client.clone())
            .list_metadata(&lp)
            .await
            .expect("listing StorageClasses")
            .items
            .into_iter()
            .filter(|o| o.name_any().starts_with("lvms-"))
        {
            objects.push((
                format!("StorageClass/{}", o.name_any()),
                o.uid().unwrap_or_default(),
            ));
        }
        if let Some(o) = Api::<DaemonSet>::namespaced(client.clone(), ns)
            .get_metadata_opt("vg-manager")
            .await
            .expect("getting the DaemonSet")
        {
            objects.push(("DaemonSet/vg-manager".into(), o.uid().unwrap_or_default()));
        }
        if let Some(o) = Api::<CSIDriver>::all(client.clone())
            .get_metadata_opt("topolvm.io")
            .await
            .expect("getting the CSIDriver")
        {
            objects.push(("CSIDriver/topolvm.io".into(), o.uid().unwrap_or_default()));
        }
        for o in Api::<LVMCluster>::namespaced(client.clone(), ns)
            .list_metadata(&lp)
            .await
            .expect("listing LVMClusters")
            .items
        {
            objects.push((
                format!("LVMCluster/{}", o.name_any()),
                o.uid().unwrap_or_default(),
            ));
        }
        if !objects.is_empty() {
            left = true;
        }
        for (what, uid) in &objects {
            self.report.add(
                k,
                "left-object",
                uid,
                format!("{what} (uid {uid}) still exists after the cluster was deleted"),
            );
        }
        let present: BTreeSet<String> = statuses.iter().filter_map(|o| o.uid()).collect();
        if !present.is_empty() {
            left = true;
        }
        let seen = self.seen.lock().map(|m| m.clone()).unwrap_or_default();
        for (uid, o) in seen
            .iter()
            .filter(|(_, o)| o.kind == "LVMVolumeGroupNodeStatus")
        {
            let outside = !self.timeline.cluster_live_at(o.first_ms);
            let still = present.contains(uid);
            if outside {
                self.report.add(
                    self.timeline.cycle_of(o.first_ms),
                    "node-status-recreated",
                    uid,
                    format!(
                        "LVMVolumeGroupNodeStatus/{} (uid {uid}) created at {} while no live LVMCluster existed (after teardown began, or between cycles){}",
                        o.name,
                        self.timeline.offset(o.first_ms),
                        if still { "; still present at rest" } else { "" }
                    ),
                );
            } else if still {
                self.report.add(
                    k,
                    "left-object",
                    uid,
                    format!(
                        "LVMVolumeGroupNodeStatus/{} (uid {uid}) still exists after the cluster was deleted",
                        o.name
                    ),
                );
            }
        }

        // 3. Journals verify and hold no open intents.
        for who in Who::ALL {
            let dir = journal_dir(self.s, who);
            let out = lvms_cli(&["journal", "verify"], &dir);
            if !out.status.success() {
                self.report.add(
                    k,
                    "journal-verify",
                    &format!("{k}/{who}"),
                    format!(
                        "lvms journal verify {} exited {:?}: {}{}",
                        dir.display(),
                        out.status.code(),
                        clip(&String::from_utf8_lossy(&out.stdout), 400),
                        clip(&String::from_utf8_lossy(&out.stderr), 400)
                    ),
                );
            }
            let out = lvms_cli(&["journal", "inspect", "--open", "-o", "json"], &dir);
            let open: Option<Vec<Value>> = serde_json::from_slice(&out.stdout).ok();
            match open.filter(|_| out.status.success()) {
                Some(v) => {
                    // Each open intent once, in the cycle it was first seen open at rest.
                    for e in &v {
                        let o = &e["object"];
                        self.report.add(
                            self.timeline.cycle_of(e["at_ms"].as_u64().unwrap_or(0)),
                            "open-intents",
                            &format!("{who}/{}", e["seq"]),
                            format!(
                                "{who} journal: intent seq {} (unit {}, action {}, object {}/{}) still open at rest after cycle {k}",
                                e["seq"],
                                e["unit"].as_str().unwrap_or("?"),
                                e["body"]["action"].as_str().unwrap_or("?"),
                                o["kind"].as_str().unwrap_or("?"),
                                o["name"].as_str().unwrap_or("?")
                            ),
                        );
                    }
                }
                None => self.report.add(
                    k,
                    "journal-verify",
                    &format!("{k}/{who}/cli"),
                    format!(
                        "lvms journal inspect --open {} failed ({:?}): {}",
                        dir.display(),
                        out.status.code(),
                        clip(&String::from_utf8_lossy(&out.stderr), 400)
                    ),
                ),
            }
        }

        let mut journals: Vec<(Who, Vec<Record>)> = Vec::new();
        for who in Who::ALL {
            match read_journal(self.s, who) {
                Ok(r) => journals.push((who, r)),
                Err(e) => self.report.add(
                    k,
                    "journal-verify",
                    &format!("{k}/{who}/read"),
                    format!("{who} journal unreadable: {e}"),
                ),
            }
        }

        // 4. One vgcreate effect per VG.
        for (who, recs) in &journals {
            let Some(node) = who.node() else { continue };
            let vg = c.vg_of(node);
            self.check_vgcreate(k, node, vg, recs);
        }

        // 5 and 6. Events.
        self.check_events(&journals).await;
        left
    }

    fn check_vgcreate(&mut self, k: usize, node: &str, vg: &str, recs: &[Record]) {
        let unit = format!("vg/{vg}");
        let outcomes: BTreeMap<u64, &OutcomeResult> = recs
            .iter()
            .filter_map(|r| match &r.body {
                Body::Outcome(o) => Some((o.intent_seq, &o.result)),
                _ => None,
            })
            .collect();
        let mut effects = 0;
        let mut verdicts = Vec::new();
        for r in recs {
            let Body::Intent(i) = &r.body else { continue };
            if i.unit != unit || i.action != "vgcreate" {
                continue;
            }
            let verdict = match outcomes.get(&r.seq) {
                None => "open".to_string(),
                Some(OutcomeResult::Err { reason, .. }) => format!("failed ({reason})"),
                Some(OutcomeResult::Ok { detail, .. }) => match detail.get("replay") {
                    None => {
                        effects += 1;
                        "ran".to_string()
                    }
                    Some(v) if v == "already-done" => {
                        effects += 1;
                        "already-done (ran once, before a crash)".to_string()
                    }
                    Some(v) => format!("replay={v}"),
                },
            };
            verdicts.push(format!("seq {}: {verdict}", r.seq));
        }
        if effects != 1 {
            self.report.add(
                k,
                "vgcreate-effects",
                &format!("{k}/{vg}"),
                format!(
                    "{node}: {effects} vgcreate effect(s) for {vg} (want exactly 1): [{}]",
                    verdicts.join(", ")
                ),
            );
        }
    }

    async fn check_events(&mut self, journals: &[(Who, Vec<Record>)]) {
        struct Pub {
            who: Who,
            seq: u64,
            source_seq: u64,
            count: u64,
            at_ms: u64,
            dropped: bool,
        }
        let mut outcome_at: BTreeMap<(usize, u64), (u64, String)> = BTreeMap::new();
        let mut pubs: BTreeMap<String, Vec<Pub>> = BTreeMap::new();
        for (who, recs) in journals {
            for r in recs {
                match &r.body {
                    Body::Outcome(o) => {
                        outcome_at.insert((who.idx(), r.seq), (r.at_ms, o.unit.clone()));
                    }
                    Body::Published(p) if p.kind == PublishKind::Event => {
                        let spec = EventSpec {
                            regarding: p.object.clone().unwrap_or_default(),
                            type_: EventType::Normal,
                            reason: String::new(),
                            note: String::new(),
                            action: String::new(),
                        };
                        let name = lvms::kube::events::event_name(&spec, &p.dedupe_key);
                        pubs.entry(name).or_default().push(Pub {
                            who: *who,
                            seq: r.seq,
                            source_seq: p.source_seq,
                            count: p.count,
                            at_ms: r.at_ms,
                            dropped: p.summary.starts_with("dropped"),
                        });
                    }
                    _ => {}
                }
            }
        }
        let events = Api::<Event>::namespaced(self.s.client.clone(), &self.s.ns.name)
            .list(&ListParams::default())
            .await
            .expect("listing Events")
            .items;
        let seen = self.seen.lock().map(|m| m.clone()).unwrap_or_default();
        let mut names = BTreeSet::new();
        for e in &events {
            let name = e.name_any();
            names.insert(name.clone());
            let reg = e.regarding.clone().unwrap_or_default();
            let (kind, rname, uid) = (
                reg.kind.unwrap_or_default(),
                reg.name.unwrap_or_default(),
                reg.uid.unwrap_or_default(),
            );
            let what = format!(
                "Event {name} ({} {} on {kind}/{rname}: {:?})",
                e.type_.as_deref().unwrap_or("?"),
                e.reason.as_deref().unwrap_or("?"),
                clip(e.note.as_deref().unwrap_or_default(), 140)
            );
            let ev_ms = e
                .event_time
                .as_ref()
                .map(|t| t.0.as_millisecond().max(0) as u64)
                .or_else(|| {
                    e.metadata
                        .creation_timestamp
                        .as_ref()
                        .map(|t| t.0.as_millisecond().max(0) as u64)
                })
                .unwrap_or(0);
            let ev_cycle = self.timeline.cycle_of(ev_ms);
            let mine = pubs.get(&name).map(Vec::as_slice).unwrap_or_default();

            // 5. Only objects of the Event's own cycle.
            match seen.get(&uid) {
                None => {
                    if matches!(
                        kind.as_str(),
                        "LVMCluster" | "LVMVolumeGroup" | "LVMVolumeGroupNodeStatus"
                    ) {
                        self.report.add(
                            ev_cycle,
                            "event-unknown-object",
                            &name,
                            format!(
                                "{what}, created at {}, regards uid {uid:?} the soak never saw",
                                self.timeline.offset(ev_ms)
                            ),
                        );
                    }
                }
                Some(o) => {
                    let oc = self.timeline.object_cycles(o.first_ms);
                    let obj_at = self.timeline.offset(o.first_ms);
                    if !oc.contains(&ev_cycle) {
                        self.report.add(
                            ev_cycle,
                            "event-other-cycle",
                            &name,
                            format!(
                                "{what} created at {} regards an object first seen at {obj_at}",
                                self.timeline.offset(ev_ms)
                            ),
                        );
                    }
                    if let Some((p, src_ms, unit)) = mine.iter().find_map(|p| {
                        let (ms, unit) = outcome_at
                            .get(&(p.who.idx(), p.source_seq))
                            .cloned()
                            .unwrap_or((p.at_ms, "?".into()));
                        (!oc.contains(&self.timeline.cycle_of(ms))).then_some((p, ms, unit))
                    }) {
                        self.report.add(
                            ev_cycle,
                            "event-reaimed",
                            &name,
                            format!(
                                "{what} regards an object first seen at {obj_at} but projects the {} journal's outcome seq {} (unit {unit}) written at {} (published at {})",
                                p.who,
                                p.source_seq,
                                self.timeline.offset(src_ms),
                                self.timeline.offset(p.at_ms)
                            ),
                        );
                    }
                }
            }

            // 6. series.count = number of Published records for its key.
            let count = e
                .series
                .as_ref()
                .map(|s| u64::try_from(s.count).unwrap_or(0))
                .unwrap_or(1);
            if mine.len() as u64 != count {
                let recs: Vec<String> = mine
                    .iter()
                    .map(|p| format!("{} seq {} count {}", p.who, p.seq, p.count))
                    .collect();
                self.report.add(
                    ev_cycle,
                    "event-count",
                    &format!("{name}/{count}/{}", mine.len()),
                    format!(
                        "{what}: series count {count} but {} Published record(s) [{}]",
                        mine.len(),
                        recs.join(", ")
                    ),
                );
            }
        }
        let now = now_ms();
        for (name, ps) in &pubs {
            if names.contains(name) {
                continue;
            }
            let Some(last) = ps.iter().max_by_key(|p| p.at_ms) else {
                continue;
            };
            if last.dropped || now.saturating_sub(last.at_ms) > EVENT_TTL_MARGIN_MS {
                continue;
            }
            self.report.add(
                self.timeline.cycle_of(last.at_ms),
                "event-missing",
                name,
                format!(
                    "{} journal published Event {name} (seq {}, count {}) at {} but there is no such Event",
                    last.who,
                    last.seq,
                    last.count,
                    self.timeline.offset(last.at_ms)
                ),
            );
        }
    }

    /// After a cycle that left something behind or did not converge: remove it by hand so
    /// the next cycle starts clean (nothing here is checked).
    async fn force_clean(&mut self, c: &Cycle) {
        let ns = &self.s.ns.name;
        let client = &self.s.client;
        let unfinalize = json!({"metadata": {"finalizers": null}});
        let pp = PatchParams::default();
        let dp = DeleteParams::default();
        let lp = ListParams::default();
        macro_rules! strip_all {
            ($ty:ty) => {{
                let api: Api<$ty> = Api::namespaced(client.clone(), ns);
                if let Ok(l) = api.list_metadata(&lp).await {
                    for o in l.items {
                        let _ = api
                            .patch(&o.name_any(), &pp, &Patch::Merge(&unfinalize))
                            .await;
                        let _ = api.delete(&o.name_any(), &dp).await;
                    }
                }
            }};
        }
        strip_all!(LVMCluster);
        strip_all!(LVMVolumeGroup);
        strip_all!(LVMVolumeGroupNodeStatus);
        let _ = Api::<DaemonSet>::namespaced(client.clone(), ns)
            .delete("vg-manager", &dp)
            .await;
        let scs: Api<StorageClass> = Api::all(client.clone());
        if let Ok(l) = scs.list_metadata(&lp).await {
            for o in l.items.iter().filter(|o| o.name_any().starts_with("lvms-")) {
                let _ = scs.delete(&o.name_any(), &dp).await;
            }
        }
        let _ = Api::<CSIDriver>::all(client.clone())
            .delete("topolvm.io", &dp)
            .await;
        // The host: this cycle's VGs, then the disks' labels, then lvmd.yaml.
        for vg in [&c.vga, &c.vgb] {
            if vg_names().contains(vg) {
                lvm("vgremove", &["-f", vg]);
            }
        }
        let labels = pvs();
        for d in self.disks {
            if labels.iter().any(|(pv, _)| *pv == d.loop_dev) {
                lvm("pvremove", &["-ff", "-y", &d.loop_dev]);
            }
        }
        for node in NODES {
            let _ = std::fs::remove_file(lvmd_path(self.s, node));
        }
        let api = self.s.clusters();
        let vgs: Api<LVMVolumeGroup> = Api::namespaced(client.clone(), ns);
        let nss: Api<LVMVolumeGroupNodeStatus> = Api::namespaced(client.clone(), ns);
        let deadline = Instant::now() + Duration::from_secs(20);
        self.chaos
            .until(deadline, || async {
                let empty = api.list_metadata(&lp).await.ok()?.items.is_empty()
                    && vgs.list_metadata(&lp).await.ok()?.items.is_empty()
                    && nss.list_metadata(&lp).await.ok()?.items.is_empty();
                empty.then_some(())
            })
            .await;
        println!("cycle {}: leftovers removed by force", c.k);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_random_kills_converge_and_leave_nothing_behind() {
    require_prerequisites();
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "the soak needs root (loop devices, lvm2 on them): run it as root on a host or in a privileged container"
    );
    let seed = env_u64("LVMS_SOAK_SEED").unwrap_or(1);
    let cycles = env_u64("LVMS_SOAK_CYCLES").unwrap_or(10) as usize;
    let started = Instant::now();
    println!("soak: seed {seed}, {cycles} cycles (LVMS_SOAK_SEED / LVMS_SOAK_CYCLES)");

    let s = Scenario::new("soak").await;
    let disks_dir = s.dir.join("disks");
    let disk_a = Disk::new(&disks_dir, "soak-a", 128);
    let disk_b = Disk::new(&disks_dir, "soak-b", 128);
    for n in NODES {
        create_node(&s.client, n, false).await;
    }
    let seen: SeenMap = Arc::default();
    let ns = &s.ns.name;
    let watchers = [
        watch_uids(
            Api::<LVMCluster>::namespaced(s.client.clone(), ns),
            "LVMCluster",
            seen.clone(),
        ),
        watch_uids(
            Api::<LVMVolumeGroup>::namespaced(s.client.clone(), ns),
            "LVMVolumeGroup",
            seen.clone(),
        ),
        watch_uids(
            Api::<LVMVolumeGroupNodeStatus>::namespaced(s.client.clone(), ns),
            "LVMVolumeGroupNodeStatus",
            seen.clone(),
        ),
    ];
    let mut soak = Soak {
        s: &s,
        disks: [&disk_a, &disk_b],
        chaos: Chaos::new(&s),
        seen,
        timeline: Timeline::default(),
        report: Report::default(),
        not_converged_in_a_row: 0,
    };
    soak.timeline.begin(); // cycle 0: setup
    let setup_deadline = Instant::now() + Duration::from_secs(60);
    let up = soak.chaos.until_ready(&Who::ALL, setup_deadline).await;
    assert!(
        up,
        "the operator and both vg-managers never became ready; logs under {}",
        s.dir.display()
    );

    let mut rng = Rng(seed);
    let pid = std::process::id();
    let mut done = 0;
    for k in 1..=cycles {
        let plan = CyclePlan::draw(&mut rng, &format!("a{pid}k{k}"), &format!("b{pid}k{k}"));
        println!(
            "cycle {k}: plan {} random kill(s) {:?}, fault {:?}",
            plan.kills.len(),
            plan.kills
                .iter()
                .map(|k| format!("{}@{:?}+{}ms", k.who, k.phase, k.after.as_millis()))
                .collect::<Vec<_>>(),
            plan.fault
                .as_ref()
                .map(|f| format!("{}@{:?} {}", f.who, f.phase, f.spec))
        );
        let go_on = soak.run_cycle(k, &plan).await;
        done = k;
        if !go_on {
            break;
        }
    }
    // The end of the run: Events once more (late publications of the last cycle).
    let _ = soak.chaos.quiesce().await;
    let mut journals = Vec::new();
    for who in Who::ALL {
        if let Ok(r) = read_journal(&s, who) {
            journals.push((who, r));
        }
    }
    soak.check_events(&journals).await;
    for w in &watchers {
        w.abort();
    }

    let elapsed = started.elapsed();
    let report = &soak.report;
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for v in &report.list {
        *by_kind.entry(v.kind).or_default() += 1;
    }
    if !report.list.is_empty() {
        println!("soak violations (seed {seed}):");
        for v in &report.list {
            println!("  cycle {} seed {seed} [{}] {}", v.cycle, v.kind, v.detail);
        }
    }
    println!(
        "soak summary: seed {seed}, cycles {done}/{cycles}, kills {} random / {} fault-point ({} armed), violations {} {:?}, elapsed {:.1}s (logs and journals: {})",
        soak.chaos.random_kills,
        soak.chaos.fault_kills,
        soak.chaos.faults_armed,
        report.list.len(),
        by_kind,
        elapsed.as_secs_f64(),
        s.dir.display()
    );
    assert!(
        report.list.is_empty(),
        "soak (seed {seed}) found {} violation(s) {by_kind:?}; see the list above",
        report.list.len()
    );
}
