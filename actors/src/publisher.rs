//! Events as a projection of the journal, exactly once.
//!
//! Each pass Outcome (or step Outcome carrying `event.*` detail) maps to at most one Event
//! occurrence. Identical occurrences share a key and one Event object whose series count is
//! the number of occurrences in the journal, so a retry storm is one Event with count N.
//! The count comes from the last Published record for the key; a crash after the API write
//! but before Published recomputes the same count and rewrites the same value (idempotent).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use lvms_journal::{Body, Journal, JournalError, ObjectRef, PublishKind, Published, Record, Seq};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tracing::{error, info, warn};

use crate::faults;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl From<&lvms_journal::EventNote> for EventType {
    fn from(e: &lvms_journal::EventNote) -> Self {
        if e.warning {
            EventType::Warning
        } else {
            EventType::Normal
        }
    }
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    pub regarding: ObjectRef,
    pub type_: EventType,
    pub reason: String,
    pub note: String,
    /// events.k8s.io `action` (what was being done), e.g. `Reconcile`.
    pub action: String,
}

impl EventSpec {
    /// Identical occurrences (same object, type, reason, note) aggregate under one key.
    pub fn key(&self) -> String {
        format!(
            "event/{}/{}/{}/{:016x}",
            self.regarding.uid,
            self.type_.as_str(),
            self.reason,
            fnv1a(self.note.as_bytes())
        )
    }
}

/// Stable across releases (std's hasher is not), so Event names survive upgrades.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100000001b3)
    })
}

/// Why an Event write failed, and whether trying again can help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SinkError {
    /// Transient (API unavailable, conflict): retried, in order.
    #[error("{0}")]
    Retry(String),
    /// Can never succeed (e.g. the namespace is being deleted): recorded as dropped, so one
    /// undeliverable Event does not hold back every later one.
    #[error("{0}")]
    Drop(String),
}

impl From<String> for SinkError {
    fn from(s: String) -> Self {
        SinkError::Retry(s)
    }
}

impl From<&str> for SinkError {
    fn from(s: &str) -> Self {
        SinkError::Retry(s.to_string())
    }
}

/// Where Events go (the Kubernetes events API in the operator).
pub trait EventSink: Send + Sync + 'static {
    /// Make the Event for `key` show `count` occurrences. Idempotent for a given count.
    fn write(
        &self,
        key: &str,
        spec: &EventSpec,
        count: u64,
    ) -> impl Future<Output = Result<(), SinkError>> + Send;
}

/// Maps a journal record to the Events it stands for (none, or one per object it regards:
/// LVMS sends some Events to the volume group, its node status and its LVMCluster at once).
/// Each (record, object) pair is published exactly once: the key names the object. An error
/// (a record it needs could not be read) is retried like a failed write, never taken as "no
/// Event".
pub type EventMapper =
    Arc<dyn Fn(&Journal, &Record) -> lvms_journal::Result<Vec<EventSpec>> + Send + Sync>;

pub struct PublisherArgs<S> {
    pub sink: Arc<S>,
    pub journal: Arc<Journal>,
    pub event_for: EventMapper,
    /// Checkpoint the cursor once it is this many records past the last checkpoint
    /// ([`crate::CHECKPOINT_EVERY`] by default).
    pub checkpoint_every: u64,
}

impl<S> Clone for PublisherArgs<S> {
    fn clone(&self) -> Self {
        PublisherArgs {
            sink: self.sink.clone(),
            journal: self.journal.clone(),
            event_for: self.event_for.clone(),
            checkpoint_every: self.checkpoint_every,
        }
    }
}

/// The publisher's checkpoint in the journal: every record up to it has been looked at and
/// its Events are out (and durable). A start resumes there: without it the publisher read the
/// whole journal at every start (seconds at a million records), and new Events waited.
pub const PUBLISHER_CHECKPOINT: &str = "event-publisher";

#[derive(Debug)]
pub enum PublisherMsg {
    /// Something was journaled (the seq is a hint): scan forward from the cursor.
    Outcome(Seq),
    /// Retry after a failed write (sent by the publisher's own timer).
    Retry,
}

pub struct EventPublisher<S>(std::marker::PhantomData<fn() -> S>);

impl<S> Default for EventPublisher<S> {
    fn default() -> Self {
        EventPublisher(std::marker::PhantomData)
    }
}

pub struct PublisherState<S> {
    args: PublisherArgs<S>,
    /// Every record up to here has been looked at (and its Event, if any, is out).
    cursor: Seq,
    /// Where the latest checkpoint in the journal is.
    checkpointed: Seq,
    retry_armed: bool,
}

impl<S: EventSink> Actor for EventPublisher<S> {
    type Msg = PublisherMsg;
    type State = PublisherState<S>;
    type Arguments = PublisherArgs<S>;

    /// Starts at its checkpoint (seq 1 without one): every later outcome whose Event is not
    /// covered by a Published record yet (the process died between the two) goes out now, in
    /// seq order; the rest are recognised as published and skipped.
    async fn pre_start(
        &self,
        myself: ActorRef<PublisherMsg>,
        args: PublisherArgs<S>,
    ) -> Result<PublisherState<S>, ActorProcessingErr> {
        // To itself, before it runs: fails only if it is already stopping.
        let _ = myself.send_message(PublisherMsg::Outcome(0));
        let cursor = match args.journal.checkpointed(PUBLISHER_CHECKPOINT) {
            Ok(at) => at.unwrap_or(0),
            Err(e) => {
                // Looking at everything again is slow but loses nothing (Published dedupes).
                error!(error = %e, "event publisher checkpoint unreadable; starting at seq 1");
                0
            }
        };
        Ok(PublisherState {
            args,
            cursor,
            checkpointed: cursor,
            retry_armed: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<PublisherMsg>,
        msg: PublisherMsg,
        state: &mut PublisherState<S>,
    ) -> Result<(), ActorProcessingErr> {
        if let PublisherMsg::Outcome(seq) = msg
            && seq != 0
            && seq <= state.cursor
        {
            return Ok(());
        }
        if matches!(msg, PublisherMsg::Retry) {
            state.retry_armed = false;
        }
        let journal = state.args.journal.clone();
        // An Event goes out only for an outcome that is durable: otherwise a kill could keep
        // the Event and lose its outcome, and the occurrence be counted again after replay.
        // One flush per wake-up that has Events to write (outcomes are group-flushed).
        let mut durable = false;
        // In chunks: the journal iterator is not Send, so it cannot live across an await.
        'scan: loop {
            let chunk: Vec<_> = journal
                .iter_range(state.cursor.saturating_add(1)..)
                .take(256)
                .collect();
            if chunk.is_empty() {
                break;
            }
            for rec in chunk {
                let rec = match rec {
                    Ok(rec) => rec,
                    Err(e) => {
                        // Reported, not skipped: the cursor stays before it and we retry.
                        error!(error = %e, "journal record unreadable while publishing Events");
                        break 'scan;
                    }
                };
                if matches!(rec.body, Body::Outcome(_))
                    && let Err(e) = publish(&state.args, &rec, &mut durable).await
                {
                    warn!(seq = rec.seq, error = %e, "event not published yet; will retry");
                    if !state.retry_armed {
                        state.retry_armed = true;
                        myself.send_after(Duration::from_secs(2), || PublisherMsg::Retry);
                    }
                    break 'scan;
                }
                state.cursor = rec.seq;
            }
        }
        checkpoint_if_due(state);
        Ok(())
    }
}

/// Checkpoints the cursor once it is `checkpoint_every` past the last one. The Published
/// records of everything before it are applied already; the checkpoint's flush makes them
/// durable with it. A failure only means the next start looks further back.
fn checkpoint_if_due<S>(state: &mut PublisherState<S>) {
    if state.cursor.saturating_sub(state.checkpointed) < state.args.checkpoint_every.max(1) {
        return;
    }
    match state
        .args
        .journal
        .checkpoint(PUBLISHER_CHECKPOINT, state.cursor, Default::default())
    {
        Ok(_) => state.checkpointed = state.cursor,
        Err(e) => {
            warn!(error = %e, cursor = state.cursor, "event publisher checkpoint not written")
        }
    }
}

/// Why a record's Events are not all out yet (logged; the record is retried).
#[derive(Debug, thiserror::Error)]
enum PublishError {
    #[error("reading the journal for the Events of seq {seq}: {source}")]
    EventsOf {
        seq: Seq,
        #[source]
        source: JournalError,
    },
    /// Flushing, reading the last Published of a key, or appending a Published.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The sink asked for a retry.
    #[error(transparent)]
    Sink(SinkError),
}

async fn publish<S: EventSink>(
    args: &PublisherArgs<S>,
    rec: &Record,
    durable: &mut bool,
) -> Result<(), PublishError> {
    let specs = (args.event_for)(&args.journal, rec).map_err(|source| PublishError::EventsOf {
        seq: rec.seq,
        source,
    })?;
    if !specs.is_empty() && !*durable {
        args.journal.flush()?;
        *durable = true;
    }
    // In order; a retry after a failure skips the ones already recorded as published.
    for spec in specs {
        publish_one(args, rec, &spec).await?;
    }
    Ok(())
}

async fn publish_one<S: EventSink>(
    args: &PublisherArgs<S>,
    rec: &Record,
    spec: &EventSpec,
) -> Result<(), PublishError> {
    let journal = &args.journal;
    let seq = rec.seq;
    let key = spec.key();
    let last = journal.last_published(&key)?;
    let (last_seq, last_count) = match &last {
        Some(Record {
            body: Body::Published(p),
            ..
        }) => (p.source_seq, p.count),
        _ => (0, 0),
    };
    if last_seq >= seq {
        return Ok(()); // already out: exactly once
    }
    let count = last_count + 1;
    let mut summary = format!("{} {}: {}", spec.type_.as_str(), spec.reason, spec.note);
    match args.sink.write(&key, spec, count).await {
        Ok(()) => {}
        Err(e @ SinkError::Retry(_)) => return Err(PublishError::Sink(e)),
        Err(SinkError::Drop(e)) => {
            warn!(seq, reason = %spec.reason, error = %e, "event cannot be delivered; recorded as dropped");
            summary = format!("dropped ({e}): {summary}");
        }
    }
    faults::crash_point(faults::EVENT_WRITTEN, "event-publisher");
    let unit = match &rec.body {
        Body::Outcome(o) => o.unit.clone(),
        _ => String::new(),
    };
    journal.append_published(
        Published {
            unit,
            object: Some(spec.regarding.clone()),
            kind: PublishKind::Event,
            dedupe_key: key,
            source_seq: seq,
            count,
            summary,
        },
        rec.trace,
    )?;
    info!(seq, reason = %spec.reason, regarding = %spec.regarding.kind, count, "event published");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_is_stable() {
        // Published test vector for 64-bit FNV-1a.
        assert_eq!(fnv1a(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a(b""), 0xcbf29ce484222325);
    }

    #[test]
    fn identical_occurrences_share_a_key() {
        let spec = |note: &str| EventSpec {
            regarding: ObjectRef {
                uid: "u1".into(),
                ..Default::default()
            },
            type_: EventType::Warning,
            reason: "ResourceReconciliationIncomplete".into(),
            note: note.into(),
            action: "Reconcile".into(),
        };
        assert_eq!(spec("x").key(), spec("x").key());
        assert_ne!(spec("x").key(), spec("y").key());
    }
}
