//! `lvms vg-manager`: lock → journal → caches → supervision tree (publisher, registry,
//! node-status projector, and one actor per LVMVolumeGroup added at run time).

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::watcher;
use kube::{Api, Client};
use lvms_actors::{PublisherArgs, RestartPolicy, SupervisorMsg, Trigger};
use lvms_journal::Journal;
use ractor::ActorRef;
use tracing::{error, info};

use super::context::NodeCtx;
use super::events::EventTargets;
use super::host::Host;
use super::node_report::NodeReport;
use super::node_status_unit::{self, NodeStatusUnit};
use super::registry::{self, Registry, SpecFor};
use super::volume_group::VolumeGroupUnit;
use crate::api::{LVMVolumeGroup, LVMVolumeGroupNodeStatus, LogicalVolume};
use crate::kube::caches::{spawn_typed, strip_meta};
use crate::kube::events::KubeEvents;
use crate::runtime::{Diagnostics, PublisherSlot, Supervision, UnitWiring};
use crate::telemetry::metrics::{Metrics, Process};

#[derive(Debug, Clone)]
pub struct Config {
    pub node: String,
    pub namespace: String,
    pub host: Host,
    pub lvmd_config: PathBuf,
    pub journal_dir: PathBuf,
    pub lock_file: PathBuf,
    pub diagnostics_addr: SocketAddr,
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
}

pub async fn run(
    client: Client,
    cfg: Config,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let _lock = super::lock::acquire(&cfg.lock_file)?;
    let metrics = Metrics::new(Process::VgManager);
    let diag = Diagnostics::start(cfg.diagnostics_addr, metrics.text()).await?;
    let supervision = diag.supervision.clone();

    std::fs::create_dir_all(&cfg.journal_dir)
        .with_context(|| format!("--journal-dir {}", cfg.journal_dir.display()))?;
    let path = cfg.journal_dir.join("vg-manager");
    let journal = Arc::new(
        Journal::open(&path)
            .with_context(|| format!("opening the journal at {}", path.display()))?,
    );

    // Watch events → triggers: the registry and every volume-group actor.
    let registry_trigger = Trigger::new();
    let volumes_trigger = Trigger::new();
    let vg_triggers: Arc<Mutex<BTreeMap<String, Trigger>>> = Arc::default();
    let report = NodeReport::default();
    let router: crate::kube::caches::Router = {
        let (reg, vgs) = (registry_trigger.clone(), vg_triggers.clone());
        let node_status = report.changed.clone();
        let volumes = volumes_trigger.clone();
        Arc::new(move |source, _change, _traceparent: Option<&str>| {
            use crate::kube::kinds::Kind;
            // Every change that can move a volume or the node's capacity: its volumes, a
            // class built or torn down (the node status follows each volume-group pass), the
            // Node's annotations.
            if matches!(
                source,
                Kind::LogicalVolume | Kind::NodeStatus | Kind::VolumeGroup | Kind::Node
            ) {
                volumes.bump(&format!("{source:?}"));
            }
            // LogicalVolumes matter to the volumes unit only.
            if source == Kind::LogicalVolume {
                return;
            }
            // This node's status matters only to the node-status unit: it writes into the
            // object the operator created (and stops when it is deleted). Its own writes come
            // back here too and find nothing to do.
            if source == Kind::NodeStatus {
                node_status.bump("NodeStatus");
                return;
            }
            reg.bump(&format!("{source:?}"));
            if let Ok(m) = vgs.lock() {
                m.values().for_each(|t| t.bump(&format!("{source:?}")));
            }
        })
    };
    let mut tasks = Vec::new();
    let volume_groups = spawn_typed(
        Api::<LVMVolumeGroup>::namespaced(client.clone(), &cfg.namespace),
        watcher::Config::default(),
        crate::kube::kinds::Kind::VolumeGroup,
        router.clone(),
        strip_meta,
        &mut tasks,
    );
    let nodes = spawn_typed(
        Api::<Node>::all(client.clone()),
        watcher::Config::default().fields(&format!("metadata.name={}", cfg.node)),
        crate::kube::kinds::Kind::Node,
        router.clone(),
        strip_meta,
        &mut tasks,
    );
    // This node's status: Event targets and the node-status unit's write target.
    let node_statuses = spawn_typed(
        Api::<LVMVolumeGroupNodeStatus>::namespaced(client.clone(), &cfg.namespace),
        watcher::Config::default().fields(&format!("metadata.name={}", cfg.node)),
        crate::kube::kinds::Kind::NodeStatus,
        router.clone(),
        strip_meta,
        &mut tasks,
    );
    // This node's LogicalVolumes only (`spec.nodeName` is a selectable field of the CRD).
    let logical_volumes = spawn_typed(
        Api::<LogicalVolume>::all(client.clone()),
        watcher::Config::default().fields(&format!("spec.nodeName={}", cfg.node)),
        crate::kube::kinds::Kind::LogicalVolume,
        router.clone(),
        strip_meta,
        &mut tasks,
    );
    volume_groups
        .wait_until_ready()
        .await
        .context("LVMVolumeGroup cache")?;
    nodes.wait_until_ready().await.context("Node cache")?;
    // Before any pass: a pass records which node status its Events regard.
    node_statuses
        .wait_until_ready()
        .await
        .context("LVMVolumeGroupNodeStatus cache")?;
    logical_volumes
        .wait_until_ready()
        .await
        .context("LogicalVolume cache")?;
    info!(node = %cfg.node, "caches synced");

    let ctx = Arc::new(NodeCtx {
        client: client.clone(),
        api: Arc::new(super::node_api::KubeNodeApi {
            client: client.clone(),
            namespace: cfg.namespace.clone(),
        }),
        namespace: cfg.namespace.clone(),
        node: cfg.node.clone(),
        host: Arc::new(cfg.host.clone()),
        lvmd_path: cfg.lvmd_config.clone(),
        report: report.clone(),
        volume_groups: volume_groups.clone(),
        node_statuses: node_statuses.clone(),
        lvmd_lock: tokio::sync::Mutex::new(()),
        gate_lock: tokio::sync::Mutex::new(()),
        device_allowlist: cfg.device_allowlist.clone(),
        reconcile_interval: cfg.reconcile_interval,
        metrics: metrics.clone(),
    });
    let publisher = PublisherSlot::default();
    let trimmer = crate::runtime::memory::Trimmer::default();
    let _trimming = trimmer.spawn(Duration::from_millis(200));
    let wiring = UnitWiring {
        journal: journal.clone(),
        epoch: Arc::new(AtomicU64::new(0)),
        on_pass: {
            let (publisher, metrics) = (publisher.clone(), metrics.clone());
            metrics.watch_journal(&journal);
            Arc::new(move |pass: &lvms_actors::PassReport<'_>| {
                metrics.pass(pass);
                trimmer.mark();
                if pass.journaled {
                    publisher.poke();
                }
            })
        },
        debounce: cfg.debounce,
        checkpoint_every: cfg.checkpoint_every,
    };
    let supervisor_slot: Arc<OnceLock<ActorRef<SupervisorMsg>>> = Arc::default();
    let spec_for: SpecFor = {
        let (wiring, ctx) = (wiring.clone(), ctx.clone());
        Arc::new(move |vg: &str, trigger: Trigger| {
            let name = format!("vg/{vg}");
            let unit = VolumeGroupUnit {
                unit: name.clone(),
                vg: vg.to_string(),
                ctx: ctx.clone(),
                host_clock: Default::default(),
                continued_trace: Default::default(),
            };
            wiring.child(&name, trigger, unit)
        })
    };

    let mut children = vec![publisher.child(PublisherArgs {
        sink: Arc::new(KubeEvents {
            client: client.clone(),
            controller: "lvms-vg-manager".into(),
            instance: cfg.node.clone(),
        }),
        journal: journal.clone(),
        event_for: {
            let targets = EventTargets {
                node: cfg.node.clone(),
                namespace: cfg.namespace.clone(),
            };
            Arc::new(move |j: &Journal, r: &lvms_journal::Record| targets.events_for(j, r))
        },
        checkpoint_every: cfg.checkpoint_every,
    })];
    children.push(wiring.child(
        node_status_unit::UNIT,
        report.changed.clone(),
        NodeStatusUnit::new(
            client.clone(),
            cfg.namespace.clone(),
            cfg.node.clone(),
            report.clone(),
            node_statuses.clone(),
        ),
    ));
    children.push(wiring.child(
        super::volumes::UNIT,
        volumes_trigger.clone(),
        super::volumes::VolumesUnit {
            ctx: ctx.clone(),
            volumes: logical_volumes,
            nodes: nodes.clone(),
            host_clock: Default::default(),
            holds_checked: Default::default(),
        },
    ));
    // The node service: its RPCs journal format / mount steps; its unit replays them.
    children.push(wiring.child(
        crate::csi::node::actions::UNIT,
        Trigger::new(),
        super::csi_node_unit::CsiNodeUnit { ctx: ctx.clone() },
    ));
    children.push(wiring.child(
        registry::UNIT,
        registry_trigger.clone(),
        Registry {
            node_name: cfg.node.clone(),
            volume_groups,
            nodes,
            supervisor: supervisor_slot.clone(),
            spec_for,
            triggers: vg_triggers,
        },
    ));
    let mut tree =
        Supervision::start(children, cfg.restart_policy, supervision.clone(), &metrics).await?;
    // Set once, here: it cannot be set already.
    let _ = supervisor_slot.set(tree.supervisor.clone());
    registry_trigger.bump("supervisor up");
    let csi = crate::csi::node::service::serve(
        &cfg.csi_node_socket,
        &cfg.node,
        {
            let supervision = supervision.clone();
            Arc::new(move || {
                supervision.check().map_err(|e| e.to_string())?;
                Ok(true)
            })
        },
        Arc::new(super::node_volumes::HostVolumes {
            ctx: ctx.clone(),
            journal: journal.clone(),
        }),
    )?;
    let csi_live = {
        let liveness = diag.liveness.clone();
        crate::csi::liveness::spawn(
            cfg.csi_node_socket.clone(),
            cfg.csi_probe_interval,
            move |r| liveness.set(r),
        )
    };
    // As LVMS: not ready until kubelet has registered the driver (when this process does it).
    let registration = match &cfg.registration {
        Some((dir, endpoint)) => {
            let (serving, mut told) = crate::csi::registration::serve(dir, endpoint)?;
            let gate = diag.registration.clone();
            gate.set(Err(format!(
                "kubelet has not registered {} yet ({})",
                crate::api::topolvm::DRIVER_NAME,
                dir.join(crate::csi::registration::REGISTRATION_SOCKET)
                    .display()
            )));
            tasks.push(tokio::spawn(async move {
                while told.changed().await.is_ok() {
                    let verdict = match told.borrow().as_ref() {
                        Some(s) if s.plugin_registered => Ok(()),
                        Some(s) => Err(format!("kubelet refused the registration: {}", s.error)),
                        None => continue,
                    };
                    gate.set(verdict);
                }
            }));
            Some(serving)
        }
        None => None,
    };
    diag.mark_synced();
    info!(node = %cfg.node, "vg-manager running");

    futures::pin_mut!(shutdown);
    tokio::select! {
        _ = &mut shutdown => info!("shutting down"),
        _ = &mut tree.done => {
            // Log text only: the supervisor is gone either way.
            let why = supervision.check().err().unwrap_or_default();
            error!(%why, "supervisor stopped; /readyz now fails");
            shutdown.await;
        }
    }
    csi_live.abort();
    if let Some(r) = registration {
        r.stop().await;
    }
    csi.stop().await;
    tree.stop(&journal).await;
    tasks.iter().for_each(|t| t.abort());
    drop(diag);
    Ok(())
}
