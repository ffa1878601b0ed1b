//! `lvms operator`: discovery → journal → (leader election) → caches → supervision tree.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use kube::Client;
use lvms_actors::{PublisherArgs, RestartPolicy, Trigger};
use lvms_journal::{Journal, JournalConfig};
use tracing::{error, info};

use super::context::Ctx;
use super::units::csi_nodes::CsiNodesUnit;
use super::units::generations::PassedGenerations;
use super::units::lifecycle::{self, LifecycleUnit};
use super::units::objects::ObjectsUnit;
use super::units::status_projector::{self, StatusUnit};
use super::units::{events, object_units, wakes};
use super::world::OperatorSettings;
use crate::kube::caches::{Router, WatchHub};
use crate::kube::discovery;
use crate::kube::events::KubeEvents;
use crate::runtime::{Diagnostics, PublisherSlot, Supervision, UnitWiring};
use crate::telemetry::metrics::{Metrics, Process};

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
    /// Records between journal checkpoints: a start reads at most about this many records
    /// (unit health, the Event publisher), not the whole journal.
    pub checkpoint_every: u64,
    /// Where the CSI Identity + Controller services are served.
    pub csi_socket: PathBuf,
    /// How often `/healthz` probes that socket.
    pub csi_probe_interval: Duration,
    /// Which Normal Events go out (Warnings always do).
    pub normal_events: events::NormalEvents,
    pub restart_policy: RestartPolicy,
}

/// The operator journal is small and mostly appended: a 2 MiB page cache is plenty and keeps
/// the process lean (sled's cache is the largest single allocation otherwise).
fn journal_config() -> JournalConfig {
    let mut cfg = JournalConfig::default();
    cfg.sled.cache_capacity = 2 << 20;
    cfg
}

/// Run until `shutdown` resolves (SIGTERM), the lease is lost (error), or setup fails.
pub async fn run(
    client: Client,
    cfg: Config,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let metrics = Metrics::new(Process::Operator);
    let diag = Diagnostics::start(cfg.diagnostics_addr, metrics.text()).await?;
    let supervision = diag.supervision.clone();

    let capabilities = discovery::capabilities(&client).await.context(
        "discovering optional APIs (VolumeSnapshotClass, VolumeGroupSnapshotClass, SCC)",
    )?;
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
    let unit_names: Vec<&'static str> = crate::operator::table::units(&capabilities)
        .map(crate::operator::table::UnitId::name)
        .collect();
    let triggers: BTreeMap<&'static str, Trigger> =
        unit_names.iter().map(|n| (*n, Trigger::new())).collect();
    let router: Router = {
        let triggers = triggers.clone();
        Arc::new(move |source, change, traceparent: Option<&str>| {
            for (name, t) in &triggers {
                if wakes(source, change, name) {
                    t.bump_traced(&format!("{source:?}"), traceparent);
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

    let publisher = PublisherSlot::default();
    let status_trigger = triggers[status_projector::UNIT].clone();
    metrics.watch_journal(&journal);
    let trimmer = crate::runtime::memory::Trimmer::default();
    let _trimming = trimmer.spawn(Duration::from_millis(200));
    let passed = Arc::new(PassedGenerations::default());
    let on_pass: lvms_actors::PassHook = {
        let (publisher, metrics, passed) = (publisher.clone(), metrics.clone(), passed.clone());
        Arc::new(move |pass: &lvms_actors::PassReport<'_>| {
            metrics.pass(pass);
            trimmer.mark();
            // A pass over a new generation may be the last one a held status waits for, even
            // when it wrote nothing.
            let moved = pass.subject.is_some_and(|s| passed.record(pass.unit, s));
            if pass.unit != status_projector::UNIT && (pass.journaled || moved) {
                status_trigger.bump(pass.unit);
            }
            if pass.journaled {
                publisher.poke();
            }
        })
    };
    let wiring = UnitWiring {
        journal: journal.clone(),
        epoch: epoch.clone(),
        on_pass,
        debounce: cfg.debounce,
        checkpoint_every: cfg.checkpoint_every,
    };

    let mut children = vec![publisher.child(PublisherArgs {
        sink: Arc::new(KubeEvents {
            client: client.clone(),
            controller: "lvms-operator".into(),
            instance: cfg.identity.clone(),
        }),
        journal: journal.clone(),
        event_for: {
            let normal = cfg.normal_events;
            Arc::new(move |j: &lvms_journal::Journal, r: &lvms_journal::Record| {
                Ok(events::event_for(j, r, normal)?.into_iter().collect())
            })
        },
        checkpoint_every: cfg.checkpoint_every,
    })];
    children.push(wiring.child(
        lifecycle::UNIT,
        triggers[lifecycle::UNIT].clone(),
        LifecycleUnit { ctx: ctx.clone() },
    ));
    for (name, kind) in object_units(&capabilities) {
        let unit = ObjectsUnit::new(name, kind, ctx.clone());
        children.push(wiring.child(name, triggers[name].clone(), unit));
    }
    let csi_nodes = super::units::csi_nodes::UNIT;
    children.push(wiring.child(
        csi_nodes,
        triggers[csi_nodes].clone(),
        CsiNodesUnit { ctx: ctx.clone() },
    ));
    children.push(wiring.child(
        status_projector::UNIT,
        triggers[status_projector::UNIT].clone(),
        StatusUnit::new(ctx.clone(), passed),
    ));

    // The CSI controller: its RPCs journal LogicalVolume writes; its unit replays them.
    let csi_trigger = Trigger::new();
    children.push(wiring.child(
        crate::csi::controller::writes::UNIT,
        csi_trigger.clone(),
        crate::csi::controller::replay::CsiControllerUnit {
            client: client.clone(),
        },
    ));
    let volumes = crate::csi::controller::volumes::Volumes::new();
    let volumes_task = tokio::spawn(volumes.clone().run(kube::Api::all(client.clone())));
    // The helpers for users' volumes (LVMS's PV/PVC controllers, TopoLVM's Node finalizer).
    {
        use super::units::topolvm_nodes;
        use super::units::{persistent_volume_claims as pvcs, persistent_volumes as pvs};
        children.push(wiring.child(
            pvs::UNIT,
            triggers[pvs::UNIT].clone(),
            pvs::PersistentVolumesUnit { ctx: ctx.clone() },
        ));
        children.push(wiring.child(
            pvcs::UNIT,
            triggers[pvcs::UNIT].clone(),
            pvcs::PersistentVolumeClaimsUnit { ctx: ctx.clone() },
        ));
        children.push(wiring.child(
            topolvm_nodes::UNIT,
            triggers[topolvm_nodes::UNIT].clone(),
            topolvm_nodes::TopolvmNodesUnit {
                ctx: ctx.clone(),
                volumes: volumes.clone(),
            },
        ));
    }
    let csi = super::csi::serve(
        &cfg.csi_socket,
        crate::csi::controller::writes::LvWrites {
            client: client.clone(),
            journal: journal.clone(),
            epoch: epoch.clone(),
        },
        volumes,
        ctx.caches.nodes.clone(),
        ctx.caches.clusters.clone(),
        supervision.clone(),
    )?;

    let csi_live = {
        let liveness = diag.liveness.clone();
        crate::csi::liveness::spawn(cfg.csi_socket.clone(), cfg.csi_probe_interval, move |r| {
            liveness.set(r)
        })
    };
    let mut tree =
        Supervision::start(children, cfg.restart_policy, supervision.clone(), &metrics).await?;
    csi_trigger.bump("supervisor up");
    diag.mark_synced();
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
    futures::pin_mut!(shutdown);
    let exit = tokio::select! {
        _ = &mut shutdown => Exit::Shutdown,
        _ = lost => Exit::LeaseLost,
        _ = &mut tree.done => Exit::SupervisorDied,
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
            // Log text only: the supervisor is gone either way.
            let why = supervision.check().err().unwrap_or_default();
            error!(%why, "supervisor stopped; /readyz now fails");
            shutdown.await;
            Ok(())
        }
    };
    csi_live.abort();
    csi.stop().await;
    volumes_task.abort();
    tree.stop(&journal).await;
    drop(diag);
    result
}
