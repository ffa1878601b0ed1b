//! The skeleton both long-running processes share: metrics and the diagnostics server, the
//! journal, the Event publisher, what every unit is wired with, supervision, the CSI socket's
//! liveness probe, and the end. `operator::run` and `vgmanager::run` add only what is theirs.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use anyhow::Context as _;
use lvms_actors::{ChildSpec, EventMapper, PassHook, PassReport, PublisherArgs, RestartPolicy};
use lvms_journal::{Journal, JournalConfig};
use tokio::task::JoinHandle;
use tracing::{error, info};

use super::memory::{Trimmer, Trimming};
use super::metrics_server::MetricsServing;
use super::{Diagnostics, PublisherSlot, Supervision, UnitWiring};
use crate::kube::events::KubeEvents;
use crate::telemetry::metrics::{Metrics, Process};

/// A running process's shared parts.
pub struct ProcessCore {
    pub metrics: Metrics,
    pub diag: Diagnostics,
    pub journal: Arc<Journal>,
    pub publisher: PublisherSlot,
    trimmer: Trimmer,
    _trimming: Trimming,
    compacting: JoinHandle<()>,
    metrics_task: Option<JoinHandle<()>>,
}

impl Drop for ProcessCore {
    fn drop(&mut self) {
        self.compacting.abort();
        if let Some(t) = &self.metrics_task {
            t.abort();
        }
    }
}

/// Why [`ProcessCore::serve_until`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The process was asked to stop (SIGTERM).
    Shutdown,
    /// The process's own reason to end (the operator's lost lease).
    Other,
    /// Supervision gave up; `/readyz` failed until the process was asked to stop.
    SupervisorDied,
}

/// The message a panic carried (`panic!` with a literal or with a format), if it carried one.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> Option<String> {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
}

/// Open the process's journal. A store that cannot be opened crash-loops the process, so its
/// error says where, what failed and what to do; sled panics on some damage, which is turned
/// into the same error rather than a bare panic message.
pub fn open_journal(path: &Path, cfg: JournalConfig) -> anyhow::Result<Journal> {
    let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Journal::open_with(path, cfg)
    }));
    let e = match opened {
        Ok(Ok(j)) => return Ok(j),
        Ok(Err(e)) => e,
        Err(panic) => {
            let what = panic_message(panic.as_ref()).unwrap_or_else(|| "a panic".into());
            lvms_journal::JournalError::Store(lvms_journal::StoreError::new(
                "opening sled database",
                std::io::Error::other(what),
            ))
        }
    };
    anyhow::bail!(
        "opening the journal at {}: {e}{}",
        path.display(),
        open_hint(&e, path)
    )
}

/// What a user does about a journal that does not open (pure; tested).
fn open_hint(e: &lvms_journal::JournalError, path: &Path) -> String {
    use lvms_journal::JournalError as E;
    match e {
        E::Store(_) | E::Meta { .. } => format!(
            ". The store is damaged and is not repaired in place: keep a copy for the \
             post-mortem (`cp -a {p} {p}.damaged`, or `lvms must-gather`), check it with \
             `lvms journal verify {p}.damaged`, then move {p} aside. lvms starts a new journal \
             and observes the cluster and the node again; intents the old one left open are not \
             replayed (docs/troubleshooting.md)",
            p = path.display()
        ),
        E::NewerFormat { .. } => ". A newer lvms wrote it: run that release again (a \
             downgrade cannot read it), or move the directory aside to start a new journal"
            .into(),
        _ => String::new(),
    }
}

impl ProcessCore {
    /// Metrics (over TLS, `serving`), `/healthz` `/readyz` on `addr`, and the journal
    /// `dir/name`. `client` checks the metrics clients' tokens.
    pub async fn start(
        process: Process,
        addr: SocketAddr,
        serving: &MetricsServing,
        client: kube::Client,
        journal_dir: &Path,
        name: &str,
        journal_config: JournalConfig,
    ) -> anyhow::Result<Self> {
        let metrics = Metrics::new(process);
        let diag = Diagnostics::start(addr).await?;
        std::fs::create_dir_all(journal_dir)
            .with_context(|| format!("--journal-dir {}", journal_dir.display()))?;
        let path = journal_dir.join(name);
        let journal = Arc::new(open_journal(&path, journal_config)?);
        metrics.watch_journal(&journal);
        // Served once the journal's gauges are there: a first scrape never lacks them.
        let metrics_task = super::metrics_server::start(serving, client, metrics.text()).await?;
        let trimmer = Trimmer::default();
        let trimming = trimmer.spawn(Duration::from_millis(200));
        let compacting = super::compaction::spawn(
            journal.clone(),
            super::compaction::EVERY,
            lvms_journal::Retention::PRODUCTION,
        );
        Ok(ProcessCore {
            metrics,
            diag,
            journal,
            publisher: PublisherSlot::default(),
            trimmer,
            _trimming: trimming,
            compacting,
            metrics_task,
        })
    }

    /// What every unit actor of this process shares. After each pass: its metrics, a heap
    /// trim mark, the publisher poked when it journaled; then `also` (the operator wakes its
    /// status unit).
    pub fn wiring(
        &self,
        epoch: Arc<AtomicU64>,
        debounce: Duration,
        checkpoint_every: u64,
        also: Option<PassHook>,
    ) -> UnitWiring {
        let (publisher, metrics, trimmer) = (
            self.publisher.clone(),
            self.metrics.clone(),
            self.trimmer.clone(),
        );
        UnitWiring {
            journal: self.journal.clone(),
            epoch,
            on_pass: Arc::new(move |pass: &PassReport<'_>| {
                metrics.pass(pass);
                trimmer.mark();
                if let Some(also) = &also {
                    also(pass);
                }
                if pass.journaled {
                    publisher.poke();
                }
            }),
            debounce,
            checkpoint_every,
        }
    }

    /// The Event publisher, a supervisor child writing through `events`.
    pub fn publisher_child(
        &self,
        events: KubeEvents,
        event_for: EventMapper,
        checkpoint_every: u64,
    ) -> ChildSpec {
        self.publisher.child(PublisherArgs {
            sink: Arc::new(events),
            journal: self.journal.clone(),
            event_for,
            checkpoint_every,
        })
    }

    /// `/healthz` follows the answer of the CSI socket at `socket` to Probe.
    pub fn probe_csi(&self, socket: PathBuf, every: Duration) -> JoinHandle<()> {
        let liveness = self.diag.liveness.clone();
        crate::csi::liveness::spawn(socket, every, move |r| {
            liveness.set(r.map_err(|e| e.to_string()))
        })
    }

    pub async fn supervise(
        &self,
        children: Vec<ChildSpec>,
        policy: RestartPolicy,
    ) -> anyhow::Result<Supervision> {
        Supervision::start(
            children,
            policy,
            self.diag.supervision.clone(),
            &self.metrics,
        )
        .await
    }

    /// Runs until `shutdown`, `other` or the end of supervision. When supervision gives up,
    /// `/readyz` fails with why, and the process stays up until it is asked to stop.
    pub async fn serve_until(
        &self,
        tree: &mut Supervision,
        shutdown: impl Future<Output = ()>,
        other: impl Future<Output = ()>,
    ) -> Exit {
        futures::pin_mut!(shutdown);
        tokio::select! {
            _ = &mut shutdown => {
                info!("shutting down");
                Exit::Shutdown
            }
            _ = other => Exit::Other,
            _ = &mut tree.done => {
                // Log text only: the supervisor is gone either way.
                let why = self.diag.supervision.check().err().unwrap_or_default();
                error!(%why, "supervisor stopped; /readyz now fails");
                shutdown.await;
                Exit::SupervisorDied
            }
        }
    }

    /// Stops every unit (each finishes its pass), flushes the journal, ends the diagnostics.
    pub async fn stop(self, tree: Supervision) {
        tree.stop(&self.journal).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_damaged_store_names_its_path_and_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vg-manager");
        drop(Journal::open(&path).unwrap());
        // sled's `conf` (the store's segment size and format, checked at every open) damaged.
        let conf = path.join("conf");
        let mut bytes = std::fs::read(&conf).unwrap();
        for b in bytes.iter_mut() {
            *b ^= 0xa5;
        }
        std::fs::write(&conf, bytes).unwrap();
        let Err(e) = open_journal(&path, JournalConfig::default()) else {
            panic!("a damaged store opened");
        };
        let text = e.to_string();
        for part in [
            path.display().to_string().as_str(),
            "journal store",
            "lvms journal verify",
            "move",
            "not replayed",
        ] {
            assert!(text.contains(part), "{part:?} missing from: {text}");
        }
    }

    #[test]
    fn a_panic_says_what_it_carried() {
        let literal = std::panic::catch_unwind(|| panic!("plain")).unwrap_err();
        assert_eq!(panic_message(literal.as_ref()).as_deref(), Some("plain"));
        let n = 7;
        let formatted = std::panic::catch_unwind(|| panic!("record {n}")).unwrap_err();
        assert_eq!(
            panic_message(formatted.as_ref()).as_deref(),
            Some("record 7")
        );
        let other = std::panic::catch_unwind(|| std::panic::panic_any(3_u8)).unwrap_err();
        assert_eq!(panic_message(other.as_ref()), None);
    }

    #[test]
    fn hints_fit_the_failure() {
        use lvms_journal::JournalError as E;
        let p = Path::new("/var/lib/lvms/journal/vg-manager");
        let newer = open_hint(
            &E::NewerFormat {
                found: 9,
                supported: 3,
            },
            p,
        );
        assert!(newer.contains("newer lvms"), "{newer}");
        assert!(!newer.contains("damaged"), "{newer}");
        let meta = open_hint(
            &E::Meta {
                key: "format",
                reason: "empty value".into(),
            },
            p,
        );
        assert!(
            meta.contains("/var/lib/lvms/journal/vg-manager.damaged"),
            "{meta}"
        );
        assert_eq!(open_hint(&E::Poisoned, p), "");
    }
}
