//! Journal records as steps: each intent with its outcome (or still open), and which steps are
//! still failing (their latest outcome for the same unit, object and action is an error).

use std::collections::BTreeMap;

use lvms_journal::{Body, OutcomeResult, rfc3339_utc};
use serde::Serialize;

use super::facts::JournalFacts;

/// One intent and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    /// The journal it is from (`operator`, `node/<name>`).
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub seq: u64,
    pub at: String,
    #[serde(skip)]
    pub at_ms: u64,
    pub unit: String,
    pub object: String,
    pub action: String,
    pub result: StepResult,
    pub trace_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "state")]
pub enum StepResult {
    /// No outcome yet: the effect may or may not have happened; replay resolves it.
    Open,
    Ok,
    Err {
        reason: String,
        message: String,
        retryable: bool,
    },
    /// Closed, but its outcome was not among the records read.
    Closed,
}

impl Step {
    /// `reason: message` of a failed step.
    pub fn error(&self) -> Option<String> {
        match &self.result {
            StepResult::Err {
                reason, message, ..
            } => Some(format!("{reason}: {message}")),
            _ => None,
        }
    }
}

/// The steps of one journal's records, oldest first.
pub fn steps(j: &JournalFacts) -> Vec<Step> {
    let outcomes: BTreeMap<u64, &OutcomeResult> = j
        .records
        .iter()
        .filter_map(|(r, _)| match &r.body {
            Body::Outcome(o) => Some((o.intent_seq, &o.result)),
            _ => None,
        })
        .collect();
    j.records
        .iter()
        .filter_map(|(r, open)| {
            let Body::Intent(i) = &r.body else {
                return None;
            };
            let result = match (open, outcomes.get(&r.seq)) {
                (true, _) => StepResult::Open,
                (false, Some(OutcomeResult::Ok(_))) => StepResult::Ok,
                (
                    false,
                    Some(OutcomeResult::Err {
                        reason,
                        message,
                        retryable,
                    }),
                ) => StepResult::Err {
                    reason: reason.clone(),
                    message: message.clone(),
                    retryable: *retryable,
                },
                (false, None) => StepResult::Closed,
            };
            Some(Step {
                source: j.label.clone(),
                node: j.node.clone(),
                seq: r.seq,
                at: rfc3339_utc(r.at_ms),
                at_ms: r.at_ms,
                unit: i.unit.clone(),
                object: i.object.to_string(),
                action: i.action.clone(),
                result,
                trace_id: r.trace.trace_id.to_string(),
            })
        })
        .collect()
}

/// Steps whose latest attempt (same journal, unit, object and action) failed: what still holds
/// something back. Newest first.
pub fn still_failing(steps: &[Step]) -> Vec<Step> {
    let mut latest: BTreeMap<(&str, &str, &str, &str), &Step> = BTreeMap::new();
    for s in steps {
        if matches!(s.result, StepResult::Closed | StepResult::Open) {
            continue;
        }
        let key = (
            s.source.as_str(),
            s.unit.as_str(),
            s.object.as_str(),
            s.action.as_str(),
        );
        if latest.get(&key).is_none_or(|l| l.seq < s.seq) {
            latest.insert(key, s);
        }
    }
    let mut out: Vec<Step> = latest
        .into_values()
        .filter(|s| matches!(s.result, StepResult::Err { .. }))
        .cloned()
        .collect();
    out.sort_by(|a, b| b.at_ms.cmp(&a.at_ms).then(b.seq.cmp(&a.seq)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lvms_journal::{Done, Intent, ObjectRef, Outcome, Record, Trace};

    fn rec(seq: u64, body: Body) -> Record {
        Record {
            seq,
            at_ms: 1_700_000_000_000 + seq,
            trace: Trace::default(),
            body,
        }
    }

    fn obj(name: &str) -> ObjectRef {
        ObjectRef {
            kind: "LVMVolumeGroup".into(),
            namespace: "ns".into(),
            name: name.into(),
            ..ObjectRef::default()
        }
    }

    fn intent(seq: u64, name: &str) -> Record {
        rec(
            seq,
            Body::Intent(Intent {
                unit: format!("vg/{name}"),
                object: obj(name),
                action: "pass".into(),
                args: vec![],
                desired_digest: String::new(),
                idempotency_key: String::new(),
                lease_epoch: 0,
                regarding: vec![],
            }),
        )
    }

    fn outcome(seq: u64, of: u64, name: &str, result: OutcomeResult) -> Record {
        rec(
            seq,
            Body::Outcome(Outcome {
                intent_seq: of,
                unit: format!("vg/{name}"),
                object: obj(name),
                result,
                duration_ms: 0,
                regarding: vec![],
            }),
        )
    }

    fn err(reason: &str) -> OutcomeResult {
        OutcomeResult::Err {
            reason: reason.into(),
            message: "m".into(),
            retryable: true,
        }
    }

    #[test]
    fn a_step_fails_until_a_later_attempt_succeeds() {
        let j = JournalFacts {
            label: "node/node-b".into(),
            node: Some("node-b".into()),
            records: vec![
                (intent(1, "a"), false),
                (outcome(2, 1, "a", err("DevicePathCheckFailed")), false),
                (intent(3, "b"), false),
                (outcome(4, 3, "b", err("VGCreateFailed")), false),
                (intent(5, "b"), false),
                (
                    outcome(6, 5, "b", OutcomeResult::Ok(Done::default())),
                    false,
                ),
                (intent(7, "c"), true),
            ],
            ..JournalFacts::default()
        };
        let all = steps(&j);
        assert_eq!(all.len(), 4);
        assert_eq!(all[3].result, StepResult::Open);
        let failing = still_failing(&all);
        assert_eq!(failing.len(), 1, "{failing:?}");
        assert_eq!(failing[0].object, "LVMVolumeGroup/ns/a");
        assert_eq!(
            failing[0].error().as_deref(),
            Some("DevicePathCheckFailed: m")
        );
        assert_eq!(failing[0].node.as_deref(), Some("node-b"));
    }
}
