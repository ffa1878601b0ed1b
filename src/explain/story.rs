//! The explanation of one subject: its state and conditions, what holds it back, open intents,
//! Events and journal records newest first, and the traces behind them.

use lvms_journal::render::{record_cell, result_cell};
use lvms_journal::rfc3339_utc;
use serde::Serialize;
use serde_json::Value;

use super::facts::{EventFact, Facts};
use super::holdback::{Holdback, holdbacks};
use super::steps::{Step, StepResult, steps, still_failing};

/// How many journal records and Events the story shows (the JSON has the same cut).
pub const STORY_LINES: usize = 15;
pub const EVENT_LINES: usize = 8;

#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    pub subject: String,
    pub found: bool,
    /// One-line facts from the object's status (state, phase, ready, ...).
    pub state: Vec<String>,
    pub conditions: Vec<Condition>,
    pub held_back: Vec<Holdback>,
    pub open_intents: Vec<Step>,
    pub events: Vec<EventFact>,
    /// Journal records about the subject, newest first.
    pub records: Vec<Line>,
    /// How many records matched in all (the story shows the newest [`STORY_LINES`]).
    pub records_matched: usize,
    pub traces: Vec<TraceLink>,
    pub journals: Vec<JournalNote>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

/// One journal record, as `lvms journal inspect` shows it, with the journal it is from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Line {
    pub source: String,
    pub seq: u64,
    pub at: String,
    #[serde(skip)]
    pub at_ms: u64,
    pub unit: String,
    pub object: String,
    pub record: String,
    pub result: String,
    pub trace_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraceLink {
    pub trace_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// Which journals were read and what they gave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JournalNote {
    pub source: String,
    pub path: String,
    pub records: usize,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub corrupt: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn status_facts(obj: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if obj.pointer("/metadata/deletionTimestamp").is_some() {
        let fins = obj
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .map(|f| {
                f.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        out.push(format!("being deleted; finalizers left: [{fins}]"));
    }
    for (label, ptr) in [
        ("state", "/status/state"),
        ("ready", "/status/ready"),
        ("phase", "/status/phase"),
        ("readyToUse", "/status/readyToUse"),
        ("error", "/status/error/message"),
        ("volume", "/spec/volumeName"),
        ("node", "/spec/nodeName"),
        ("class", "/spec/deviceClass"),
        ("size", "/spec/size"),
        ("current size", "/status/currentSize"),
        ("code", "/status/code"),
        ("message", "/status/message"),
    ] {
        match obj.pointer(ptr) {
            Some(Value::String(s)) if !s.is_empty() => out.push(format!("{label} {s}")),
            Some(Value::Bool(b)) => out.push(format!("{label} {b}")),
            _ => {}
        }
    }
    out.extend(audit_fact(obj));
    out
}

/// A node status's last orphan audit (its `lvms.topolvm.io/audit` annotation), in one line.
fn audit_fact(obj: &Value) -> Option<String> {
    let text = obj
        .pointer("/metadata/annotations/lvms.topolvm.io~1audit")?
        .as_str()?;
    let Ok(audit) = serde_json::from_str::<Value>(text) else {
        return Some(
            "audit: the annotation is not an audit (`lvms audit --now` writes it again)".into(),
        );
    };
    let at = audit.get("at").and_then(Value::as_str).unwrap_or("?");
    let found: Vec<String> = audit
        .get("counts")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, n)| Some((k, n.as_u64()?)))
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k}={n}"))
        .collect();
    Some(if found.is_empty() {
        format!("audit {at}: no orphan")
    } else {
        format!("audit {at}: {} (`lvms audit` lists them)", found.join(" "))
    })
}

fn conditions(obj: &Value) -> Vec<Condition> {
    let s = |c: &Value, k: &str| {
        c.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| Condition {
            type_: s(c, "type"),
            status: s(c, "status"),
            reason: s(c, "reason"),
            message: s(c, "message"),
        })
        .collect()
}

/// Jaeger's trace page for an id.
pub fn trace_url(jaeger: &str, id: &str) -> String {
    format!("{}/trace/{id}", jaeger.trim_end_matches('/'))
}

/// The explanation of `f.subject`.
pub fn explain(f: &Facts) -> Explanation {
    let all_steps: Vec<Step> = f.journals.iter().flat_map(steps).collect();
    let failing = still_failing(&all_steps);
    let mut events = f.events.clone();
    events.sort_by(|a, b| b.at.cmp(&a.at));
    let held_back = holdbacks(f, &failing, &events);
    let mut open_intents: Vec<Step> = all_steps
        .iter()
        .filter(|s| s.result == StepResult::Open)
        .cloned()
        .collect();
    open_intents.sort_by_key(|s| std::cmp::Reverse(s.at_ms));

    let mut lines: Vec<Line> = f
        .journals
        .iter()
        .flat_map(|j| {
            j.records.iter().map(|(r, open)| Line {
                source: j.label.clone(),
                seq: r.seq,
                at: rfc3339_utc(r.at_ms),
                at_ms: r.at_ms,
                unit: r.unit().unwrap_or("-").to_string(),
                object: r.object().map_or("-".into(), ToString::to_string),
                record: record_cell(&r.body),
                result: result_cell(&r.body, *open),
                trace_id: r.trace.trace_id.to_string(),
            })
        })
        .collect();
    lines.sort_by(|a, b| b.at_ms.cmp(&a.at_ms).then(b.seq.cmp(&a.seq)));
    let records_matched = lines.len();
    lines.truncate(STORY_LINES);

    // Traces of what holds the subject back first, then of the newest records.
    let mut traces: Vec<TraceLink> = Vec::new();
    let ids = held_back
        .iter()
        .filter_map(|h| h.step.as_ref().and_then(|s| s.trace_id.clone()))
        .chain(open_intents.iter().map(|s| s.trace_id.clone()))
        .chain(lines.iter().map(|l| l.trace_id.clone()));
    for id in ids {
        if traces.len() >= 5 {
            break;
        }
        if id.chars().all(|c| c == '0') || traces.iter().any(|t| t.trace_id == id) {
            continue;
        }
        traces.push(TraceLink {
            url: f.jaeger.as_deref().map(|j| trace_url(j, &id)),
            trace_id: id,
        });
    }

    events.truncate(EVENT_LINES);
    Explanation {
        subject: f.subject.to_string(),
        found: f.object.is_some(),
        state: f.object.as_ref().map(status_facts).unwrap_or_default(),
        conditions: f.object.as_ref().map(conditions).unwrap_or_default(),
        held_back,
        open_intents,
        events,
        records: lines,
        records_matched,
        traces,
        journals: f
            .journals
            .iter()
            .map(|j| JournalNote {
                source: j.label.clone(),
                path: j.path.clone(),
                records: j.records.len(),
                corrupt: j.corrupt.clone(),
                error: j.error.clone(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod audit_fact_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_node_status_shows_its_last_audit_in_one_line() {
        let with =
            |text: &str| json!({"metadata": {"annotations": {"lvms.topolvm.io/audit": text}}});
        let found = with(
            r#"{"at":"2026-11-29T10:00:00Z","counts":{"leaked-lv":2,"missing-lv":0,"stale-pv":1}}"#,
        );
        assert_eq!(
            audit_fact(&found).as_deref(),
            Some("audit 2026-11-29T10:00:00Z: leaked-lv=2 stale-pv=1 (`lvms audit` lists them)")
        );
        let clean = with(r#"{"at":"2026-11-29T10:00:00Z","counts":{"leaked-lv":0}}"#);
        assert_eq!(
            audit_fact(&clean).as_deref(),
            Some("audit 2026-11-29T10:00:00Z: no orphan")
        );
        assert!(audit_fact(&with("{not json")).is_some_and(|l| l.contains("not an audit")));
        assert_eq!(audit_fact(&json!({"metadata": {}})), None);
    }
}
