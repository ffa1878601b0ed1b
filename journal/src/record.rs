//! The four record kinds and their common header.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Journal sequence number. Assigned by the single writer, starting at 1, stored big-endian.
pub type Seq = u64;

/// W3C/OpenTelemetry trace id (16 bytes, printed as 32 lowercase hex digits).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord, Serialize, Deserialize,
)]
pub struct TraceId(pub [u8; 16]);

/// OpenTelemetry span id (8 bytes, printed as 16 lowercase hex digits).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord, Serialize, Deserialize,
)]
pub struct SpanId(pub [u8; 8]);

fn write_hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    bytes.iter().try_for_each(|b| write!(f, "{b:02x}"))
}

/// Why a trace or span id does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseIdError {
    #[error("expected {expected} hex digits, got {text:?}")]
    Length { expected: usize, text: String },
    #[error("{text:?}: {source}")]
    Digit {
        text: String,
        #[source]
        source: std::num::ParseIntError,
    },
}

fn parse_hex<const N: usize>(s: &str) -> Result<[u8; N], ParseIdError> {
    let s = s.trim();
    if s.len() != 2 * N || !s.is_ascii() {
        return Err(ParseIdError::Length {
            expected: 2 * N,
            text: s.to_string(),
        });
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte =
            u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|source| ParseIdError::Digit {
                text: s.to_string(),
                source,
            })?;
    }
    Ok(out)
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, &self.0)
    }
}
impl fmt::Display for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, &self.0)
    }
}
impl FromStr for TraceId {
    type Err = ParseIdError;
    fn from_str(s: &str) -> Result<Self, ParseIdError> {
        parse_hex(s).map(TraceId)
    }
}
impl FromStr for SpanId {
    type Err = ParseIdError;
    fn from_str(s: &str) -> Result<Self, ParseIdError> {
        parse_hex(s).map(SpanId)
    }
}

/// The trace context every append carries (one reconcile = one trace).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Trace {
    pub trace_id: TraceId,
    pub span_id: SpanId,
}

/// A Kubernetes object, by value: the journal knows nothing of Kubernetes types.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct ObjectRef {
    pub kind: String,
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub generation: i64,
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.kind, self.name)
        } else {
            write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// A domain's step actions (operator object steps, volume-group host steps, ...). Each is
/// stored as its [`name`](Action::name) in [`Intent::action`]; replay parses it back and an
/// unknown name is an error to report, never a step to skip.
pub trait Action: Copy + Eq + fmt::Debug + Send + Sync + 'static {
    /// Every action of the domain (for parsing).
    const ALL: &'static [Self];

    /// The stored name (stable across releases: journals outlive binaries).
    fn name(self) -> &'static str;

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|a| a.name() == name)
    }
}

/// A side effect about to run. Durable before the effect starts (write-ahead).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    pub unit: String,
    pub object: ObjectRef,
    /// An [`Action`]'s name.
    pub action: String,
    /// What the step acts with (a host command's argv, finalizer names, a reason): read back
    /// by replay. Format 3; empty in older formats, whose host steps kept the argv in
    /// `desired_digest`.
    pub args: Vec<String>,
    /// Digest of the desired state the step writes (empty when it writes none).
    pub desired_digest: String,
    pub idempotency_key: String,
    /// Fencing token: appends carrying an epoch older than one already seen are refused.
    pub lease_epoch: u64,
    /// Other objects this intent's projections (Events) regard, as they were when it was
    /// written, UIDs included: a later object of the same name is never re-aimed at.
    /// Format 2; empty in records of format 1.
    pub regarding: Vec<ObjectRef>,
}

/// An intent whose action its domain does not know (written by a newer release, or a typo
/// in a test): reported on the intent, never skipped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "intent of unit {unit} on {object} has action {action:?}, which this release does not know"
)]
pub struct UnknownAction {
    pub unit: String,
    pub object: Box<ObjectRef>,
    pub action: String,
}

impl Intent {
    /// The action as domain `A` knows it; an unknown name says which record and what it held.
    pub fn action_as<A: Action>(&self) -> std::result::Result<A, UnknownAction> {
        A::parse(&self.action).ok_or_else(|| UnknownAction {
            unit: self.unit.clone(),
            object: Box::new(self.object.clone()),
            action: self.action.clone(),
        })
    }
}

/// An Event a step asks its unit's publisher to emit (about the step's object, and the
/// objects the intent regards).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventNote {
    pub warning: bool,
    pub reason: String,
    pub note: String,
}

impl EventNote {
    pub fn normal(reason: impl Into<String>, note: impl Into<String>) -> Self {
        EventNote {
            warning: false,
            reason: reason.into(),
            note: note.into(),
        }
    }

    pub fn warning(reason: impl Into<String>, note: impl Into<String>) -> Self {
        EventNote {
            warning: true,
            reason: reason.into(),
            note: note.into(),
        }
    }

    pub fn type_name(&self) -> &'static str {
        if self.warning { "Warning" } else { "Normal" }
    }
}

/// How replay resolved an intent left open by a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Replayed {
    /// The effect is in the world: nothing was redone.
    AlreadyDone,
    /// Replay performed the effect (again).
    Redone,
    /// The effect is not in the world; the next pass decides afresh.
    NotDone,
    /// The effect is no longer wanted.
    Superseded,
    /// The unit recomputes this every pass (status, checks): nothing to resolve.
    Rechecked,
}

impl Replayed {
    pub fn as_str(self) -> &'static str {
        match self {
            Replayed::AlreadyDone => "already-done",
            Replayed::Redone => "redone",
            Replayed::NotDone => "not-done",
            Replayed::Superseded => "superseded",
            Replayed::Rechecked => "rechecked",
        }
    }
}

impl fmt::Display for Replayed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a successful step (or pass, or replay) reports. Code reads the typed fields; `facts`
/// are for people reading the journal (argv, timings, paths) and are never read by code.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Done {
    /// The object's resourceVersion after an API write.
    pub resource_version: Option<String>,
    /// The Event to publish for this step.
    pub event: Option<EventNote>,
    /// Set when replay, not a step, closed the intent.
    pub replay: Option<Replayed>,
    /// Pass outcomes: one line on what the pass did.
    pub summary: Option<String>,
    /// Pass outcomes: how many steps the pass applied.
    pub applied: Option<u32>,
    /// Pass outcomes: success is no news (its steps told it), so no Event is made of it.
    pub quiet: bool,
    pub facts: BTreeMap<String, String>,
}

impl Done {
    pub fn event(event: EventNote) -> Self {
        Done {
            event: Some(event),
            ..Done::default()
        }
    }

    pub fn replayed(how: Replayed) -> Self {
        Done {
            replay: Some(how),
            ..Done::default()
        }
    }

    pub fn resource_version(rv: Option<String>) -> Self {
        Done {
            resource_version: rv,
            ..Done::default()
        }
    }

    pub fn with_fact(mut self, key: &str, value: impl Into<String>) -> Self {
        self.facts.insert(key.to_string(), value.into());
        self
    }

    pub fn with_event(mut self, event: EventNote) -> Self {
        self.event = Some(event);
        self
    }

    /// The flat `key: value` view of earlier formats (and of `inspect`'s JSON `detail`).
    pub fn flat(&self) -> BTreeMap<String, String> {
        let mut d = self.facts.clone();
        let mut put = |k: &str, v: String| {
            d.insert(k.to_string(), v);
        };
        if let Some(rv) = &self.resource_version {
            put("resourceVersion", rv.clone());
        }
        if let Some(e) = &self.event {
            put("event.type", e.type_name().to_string());
            put("event.reason", e.reason.clone());
            put("event.note", e.note.clone());
        }
        if let Some(r) = self.replay {
            put("replay", r.as_str().to_string());
        }
        if let Some(s) = &self.summary {
            put("summary", s.clone());
        }
        if let Some(n) = self.applied {
            put("applied", n.to_string());
        }
        if self.quiet {
            put("quiet", "true".to_string());
        }
        d
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OutcomeResult {
    Ok(Done),
    Err {
        reason: String,
        message: String,
        retryable: bool,
    },
}

impl OutcomeResult {
    /// The success report, if this is one.
    pub fn done(&self) -> Option<&Done> {
        match self {
            OutcomeResult::Ok(d) => Some(d),
            OutcomeResult::Err { .. } => None,
        }
    }
}

/// The result of an intent. `unit` and `object` are copied from the intent by the journal
/// so that filters and tables need no join.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub intent_seq: Seq,
    pub unit: String,
    pub object: ObjectRef,
    pub result: OutcomeResult,
    pub duration_ms: u64,
    /// Copied from the intent (format 2; empty in records of format 1).
    pub regarding: Vec<ObjectRef>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PublishKind {
    Event,
    Status,
}

/// An Event or status write that went out; the latest per `dedupe_key` is indexed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    pub unit: String,
    pub object: Option<ObjectRef>,
    pub kind: PublishKind,
    pub dedupe_key: String,
    /// The record (usually an Outcome) this publication projects; a publisher that finds
    /// `source_seq` already covered for its key knows the write went out (exactly once).
    pub source_seq: Seq,
    /// How many times this key has been published (Event series count; 1 for status).
    pub count: u64,
    pub summary: String,
}

/// A projection's serialized state, folding every record with seq <= `upto_seq`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub projection: String,
    pub upto_seq: Seq,
    pub state: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Body {
    Intent(Intent),
    Outcome(Outcome),
    Published(Published),
    Snapshot(Snapshot),
}

/// One journal record: header + body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub seq: Seq,
    /// Wall clock at append, unix milliseconds.
    pub at_ms: u64,
    pub trace: Trace,
    pub body: Body,
}

impl Body {
    /// Stable lowercase kind name (used in JSON and stats).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Body::Intent(_) => "intent",
            Body::Outcome(_) => "outcome",
            Body::Published(_) => "published",
            Body::Snapshot(_) => "snapshot",
        }
    }
}

impl Record {
    pub fn unit(&self) -> Option<&str> {
        match &self.body {
            Body::Intent(i) => Some(&i.unit),
            Body::Outcome(o) => Some(&o.unit),
            Body::Published(p) => Some(&p.unit),
            Body::Snapshot(_) => None,
        }
    }

    pub fn object(&self) -> Option<&ObjectRef> {
        match &self.body {
            Body::Intent(i) => Some(&i.object),
            Body::Outcome(o) => Some(&o.object),
            Body::Published(p) => p.object.as_ref(),
            Body::Snapshot(_) => None,
        }
    }
}
