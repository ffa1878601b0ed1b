//! Shared builders for the integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use lvms_journal::*;
use serde::{Deserialize, Serialize};

pub fn trace(n: u64) -> Trace {
    let mut t = [0u8; 16];
    t[8..].copy_from_slice(&n.to_be_bytes());
    let mut s = [0u8; 8];
    s.copy_from_slice(&(n ^ 0xabcd).to_be_bytes());
    Trace {
        trace_id: TraceId(t),
        span_id: SpanId(s),
    }
}

pub fn object(name: &str) -> ObjectRef {
    ObjectRef {
        kind: "LVMCluster".into(),
        namespace: "openshift-storage".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        generation: 1,
    }
}

pub fn intent(unit: &str, name: &str, key: &str) -> Intent {
    Intent {
        unit: unit.into(),
        object: object(name),
        action: "create-vg".into(),
        args: Vec::new(),
        desired_digest: "d1".into(),
        idempotency_key: key.into(),
        lease_epoch: 1,
        regarding: Vec::new(),
    }
}

/// A cheap unflushed record: a status publication, one key per unit and object.
pub fn status(unit: &str, name: &str) -> Published {
    Published {
        unit: unit.into(),
        object: Some(object(name)),
        kind: PublishKind::Status,
        dedupe_key: format!("status/{unit}/{name}"),
        source_seq: 0,
        count: 1,
        summary: "written".into(),
    }
}

pub fn published(unit: &str, key: &str, summary: &str) -> Published {
    Published {
        unit: unit.into(),
        object: Some(object("c")),
        kind: PublishKind::Event,
        dedupe_key: key.into(),
        source_seq: 0,
        count: 1,
        summary: summary.into(),
    }
}

pub fn ok() -> OutcomeResult {
    OutcomeResult::Ok(Done::resource_version(Some("42".into())))
}

/// A manual clock for age-based tests.
pub fn manual_clock(start: u64) -> (Clock, Arc<AtomicU64>) {
    let now = Arc::new(AtomicU64::new(start));
    let n = now.clone();
    (Clock::from_fn(move || n.load(Ordering::SeqCst)), now)
}

/// Opens a journal at `path` whose clock starts at `start` ms and moves only when told.
pub fn open_with_manual_clock(path: &std::path::Path, start: u64) -> (Journal, Arc<AtomicU64>) {
    let (clock, now) = manual_clock(start);
    let j = Journal::open_with(
        path,
        JournalConfig {
            clock,
            ..JournalConfig::default()
        },
    )
    .unwrap();
    (j, now)
}

pub fn config(flush: FlushPolicy) -> JournalConfig {
    JournalConfig {
        flush,
        ..JournalConfig::default()
    }
}

/// A projection touching every kind: counts by unit/kind, open intents, last publish per key.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub counts: BTreeMap<String, u64>,
    pub open: BTreeMap<u64, String>,
    pub last_published: BTreeMap<String, String>,
    pub last_seq: u64,
}

impl Projection for Summary {
    const NAME: &'static str = "summary";
    fn apply(&mut self, r: &Record) {
        *self
            .counts
            .entry(format!(
                "{}/{}",
                r.unit().unwrap_or("-"),
                r.body.kind_name()
            ))
            .or_default() += 1;
        match &r.body {
            Body::Intent(i) => {
                self.open.insert(r.seq, i.idempotency_key.clone());
            }
            Body::Outcome(o) => {
                self.open.remove(&o.intent_seq);
            }
            Body::Published(p) => {
                self.last_published
                    .insert(p.dedupe_key.clone(), p.summary.clone());
            }
            _ => {}
        }
        self.last_seq = r.seq;
    }
}

/// Checks the open-intent index against the records themselves.
pub fn assert_open_index_consistent(j: &Journal) {
    let mut from_log = std::collections::BTreeSet::new();
    for r in j.iter() {
        let r = r.expect("no corrupt records expected");
        match r.body {
            Body::Intent(_) => {
                from_log.insert(r.seq);
            }
            Body::Outcome(o) => {
                from_log.remove(&o.intent_seq);
            }
            _ => {}
        }
    }
    let idx: std::collections::BTreeSet<u64> = j.open_intent_seqs().unwrap().into_iter().collect();
    assert_eq!(idx, from_log, "open-intent index disagrees with the log");
}
