//! `lvms operator`: the cluster-level controller (one replica, Recreate, like LVMS).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use lvms_actors::RestartPolicy;

use crate::operator::run::{Config, run};

#[derive(Debug, Args)]
pub struct OperatorArgs {
    /// The operator namespace: the LVMCluster and everything namespaced live here.
    #[arg(long, env = "NAMESPACE")]
    pub namespace: String,
    /// Where the reconcile journal lives (`<dir>/operator`).
    #[arg(
        long,
        env = "LVMS_JOURNAL_DIR",
        default_value = "/var/lib/lvms/journal"
    )]
    pub journal_dir: PathBuf,
    /// `/healthz` and `/readyz`.
    #[arg(long, env = "LVMS_DIAGNOSTICS_ADDR", default_value = "0.0.0.0:8081")]
    pub diagnostics_addr: SocketAddr,
    #[command(flatten)]
    pub metrics: super::metrics::MetricsArgs,
    /// Hold the Lease `1136b8a6.topolvm.io` before reconciling (off by default, as in LVMS).
    #[arg(long, env = "LVMS_LEADER_ELECT", default_value_t = false)]
    pub leader_elect: bool,
    /// Image for the vg-manager DaemonSet. Default: this pod's own image (via `NAME`).
    #[arg(long, env = "VGMANAGER_IMAGE")]
    pub vg_manager_image: Option<String>,
    /// Command the vg-manager DaemonSet runs.
    #[arg(
        long,
        value_delimiter = ' ',
        default_value = "/usr/bin/lvms vg-manager"
    )]
    pub vg_manager_command: Vec<String>,
    /// PriorityClass of the vg-manager Pods: `auto` (LVMS's `openshift-user-critical` on
    /// OpenShift, none elsewhere), `none`, or a PriorityClass's name.
    #[arg(long, env = "VGMANAGER_PRIORITY_CLASS", default_value = "auto")]
    pub vg_manager_priority_class: crate::operator::world::PriorityClassChoice,
    /// A Node deleted, or tainted `node.kubernetes.io/out-of-service`, has its claims deleted
    /// and its LogicalVolumes released once it has not been Ready for this long (never while
    /// its kubelet reports Ready). `0s`: as soon as it is not Ready (Kubernetes's node lifecycle
    /// controller already waits 40 s of silence before it says so).
    #[arg(long, env = "LVMS_DEAD_NODE_GRACE", default_value = "0s", value_parser = super::since::parse_duration)]
    pub dead_node_grace: Duration,
    /// This pod's name (downward API), used for the image lookup, Events and the lease.
    #[arg(long, env = "NAME")]
    pub pod_name: Option<String>,
    /// Cooldown between passes of a unit: the first change after a quiet spell starts a pass at
    /// once; changes during it (or this soon after) are coalesced into one more pass.
    #[arg(long, default_value = "50ms", value_parser = parse_ms)]
    pub debounce: Duration,
    /// Records between journal checkpoints (unit-health snapshots, the Event publisher's
    /// position): a restart reads at most about this many records, however long the journal.
    /// Each checkpoint is one flushed record.
    #[arg(long, env = "LVMS_JOURNAL_CHECKPOINT_EVERY", default_value_t = lvms_actors::CHECKPOINT_EVERY, value_parser = clap::value_parser!(u64).range(1..))]
    pub journal_checkpoint_every: u64,
    /// Normal Events: `summary` (one success per LVMCluster reconcile) or `all` (also every
    /// unit's successful pass). Warnings are always sent.
    #[arg(long, default_value = "summary")]
    pub normal_events: crate::operator::units::events::NormalEvents,
    /// Restart intensity: at most this many actor restarts ...
    #[arg(long, default_value_t = 5)]
    pub max_restarts: usize,
    /// ... within this window (seconds), else supervision gives up and /readyz fails.
    #[arg(long, default_value_t = 30)]
    pub restart_window_secs: u64,
    /// The CSI controller socket (Identity + Controller), shared with the sidecars.
    #[arg(long, env = "LVMS_CSI_SOCKET", default_value = crate::csi::names::DEFAULT_CONTROLLER_SOCKET)]
    pub csi_socket: PathBuf,
    /// How often the CSI socket is probed (Identity.Probe over its path, as the livenessprobe
    /// sidecar does); a failed probe fails `/healthz` until the next one passes.
    #[arg(long, env = "LVMS_CSI_PROBE_INTERVAL", default_value = "10s", value_parser = super::since::parse_duration)]
    pub csi_probe_interval: std::time::Duration,
    /// Log format.
    #[arg(long, env = "LVMS_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}

fn parse_ms(s: &str) -> Result<Duration, String> {
    let n = s.strip_suffix("ms").unwrap_or(s);
    n.parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|e| format!("{s:?}: expected milliseconds like 50ms ({e})"))
}

/// The pod's own image: container `manager` of pod `NAME` (LVMS does the same lookup).
async fn own_image(client: &kube::Client, ns: &str, pod: &str) -> anyhow::Result<String> {
    let p = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), ns)
        .get(pod)
        .await
        .with_context(|| format!("reading pod {ns}/{pod} to find the vg-manager image"))?;
    p.spec
        .and_then(|s| {
            s.containers
                .into_iter()
                .find(|c| c.name == "manager")
                .and_then(|c| c.image)
        })
        .with_context(|| {
            format!(
                "pod {ns}/{pod} has no container `manager` with an image; pass --vg-manager-image"
            )
        })
}

pub fn run_cmd(args: OperatorArgs) -> anyhow::Result<ExitCode> {
    let log_format = args.log_format.clone();
    super::signals::run_daemon(&log_format, "lvms-operator", |client| async move {
        let image = match (&args.vg_manager_image, &args.pod_name) {
            (Some(i), _) => i.clone(),
            (None, Some(pod)) => own_image(&client, &args.namespace, pod).await?,
            (None, None) => anyhow::bail!(
                "no vg-manager image: pass --vg-manager-image (VGMANAGER_IMAGE) or run in a pod with NAME set"
            ),
        };
        let identity = args
            .pod_name
            .clone()
            .unwrap_or_else(|| format!("lvms-operator-{}", std::process::id()));
        let cfg = Config {
            namespace: args.namespace,
            journal_dir: args.journal_dir,
            diagnostics_addr: args.diagnostics_addr,
            metrics: args.metrics.serving(),
            leader_elect: args.leader_elect,
            identity,
            image,
            vg_manager_command: args.vg_manager_command,
            vg_manager_priority_class: args.vg_manager_priority_class,
            dead_node_grace: args.dead_node_grace,
            debounce: args.debounce,
            checkpoint_every: args.journal_checkpoint_every,
            csi_socket: args.csi_socket,
            csi_probe_interval: args.csi_probe_interval,
            normal_events: args.normal_events,
            restart_policy: RestartPolicy {
                max_restarts: args.max_restarts,
                within: Duration::from_secs(args.restart_window_secs),
                ..RestartPolicy::default()
            },
        };
        run(client, cfg, super::signals::terminated()).await
    })
}
