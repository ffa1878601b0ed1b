//! `lvms operator`: discovery → journal → (leader election) → caches → supervision tree.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use futures::FutureExt;
use kube::Client;
use lvms_actors::{
    ChildSpec, EventPublisher, PublisherArgs, PublisherMsg, Readiness, RestartPolicy, Supervisor,
    SupervisorArgs, Trigger, Unit, UnitActor, UnitArgs,
};
use lvms_journal::{Journal, JournalConfig};
use ractor::{Actor, ActorRef};
use tracing::{error, info, warn};

use super::context::Ctx;
use super::diagnostics::{self, ReadyCheck};
use super::units::csi_nodes::CsiNodesUnit;
use super::units::lifecycle::{self, LifecycleUnit};
use super::units::objects::ObjectsUnit;
use super::units::status_projector::{self, StatusUnit};
use super::units::{events, object_units, wakes};
use super::world::OperatorSettings;
use crate::kube::caches::{Router, WatchHub};
use crate::kube::discovery;
use crate::kube::events::KubeEvents;

#[derive(Debug, Clone)]
pub struct Config {
    pub namespace: String,
    pub journal_dir: PathBuf,
    pub diagnostics_addr: SocketAddr,
    pub leader_elect: bool,
    /// Identity for leader election and Events (the pod name in a cluster).
    pub identity: String,
    pub image: String,
    pub vg_manager_command: Vec<String>,
    /// Quiet time that turns a burst of watch events into one pass.
    pub debounce: Duration,
    pub restart_policy: RestartPolicy,
}

/// The operator journal is small and mostly appended: a 2 MiB page cache is plenty and keeps
/// the process lean (sled's cache is the largest single allocation otherwise).
fn journal_config() -> JournalConfig {
    let mut cfg = JournalConfig::default();
    cfg.sled.cache_capacity = 2 << 20;
    cfg
}

/// What every unit actor shares.
#[derive(Clone)]
struct Common {
    journal: Arc<Journal>,
    epoch: Arc<AtomicU64>,
    on_pass: lvms_actors::PassHook,
    debounce: Duration,
}

fn unit_args<U>((c, trigger): (Common, Trigger), unit: U) -> UnitArgs<U> {
    UnitArgs {
        unit: Arc::new(unit),
        journal: c.journal,
        epoch: c.epoch,
        trigger,
        publisher: None,
        on_pass: Some(c.on_pass),
        trace: None,
        debounce: c.debounce,
    }
}

fn spawn_unit<U: Unit>(name: &str, args: UnitArgs<U>) -> ChildSpec {
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

/// Run until `shutdown` resolves (SIGTERM), the lease is lost (error), or setup fails.
pub async fn run(
    client: Client,
    cfg: Config,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let supervision = Readiness::default();
    let synced = Arc::new(AtomicBool::new(false));
    let ready: ReadyCheck = {
        let supervision = supervision.clone();
        let synced = synced.clone();
        Arc::new(move || {
            supervision.check()?;
            if synced.load(Ordering::Acquire) {
                Ok(())
            } else {
                Err("caches not synced yet".into())
            }
        })
    };
    let listener = diagnostics::bind(cfg.diagnostics_addr)
        .await
        .with_context(|| format!("--diagnostics-addr {}", cfg.diagnostics_addr))?;
    let diag = tokio::spawn(diagnostics::serve(listener, ready));

    let capabilities = discovery::capabilities(&client)
        .await
        .context("discovering optional APIs (VolumeSnapshotClass, SCC)")?;
    info!(?capabilities, "discovered");

    std::fs::create_dir_all(&cfg.journal_dir)
        .with_context(|| format!("--journal-dir {}", cfg.journal_dir.display()))?;
    let journal_path = cfg.journal_dir.join("operator");
    let journal = Arc::new(
        Journal::open_with(&journal_path, journal_config())
            .with_context(|| format!("opening the journal at {}", journal_path.display()))?,
    );
    let epoch = Arc::new(AtomicU64::new(0));
    let mut leadership = None;
    if cfg.leader_elect {
        let l = super::leader::acquire(&client, &cfg.namespace, &cfg.identity).await?;
        epoch.store(l.epoch, Ordering::Release);
        leadership = Some(l);
    }

    // One trigger per unit; the hub bumps the ones each watch source matters to.
    let mut unit_names: Vec<&'static str> = object_units(capabilities.scc, capabilities.snapshots)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    unit_names.extend([
        lifecycle::UNIT,
        super::units::csi_nodes::UNIT,
        status_projector::UNIT,
    ]);
    let triggers: BTreeMap<&'static str, Trigger> =
        unit_names.iter().map(|n| (*n, Trigger::new())).collect();
    let router: Router = {
        let triggers = triggers.clone();
        Arc::new(move |source| {
            for (name, t) in &triggers {
                if wakes(source, name) {
                    t.bump(&format!("{source:?}"));
                }
            }
        })
    };
    let (_hub, caches) = WatchHub::start(&client, &cfg.namespace, capabilities, router);
    caches
        .wait_ready()
        .await
        .context("waiting for the caches")?;
    info!("caches synced");

    let ctx = Arc::new(Ctx {
        client: client.clone(),
        settings: OperatorSettings {
            namespace: cfg.namespace.clone(),
            image: cfg.image.clone(),
            vg_manager_command: cfg.vg_manager_command.clone(),
        },
        capabilities,
        caches,
    });

    // The publisher may be restarted; units reach the current one through this slot.
    let publisher_slot: Arc<Mutex<Option<ActorRef<PublisherMsg>>>> = Arc::default();
    let status_trigger = triggers[status_projector::UNIT].clone();
    let on_pass: lvms_actors::PassHook = {
        let slot = publisher_slot.clone();
        Arc::new(move |unit: &str| {
            if unit != status_projector::UNIT {
                status_trigger.bump(unit);
            }
            if let Some(p) = slot.lock().ok().and_then(|s| s.clone()) {
                let _ = p.send_message(PublisherMsg::Outcome(0));
            }
        })
    };
    let common = Common {
        journal: journal.clone(),
        epoch: epoch.clone(),
        on_pass: on_pass.clone(),
        debounce: cfg.debounce,
    };
    let args = |name: &str| (common.clone(), triggers[name].clone());

    let mut children = Vec::new();
    let sink = Arc::new(KubeEvents {
        client: client.clone(),
        controller: "lvms-operator".into(),
        instance: cfg.identity.clone(),
    });
    let publisher_args = PublisherArgs {
        sink,
        journal: journal.clone(),
        event_for: Arc::new(events::event_for),
    };
    {
        let slot = publisher_slot.clone();
        children.push(ChildSpec {
            name: "event-publisher".into(),
            spawn: Arc::new(move |sup| {
                let args = publisher_args.clone();
                let slot = slot.clone();
                async move {
                    let (actor, _) =
                        Actor::spawn_linked(None, EventPublisher::default(), args, sup).await?;
                    if let Ok(mut s) = slot.lock() {
                        *s = Some(actor.clone());
                    }
                    Ok(actor.get_cell())
                }
                .boxed()
            }),
        });
    }
    children.push(spawn_unit(
        lifecycle::UNIT,
        unit_args(args(lifecycle::UNIT), LifecycleUnit { ctx: ctx.clone() }),
    ));
    for (name, kind) in object_units(capabilities.scc, capabilities.snapshots) {
        children.push(spawn_unit(
            name,
            unit_args(
                args(name),
                ObjectsUnit {
                    name,
                    kind,
                    ctx: ctx.clone(),
                },
            ),
        ));
    }
    let csi_nodes = super::units::csi_nodes::UNIT;
    children.push(spawn_unit(
        csi_nodes,
        unit_args(args(csi_nodes), CsiNodesUnit { ctx: ctx.clone() }),
    ));
    children.push(spawn_unit(
        status_projector::UNIT,
        unit_args(args(status_projector::UNIT), StatusUnit::new(ctx.clone())),
    ));

    let (supervisor, sup_handle) = Actor::spawn(
        None,
        Supervisor,
        SupervisorArgs {
            children,
            policy: cfg.restart_policy,
            readiness: supervision.clone(),
        },
    )
    .await
    .context("starting the supervision tree")?;
    synced.store(true, Ordering::Release);
    info!(namespace = %cfg.namespace, epoch = epoch.load(Ordering::Acquire), "operator running");

    let lost = async {
        match leadership.as_mut() {
            Some(l) => loop {
                if l.leading.changed().await.is_err() || !*l.leading.borrow() {
                    break;
                }
            },
            None => std::future::pending::<()>().await,
        }
    };
    enum Exit {
        Shutdown,
        LeaseLost,
        SupervisorDied,
    }
    let mut sup_handle = sup_handle;
    futures::pin_mut!(shutdown);
    let exit = tokio::select! {
        _ = &mut shutdown => Exit::Shutdown,
        _ = lost => Exit::LeaseLost,
        _ = &mut sup_handle => Exit::SupervisorDied,
    };
    let result = match exit {
        Exit::Shutdown => {
            info!("shutting down");
            Ok(())
        }
        Exit::LeaseLost => {
            error!("leader lease lost: stopping every unit");
            Err(anyhow::anyhow!("leader election lost"))
        }
        Exit::SupervisorDied => {
            // Supervision gave up: keep serving a failing /readyz until we are stopped.
            let why = supervision.check().err().unwrap_or_default();
            error!(%why, "supervisor stopped; /readyz now fails");
            shutdown.await;
            Ok(())
        }
    };
    supervisor.stop(Some("shutdown".into()));
    let _ = tokio::time::timeout(Duration::from_secs(5), sup_handle).await;
    if let Err(e) = journal.flush() {
        warn!(error = %e, "journal flush at shutdown failed");
    }
    diag.abort();
    result
}
