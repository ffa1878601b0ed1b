//! Journal compaction while the process runs: every so often, closed records beyond the
//! retention go (`Journal::compact` keeps open intents, the tail past every checkpoint and
//! the last Published per key), so the node's `/var/lib/lvms` and the operator's bounded
//! emptyDir never fill with history.

use std::sync::Arc;
use std::time::Duration;

use lvms_journal::{Journal, Retention};
use tokio::task::JoinHandle;
use tracing::{info, warn};

/// How often a running process compacts its journal.
pub const EVERY: Duration = Duration::from_secs(600);

/// Compact `journal` every `every` (the first after one interval) with `retention`; each run
/// on a blocking thread (a full scan). A refused or failed run is logged and tried again at
/// the next interval: compaction is housekeeping, never a reason to stop.
pub fn spawn(journal: Arc<Journal>, every: Duration, retention: Retention) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let j = journal.clone();
            match tokio::task::spawn_blocking(move || j.compact(retention)).await {
                Ok(Ok(r)) if r.deleted > 0 => {
                    info!(
                        deleted = r.deleted,
                        remaining = r.remaining,
                        horizon = r.horizon,
                        "journal compacted"
                    )
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    warn!(error = %e, "journal compaction refused; retried at the next interval")
                }
                Err(e) => warn!(error = %e, "journal compaction did not finish"),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lvms_journal::{Done, Intent, ObjectRef, OutcomeResult, Trace};

    fn closed(j: &Journal, k: u64) {
        let seq = j
            .append_intent(
                Intent {
                    unit: "u".into(),
                    object: ObjectRef::default(),
                    action: "apply".into(),
                    args: Vec::new(),
                    desired_digest: String::new(),
                    idempotency_key: format!("k{k}"),
                    lease_epoch: 0,
                    regarding: Vec::new(),
                },
                Trace::default(),
            )
            .unwrap();
        j.append_outcome(
            seq,
            OutcomeResult::Ok(Done::default()),
            Duration::from_millis(1),
            Trace::default(),
        )
        .unwrap();
    }

    #[tokio::test]
    async fn a_running_process_compacts_its_journal_to_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let j = Arc::new(Journal::open(dir.path()).unwrap());
        for k in 0..200 {
            closed(&j, k);
        }
        // Everything so far has been read by its projection: compaction may take it.
        j.checkpoint("reader", j.next_seq().unwrap(), Trace::default())
            .unwrap();
        assert!(j.stats().unwrap().records > 400);
        let task = spawn(
            j.clone(),
            Duration::from_millis(50),
            Retention {
                max_age: None,
                max_records: Some(20),
            },
        );
        let mut records = u64::MAX;
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            records = j.stats().unwrap().records;
            if records <= 22 {
                break;
            }
        }
        task.abort();
        assert!(records <= 22, "{records} records after compaction");
    }
}
