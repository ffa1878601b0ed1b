//! What the vg-manager's actors share on this node: the node context (client, host seam,
//! lvmd.yaml, caches, locks, metrics), the host-command clock, and the errors host work maps to.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::runtime::reflector::Store;
use lvms_actors::UnitError;

use super::host::HostOps;
use super::node_api::NodeApi;
use super::node_report::NodeReport;
use crate::api::{LVMVolumeGroup, LVMVolumeGroupNodeStatus};
use crate::node::vg::events::EventReason;
use crate::node::{commands, lvmd_config};
use crate::telemetry::metrics::Metrics;

/// The journal's object kind for this node's host (commands, lvmd.yaml).
pub const HOST_KIND: &str = "Host";

/// What every volume-group actor on this node shares.
pub struct NodeCtx {
    pub client: Client,
    /// The volume-group actors' writes to the API (finalizers, the wiped annotation).
    pub api: Arc<dyn NodeApi>,
    pub namespace: String,
    pub node: String,
    /// Commands and files of this node (the real host, or a fake in unit tests).
    pub host: Arc<dyn HostOps>,
    pub lvmd_path: PathBuf,
    pub report: NodeReport,
    pub volume_groups: Store<LVMVolumeGroup>,
    /// This node's LVMVolumeGroupNodeStatus (created by the operator): Events regard it.
    pub node_statuses: Store<LVMVolumeGroupNodeStatus>,
    /// lvmd.yaml holds every class: one writer at a time.
    pub lvmd_lock: tokio::sync::Mutex<()>,
    /// Gates ([`crate::node::volume::gate`]) are made, grown, removed and held by one task at a time:
    /// a group snapshot's hold never races a publish.
    pub gate_lock: tokio::sync::Mutex<()>,
    /// `--device-allowlist`: when set, the only devices this node may look at.
    pub device_allowlist: Option<PathBuf>,
    /// Replaces LVMS's 30 s requeue (`--reconcile-interval`).
    pub reconcile_interval: Duration,
    /// Where each pass leaves the node gauges (`topolvm_volumegroup_*`, `topolvm_thinpool_*`).
    pub metrics: Metrics,
}

#[cfg(test)]
impl NodeCtx {
    /// Node `node-a` on `host` for unit tests: its API client reaches nothing (every call fails,
    /// retryably), `api` is the recording seam, `volume_groups` what the actors see.
    pub(crate) fn for_tests(
        host: Arc<dyn HostOps>,
        api: Arc<dyn NodeApi>,
        lvmd_path: PathBuf,
        volume_groups: Store<LVMVolumeGroup>,
    ) -> NodeCtx {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("url"));
        NodeCtx {
            client: Client::try_from(config).expect("client"),
            api,
            namespace: "lvms".into(),
            node: "node-a".into(),
            host,
            lvmd_path,
            report: NodeReport::default(),
            volume_groups,
            node_statuses: kube::runtime::reflector::store().0,
            lvmd_lock: tokio::sync::Mutex::new(()),
            gate_lock: tokio::sync::Mutex::new(()),
            device_allowlist: None,
            reconcile_interval: Duration::from_secs(30),
            metrics: crate::telemetry::metrics::Metrics::new(
                crate::telemetry::metrics::Process::VgManager,
            ),
        }
    }
}

impl NodeCtx {
    /// This node's lvmd.yaml: None when there is none yet; unreadable or invalid is an error,
    /// never "no classes".
    pub fn read_lvmd(&self) -> Result<Option<lvmd_config::LvmdConfig>, UnitError> {
        let path = &self.lvmd_path;
        match self.host.read_to_string(path) {
            Ok(text) => lvmd_config::parse(&text).map(Some).map_err(|e| {
                UnitError::permanent("LVMDConfigInvalid", format!("{}: {e}", path.display()))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(UnitError::retryable(
                "LVMDConfigUnreadable",
                format!("{}: {e}", path.display()),
            )),
        }
    }
}

/// Host command time and count within one pass: the part of a pass that is lvm2's, not ours.
#[derive(Default)]
pub struct HostClock(std::sync::Mutex<(Duration, u32)>);

impl HostClock {
    pub(crate) fn reset(&self) {
        if let Ok(mut c) = self.0.lock() {
            *c = (Duration::ZERO, 0);
        }
    }

    pub(crate) fn add(&self, d: Duration) {
        if let Ok(mut c) = self.0.lock() {
            c.0 += d;
            c.1 += 1;
        }
    }

    pub fn read(&self) -> (Duration, u32) {
        // Pass figures for the log only; poisoned (a panic elsewhere) reads as zero.
        self.0.lock().map(|c| *c).unwrap_or_default()
    }
}

pub fn host_err(what: &str) -> impl Fn(super::host::HostError) -> UnitError + '_ {
    move |e| UnitError::retryable("HostCommandFailed", format!("{what}: {e}"))
}

pub fn cmd_err(e: commands::CommandError) -> UnitError {
    UnitError::permanent("InvalidCommand", e.to_string())
}

pub fn warn(reason: EventReason, message: String) -> UnitError {
    UnitError::retryable(reason.as_str(), message)
}
