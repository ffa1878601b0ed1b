//! One actor per reconcile unit: replay open intents, then one pass per coalesced burst.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use lvms_journal::{Claim, Done, Intent, Journal, ObjectRef, Record, Seq, Trace};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::task::JoinHandle;
use tracing::{Instrument, error, info, info_span, warn};

use crate::error::UnitError;
use crate::faults;
use crate::health::UnitHealth;
use crate::publisher::PublisherMsg;
use crate::steps::{PASS_ACTION, Steps};
use crate::trace::TraceSource;
use crate::trigger::Trigger;

/// What a successful pass reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pass {
    /// One line for the journal and the status (e.g. "3 objects in sync").
    pub summary: String,
    /// Come back later even without a watch event (e.g. waiting for a kubelet).
    pub requeue_after: Option<Duration>,
}

/// A reconcile unit: pure decisions inside, side effects only through [`Steps`].
pub trait Unit: Send + Sync + 'static {
    fn name(&self) -> &str;

    /// One level-based pass from the current caches. Calls `steps.begin(subject)` once the
    /// subject (the LVMCluster) is known; every write goes through `steps.run`.
    fn reconcile(&self, steps: &Steps) -> impl Future<Output = Result<Pass, UnitError>> + Send;

    /// Resolve an intent left open by a crash: look at the world first, redo only what is
    /// missing, and return the report for its Outcome (with a [`Replayed`](lvms_journal::Replayed) verdict).
    fn replay(
        &self,
        intent: &Intent,
        steps: &Steps,
    ) -> impl Future<Output = Result<Done, UnitError>> + Send;

    /// A W3C traceparent this unit's next pass should continue when its trigger carries
    /// none (vg-manager: the one the operator wrote on the LVMVolumeGroup).
    fn traceparent(&self) -> Option<String> {
        None
    }

    /// True when request handlers that live as long as the process (CSI RPCs, through
    /// [`Steps::request`]) also journal steps under this unit's name. Such a unit's replay
    /// resolves only what earlier processes left open: an open intent of this process belongs
    /// to a request still in flight, which closes it itself.
    fn serves_requests(&self) -> bool {
        false
    }
}

#[derive(Debug)]
pub enum UnitMsg {
    Run,
}

/// What every pass reports to the [`PassHook`] (metrics, the operator's status wake-up).
#[derive(Debug, Clone, Copy)]
pub struct PassReport<'a> {
    pub unit: &'a str,
    pub ok: bool,
    /// The error's reason when the pass failed.
    pub reason: Option<&'a str>,
    pub duration: Duration,
    /// Whether the pass wrote an Outcome (steps ran or health changed).
    pub journaled: bool,
    /// What the pass reconciled (with its generation), when it got as far as naming it.
    pub subject: Option<&'a lvms_journal::ObjectRef>,
}

/// Hook run after every pass.
pub type PassHook = Arc<dyn Fn(&PassReport<'_>) + Send + Sync>;

pub struct UnitArgs<U> {
    pub unit: Arc<U>,
    pub journal: Arc<Journal>,
    pub epoch: Arc<AtomicU64>,
    pub trigger: Trigger,
    pub publisher: Option<ActorRef<PublisherMsg>>,
    pub on_pass: Option<PassHook>,
    pub trace: Option<TraceSource>,
    /// Cooldown: the least time from the end of one pass to the start of the next. The first
    /// change after a quiet spell starts a pass at once; what arrives during that pass (and
    /// this long after it) becomes one more pass.
    pub debounce: Duration,
    /// Records after the latest [`UnitHealth`] snapshot that make the next pass take one
    /// ([`CHECKPOINT_EVERY`] in production): every unit folds the projection at start,
    /// and without snapshots that fold reads the whole journal.
    pub health_snapshot_every: u64,
}

/// Default records between checkpoints ([`UnitArgs::health_snapshot_every`], the Event
/// publisher's): a start folds at most about this many records per unit (~25 ms on the
/// slowest machine measured) and the publisher looks at as many again; taking a snapshot
/// folds the same tail once under the journal's writer lock.
pub const CHECKPOINT_EVERY: u64 = 4096;

impl<U> Clone for UnitArgs<U> {
    fn clone(&self) -> Self {
        UnitArgs {
            unit: self.unit.clone(),
            journal: self.journal.clone(),
            epoch: self.epoch.clone(),
            trigger: self.trigger.clone(),
            publisher: self.publisher.clone(),
            on_pass: self.on_pass.clone(),
            trace: self.trace.clone(),
            debounce: self.debounce,
            health_snapshot_every: self.health_snapshot_every,
        }
    }
}

pub struct UnitActor<U>(std::marker::PhantomData<fn() -> U>);

impl<U> Default for UnitActor<U> {
    fn default() -> Self {
        UnitActor(std::marker::PhantomData)
    }
}

pub struct UnitState<U> {
    args: UnitArgs<U>,
    /// This instance's claim of its unit in the journal (see [`Claim`]).
    claim: Claim,
    replayed: bool,
    resumed: Option<(Seq, ObjectRef)>,
    /// (ok, message) of the last journaled pass: passes that change nothing and report the
    /// same health write nothing, so a steady state leaves the journal alone.
    last_health: Option<(bool, String)>,
    failures: u32,
    requeue: Option<JoinHandle<()>>,
    passes: u64,
    last_pass_end: Option<tokio::time::Instant>,
}

impl<U: Unit> Actor for UnitActor<U> {
    type Msg = UnitMsg;
    type State = UnitState<U>;
    type Arguments = UnitArgs<U>;

    async fn pre_start(
        &self,
        myself: ActorRef<UnitMsg>,
        args: UnitArgs<U>,
    ) -> Result<UnitState<U>, ActorProcessingErr> {
        let name = args.unit.name().to_string();
        // The supervisor starts an instance only once its predecessor has ended; the claim
        // makes any other writer of this unit in this process unable to append from now on.
        let claim = args.journal.claim(&name)?;
        let health = args.journal.rebuild::<UnitHealth>()?.state;
        let last_health = health.units.get(&name).map(|s| (s.ok, s.message.clone()));
        args.trigger.attach(Arc::new(move || {
            // A dead actor is fine: its replacement attaches and runs a pass anyway.
            let _ = myself.send_message(UnitMsg::Run);
        }));
        Ok(UnitState {
            args,
            claim,
            replayed: false,
            resumed: None,
            last_health,
            failures: 0,
            requeue: None,
            passes: 0,
            last_pass_end: None,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<UnitMsg>,
        state: &mut UnitState<U>,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(t) = state.requeue.take() {
            t.abort();
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<UnitMsg>,
        msg: UnitMsg,
        state: &mut UnitState<U>,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            UnitMsg::Run => {
                if let Some(end) = state.last_pass_end {
                    tokio::time::sleep_until(end + state.args.debounce).await;
                }
                let (trigger, traceparent) = state.args.trigger.take();
                state.passes += 1;
                faults::panic_point(state.args.unit.name(), state.passes);
                let unit = state.args.unit.name();
                // One root span per pass, unless the change that woke us carries a trace.
                let span = info_span!(
                    parent: None,
                    "reconcile",
                    otel.name = format!("reconcile {unit}"),
                    unit,
                    trigger = %trigger,
                    object = tracing::field::Empty,
                    generation = tracing::field::Empty,
                    trace_id = tracing::field::Empty,
                    otel.status_code = tracing::field::Empty,
                    error.message = tracing::field::Empty,
                );
                let trace = match &state.args.trace {
                    Some(hooks) => {
                        if let Some(tp) = traceparent.or_else(|| state.args.unit.traceparent()) {
                            hooks.adopt(&span, &tp);
                        }
                        let trace = span.in_scope(|| hooks.current());
                        span.record("trace_id", tracing::field::display(trace.trace_id));
                        trace
                    }
                    None => Trace::default(),
                };
                let superseded = run_pass(state, trace).instrument(span).await;
                state.last_pass_end = Some(tokio::time::Instant::now());
                if superseded {
                    // A newer instance holds the unit: this one must not retry, only end.
                    error!(unit = %state.claim.unit(), instance = state.claim.instance(), "this unit instance was superseded; stopping it");
                    myself.stop(Some("superseded by a newer instance of its unit".into()));
                }
            }
        }
        Ok(())
    }
}

/// The seq below which this instance resolves open intents at start: those of earlier
/// instances (all ended: the supervisor waits for them), or for a unit that also serves
/// requests, those of earlier processes only.
fn replay_before<U: Unit>(state: &UnitState<U>) -> Seq {
    let since = state.claim.since();
    if state.args.unit.serves_requests() {
        since.min(state.args.journal.opened_at())
    } else {
        since
    }
}

async fn replay<U: Unit>(state: &mut UnitState<U>, trace: Trace) -> Result<(), UnitError> {
    let before = replay_before(state);
    let a = &state.args;
    let name = a.unit.name();
    let claim = Some(state.claim.clone());
    let (open, unreadable) = a
        .journal
        .open_intents_checked()
        .map_err(UnitError::journal)?;
    // An intent that cannot be read cannot be replayed: said once per start, left to verify.
    for c in unreadable {
        warn!(unit = %name, seq = c.seq, reason = %c.reason, "an open intent in the journal cannot be read; replay skips it (lvms journal verify lists it)");
    }
    let open = open
        .into_iter()
        .filter(|r| r.unit() == Some(name) && r.seq < before);
    let mut passes: Vec<(Seq, ObjectRef)> = Vec::new();
    for rec in open {
        let Record {
            seq,
            body: lvms_journal::Body::Intent(intent),
            ..
        } = rec
        else {
            continue;
        };
        if intent.action == PASS_ACTION {
            passes.push((seq, intent.object));
            continue;
        }
        let steps = Steps::new(
            a.journal.clone(),
            name.into(),
            a.epoch.clone(),
            trace,
            None,
            claim.clone(),
        );
        let started = Instant::now();
        let result = a.unit.replay(&intent, &steps).await;
        match &result {
            Ok(done) => {
                info!(seq, action = %intent.action, object = %intent.object, replay = ?done.replay, "replayed open intent")
            }
            // The world could not be read: no verdict, so the intent stays open and replay
            // runs again later (never "nothing there").
            Err(e) if e.retryable => {
                warn!(seq, action = %intent.action, object = %intent.object, error = %e, "replay of open intent failed; left open, retried");
                return Err(e.clone());
            }
            Err(e) => {
                warn!(seq, action = %intent.action, object = %intent.object, error = %e, "replay of open intent cannot succeed; closed with the error, the next pass decides")
            }
        }
        // Replay closed it, whatever the unit said: one that names no verdict recomputes.
        let result = result.map(|mut d| {
            d.replay.get_or_insert(lvms_journal::Replayed::Rechecked);
            d
        });
        steps.close(seq, &result, started)?;
    }
    // The interrupted pass resumes: the next pass closes it instead of opening a new one.
    // More than one open pass cannot happen with one writer per unit, but close extras anyway.
    let latest = passes.pop();
    for (seq, object) in passes {
        let steps = Steps::new(
            a.journal.clone(),
            name.into(),
            a.epoch.clone(),
            trace,
            None,
            claim.clone(),
        );
        steps.begin(object);
        steps.close(
            seq,
            &Err(UnitError::retryable(
                "Superseded",
                "a later pass of this unit was also interrupted",
            )),
            Instant::now(),
        )?;
    }
    state.resumed = latest;
    Ok(())
}

/// One pass (after replay, the first time). Returns true when the journal refused an append
/// because a newer instance of this unit holds its claim.
async fn run_pass<U: Unit>(state: &mut UnitState<U>, trace: Trace) -> bool {
    if let Some(t) = state.requeue.take() {
        t.abort();
    }
    let name = state.args.unit.name().to_string();
    if !state.replayed {
        if let Err(e) = replay(state, trace).await {
            if e.is_superseded() {
                return true;
            }
            error!(unit = %name, error = %e, "replay failed; retrying");
            schedule(state, backoff(state.failures));
            state.failures += 1;
            return false;
        }
        state.replayed = true;
    }
    let a = state.args.clone();
    let steps = Steps::new(
        a.journal.clone(),
        name.as_str().into(),
        a.epoch.clone(),
        trace,
        state.resumed.take(),
        Some(state.claim.clone()),
    )
    .with_hooks(a.trace.clone());
    let started = Instant::now();
    let result = a.unit.reconcile(&steps).await;
    if let Err(e) = &result {
        crate::error::record_span_error(&tracing::Span::current(), e);
    }
    let health = match &result {
        Ok(p) => (true, p.summary.clone()),
        Err(e) => (false, e.to_string()),
    };
    let journaled = match journal_pass(state, &steps, &result, &health) {
        Ok(seq) => seq,
        Err(e) if e.is_superseded() => return true,
        Err(e) => {
            error!(unit = %name, error = %e, "could not journal the pass outcome");
            None
        }
    };
    if result.as_ref().is_err_and(UnitError::is_superseded) {
        return true;
    }
    if let Some(seq) = journaled {
        faults::crash_point(faults::OUTCOME, &name);
        state.last_health = Some(health);
        if let Some(p) = &a.publisher {
            // A hint: a stopped publisher's successor rescans from its cursor.
            let _ = p.send_message(PublisherMsg::Outcome(seq));
        }
    }
    // Checked after every pass, journaled or not: records written outside passes (CSI
    // RPCs, Events) grow the tail a start folds too. One index read when not due.
    if let Err(e) = a
        .journal
        .snapshot_if_due::<UnitHealth>(a.health_snapshot_every, trace)
    {
        warn!(unit = %name, error = %e, "could not snapshot unit health; the next pass retries");
    }
    if let Some(hook) = &a.on_pass {
        let subject = steps.subject();
        hook(&PassReport {
            unit: &name,
            ok: result.is_ok(),
            reason: result.as_ref().err().map(|e| e.reason.as_str()),
            duration: started.elapsed(),
            journaled: journaled.is_some(),
            subject: subject.as_ref(),
        });
    }
    match result {
        Ok(pass) => {
            state.failures = 0;
            if let Some(after) = pass.requeue_after {
                schedule(state, after);
            }
        }
        Err(e) => {
            let delay = e.retry_after.unwrap_or_else(|| backoff(state.failures));
            state.failures = state.failures.saturating_add(1);
            if e.retryable {
                warn!(unit = %name, error = %e, retry_in = ?delay, "pass failed");
                schedule(state, delay);
            } else {
                warn!(unit = %name, error = %e, "pass failed; waiting for the input to change");
            }
        }
    }
    false
}

/// Close the pass intent (open if steps ran, or when health changed). Returns its Outcome seq.
fn journal_pass<U>(
    state: &UnitState<U>,
    steps: &Steps,
    result: &Result<Pass, UnitError>,
    health: &(bool, String),
) -> Result<Option<Seq>, UnitError> {
    let changed = state.last_health.as_ref() != Some(health);
    if steps.pass_seq().is_none() && (!changed || steps.subject().is_none()) {
        return Ok(None);
    }
    let seq = steps.open_pass()?;
    let result = match result {
        Ok(p) => Ok(Done {
            summary: Some(p.summary.clone()),
            applied: Some(steps.applied()),
            quiet: steps.is_quiet(),
            ..Done::default()
        }),
        Err(e) => Err(e.clone()),
    };
    steps.close(seq, &result, Instant::now()).map(Some)
}

fn backoff(failures: u32) -> Duration {
    Duration::from_millis(500u64.saturating_mul(1 << failures.min(6))).min(Duration::from_secs(30))
}

fn schedule<U>(state: &mut UnitState<U>, after: Duration) {
    let trigger = state.args.trigger.clone();
    state.requeue = Some(tokio::spawn(async move {
        tokio::time::sleep(after).await;
        trigger.bump("requeue");
    }));
}

#[cfg(test)]
mod tests {
    use super::backoff;
    use std::time::Duration;

    #[test]
    fn backoff_doubles_then_caps() {
        assert_eq!(backoff(0), Duration::from_millis(500));
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(3), Duration::from_secs(4));
        assert_eq!(backoff(20), Duration::from_secs(30));
    }
}
