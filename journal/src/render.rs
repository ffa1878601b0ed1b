//! Query filters and output formatting for `lvms journal inspect` (pure functions).
//!
//! # JSON schema (stable, version 1)
//!
//! `render_json` prints one JSON array of entries; `render_jsonl` prints one entry per line.
//! Every entry is an object with these fields:
//!
//! | field | type | meaning |
//! |---|---|---|
//! | `v` | number | schema version, `1` |
//! | `seq` | number | journal sequence number |
//! | `kind` | string | `intent`, `outcome`, `published`, `snapshot` or `corrupt` (`observed` until format 3, never written) |
//! | `time` | string or null | append time, RFC 3339 UTC with milliseconds (null when corrupt) |
//! | `at_ms` | number or null | append time, unix milliseconds |
//! | `unit` | string or null | reconcile unit |
//! | `object` | object or null | `{kind, namespace, name, uid, generation}`; namespace `""` = cluster-scoped |
//! | `trace_id` | string or null | 32 lowercase hex digits |
//! | `span_id` | string or null | 16 lowercase hex digits |
//! | `open` | bool | true only for an intent that has no outcome yet |
//! | `body` | object or null | kind-specific fields, below |
//! | `reason` | string | only for `corrupt`: why the record could not be read |
//!
//! `body` per kind:
//! * intent: `{action, args, desired_digest, idempotency_key, lease_epoch, regarding}`
//!   (`args`: what the step acts with, e.g. a host command's argv; `[]` before format 3)
//! * outcome: `{intent_seq, duration_ms, ok: bool, regarding, resource_version?, detail?, event?, replay?, summary?, applied?, quiet?, reason?, message?, retryable?}`
//!   (`regarding`: the other objects its Events go to, as objects like `object`; `[]` in format 1)
//!   (when ok: `event` `{type, reason, note}` or null, `replay` (`already-done`, `redone`,
//!   `not-done`, `superseded`, `rechecked`) or null, `summary`/`applied` of a pass or null,
//!   `quiet`, and `detail`, every field flattened into one string map as format 2 stored it;
//!   `reason`/`message`/`retryable` when not)
//! * published: `{kind: "event"|"status", dedupe_key, summary}`
//! * snapshot: `{projection, upto_seq, state_len}`
//!
//! Fields may be added in later versions; existing fields keep their names and meaning.

use std::str::FromStr;

use serde_json::{Value, json};

use crate::error::{CorruptRecord, JournalError, Result};
use crate::journal::Journal;
use crate::record::{Body, ObjectRef, OutcomeResult, PublishKind, Record, Replayed, TraceId};
use crate::time::rfc3339_utc;

/// `KIND/NAMESPACE/NAME`, or `KIND/NAME` for cluster-scoped objects. Kind matches case-insensitively.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectFilter {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl FromStr for ObjectFilter {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split('/').collect();
        let (kind, namespace, name) = match parts.as_slice() {
            [k, n] => (*k, "", *n),
            [k, ns, n] => (*k, *ns, *n),
            _ => {
                return Err(format!(
                    "object {s:?}: expected KIND/NAMESPACE/NAME or KIND/NAME"
                ));
            }
        };
        if kind.is_empty() || name.is_empty() {
            return Err(format!("object {s:?}: kind and name must not be empty"));
        }
        Ok(Self {
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        })
    }
}

impl std::fmt::Display for ObjectFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.kind, self.name)
        } else {
            write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
        }
    }
}

impl ObjectFilter {
    pub fn matches(&self, o: &ObjectRef) -> bool {
        o.kind.eq_ignore_ascii_case(&self.kind)
            && o.namespace == self.namespace
            && o.name == self.name
    }
}

/// What `inspect` selects. All set conditions must hold. Corrupt records always pass (their
/// fields are unknown and hiding them would hide damage), subject only to `limit`; with an
/// object filter, those the object index lists under that object (the index entry is written
/// in the same batch as the record, so it names the object a damaged record was about).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub unit: Option<String>,
    pub object: Option<ObjectFilter>,
    /// Only records appended at or after this unix millisecond.
    pub since_ms: Option<u64>,
    /// Only intents that have no outcome.
    pub open_only: bool,
    pub trace_id: Option<TraceId>,
    /// Keep only the newest `limit` matching entries (still printed oldest first).
    pub limit: Option<usize>,
}

impl Filter {
    pub fn matches(&self, rec: &Record, open: bool) -> bool {
        (!self.open_only || open)
            && self.unit.as_deref().is_none_or(|u| rec.unit() == Some(u))
            && self
                .object
                .as_ref()
                .is_none_or(|f| rec.object().is_some_and(|o| f.matches(o)))
            && self.since_ms.is_none_or(|s| rec.at_ms >= s)
            && self.trace_id.is_none_or(|t| rec.trace.trace_id == t)
    }
}

/// One row of `inspect` output.
// Entries are built once per query for output; boxing the common variant buys nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Record { record: Record, open: bool },
    Corrupt(CorruptRecord),
}

impl Entry {
    pub fn seq(&self) -> u64 {
        match self {
            Entry::Record { record, .. } => record.seq,
            Entry::Corrupt(c) => c.seq,
        }
    }
}

impl Journal {
    /// Records matching `filter`, oldest first. Store errors abort; corrupt records become
    /// entries. An object filter reads the object index (and scans only what was written
    /// before the index existed); anything else scans the log.
    pub fn query(&self, filter: &Filter) -> Result<Vec<Entry>> {
        let open: std::collections::BTreeSet<u64> = self.open_intent_seqs()?.into_iter().collect();
        let mut out = Vec::new();
        let keep = |item: Result<Record>, out: &mut Vec<Entry>| -> Result<()> {
            match item {
                Ok(record) => {
                    let is_open =
                        matches!(record.body, Body::Intent(_)) && open.contains(&record.seq);
                    if filter.matches(&record, is_open) {
                        out.push(Entry::Record {
                            record,
                            open: is_open,
                        });
                    }
                }
                Err(JournalError::Corrupt(c)) => out.push(Entry::Corrupt(c)),
                Err(e) => return Err(e),
            }
            Ok(())
        };
        match &filter.object {
            Some(o) => {
                // Newest first through the index, so a limit stops reading early (`lvms
                // explain` asks for the newest records of objects with long histories).
                let seqs = self.object_seqs(&o.kind, &o.namespace, &o.name)?;
                for seq in seqs.into_iter().rev() {
                    if filter.limit.is_some_and(|n| out.len() >= n) {
                        break;
                    }
                    let item = self.get(seq).and_then(|r| {
                        r.ok_or_else(|| {
                            JournalError::Corrupt(CorruptRecord {
                                seq,
                                reason: format!(
                                    "the object index lists {seq} under {o}, which is not in the log"
                                ),
                            })
                        })
                    });
                    keep(item, &mut out)?;
                }
                out.reverse();
                if filter.limit.is_none_or(|n| out.len() < n) {
                    let mut older = Vec::new();
                    for item in self.iter_range(..self.object_index_from()) {
                        keep(item, &mut older)?;
                    }
                    older.append(&mut out);
                    out = older;
                }
            }
            None => {
                for item in self.iter() {
                    keep(item, &mut out)?;
                }
            }
        }
        if let Some(n) = filter.limit {
            let skip = out.len().saturating_sub(n);
            out.drain(..skip);
        }
        Ok(out)
    }

    /// Records of one unit (full scan).
    pub fn by_unit(&self, unit: &str) -> Result<Vec<Entry>> {
        self.query(&Filter {
            unit: Some(unit.into()),
            ..Filter::default()
        })
    }

    /// Records about one object (full scan).
    pub fn by_object(&self, object: ObjectFilter) -> Result<Vec<Entry>> {
        self.query(&Filter {
            object: Some(object),
            ..Filter::default()
        })
    }

    /// Records of one trace (full scan).
    pub fn by_trace(&self, trace_id: TraceId) -> Result<Vec<Entry>> {
        self.query(&Filter {
            trace_id: Some(trace_id),
            ..Filter::default()
        })
    }

    /// Records appended at or after `since_ms` (full scan; the clock may step backwards).
    pub fn since(&self, since_ms: u64) -> Result<Vec<Entry>> {
        self.query(&Filter {
            since_ms: Some(since_ms),
            ..Filter::default()
        })
    }
}

/// The RECORD cell of a table row: what the record is (`Intent lvcreate`, `Outcome of 7`, ...).
pub fn record_cell(body: &Body) -> String {
    match body {
        Body::Intent(i) => format!("Intent {}", i.action),
        Body::Outcome(o) => format!("Outcome of {}", o.intent_seq),
        Body::Published(p) => match p.kind {
            PublishKind::Event => format!("Event {}", p.dedupe_key),
            PublishKind::Status => format!("Status {}", p.dedupe_key),
        },
        Body::Snapshot(s) => format!("Snapshot {}", s.projection),
    }
}

/// The RESULT cell of a table row: open/closed, ok with its facts, or the error.
pub fn result_cell(body: &Body, open: bool) -> String {
    match body {
        Body::Intent(_) if open => "OPEN".into(),
        Body::Intent(_) => "closed".into(),
        Body::Outcome(o) => match &o.result {
            OutcomeResult::Ok(d) => {
                let mut cell = String::from("ok");
                if let Some(rv) = &d.resource_version {
                    cell.push_str(&format!(" rv={rv}"));
                }
                if let Some(r) = d.replay {
                    cell.push_str(&format!(" replay={r}"));
                }
                if let Some(e) = &d.event {
                    cell.push_str(&format!(" event={}", e.reason));
                }
                cell
            }
            OutcomeResult::Err {
                reason,
                message,
                retryable,
            } => format!(
                "err{} {reason}: {message}",
                if *retryable { "(retryable)" } else { "" }
            ),
        },
        Body::Published(p) => p.summary.clone(),
        Body::Snapshot(s) => format!("upto {} ({} bytes)", s.upto_seq, s.state.len()),
    }
}

/// Keeps a table on one line per row: control characters become spaces.
fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

const HEADERS: [&str; 8] = [
    "SEQ", "TIME", "UNIT", "OBJECT", "RECORD", "RESULT", "DURATION", "TRACE",
];

/// Aligned text table: seq, time (RFC 3339 UTC), unit, object, record, result, duration, trace id.
/// Corrupt records appear as rows with record `CORRUPT` and the reason as result.
pub fn render_table(entries: &[Entry]) -> String {
    let rows: Vec<[String; 8]> = entries
        .iter()
        .map(|e| match e {
            Entry::Record { record, open } => [
                record.seq.to_string(),
                rfc3339_utc(record.at_ms),
                record.unit().unwrap_or("-").to_string(),
                record.object().map_or("-".into(), |o| o.to_string()),
                record_cell(&record.body),
                result_cell(&record.body, *open),
                match &record.body {
                    Body::Outcome(o) => format!("{}ms", o.duration_ms),
                    _ => "-".into(),
                },
                record.trace.trace_id.to_string(),
            ],
            Entry::Corrupt(c) => [
                c.seq.to_string(),
                "-".into(),
                "-".into(),
                "-".into(),
                "CORRUPT".into(),
                c.reason.clone(),
                "-".into(),
                "-".into(),
            ],
        })
        .map(|r| r.map(|c| clean(&c)))
        .collect();
    let mut widths = HEADERS.map(str::len);
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[String]| {
        let mut l = String::new();
        for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                l.push_str(c);
            } else {
                l.push_str(&format!("{c:<w$}  "));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&HEADERS.map(String::from));
    for r in &rows {
        line(r);
    }
    out
}

fn object_json(o: &ObjectRef) -> Value {
    json!({"kind": o.kind, "namespace": o.namespace, "name": o.name, "uid": o.uid, "generation": o.generation})
}

/// One entry as a JSON value following the schema in the module docs.
pub fn entry_json(entry: &Entry) -> Value {
    match entry {
        Entry::Corrupt(c) => json!({
            "v": 1, "seq": c.seq, "kind": "corrupt", "time": null, "at_ms": null, "unit": null,
            "object": null, "trace_id": null, "span_id": null, "open": false, "body": null,
            "reason": c.reason,
        }),
        Entry::Record { record, open } => {
            let body = match &record.body {
                Body::Intent(i) => json!({
                    "action": i.action, "args": i.args, "desired_digest": i.desired_digest,
                    "idempotency_key": i.idempotency_key, "lease_epoch": i.lease_epoch,
                    "regarding": i.regarding.iter().map(object_json).collect::<Vec<_>>(),
                }),
                Body::Outcome(o) => match &o.result {
                    OutcomeResult::Ok(d) => json!({
                        "intent_seq": o.intent_seq, "duration_ms": o.duration_ms, "ok": true,
                        "resource_version": d.resource_version, "detail": d.flat(),
                        "event": d.event.as_ref().map(|e| json!({
                            "type": e.type_name(), "reason": e.reason, "note": e.note,
                        })),
                        "replay": d.replay.map(Replayed::as_str),
                        "summary": d.summary, "applied": d.applied, "quiet": d.quiet,
                        "regarding": o.regarding.iter().map(object_json).collect::<Vec<_>>(),
                    }),
                    OutcomeResult::Err {
                        reason,
                        message,
                        retryable,
                    } => json!({
                        "intent_seq": o.intent_seq, "duration_ms": o.duration_ms, "ok": false,
                        "reason": reason, "message": message, "retryable": retryable,
                        "regarding": o.regarding.iter().map(object_json).collect::<Vec<_>>(),
                    }),
                },
                Body::Published(p) => json!({
                    "kind": match p.kind { PublishKind::Event => "event", PublishKind::Status => "status" },
                    "dedupe_key": p.dedupe_key, "source_seq": p.source_seq, "count": p.count,
                    "summary": p.summary,
                }),
                Body::Snapshot(s) => {
                    json!({"projection": s.projection, "upto_seq": s.upto_seq, "state_len": s.state.len()})
                }
            };
            json!({
                "v": 1,
                "seq": record.seq,
                "kind": record.body.kind_name(),
                "time": rfc3339_utc(record.at_ms),
                "at_ms": record.at_ms,
                "unit": record.unit(),
                "object": record.object().map(object_json),
                "trace_id": record.trace.trace_id.to_string(),
                "span_id": record.trace.span_id.to_string(),
                "open": open,
                "body": body,
            })
        }
    }
}

/// A pretty-printed JSON array of entries.
pub fn render_json(entries: &[Entry]) -> String {
    let v = Value::Array(entries.iter().map(entry_json).collect());
    // Serializing a Value built from strings and numbers cannot fail.
    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
}

/// One compact JSON object per line.
pub fn render_jsonl(entries: &[Entry]) -> String {
    entries
        .iter()
        .map(|e| entry_json(e).to_string() + "\n")
        .collect()
}
