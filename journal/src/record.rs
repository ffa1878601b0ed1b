//! The five record kinds and their common header.

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

fn parse_hex<const N: usize>(s: &str) -> Result<[u8; N], String> {
    let s = s.trim();
    if s.len() != 2 * N || !s.is_ascii() {
        return Err(format!("expected {} hex digits, got {:?}", 2 * N, s));
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|e| format!("{s:?}: {e}"))?;
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
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_hex(s).map(TraceId)
    }
}
impl FromStr for SpanId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
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

/// What a watch delivered to a unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observed {
    pub unit: String,
    pub object: ObjectRef,
    pub digest: String,
}

/// A side effect about to run. Durable before the effect starts (write-ahead).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    pub unit: String,
    pub object: ObjectRef,
    pub action: String,
    pub desired_digest: String,
    pub idempotency_key: String,
    /// Fencing token: appends carrying an epoch older than one already seen are refused.
    pub lease_epoch: u64,
    /// Other objects this intent's projections (Events) regard, as they were when it was
    /// written, UIDs included: a later object of the same name is never re-aimed at.
    /// Format 2; empty in records of format 1.
    pub regarding: Vec<ObjectRef>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OutcomeResult {
    Ok {
        resource_version: Option<String>,
        detail: BTreeMap<String, String>,
    },
    Err {
        reason: String,
        message: String,
        retryable: bool,
    },
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
    Observed(Observed),
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
            Body::Observed(_) => "observed",
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
            Body::Observed(o) => Some(&o.unit),
            Body::Intent(i) => Some(&i.unit),
            Body::Outcome(o) => Some(&o.unit),
            Body::Published(p) => Some(&p.unit),
            Body::Snapshot(_) => None,
        }
    }

    pub fn object(&self) -> Option<&ObjectRef> {
        match &self.body {
            Body::Observed(o) => Some(&o.object),
            Body::Intent(i) => Some(&i.object),
            Body::Outcome(o) => Some(&o.object),
            Body::Published(p) => p.object.as_ref(),
            Body::Snapshot(_) => None,
        }
    }
}
