//! Wiring both long-running processes (operator, vg-manager) share: the diagnostics server
//! with its readiness, unit actors as supervisor children, and the restartable EventPublisher.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use futures::FutureExt;
use lvms_actors::{
    ChildSpec, EventPublisher, EventSink, PassHook, PublisherArgs, PublisherMsg, Readiness,
    Trigger, Unit, UnitActor, UnitArgs,
};
use lvms_journal::Journal;
use ractor::{Actor, ActorRef};
use tokio::task::JoinHandle;

pub mod compaction;
pub mod diagnostics;
pub mod memory;
pub mod metrics_auth;
pub mod metrics_server;
pub mod process;
pub mod serving_cert;

use diagnostics::ReadyCheck;

/// `/healthz` + `/readyz`: ready once the caches are synced, until supervision gives up.
pub struct Diagnostics {
    pub supervision: Readiness,
    /// What `/healthz` answers: alive until a probe says otherwise (the CSI socket checks).
    pub liveness: Liveness,
    /// One more condition of `/readyz` (vg-manager: kubelet registered the driver).
    pub registration: Liveness,
    synced: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl Diagnostics {
    pub async fn start(addr: SocketAddr) -> anyhow::Result<Self> {
        let supervision = Readiness::default();
        let synced = Arc::new(AtomicBool::new(false));
        let registration = Liveness::default();
        let ready: ReadyCheck = {
            let (supervision, synced) = (supervision.clone(), synced.clone());
            let registration = registration.clone();
            Arc::new(move || {
                supervision.check()?;
                registration.check()?;
                if synced.load(Ordering::Acquire) {
                    Ok(())
                } else {
                    // Detail for a /readyz that fails anyway; poisoned it is just left out.
                    let failing = crate::kube::caches::watch_errors()
                        .lock()
                        .map(|m| {
                            m.iter()
                                .map(|(k, v)| format!("{k}: {v}"))
                                .collect::<Vec<_>>()
                                .join("; ")
                        })
                        .unwrap_or_default();
                    if failing.is_empty() {
                        Err("caches not synced yet".into())
                    } else {
                        Err(format!("caches not synced yet; failing watches: {failing}"))
                    }
                }
            })
        };
        let listener = diagnostics::bind(addr)
            .await
            .with_context(|| format!("--diagnostics-addr {addr}"))?;
        let liveness = Liveness::default();
        let live: ReadyCheck = {
            let liveness = liveness.clone();
            Arc::new(move || liveness.check())
        };
        let task = tokio::spawn(diagnostics::serve(listener, live, ready));
        Ok(Diagnostics {
            supervision,
            liveness,
            registration,
            synced,
            task,
        })
    }

    pub fn mark_synced(&self) {
        self.synced.store(true, Ordering::Release);
    }
}

/// The last word of a probe or gate: the CSI socket answering Probe (`/healthz`), kubelet's
/// registration of the driver (`/readyz`).
#[derive(Clone, Default)]
pub struct Liveness(Arc<Mutex<Option<String>>>);

impl Liveness {
    /// Record a probe's result: `Err` makes `/healthz` fail with its text until the next `Ok`.
    pub fn set(&self, result: Result<(), String>) {
        // A poisoned lock only loses this probe's word; the next probe writes again.
        if let Ok(mut v) = self.0.lock() {
            *v = result.err();
        }
    }

    pub fn check(&self) -> Result<(), String> {
        match self.0.lock().ok().and_then(|v| v.clone()) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }
}

impl Drop for Diagnostics {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The current EventPublisher (it may be restarted): units poke it after a journaled pass.
#[derive(Clone, Default)]
pub struct PublisherSlot(Arc<Mutex<Option<ActorRef<PublisherMsg>>>>);

impl PublisherSlot {
    pub fn poke(&self) {
        // Best effort: a publisher that is down or restarting rescans the journal from its
        // cursor when it starts, so a lost poke loses no Event.
        if let Some(p) = self.0.lock().ok().and_then(|s| s.clone()) {
            let _ = p.send_message(PublisherMsg::Outcome(0));
        }
    }

    /// The supervisor child that runs the publisher and keeps this slot pointing at it.
    pub fn child<S: EventSink>(&self, args: PublisherArgs<S>) -> ChildSpec {
        let slot = self.clone();
        ChildSpec {
            name: "event-publisher".into(),
            spawn: Arc::new(move |sup| {
                let (args, slot) = (args.clone(), slot.clone());
                async move {
                    let (actor, _) =
                        Actor::spawn_linked(None, EventPublisher::default(), args, sup).await?;
                    if let Ok(mut s) = slot.0.lock() {
                        *s = Some(actor.clone());
                    }
                    Ok(actor.get_cell())
                }
                .boxed()
            }),
        }
    }
}

/// What every unit actor of a process shares.
#[derive(Clone)]
pub struct UnitWiring {
    pub journal: Arc<Journal>,
    pub epoch: Arc<AtomicU64>,
    pub on_pass: PassHook,
    pub debounce: Duration,
    /// Records between journal checkpoints (unit-health snapshots; the Event publisher's).
    pub checkpoint_every: u64,
}

impl UnitWiring {
    /// A supervisor child running `unit`, woken by `trigger`.
    pub fn child<U: Unit>(&self, name: &str, trigger: Trigger, unit: U) -> ChildSpec {
        let args = UnitArgs {
            unit: Arc::new(unit),
            journal: self.journal.clone(),
            epoch: self.epoch.clone(),
            trigger,
            publisher: None,
            on_pass: Some(self.on_pass.clone()),
            trace: Some(crate::telemetry::otel::hooks()),
            debounce: self.debounce,
            health_snapshot_every: self.checkpoint_every,
        };
        ChildSpec {
            name: name.to_string(),
            spawn: Arc::new(move |sup| {
                let args = args.clone();
                async move {
                    let (actor, _) =
                        Actor::spawn_linked(None, UnitActor::<U>::default(), args, sup).await?;
                    Ok(actor.get_cell())
                }
                .boxed()
            }),
        }
    }
}

/// A running supervision tree: both processes start it the same way and stop it the same way
/// (each child finishes its pass, then the journal is flushed).
pub struct Supervision {
    pub supervisor: ActorRef<lvms_actors::SupervisorMsg>,
    /// Ends when the supervisor stops (it gave up, or was stopped).
    pub done: JoinHandle<()>,
}

impl Supervision {
    pub async fn start(
        children: Vec<ChildSpec>,
        policy: lvms_actors::RestartPolicy,
        readiness: Readiness,
        metrics: &crate::telemetry::metrics::Metrics,
    ) -> anyhow::Result<Self> {
        let (supervisor, done) = Actor::spawn(
            None,
            lvms_actors::Supervisor,
            lvms_actors::SupervisorArgs {
                children,
                policy,
                readiness,
                on_restart: Some(metrics.restart_hook()),
            },
        )
        .await
        .context("starting the supervision tree")?;
        Ok(Supervision { supervisor, done })
    }

    /// Stops every child (each finishes its current pass, 5 s at most), then flushes.
    pub async fn stop(self, journal: &Journal) {
        self.supervisor.stop(Some("shutdown".into()));
        let _ = tokio::time::timeout(Duration::from_secs(5), self.done).await;
        if let Err(e) = journal.flush() {
            tracing::warn!(error = %e, "journal flush at shutdown failed");
        }
    }
}
