//! Shared fixtures for the lvms-actors integration tests: a real journal in a temp dir, a
//! fake reconcile unit and a fake event sink (stand-ins for the Kubernetes side).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use lvms_actors::{
    ChildSpec, EventSink, EventSpec, EventType, PASS_ACTION, Pass, StepSpec, Steps, Trigger, Unit,
    UnitActor, UnitArgs, UnitError, UnitMsg,
};
use lvms_journal::{
    Body, Done, Intent, Journal, ObjectRef, Outcome, OutcomeResult, Record, Replayed, Seq, Trace,
};
use ractor::{Actor, ActorCell, ActorRef};
use tokio::task::JoinHandle;

// ---- temp dirs and journals ------------------------------------------------------------

/// A fresh directory under the system temp dir, removed on drop.
pub struct TestDir(PathBuf);

impl TestDir {
    pub fn new(tag: &str) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let path =
            std::env::temp_dir().join(format!("lvms-actors-test-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create test dir");
        TestDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A real journal in its own temp dir. Field order matters: the journal closes first.
pub struct Env {
    pub journal: Arc<Journal>,
    pub dir: TestDir,
}

impl Env {
    pub fn new(tag: &str) -> Self {
        let dir = TestDir::new(tag);
        let journal = Arc::new(Journal::open(dir.path().join("journal")).expect("open journal"));
        Env { journal, dir }
    }

    pub fn journal_path(&self) -> PathBuf {
        self.dir.path().join("journal")
    }

    /// Drop the journal and open it again from disk (what a restarted process sees).
    pub fn reopen(self) -> Self {
        let Env { journal, dir } = self;
        let j = Arc::try_unwrap(journal).expect("journal still shared");
        drop(j);
        let journal = Arc::new(Journal::open(dir.path().join("journal")).expect("reopen journal"));
        Env { journal, dir }
    }
}

pub fn records(j: &Journal) -> Vec<Record> {
    j.iter().map(|r| r.expect("no corrupt records")).collect()
}

pub fn kinds(j: &Journal) -> Vec<&'static str> {
    records(j).iter().map(|r| r.body.kind_name()).collect()
}

/// The action of the intent an outcome closes.
pub fn intent_action(j: &Journal, intent_seq: Seq) -> String {
    match j.get(intent_seq).unwrap().map(|r| r.body) {
        Some(Body::Intent(i)) => i.action,
        other => panic!("seq {intent_seq} is not an intent: {other:?}"),
    }
}

/// (outcome seq, outcome) of every pass outcome, in seq order.
pub fn pass_outcomes(j: &Journal) -> Vec<(Seq, Outcome)> {
    records(j)
        .into_iter()
        .filter_map(|r| match r.body {
            Body::Outcome(o) if intent_action(j, o.intent_seq) == PASS_ACTION => Some((r.seq, o)),
            _ => None,
        })
        .collect()
}

pub fn published(j: &Journal) -> Vec<(Seq, lvms_journal::Published)> {
    records(j)
        .into_iter()
        .filter_map(|r| match r.body {
            Body::Published(p) => Some((r.seq, p)),
            _ => None,
        })
        .collect()
}

pub fn done(o: &Outcome) -> &Done {
    match &o.result {
        OutcomeResult::Ok(d) => d,
        other => panic!("expected an Ok outcome, got {other:?}"),
    }
}

/// The fake unit's one step action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FakeAction {
    Apply,
}

impl lvms_actors::Action for FakeAction {
    const ALL: &'static [Self] = &[FakeAction::Apply];
    fn name(self) -> &'static str {
        "apply"
    }
}

pub fn subject() -> ObjectRef {
    ObjectRef {
        kind: "LVMCluster".into(),
        namespace: "openshift-storage".into(),
        name: "my-lvmcluster".into(),
        uid: "uid-lvmcluster".into(),
        generation: 1,
    }
}

pub fn object(kind: &str, name: &str) -> ObjectRef {
    ObjectRef {
        kind: kind.into(),
        namespace: "openshift-storage".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        generation: 1,
    }
}

pub fn intent(unit: &str, object: ObjectRef, action: &str, key: &str) -> Intent {
    Intent {
        unit: unit.into(),
        object,
        action: action.into(),
        args: Vec::new(),
        desired_digest: String::new(),
        idempotency_key: key.into(),
        lease_epoch: 1,
        regarding: Vec::new(),
    }
}

/// Append a whole pass (intent + outcome) for `unit` directly, as a unit actor would.
/// Returns (intent seq, outcome seq).
pub fn append_pass(j: &Journal, unit: &str, result: OutcomeResult) -> (Seq, Seq) {
    let i = j
        .append_intent(
            intent(unit, subject(), PASS_ACTION, &format!("{unit}/pass")),
            Trace::default(),
        )
        .unwrap();
    let o = j
        .append_outcome(i, result, Duration::from_millis(1), Trace::default())
        .unwrap();
    (i, o)
}

pub fn err_result(reason: &str, message: &str) -> OutcomeResult {
    OutcomeResult::Err {
        reason: reason.into(),
        message: message.into(),
        retryable: false,
    }
}

pub fn ok_result(summary: &str) -> OutcomeResult {
    OutcomeResult::Ok(Done {
        summary: Some(summary.to_string()),
        ..Done::default()
    })
}

// ---- waiting ----------------------------------------------------------------------------

pub const WAIT: Duration = Duration::from_secs(3);

/// Poll `cond` every 5 ms until it holds; panic with `what` after [`WAIT`].
pub async fn wait_until(what: &str, cond: impl FnMut() -> bool) {
    wait_until_within(WAIT, what, cond).await
}

pub async fn wait_until_within(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > limit {
            panic!("timed out after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Give the actors time to do something they should not do.
pub async fn settle() {
    tokio::time::sleep(Duration::from_millis(250)).await;
}

// ---- the fake unit ----------------------------------------------------------------------

/// What a step effect saw in the journal while it ran.
#[derive(Debug, Clone)]
pub struct EffectView {
    pub pass: u64,
    pub step: u32,
    pub object: ObjectRef,
    /// `open_intents_for(unit)` from inside the effect.
    pub open: Vec<Record>,
    /// Open intents of the unit in a copy of the journal's files (what survives a crash).
    pub durable_open: Option<Vec<Record>>,
}

/// A reconcile unit whose behaviour the test steers through its public fields.
pub struct FakeUnit {
    name: String,
    /// When set, the pass calls `steps.begin(subject)`.
    pub subject: Mutex<Option<ObjectRef>>,
    /// Steps (journaled side effects) per pass.
    pub steps_per_pass: AtomicU32,
    /// While true, a pass waits (after `begin`, before its steps).
    pub hold: AtomicBool,
    /// While true, a step's effect waits inside the step (its intent durable, its outcome not
    /// yet written): a pass held mid-step, as a slow host command holds it.
    pub hold_in_step: AtomicBool,
    /// Step effects running now, and the most ever running at once (across every instance of
    /// the unit: two means two instances acted side by side).
    pub in_step: AtomicU32,
    pub max_in_step: AtomicU32,
    /// When set, the pass returns this error (after its steps).
    pub fail: Mutex<Option<UnitError>>,
    /// Panic on the next pass only.
    pub panic_once: AtomicBool,
    /// Panic on every pass.
    pub panic_always: AtomicBool,
    /// Summary "pass N" instead of a constant one.
    pub numbered_summary: AtomicBool,
    /// Copy the journal's files inside the first step effect to check durability.
    pub check_durable: AtomicBool,
    /// Replays that fail (retryably: the world could not be read) before one succeeds.
    pub replay_failures: AtomicU32,
    /// Request handlers journal under this unit too ([`Unit::serves_requests`]).
    pub serves_requests: AtomicBool,
    passes: AtomicU64,
    log: Mutex<Vec<String>>,
    effects: Mutex<Vec<EffectView>>,
    replayed: Mutex<Vec<Intent>>,
    journal_path: Mutex<Option<PathBuf>>,
}

impl FakeUnit {
    pub fn new(name: &str) -> Arc<Self> {
        Arc::new(FakeUnit {
            name: name.into(),
            subject: Mutex::new(Some(subject())),
            steps_per_pass: AtomicU32::new(0),
            replay_failures: AtomicU32::new(0),
            serves_requests: AtomicBool::new(false),
            hold: AtomicBool::new(false),
            hold_in_step: AtomicBool::new(false),
            in_step: AtomicU32::new(0),
            max_in_step: AtomicU32::new(0),
            fail: Mutex::new(None),
            panic_once: AtomicBool::new(false),
            panic_always: AtomicBool::new(false),
            numbered_summary: AtomicBool::new(false),
            check_durable: AtomicBool::new(false),
            passes: AtomicU64::new(0),
            log: Mutex::new(Vec::new()),
            effects: Mutex::new(Vec::new()),
            replayed: Mutex::new(Vec::new()),
            journal_path: Mutex::new(None),
        })
    }

    /// Passes started (including ones that panicked).
    pub fn passes(&self) -> u64 {
        self.passes.load(Ordering::SeqCst)
    }

    /// "replay:<idempotency key>" and "reconcile:<n>" in call order.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    pub fn effects(&self) -> Vec<EffectView> {
        self.effects.lock().unwrap().clone()
    }

    pub fn replayed(&self) -> Vec<Intent> {
        self.replayed.lock().unwrap().clone()
    }

    pub fn set_fail(&self, e: Option<UnitError>) {
        *self.fail.lock().unwrap() = e;
    }

    pub fn set_journal_path(&self, p: PathBuf) {
        *self.journal_path.lock().unwrap() = Some(p);
    }

    fn push_log(&self, line: String) {
        self.log.lock().unwrap().push(line);
    }
}

pub const SUMMARY: &str = "all objects in sync";

impl Unit for FakeUnit {
    fn name(&self) -> &str {
        &self.name
    }

    fn serves_requests(&self) -> bool {
        self.serves_requests.load(Ordering::SeqCst)
    }

    async fn reconcile(&self, steps: &Steps) -> Result<Pass, UnitError> {
        let n = self.passes.fetch_add(1, Ordering::SeqCst) + 1;
        self.push_log(format!("reconcile:{n}"));
        if self.panic_always.load(Ordering::SeqCst) || self.panic_once.swap(false, Ordering::SeqCst)
        {
            panic!("fake unit {} panics on pass {n}", self.name);
        }
        let subject = self.subject.lock().unwrap().clone();
        if let Some(s) = subject {
            steps.begin(s);
        }
        while self.hold.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        for i in 0..self.steps_per_pass.load(Ordering::SeqCst) {
            let target = object("ConfigMap", &format!("cm-{i}"));
            let spec =
                StepSpec::new(target.clone(), FakeAction::Apply).digest(format!("digest-{i}"));
            let journal = steps.journal().clone();
            let durable = i == 0 && self.check_durable.load(Ordering::SeqCst);
            let path = self.journal_path.lock().unwrap().clone();
            steps
                .run(spec, || async move {
                    let now = self.in_step.fetch_add(1, Ordering::SeqCst) + 1;
                    self.max_in_step.fetch_max(now, Ordering::SeqCst);
                    while self.hold_in_step.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    self.in_step.fetch_sub(1, Ordering::SeqCst);
                    let open = journal
                        .open_intents_for(&self.name)
                        .map_err(UnitError::journal)?;
                    let durable_open = match (durable, path) {
                        (true, Some(p)) => {
                            let copy = Journal::open_copy(&p).map_err(UnitError::journal)?;
                            Some(
                                copy.open_intents_for(&self.name)
                                    .map_err(UnitError::journal)?,
                            )
                        }
                        _ => None,
                    };
                    self.effects.lock().unwrap().push(EffectView {
                        pass: n,
                        step: i,
                        object: target,
                        open,
                        durable_open,
                    });
                    Ok(Done::resource_version(Some(format!("{n}{i}"))))
                })
                .await?;
        }
        let fail = self.fail.lock().unwrap().clone();
        if let Some(e) = fail {
            return Err(e);
        }
        let summary = if self.numbered_summary.load(Ordering::SeqCst) {
            format!("pass {n}")
        } else {
            SUMMARY.to_string()
        };
        Ok(Pass {
            summary,
            requeue_after: None,
        })
    }

    async fn replay(&self, intent: &Intent, _steps: &Steps) -> Result<Done, UnitError> {
        self.push_log(format!("replay:{}", intent.idempotency_key));
        self.replayed.lock().unwrap().push(intent.clone());
        if self
            .replay_failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(UnitError::retryable(
                "HostUnreadable",
                "pvs: garbled report",
            ));
        }
        intent
            .action_as::<FakeAction>()
            .map_err(|e| UnitError::permanent("UnknownAction", e.to_string()))?;
        Ok(Done::replayed(Replayed::AlreadyDone))
    }
}

pub fn unit_args(
    unit: &Arc<FakeUnit>,
    journal: &Arc<Journal>,
    trigger: &Trigger,
) -> UnitArgs<FakeUnit> {
    UnitArgs {
        unit: unit.clone(),
        journal: journal.clone(),
        epoch: Arc::new(AtomicU64::new(1)),
        trigger: trigger.clone(),
        publisher: None,
        on_pass: None,
        trace: None,
        debounce: Duration::from_millis(10),
        health_snapshot_every: lvms_actors::CHECKPOINT_EVERY,
    }
}

pub async fn spawn_unit(args: UnitArgs<FakeUnit>) -> (ActorRef<UnitMsg>, JoinHandle<()>) {
    Actor::spawn(None, UnitActor::<FakeUnit>::default(), args)
        .await
        .expect("spawn unit actor")
}

/// Stop an actor and wait until its current message (a pass) is finished.
pub async fn stop<M: ractor::Message>(actor: &ActorRef<M>) {
    actor
        .stop_and_wait(None, Some(Duration::from_secs(3)))
        .await
        .expect("actor stops");
}

/// Every actor a child spec spawned, in order (first start, then restarts).
pub type Spawned = Arc<Mutex<Vec<ActorCell>>>;

/// A supervisor child running `args` (cloned for every restart).
pub fn child_spec(name: &str, args: UnitArgs<FakeUnit>) -> ChildSpec {
    child_spec_recording(name, args, &Spawned::default())
}

/// Like [`child_spec`], recording each spawned actor in `spawned`.
pub fn child_spec_recording(name: &str, args: UnitArgs<FakeUnit>, spawned: &Spawned) -> ChildSpec {
    let spawned = spawned.clone();
    ChildSpec {
        name: name.into(),
        spawn: Arc::new(
            move |sup: ActorCell| -> BoxFuture<'static, Result<ActorCell, ractor::SpawnErr>> {
                let args = args.clone();
                let spawned = spawned.clone();
                Box::pin(async move {
                    let (actor, _) =
                        Actor::spawn_linked(None, UnitActor::<FakeUnit>::default(), args, sup)
                            .await?;
                    spawned.lock().unwrap().push(actor.get_cell());
                    Ok(actor.get_cell())
                })
            },
        ),
    }
}

// ---- the fake event sink ----------------------------------------------------------------

/// Records every write that reaches "the API" as (key, count).
#[derive(Default)]
pub struct FakeSink {
    writes: Mutex<Vec<(String, u64)>>,
    /// The next N writes reach the API but report an error (a lost response / a crash
    /// before the publisher could record them).
    pub fail_after_write: AtomicU32,
}

impl FakeSink {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn writes(&self) -> Vec<(String, u64)> {
        self.writes.lock().unwrap().clone()
    }
}

impl EventSink for FakeSink {
    async fn write(
        &self,
        key: &str,
        _spec: &EventSpec,
        count: u64,
    ) -> Result<(), lvms_actors::SinkError> {
        self.writes.lock().unwrap().push((key.to_string(), count));
        let failing = self
            .fail_after_write
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failing {
            Err("connection reset after the write".into())
        } else {
            Ok(())
        }
    }
}

/// Maps pass outcomes (only) to Events: Normal on success, Warning with the error otherwise.
pub fn pass_event(j: &Journal, rec: &Record) -> lvms_journal::Result<Vec<EventSpec>> {
    Ok(pass_event_one(j, rec).into_iter().collect())
}

/// Like [`pass_event`], plus a copy regarding a second object (uid `<uid>-owner`), as LVMS
/// sends vg-manager Events to the volume group and its owner.
pub fn pass_event_and_owner(j: &Journal, rec: &Record) -> lvms_journal::Result<Vec<EventSpec>> {
    let Some(spec) = pass_event_one(j, rec) else {
        return Ok(Vec::new());
    };
    let mut owner = spec.clone();
    owner.regarding.uid = format!("{}-owner", spec.regarding.uid);
    Ok(vec![spec, owner])
}

fn pass_event_one(j: &Journal, rec: &Record) -> Option<EventSpec> {
    let Body::Outcome(o) = &rec.body else {
        return None;
    };
    let Ok(Some(Record {
        body: Body::Intent(i),
        ..
    })) = j.get(o.intent_seq)
    else {
        return None;
    };
    if i.action != PASS_ACTION {
        return None;
    }
    Some(match &o.result {
        OutcomeResult::Ok(d) => EventSpec {
            regarding: o.object.clone(),
            type_: EventType::Normal,
            reason: "ReconcileSucceeded".into(),
            note: d.summary.clone().unwrap_or_default(),
            action: "Reconcile".into(),
        },
        OutcomeResult::Err {
            reason, message, ..
        } => EventSpec {
            regarding: o.object.clone(),
            type_: EventType::Warning,
            reason: reason.clone(),
            note: message.clone(),
            action: "Reconcile".into(),
        },
    })
}
