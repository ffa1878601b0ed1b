//! `lvms vg-manager`: one per node (a DaemonSet created by the operator).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use lvms_actors::RestartPolicy;

use crate::vgmanager::host::Host;
use crate::vgmanager::run::{Config, run};

#[derive(Debug, Args)]
pub struct VgManagerArgs {
    #[arg(long, env = "NODE_NAME")]
    pub node_name: String,
    #[arg(long, env = "NAMESPACE")]
    pub namespace: String,
    /// Prefix of every host command ("" runs them in this process's namespaces).
    #[arg(
        long,
        env = "LVMS_HOST_COMMAND_PREFIX",
        default_value = "nsenter -m -u -i -n -p -t 1"
    )]
    pub host_command_prefix: String,
    /// How long one host command (lvm2, dmsetup, mkfs, mount) may run before it is killed
    /// and its step fails (a group snapshot's suspended gates are resumed); `0s`: no limit.
    /// Far beyond any lvm2 metadata change or mkfs, short enough that a hung command's
    /// suspended gates come back within minutes.
    #[arg(long, env = "LVMS_HOST_COMMAND_TIMEOUT", default_value = "300s", value_parser = super::since::parse_duration)]
    pub host_command_timeout: Duration,
    /// lvm2 `--config` for every lvm command (tests: `global{activation=0} ...`).
    #[arg(long, env = "LVMS_LVM_CONFIG")]
    pub lvm_config: Option<String>,
    #[arg(
        long,
        env = "LVMS_LVMD_CONFIG",
        default_value = "/etc/topolvm/lvmd.yaml"
    )]
    pub lvmd_config: PathBuf,
    #[arg(
        long,
        env = "LVMS_JOURNAL_DIR",
        default_value = "/var/lib/lvms/journal"
    )]
    pub journal_dir: PathBuf,
    /// Two vg-managers on one node would race on the same disks.
    #[arg(
        long,
        env = "LVMS_LOCK_FILE",
        default_value = "/var/lock/vgmanager/vgmanager.lock"
    )]
    pub lock_file: PathBuf,
    #[arg(long, env = "LVMS_DIAGNOSTICS_ADDR", default_value = "0.0.0.0:8081")]
    pub diagnostics_addr: SocketAddr,
    #[command(flatten)]
    pub metrics: super::metrics::MetricsArgs,
    /// Cooldown between passes of a unit, in ms (the first change after a quiet spell starts
    /// a pass at once).
    #[arg(long, default_value_t = 50)]
    pub debounce_ms: u64,
    /// Records between journal checkpoints (unit-health snapshots, the Event publisher's
    /// position): a restart reads at most about this many records, however long the journal.
    /// Each checkpoint is one flushed record.
    #[arg(long, env = "LVMS_JOURNAL_CHECKPOINT_EVERY", default_value_t = lvms_actors::CHECKPOINT_EVERY, value_parser = clap::value_parser!(u64).range(1..))]
    pub journal_checkpoint_every: u64,
    /// A file listing the only devices this node may use, one path per line (symlinks
    /// resolved), read on every pass. Unset: every device the selectors allow.
    #[arg(long, env = "LVMS_DEVICE_ALLOWLIST")]
    pub device_allowlist: Option<PathBuf>,
    /// How often a volume group is looked at again without a Kubernetes event (new disks
    /// under Dynamic discovery, thin pool growth); LVMS uses 30 s.
    #[arg(long, env = "LVMS_RECONCILE_INTERVAL", default_value = "30s", value_parser = super::since::parse_duration)]
    pub reconcile_interval: Duration,
    /// The CSI node socket (Identity + Node), where kubelet's plugin registration points.
    #[arg(long, env = "LVMS_CSI_NODE_SOCKET", default_value = crate::csi::node::service::DEFAULT_NODE_SOCKET)]
    pub csi_node_socket: PathBuf,
    /// How often the CSI socket is probed (Identity.Probe over its path, as the livenessprobe
    /// sidecar does); a failed probe fails `/healthz` until the next one passes.
    #[arg(long, env = "LVMS_CSI_PROBE_INTERVAL", default_value = "10s", value_parser = super::since::parse_duration)]
    pub csi_probe_interval: std::time::Duration,
    /// kubelet's plugins_registry directory: vg-manager registers the driver there
    /// (`topolvm.io-reg.sock`). `off`: no registration (no kubelet, or kubelet told otherwise).
    #[arg(long, env = "LVMS_REGISTRATION_DIR", default_value = crate::csi::registration::DEFAULT_REGISTRATION_DIR)]
    pub registration_dir: String,
    /// The CSI node socket as a path on the host, which kubelet dials (it differs from
    /// --csi-node-socket when the host directory is mounted elsewhere in the container).
    #[arg(long, env = "LVMS_KUBELET_NODE_SOCKET", default_value = crate::csi::node::service::DEFAULT_NODE_SOCKET)]
    pub kubelet_node_socket: PathBuf,
    /// How often this node's orphan audit runs (`lvms audit`); `0s`: only when asked
    /// (`lvms audit --now`).
    #[arg(long, env = "LVMS_AUDIT_INTERVAL", default_value = "10m", value_parser = super::since::parse_duration)]
    pub audit_interval: Duration,
    /// What the audit repairs by itself: `none` (report only), or `leaked` (remove an LV the
    /// journal proves lvms made and that no LogicalVolume and no PersistentVolume names).
    #[arg(long, env = "LVMS_AUDIT_REPAIR", value_enum, default_value_t = crate::vgmanager::audit_unit::RepairPolicy::None)]
    pub audit_repair: crate::vgmanager::audit_unit::RepairPolicy,
    /// A journaled step open longer than this is reported as half-finished.
    #[arg(long, env = "LVMS_AUDIT_OPEN_AFTER", default_value = "10m", value_parser = super::since::parse_duration)]
    pub audit_open_after: Duration,
    #[arg(long, env = "LVMS_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}

pub fn run_cmd(args: VgManagerArgs) -> anyhow::Result<ExitCode> {
    let log_format = args.log_format.clone();
    super::signals::run_daemon(&log_format, "lvms-vg-manager", |client| async move {
        let cfg = Config {
            node: args.node_name,
            namespace: args.namespace,
            host: Host {
                prefix: args
                    .host_command_prefix
                    .split_whitespace()
                    .map(String::from)
                    .collect(),
                lvm_config: args.lvm_config.filter(|c| !c.is_empty()),
                deadline: Some(args.host_command_timeout).filter(|d| !d.is_zero()),
            },
            lvmd_config: args.lvmd_config,
            journal_dir: args.journal_dir,
            lock_file: args.lock_file,
            diagnostics_addr: args.diagnostics_addr,
            metrics: args.metrics.serving(),
            debounce: Duration::from_millis(args.debounce_ms),
            checkpoint_every: args.journal_checkpoint_every,
            device_allowlist: args.device_allowlist,
            reconcile_interval: args.reconcile_interval,
            csi_node_socket: args.csi_node_socket,
            csi_probe_interval: args.csi_probe_interval,
            registration: (args.registration_dir != "off").then(|| {
                (
                    PathBuf::from(&args.registration_dir),
                    args.kubelet_node_socket,
                )
            }),
            restart_policy: RestartPolicy::default(),
            audit: crate::vgmanager::audit_unit::AuditConfig {
                interval: args.audit_interval,
                repair: args.audit_repair,
                open_after: args.audit_open_after,
            },
        };
        run(client, cfg, super::signals::terminated()).await
    })
}
