//! The journaled step executor: the only way a unit performs a side effect.
//!
//! `run` = append Intent (flushed) → effect → append Outcome. The first step of a pass opens
//! the pass intent (action [`PASS_ACTION`]); the unit actor closes it with the pass result,
//! and that Outcome is what Events and unit health are projected from.

use std::future::Future;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use lvms_journal::{Action, Claim, Done, Intent, Journal, ObjectRef, OutcomeResult, Seq, Trace};

use tracing::Instrument;

use crate::error::UnitError;
use crate::faults;

pub const PASS_ACTION: &str = "pass";

/// The effect of one batched step, built only when the step starts: a pass over 1000 objects
/// keeps `concurrency` request futures alive, not 1000.
pub type Effect<'a> =
    Box<dyn FnOnce() -> futures::future::BoxFuture<'a, Result<Done, UnitError>> + Send + 'a>;

/// One step of [`Steps::run_all`]: what it is about to do, and the effect that does it.
pub type BatchStep<'a> = (StepSpec, Effect<'a>);

/// An [`Effect`] from an async closure.
pub fn effect<'a, F, Fut>(f: F) -> Effect<'a>
where
    F: FnOnce() -> Fut + Send + 'a,
    Fut: Future<Output = Result<Done, UnitError>> + Send + 'a,
{
    Box::new(move || Box::pin(f()))
}

/// Intents [`Steps::run_all`] makes durable per journal append.
const BATCH_CHUNK: usize = 64;

/// What a step is about to do, before it does it.
#[derive(Debug, Clone)]
pub struct StepSpec {
    pub object: ObjectRef,
    /// The name of a domain [`Action`] (`apply`, `vgcreate`, ...).
    pub action: &'static str,
    /// What the step acts with (argv, finalizer names): replay reads these back.
    pub args: Vec<String>,
    /// Digest of the desired state this step writes (empty when it writes none).
    pub desired_digest: String,
}

impl StepSpec {
    pub fn new(object: ObjectRef, action: impl Action) -> Self {
        StepSpec {
            object,
            action: action.name(),
            args: Vec::new(),
            desired_digest: String::new(),
        }
    }

    pub fn args(mut self, args: Vec<String>) -> Self {
        self.args = args;
        self
    }

    pub fn digest(mut self, digest: impl Into<String>) -> Self {
        self.desired_digest = digest.into();
        self
    }

    pub fn idempotency_key(&self, unit: &str) -> String {
        format!(
            "{unit}/{}/{}/{}/{}",
            self.action,
            self.object,
            self.desired_digest,
            self.args.join(" ")
        )
    }
}

#[derive(Default)]
struct PassState {
    subject: Option<ObjectRef>,
    /// Other objects this pass's Events regard, as they are now (see [`Steps::regard`]).
    regarding: Vec<ObjectRef>,
    seq: Option<Seq>,
    applied: u32,
    /// Its success is no news (see [`Steps::quiet`]).
    quiet: bool,
}

/// Handed to a unit for one pass. Cloning shares the pass.
#[derive(Clone)]
pub struct Steps {
    journal: Arc<Journal>,
    unit: Arc<str>,
    epoch: Arc<AtomicU64>,
    trace: Trace,
    /// Ids of the span current at each append (a step's span), when tracing is wired.
    hooks: Option<crate::trace::TraceSource>,
    pass: Arc<Mutex<PassState>>,
    /// A request's steps (see [`Steps::request`]): no pass record around them.
    standalone: bool,
    /// The unit instance's claim (a unit actor's steps): its appends are refused once a newer
    /// instance of the unit has claimed it. Requests and detached steps hold none.
    claim: Option<Claim>,
}

impl Steps {
    pub(crate) fn new(
        journal: Arc<Journal>,
        unit: Arc<str>,
        epoch: Arc<AtomicU64>,
        trace: Trace,
        resumed: Option<(Seq, ObjectRef)>,
        claim: Option<Claim>,
    ) -> Self {
        let pass = PassState {
            subject: resumed.as_ref().map(|(_, o)| o.clone()),
            regarding: Vec::new(),
            seq: resumed.map(|(s, _)| s),
            applied: 0,
            quiet: false,
        };
        Steps {
            journal,
            unit,
            epoch,
            trace,
            hooks: None,
            pass: Arc::new(Mutex::new(pass)),
            standalone: false,
            claim,
        }
    }

    /// Steps of one request served outside a unit's passes (a CSI RPC): each step is its own
    /// intent and outcome, with no pass record around them (the request's caller, not a
    /// pass, reports the result); trace ids come from the span current at each append.
    /// Replay of its open intents belongs to the unit named `unit`.
    pub fn request(
        journal: Arc<Journal>,
        unit: &str,
        epoch: Arc<AtomicU64>,
        hooks: Option<crate::trace::TraceSource>,
    ) -> Self {
        let mut steps = Steps::new(journal, unit.into(), epoch, Trace::default(), None, None);
        steps.hooks = hooks;
        steps.standalone = true;
        steps
    }

    /// Steps of a pass run outside a unit actor: tests that drive a unit's `reconcile` and
    /// `replay` directly, and one-off tools. Epoch 0, no trace.
    pub fn detached(journal: Arc<Journal>, unit: &str) -> Self {
        Steps::new(
            journal,
            unit.into(),
            Arc::new(AtomicU64::new(0)),
            Trace::default(),
            None,
            None,
        )
    }

    pub(crate) fn with_hooks(mut self, hooks: Option<crate::trace::TraceSource>) -> Self {
        self.hooks = hooks;
        self
    }

    /// The trace ids for a record appended now: the current span's when tracing is wired,
    /// else the pass's.
    fn record_trace(&self) -> Trace {
        match &self.hooks {
            Some(h) => {
                let t = h.current();
                if t == Trace::default() { self.trace } else { t }
            }
            None => self.trace,
        }
    }

    pub fn unit(&self) -> &str {
        &self.unit
    }

    pub fn journal(&self) -> &Arc<Journal> {
        &self.journal
    }

    pub fn trace(&self) -> Trace {
        self.record_trace()
    }

    // `pass` is only held for plain field reads and writes, never across a panic: the
    // poisoned-lock arms of these accessors are unreachable, not a lost observation.

    /// The object this pass reconciles (the LVMCluster); Events of the pass regard it.
    pub fn begin(&self, subject: ObjectRef) {
        let span = tracing::Span::current();
        span.record("object", tracing::field::display(&subject));
        span.record("generation", subject.generation);
        if let Ok(mut p) = self.pass.lock() {
            p.subject = Some(subject);
        }
    }

    /// The other objects this pass's Events regard (vg-manager: its node status and the
    /// owning LVMCluster), with the UIDs they have now. Recorded on every intent (and so
    /// outcome) of the pass, so an Event published later, even after a restart, goes to
    /// these objects and never to a newer object of the same name. Call before the first
    /// step.
    pub fn regard(&self, objects: Vec<ObjectRef>) {
        if let Ok(mut p) = self.pass.lock() {
            p.regarding = objects;
        }
    }

    /// This pass's success is no news: its steps told it (e.g. a teardown's Events), or there
    /// was nothing left to report on. Recorded as `quiet=true` in the pass Outcome, which the
    /// Event mappers skip.
    pub fn quiet(&self) {
        if let Ok(mut p) = self.pass.lock() {
            p.quiet = true;
        }
    }

    pub(crate) fn is_quiet(&self) -> bool {
        self.pass.lock().is_ok_and(|p| p.quiet)
    }

    fn regarding(&self) -> Vec<ObjectRef> {
        self.pass
            .lock()
            .map(|p| p.regarding.clone())
            .unwrap_or_default()
    }

    pub(crate) fn subject(&self) -> Option<ObjectRef> {
        self.pass.lock().ok().and_then(|p| p.subject.clone())
    }

    pub(crate) fn pass_seq(&self) -> Option<Seq> {
        self.pass.lock().ok().and_then(|p| p.seq)
    }

    pub(crate) fn applied(&self) -> u32 {
        self.pass.lock().map(|p| p.applied).unwrap_or(0)
    }

    fn intent(
        &self,
        object: ObjectRef,
        action: &str,
        args: Vec<String>,
        digest: &str,
        key: String,
        regarding: Vec<ObjectRef>,
    ) -> Intent {
        Intent {
            unit: self.unit.to_string(),
            object,
            action: action.to_string(),
            args,
            desired_digest: digest.to_string(),
            idempotency_key: key,
            lease_epoch: self.epoch.load(Ordering::Acquire),
            regarding,
        }
    }

    /// The intent of a step, with its action and object (for its span and fault points).
    fn step_intent(
        &self,
        spec: StepSpec,
        regarding: Vec<ObjectRef>,
    ) -> (&'static str, ObjectRef, Intent) {
        let key = spec.idempotency_key(&self.unit);
        let object = spec.object.clone();
        let intent = self.intent(
            spec.object,
            spec.action,
            spec.args,
            &spec.desired_digest,
            key,
            regarding,
        );
        (spec.action, object, intent)
    }

    /// The pass intent of `p`'s pass.
    fn pass_intent(&self, p: &PassState) -> Intent {
        let subject = p.subject.clone().unwrap_or_default();
        let key = format!("{}/{PASS_ACTION}/{}", self.unit, subject);
        self.intent(
            subject,
            PASS_ACTION,
            Vec::new(),
            "",
            key,
            p.regarding.clone(),
        )
    }

    fn lock_pass(&self) -> Result<std::sync::MutexGuard<'_, PassState>, UnitError> {
        self.pass
            .lock()
            .map_err(|_| UnitError::retryable(crate::Reason::Internal, "pass state poisoned"))
    }

    /// Open the pass intent if this pass has none yet (a pass whose health changed with no
    /// step; steps open it with their first intents, see [`Steps::append_in_pass`]).
    pub(crate) fn open_pass(&self) -> Result<Seq, UnitError> {
        let mut p = self.lock_pass()?;
        if let Some(seq) = p.seq {
            return Ok(seq);
        }
        let intent = self.pass_intent(&p);
        let seq = self
            .journal
            .append_intents_claimed(self.claim.as_ref(), vec![(intent, self.record_trace())])
            .map_err(UnitError::journal)?
            .first()
            .copied()
            .ok_or_else(|| {
                UnitError::retryable(crate::Reason::Internal, "the journal returned no seq")
            })?;
        p.seq = Some(seq);
        Ok(seq)
    }

    /// Makes `intents` durable in one append, preceded by the pass intent (traced as
    /// `pass_trace`) when this pass has none yet: a pass's first step costs one flush, not
    /// two, and a crash leaves the same records as before minus the state "pass open, step
    /// not yet intended" (which replay treats like a pass with no steps). The pass lock is
    /// held across that append, so concurrent first steps open one pass.
    fn append_in_pass(
        &self,
        pass_trace: Trace,
        intents: Vec<(Intent, Trace)>,
    ) -> Result<Vec<Seq>, UnitError> {
        let append = |all| {
            self.journal
                .append_intents_claimed(self.claim.as_ref(), all)
                .map_err(UnitError::journal)
        };
        if self.standalone {
            return append(intents);
        }
        let mut p = self.lock_pass()?;
        if p.seq.is_some() {
            drop(p);
            return append(intents);
        }
        let mut all = Vec::with_capacity(intents.len() + 1);
        all.push((self.pass_intent(&p), pass_trace));
        all.extend(intents);
        let mut seqs = append(all)?;
        p.seq = Some(seqs.remove(0));
        Ok(seqs)
    }

    /// Run one side effect under a write-ahead intent. The effect must be idempotent: after
    /// a crash it may be re-run by replay.
    pub async fn run<F, Fut>(&self, spec: StepSpec, effect: F) -> Result<Done, UnitError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Done, UnitError>> + Send,
    {
        let pass_trace = self.record_trace();
        let (action, object, intent) = self.step_intent(spec, self.regarding());
        // The intent is appended inside the step's span, so it carries the step's span id.
        let span = Self::step_span(action, &object);
        let seq = span
            .in_scope(|| self.append_in_pass(pass_trace, vec![(intent, self.record_trace())]))?
            .first()
            .copied()
            .ok_or_else(|| {
                UnitError::retryable(crate::Reason::Internal, "the journal returned no seq")
            })?;
        faults::crash_point_in(faults::INTENT_DURABLE, &self.unit, action);
        self.run_one(seq, action, Box::pin(effect()), span).await
    }

    /// [`Steps::run`] for an effect that also returns a value to its caller (what it found, e.g.
    /// "already there"): the journal records the [`Done`], the caller gets both. Code decides on
    /// the value, never on `Done::facts` (those are for people).
    pub async fn run_with<T, F, Fut>(
        &self,
        spec: StepSpec,
        effect: F,
    ) -> Result<(Done, T), UnitError>
    where
        T: Send,
        F: FnOnce() -> Fut + Send,
        Fut: Future<Output = Result<(Done, T), UnitError>> + Send,
    {
        let mut value = None;
        let slot = &mut value;
        let done = self
            .run(spec, || async move {
                let (done, v) = effect().await?;
                *slot = Some(v);
                Ok(done)
            })
            .await?;
        // `run` returns Ok only with the effect's own Ok, which filled the slot.
        value.map(|v| (done, v)).ok_or_else(|| {
            UnitError::retryable(crate::Reason::Internal, "a step's effect returned no value")
        })
    }

    /// [`Steps::run`], unless the journal already holds an intent with this step's idempotency
    /// key: a report made once per occurrence (its Event published once, however many passes
    /// see the same situation). An open one is replay's to close. `None` when skipped.
    pub async fn run_once<F, Fut>(
        &self,
        spec: StepSpec,
        effect: F,
    ) -> Result<Option<Done>, UnitError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Done, UnitError>> + Send,
    {
        let key = spec.idempotency_key(&self.unit);
        if self
            .journal
            .intent_by_key(&key)
            .map_err(UnitError::journal)?
            .is_some()
        {
            return Ok(None);
        }
        self.run(spec, effect).await.map(Some)
    }

    /// Run independent side effects as one batch: every intent is made durable before its
    /// effect starts, BATCH_CHUNK intents per journal append (one flush), then the effects run
    /// with at most `concurrency` in flight, each closed by its own outcome. The next chunk's
    /// intents are appended as soon as the current chunk's effects have all started, so the
    /// writes never stall at a chunk boundary waiting for the slowest one. After a crash each
    /// open intent is replayed on its own, as after [`Steps::run`]. Returns the first error
    /// once every effect has finished (the others' outcomes are journaled either way).
    pub async fn run_all<'a>(
        &self,
        steps: Vec<BatchStep<'a>>,
        concurrency: usize,
    ) -> Result<(), UnitError> {
        use futures::StreamExt;
        let mut steps = steps.into_iter().peekable();
        let mut ready = std::collections::VecDeque::new();
        let mut in_flight = futures::stream::FuturesUnordered::new();
        let mut first = Ok(());
        loop {
            // Top up: the next durable effect, or the next chunk made durable.
            while in_flight.len() < concurrency.max(1) {
                if let Some(run) = ready.pop_front() {
                    in_flight.push(run);
                } else if steps.peek().is_some() {
                    let chunk = steps.by_ref().take(BATCH_CHUNK).collect();
                    ready.extend(self.durable_chunk(chunk));
                } else {
                    break;
                }
            }
            match in_flight.next().await {
                Some(result) => first = first.and(result.map(|_| ())),
                None => return first,
            }
        }
    }

    /// Appends a chunk's intents in one durable append and returns its effects, each closing
    /// its own intent; if the append fails, one failed run instead (no effect without its
    /// intent).
    fn durable_chunk<'s, 'a: 's>(
        &'s self,
        steps: Vec<BatchStep<'a>>,
    ) -> Vec<futures::future::BoxFuture<'s, Result<Done, UnitError>>> {
        let durable = {
            let regarding = self.regarding();
            let trace = self.record_trace();
            let mut intents = Vec::with_capacity(steps.len());
            let mut effects = Vec::with_capacity(steps.len());
            for (spec, effect) in steps {
                let (action, object, intent) = self.step_intent(spec, regarding.clone());
                intents.push((intent, trace));
                effects.push((action, object, effect));
            }
            self.append_in_pass(trace, intents)
                .map(|seqs| (seqs, effects))
        };
        let (seqs, effects) = match durable {
            Ok(d) => d,
            Err(e) => return vec![Box::pin(futures::future::ready(Err(e)))],
        };
        if let Some((action, _, _)) = effects.first() {
            faults::crash_point_in(faults::INTENT_DURABLE, &self.unit, action);
        }
        seqs.into_iter()
            .zip(effects)
            .map(|(seq, (action, object, effect))| {
                let run: futures::future::BoxFuture<'s, Result<Done, UnitError>> =
                    Box::pin(async move {
                        let span = Self::step_span(action, &object);
                        self.run_one(seq, action, effect(), span).await
                    });
                run
            })
            .collect()
    }

    fn step_span(action: &str, object: &ObjectRef) -> tracing::Span {
        tracing::info_span!(
            "step",
            otel.name = format!("{action} {}", object.kind),
            action = %action,
            object = %object,
            otel.status_code = tracing::field::Empty,
            error.message = tracing::field::Empty,
        )
    }

    /// One effect whose intent is already durable, in its step span: the effect, its outcome.
    async fn run_one(
        &self,
        seq: Seq,
        action: &'static str,
        effect: futures::future::BoxFuture<'_, Result<Done, UnitError>>,
        span: tracing::Span,
    ) -> Result<Done, UnitError> {
        let result = async {
            if let Some(stall) = faults::stall_for(&self.unit, action) {
                tracing::warn!(?stall, "LVMS_STALL_IN reached: the effect waits");
                tokio::time::sleep(stall).await;
            }
            let started = Instant::now();
            let result = effect.await;
            faults::crash_point_in(faults::APPLIED, &self.unit, action);
            self.close(seq, &result, started)?;
            faults::crash_point_in(faults::STEP_OUTCOME, &self.unit, action);
            if result.is_ok()
                && let Ok(mut p) = self.pass.lock()
            {
                p.applied += 1;
            }
            result
        }
        .instrument(span.clone())
        .await;
        if let Err(e) = &result {
            crate::error::record_span_error(&span, e);
        }
        result
    }

    /// Close an intent (a step, or a replayed one) with the effect's result.
    pub fn close(
        &self,
        seq: Seq,
        result: &Result<Done, UnitError>,
        started: Instant,
    ) -> Result<Seq, UnitError> {
        let outcome = match result {
            Ok(done) => OutcomeResult::Ok(done.clone()),
            Err(e) => OutcomeResult::Err {
                reason: e.reason.clone(),
                message: e.message.clone(),
                retryable: e.retryable,
            },
        };
        self.journal
            .append_outcome_claimed(
                self.claim.as_ref(),
                seq,
                outcome,
                started.elapsed(),
                self.record_trace(),
            )
            .map_err(UnitError::journal)
    }
}
