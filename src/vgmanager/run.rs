//! `lvms vg-manager`: lock → journal → caches (as [`super::table`] lists them) → supervision
//! tree (the Event publisher, the table's units, and one actor per LVMVolumeGroup the registry
//! adds at run time) → the CSI node service and kubelet's registration.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::runtime::reflector::Store;
use lvms_actors::RestartPolicy;
use lvms_journal::{Journal, JournalConfig};
use tracing::{info, warn};

use super::context::NodeCtx;
use super::events::EventTargets;
use super::host::Host;
use super::node_report::NodeReport;
use super::table::{self, Triggers, UnitDeps, VgUnit};
use crate::api::{LVMVolumeGroup, LVMVolumeGroupNodeStatus, LogicalVolume};
use crate::kube::caches::{Watches, strip_meta};
use crate::kube::events::KubeEvents;
use crate::runtime::process::ProcessCore;
use crate::telemetry::metrics::Process;

#[derive(Debug, Clone)]
pub struct Config {
    pub node: String,
    pub namespace: String,
    pub host: Host,
    pub lvmd_config: PathBuf,
    pub journal_dir: PathBuf,
    pub lock_file: PathBuf,
    pub diagnostics_addr: SocketAddr,
    /// `/metrics`: where, and with which certificate.
    pub metrics: crate::runtime::metrics_server::MetricsServing,
    pub debounce: Duration,
    /// Records between journal checkpoints: a start reads at most about this many records
    /// (unit health, the Event publisher), not the whole journal.
    pub checkpoint_every: u64,
    pub device_allowlist: Option<PathBuf>,
    pub reconcile_interval: Duration,
    /// Where the CSI Identity + Node services are served.
    pub csi_node_socket: PathBuf,
    /// How often `/healthz` probes that socket.
    pub csi_probe_interval: Duration,
    /// kubelet's plugins_registry directory and the node socket's host path it is told, when
    /// vg-manager registers the driver with kubelet.
    pub registration: Option<(PathBuf, PathBuf)>,
    pub restart_policy: RestartPolicy,
    /// The orphan audit's interval and repair policy.
    pub audit: super::audit_unit::AuditConfig,
}

pub async fn run(
    client: Client,
    cfg: Config,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let _lock = super::lock::acquire(&cfg.lock_file)?;
    let core = ProcessCore::start(
        Process::VgManager,
        cfg.diagnostics_addr,
        &cfg.metrics,
        client.clone(),
        &cfg.journal_dir,
        "vg-manager",
        JournalConfig::default(),
    )
    .await?;

    // Watch events → triggers, as the unit table says.
    let report = NodeReport::default();
    let triggers = Triggers::new(report.changed.clone());
    let mut w = Watches::new(&client, &cfg.namespace, triggers.router());
    let [vgs, nodes, statuses, lvs] = table::watches(&cfg.node);
    let volume_groups = w.typed::<LVMVolumeGroup>(&vgs, strip_meta);
    let nodes = w.typed::<Node>(&nodes, strip_meta);
    let node_statuses = w.typed::<LVMVolumeGroupNodeStatus>(&statuses, strip_meta);
    let logical_volumes = w.typed::<LogicalVolume>(&lvs, strip_meta);
    let _watches = w.hub();
    // Before any pass: a pass records which node status its Events regard.
    volume_groups
        .wait_until_ready()
        .await
        .context("LVMVolumeGroup cache")?;
    nodes.wait_until_ready().await.context("Node cache")?;
    node_statuses
        .wait_until_ready()
        .await
        .context("LVMVolumeGroupNodeStatus cache")?;
    logical_volumes
        .wait_until_ready()
        .await
        .context("LogicalVolume cache")?;
    info!(node = %cfg.node, "caches synced");

    let deps = UnitDeps {
        ctx: Arc::new(node_ctx(
            &client,
            &cfg,
            report,
            &volume_groups,
            &node_statuses,
            &core,
        )),
        client: client.clone(),
        namespace: cfg.namespace.clone(),
        volume_groups,
        nodes,
        node_statuses,
        logical_volumes,
        supervisor: Arc::default(),
        audit: cfg.audit.clone(),
    };
    let wiring = core.wiring(
        Arc::new(AtomicU64::new(0)),
        cfg.debounce,
        cfg.checkpoint_every,
        None,
    );
    let targets = EventTargets {
        node: cfg.node.clone(),
        namespace: cfg.namespace.clone(),
    };
    let mut children = vec![core.publisher_child(
        KubeEvents {
            client: client.clone(),
            controller: "lvms-vg-manager".into(),
            instance: cfg.node.clone(),
        },
        Arc::new(move |j: &Journal, r: &lvms_journal::Record| targets.events_for(j, r)),
        cfg.checkpoint_every,
    )];
    children.extend(
        VgUnit::FIXED
            .into_iter()
            .filter_map(|u| u.child(&deps, &wiring, &triggers)),
    );
    let mut tree = core.supervise(children, cfg.restart_policy).await?;
    // Set once, here: it cannot be set already.
    let _ = deps.supervisor.set(tree.supervisor.clone());
    triggers.of(VgUnit::Registry).bump("supervisor up");
    let volumes = Arc::new(super::node_volumes::HostVolumes::new(
        deps.ctx.clone(),
        core.journal.clone(),
    ));
    let csi = serve_csi(&cfg, &core, volumes.clone())?;
    let csi_live = core.probe_csi(cfg.csi_node_socket.clone(), cfg.csi_probe_interval);
    // As LVMS: not ready until kubelet has registered the driver (when this process does it).
    let registration = match &cfg.registration {
        Some((dir, endpoint)) => Some(register(dir, endpoint, &core)?),
        None => None,
    };
    core.diag.mark_synced();
    info!(node = %cfg.node, "vg-manager running");

    core.serve_until(&mut tree, shutdown, std::future::pending())
        .await;
    csi_live.abort();
    if let Some((r, task)) = registration {
        task.abort();
        r.stop(crate::csi::server::BRIEF_DRAIN).await;
    }
    // Drained before the units stop: a NodeUnpublishVolume in flight takes its gate down.
    csi.stop(crate::csi::server::DRAIN).await;
    // Each removal is logged as it is made; a failure leaves them to kubelet's retries.
    if let Err(e) = volumes.sweep_idle_gates().await {
        warn!(error = %e.message, "could not sweep idle gates at stop");
    }
    let journal = core.journal.clone();
    core.stop(tree).await;
    // After the units: no pass that read a class before its removal can annotate after this.
    let volumes_unit = super::volumes::VolumesUnit::new(
        deps.ctx.clone(),
        deps.logical_volumes.clone(),
        deps.nodes.clone(),
    );
    let steps = lvms_actors::Steps::request(
        journal.clone(),
        super::volumes::UNIT,
        Arc::new(AtomicU64::new(0)),
        Some(crate::telemetry::otel::hooks()),
    );
    if let Err(e) = volumes_unit.clear_capacity_without_class(&steps).await {
        warn!(error = %e.message, "could not clear the Node's capacity annotations at stop");
    }
    if let Err(e) = journal.flush() {
        warn!(error = %e, "journal flush after the stop's capacity clear failed");
    }
    Ok(())
}

fn node_ctx(
    client: &Client,
    cfg: &Config,
    report: NodeReport,
    volume_groups: &Store<LVMVolumeGroup>,
    node_statuses: &Store<LVMVolumeGroupNodeStatus>,
    core: &ProcessCore,
) -> NodeCtx {
    NodeCtx {
        client: client.clone(),
        api: Arc::new(super::node_api::KubeNodeApi {
            client: client.clone(),
            namespace: cfg.namespace.clone(),
        }),
        namespace: cfg.namespace.clone(),
        node: cfg.node.clone(),
        host: Arc::new(cfg.host.clone()),
        lvmd_path: cfg.lvmd_config.clone(),
        report,
        volume_groups: volume_groups.clone(),
        node_statuses: node_statuses.clone(),
        lvmd_lock: tokio::sync::Mutex::new(()),
        gate_lock: tokio::sync::Mutex::new(()),
        device_allowlist: cfg.device_allowlist.clone(),
        reconcile_interval: cfg.reconcile_interval,
        metrics: core.metrics.clone(),
    }
}

/// The CSI Identity + Node services on the node socket; ready while supervision holds.
fn serve_csi(
    cfg: &Config,
    core: &ProcessCore,
    volumes: Arc<super::node_volumes::HostVolumes>,
) -> anyhow::Result<crate::csi::server::Serving> {
    let supervision = core.diag.supervision.clone();
    crate::csi::node::service::serve(
        &cfg.csi_node_socket,
        &cfg.node,
        Arc::new(move || {
            supervision.check().map_err(|e| e.to_string())?;
            Ok(true)
        }),
        volumes,
    )
}

/// kubelet's plugin registration, and `/readyz` following its verdict.
fn register(
    dir: &std::path::Path,
    endpoint: &std::path::Path,
    core: &ProcessCore,
) -> anyhow::Result<(crate::csi::server::Serving, tokio::task::JoinHandle<()>)> {
    let (serving, mut told) = crate::csi::registration::serve(dir, endpoint)?;
    let gate = core.diag.registration.clone();
    gate.set(Err(format!(
        "kubelet has not registered {} yet ({})",
        crate::api::topolvm::DRIVER_NAME,
        dir.join(crate::csi::registration::REGISTRATION_SOCKET)
            .display()
    )));
    let task = tokio::spawn(async move {
        while told.changed().await.is_ok() {
            let verdict = match told.borrow().as_ref() {
                Some(s) if s.plugin_registered => Ok(()),
                Some(s) => Err(format!("kubelet refused the registration: {}", s.error)),
                None => continue,
            };
            gate.set(verdict);
        }
    });
    Ok((serving, task))
}
