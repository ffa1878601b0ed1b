//! `lvms operator`: journal → discovery → (leader election) → caches → one supervised actor
//! per row of the unit table ([`super::table`]), the Event publisher, and the CSI controller.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use kube::Client;
use lvms_actors::{RestartPolicy, Trigger};
use lvms_journal::JournalConfig;
use tracing::{error, info};

use super::context::Ctx;
use super::table::{self, UnitId};
use super::units::generations::PassedGenerations;
use super::units::{UnitDeps, events};
use super::world::OperatorSettings;
use crate::kube::caches::WatchHub;
use crate::kube::discovery;
use crate::kube::events::KubeEvents;
use crate::runtime::process::{Exit, ProcessCore};
use crate::telemetry::metrics::Process;

#[derive(Debug, Clone)]
pub struct Config {
    pub namespace: String,
    pub journal_dir: PathBuf,
    pub diagnostics_addr: SocketAddr,
    /// `/metrics`: where, and with which certificate.
    pub metrics: crate::runtime::metrics_server::MetricsServing,
    pub leader_elect: bool,
    /// Identity for leader election and Events (the pod name in a cluster).
    pub identity: String,
    pub image: String,
    pub vg_manager_command: Vec<String>,
    pub vg_manager_priority_class: crate::operator::world::PriorityClassChoice,
    pub dead_node_grace: Duration,
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
    let core = ProcessCore::start(
        Process::Operator,
        cfg.diagnostics_addr,
        &cfg.metrics,
        client.clone(),
        &cfg.journal_dir,
        "operator",
        journal_config(),
    )
    .await?;
    let capabilities = discovery::capabilities(&client).await.context(
        "discovering optional APIs (VolumeSnapshotClass, VolumeGroupSnapshotClass, SCC)",
    )?;
    info!(?capabilities, "discovered");
    let epoch = Arc::new(AtomicU64::new(0));
    let mut leadership = None;
    if cfg.leader_elect {
        let l = super::leader::acquire(&client, &cfg.namespace, &cfg.identity).await?;
        epoch.store(l.epoch, Ordering::Release);
        leadership = Some(l);
    }

    // One trigger per unit; the hub bumps the ones each watch source matters to.
    let units: Vec<UnitId> = table::units(&capabilities).collect();
    let triggers: BTreeMap<UnitId, Trigger> = units.iter().map(|u| (*u, Trigger::new())).collect();
    let router = super::units::router(&triggers);
    let (_hub, caches) = WatchHub::start(&client, &cfg.namespace, capabilities, router);
    caches
        .wait_ready()
        .await
        .context("waiting for the caches")?;
    info!("caches synced");
    let settings = OperatorSettings {
        namespace: cfg.namespace.clone(),
        image: cfg.image.clone(),
        vg_manager_command: cfg.vg_manager_command.clone(),
        vg_manager_priority_class: cfg.vg_manager_priority_class.clone(),
        dead_node_grace: cfg.dead_node_grace,
    };
    let deps = UnitDeps {
        ctx: Arc::new(Ctx {
            client: client.clone(),
            settings,
            capabilities,
            caches,
        }),
        passed: Arc::new(PassedGenerations::default()),
        volumes: crate::csi::controller::volumes::Volumes::new(),
    };

    let wake_status = deps
        .passed
        .clone()
        .status_waker(triggers.get(&UnitId::Status).cloned());
    let wiring = core.wiring(
        epoch.clone(),
        cfg.debounce,
        cfg.checkpoint_every,
        Some(wake_status),
    );
    let mut children = vec![core.publisher_child(
        KubeEvents {
            client: client.clone(),
            controller: "lvms-operator".into(),
            instance: cfg.identity.clone(),
        },
        events::mapper(cfg.normal_events),
        cfg.checkpoint_every,
    )];
    for (unit, trigger) in &triggers {
        children.push(unit.child(&deps, &wiring, trigger.clone())?);
    }

    let volumes_task = tokio::spawn(deps.volumes.clone().run(kube::Api::all(client.clone())));
    let csi = super::csi::serve(
        &cfg.csi_socket,
        crate::csi::controller::writes::LvWrites {
            client: client.clone(),
            journal: core.journal.clone(),
            epoch: epoch.clone(),
        },
        deps.volumes.clone(),
        deps.ctx.caches.nodes.clone(),
        deps.ctx.caches.clusters.clone(),
        core.diag.supervision.clone(),
    )?;
    let csi_live = core.probe_csi(cfg.csi_socket.clone(), cfg.csi_probe_interval);
    let mut tree = core.supervise(children, cfg.restart_policy).await?;
    core.diag.mark_synced();
    info!(namespace = %cfg.namespace, epoch = epoch.load(Ordering::Acquire), "operator running");

    let lost = super::leader::lost(leadership.as_mut());
    let exit = core.serve_until(&mut tree, shutdown, lost).await;
    csi_live.abort();
    csi.stop(match exit {
        Exit::Other => crate::csi::server::BRIEF_DRAIN,
        _ => crate::csi::server::DRAIN,
    })
    .await;
    volumes_task.abort();
    core.stop(tree).await;
    if exit == Exit::Other {
        error!("leader lease lost: every unit stopped");
        return Err(anyhow::anyhow!("leader election lost"));
    }
    Ok(())
}
