//! The node service's side effects on this node: find a volume's LV, read what the node shows
//! (device numbers, signature, mount table), and take the steps [`crate::csi::node::publish`] decides,
//! each side effect a journaled step of unit [`UNIT`] (format, mount, unmount, resize). Its
//! replay is [`super::csi_node_unit`]. A read that fails is Unavailable (kubelet retries),
//! never "nothing mounted" or "no signature".

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use futures::future::BoxFuture;
use lvms_actors::{Done, Steps, UnitError};
use lvms_journal::Journal;
use tonic::Code;
use tracing::info;

use super::context::NodeCtx;
use super::stats_lvs::StatsLvs;
use super::volume_lookup::{FoundLv, attrs, find};
use crate::csi::controller::writes::csi_error;
use crate::csi::errors::CsiError;
use crate::csi::node::actions::{NodeStep, UNIT};
use crate::csi::node::mountinfo::{self, Mount};
use crate::csi::node::publish::{
    Kind, PublishSpec, PublishStep, PublishView, format_argv, is_volume_mount, mount_argv,
    plan_publish, resize_argv, signature_of,
};
use crate::csi::node::service::NodeVolumes;
use crate::node::volume::gate::{self, GateStep};

/// A freshly made filesystem's root: writable by every pod, setgid (TopoLVM's).
const FRESH_ROOT_MODE: u32 = 0o2777;

pub struct HostVolumes {
    pub ctx: Arc<NodeCtx>,
    pub journal: Arc<Journal>,
    /// NodeGetVolumeStats' volume conditions: one lvm2 report for the calls of a short window.
    stats_lvs: StatsLvs,
}

impl HostVolumes {
    pub fn new(ctx: Arc<NodeCtx>, journal: Arc<Journal>) -> Self {
        Self {
            ctx,
            journal,
            stats_lvs: StatsLvs::default(),
        }
    }
}

fn internal(what: &str) -> impl Fn(String) -> CsiError + '_ {
    move |e| CsiError::internal(format!("{what}: {e}"))
}

fn unit_err(e: CsiError) -> UnitError {
    UnitError::retryable("NodeCommandFailed", e.message)
}

/// The node's reads, shared by the service and its replay.
pub struct NodeReads<'a> {
    pub ctx: &'a NodeCtx,
}

impl NodeReads<'_> {
    async fn run(&self, argv: &[String], ok: &[i32]) -> Result<String, CsiError> {
        self.ctx
            .host
            .run(argv, ok)
            .await
            .map(|o| o.stdout)
            .map_err(|e| CsiError::internal(e.to_string()))
    }

    pub async fn mounts(&self) -> Result<Vec<Mount>, CsiError> {
        let text = self
            .ctx
            .host
            .mount_table()
            .map_err(|e| CsiError::unavailable(format!("reading the mount table: {e}")))?;
        mountinfo::parse(&text).map_err(|e| CsiError::unavailable(e.to_string()))
    }

    /// `major:minor` of a block device node: from the node itself (stat), else as lsblk says.
    pub async fn device_number(&self, path: &str) -> Result<String, CsiError> {
        match self.ctx.host.block_device_number(Path::new(path)) {
            Ok(Some(n)) => return Ok(n),
            Ok(None) => {
                return Err(CsiError::unavailable(format!(
                    "device number of {path}: not a block device"
                )));
            }
            // Not seen from here (no such node in this view of /dev): lsblk, in the host's.
            Err(_) => {}
        }
        let out = self
            .run(
                &[
                    "lsblk".into(),
                    "-dnro".into(),
                    "MAJ:MIN".into(),
                    path.into(),
                ],
                &[],
            )
            .await
            .map_err(|e| {
                CsiError::unavailable(format!("device number of {path}: {}", e.message))
            })?;
        let n = out.trim();
        if n.contains(':') {
            Ok(n.to_string())
        } else {
            Err(CsiError::unavailable(format!(
                "lsblk gave no major:minor for {path}: {out:?}"
            )))
        }
    }

    /// The device's signature; blkid exits 2 when it finds none. The device's cached pages
    /// are dropped first: a filesystem made through the volume's gate is not in the LV's own
    /// page cache, and a stale "nothing here" must never lead to a format.
    pub async fn signature(&self, device: &str) -> Result<Option<String>, CsiError> {
        self.run(
            &["blockdev".into(), "--flushbufs".into(), device.into()],
            &[],
        )
        .await
        .map_err(|e| {
            CsiError::unavailable(format!("blockdev --flushbufs {device}: {}", e.message))
        })?;
        let out = self
            .run(
                &[
                    "blkid".into(),
                    "-p".into(),
                    "-o".into(),
                    "export".into(),
                    device.into(),
                ],
                &[2],
            )
            .await
            .map_err(|e| CsiError::unavailable(format!("blkid {device}: {}", e.message)))?;
        Ok(signature_of(&out))
    }

    /// Every device-mapper device (gates among them), as `dmsetup info` reports it.
    pub async fn dm_devices(&self) -> Result<Vec<gate::DmDevice>, CsiError> {
        match self.run(&gate::list_argv(), &[]).await {
            Ok(out) => gate::parse_list(&out).map_err(|e| CsiError::unavailable(e.to_string())),
            // A kernel without device-mapper (the host test tier, activation off) has no
            // device of it: that is what it said, not a failed read.
            Err(e) if gate::no_driver(&e.message) => Ok(Vec::new()),
            Err(e) => Err(CsiError::unavailable(format!(
                "dmsetup info: {}",
                e.message
            ))),
        }
    }

    /// The volume's gate, if it has one.
    pub async fn gate(&self, volume_id: &str) -> Result<Option<gate::DmDevice>, CsiError> {
        let name = gate::name(volume_id);
        Ok(self
            .dm_devices()
            .await?
            .into_iter()
            .find(|d| d.name == name))
    }

    pub async fn gate_table(&self, volume_id: &str) -> Result<gate::GateTable, CsiError> {
        let out = self
            .run(&gate::table_argv(&gate::name(volume_id)), &[])
            .await
            .map_err(|e| CsiError::unavailable(format!("dmsetup table: {}", e.message)))?;
        gate::parse_table(&out).map_err(|e| CsiError::unavailable(e.to_string()))
    }

    /// The mount at `path`, checked to be the volume's; None when nothing is mounted there.
    /// Anything else mounted there is the caller's error (`asked` says which code): nothing
    /// is done to it. The volume's devices are read as far as needed: its gate first (what a
    /// filesystem is mounted from, no lvm2 scan), then its LV (a block volume's device node, or
    /// a filesystem published before gates).
    pub async fn volume_mount_at(
        &self,
        volume_id: &str,
        path: &str,
        asked: PathUse,
    ) -> Result<Option<Mount>, CsiError> {
        let Some(m) = mountinfo::at(&self.mounts().await?, path).cloned() else {
            return Ok(None);
        };
        // The common case, with no command at all: a filesystem mounted from the volume's gate
        // (its device node's number is the mount's device). Anything else is read in full.
        // (An LV name has no `/`: an id with one names no gate and takes the full read.)
        let gate_node = (!volume_id.contains('/')).then(|| {
            self.ctx
                .host
                .block_device_number(Path::new(&gate::path(volume_id)))
        });
        if let Some(Ok(Some(n))) = gate_node
            && is_volume_mount(&m, None, &[n])
        {
            return Ok(Some(m));
        }
        let mut devices = Vec::new();
        if self.gate(volume_id).await?.is_some() {
            devices.push(self.device_number(&gate::path(volume_id)).await?);
            if is_volume_mount(&m, None, &devices) {
                return Ok(Some(m));
            }
        }
        let lv = find(self.ctx, volume_id)
            .await
            .map_err(|e| CsiError::unavailable(format!("reading lvm2 for {volume_id}: {e}")))?;
        if let Some(lv) = lv.filter(FoundLv::active) {
            devices.push(self.device_number(&lv.device(volume_id)).await?);
        }
        // Only a device node has a number of its own (a block volume's target).
        let node_device = self.device_number(path).await.ok();
        if is_volume_mount(&m, node_device.as_deref(), &devices) {
            return Ok(Some(m));
        }
        Err(CsiError::new(
            asked.code(),
            format!(
                "{} {path} is not where volume {volume_id} is published on node {}: {} ({}) is mounted there, not the volume's device ({}); nothing was done to it",
                asked.field(),
                self.ctx.node,
                m.source,
                m.device,
                if devices.is_empty() {
                    "none on this node".to_string()
                } else {
                    devices.join(", ")
                }
            ),
        ))
    }

    pub async fn lv(&self, volume_id: &str) -> Result<FoundLv, CsiError> {
        find(self.ctx, volume_id)
            .await
            .map_err(|e| CsiError::unavailable(format!("reading lvm2 for {volume_id}: {e}")))?
            .ok_or_else(|| {
                CsiError::not_found(format!(
                    "volume {volume_id} has no LV on node {}",
                    self.ctx.node
                ))
            })
    }
}

/// Removes every gate nothing holds and nothing mounts ([`gate::idle`]), each a journaled
/// `gate-remove` (`steps`) like NodeUnpublishVolume's; returns their names. Under the gate lock,
/// which every publish, unpublish, expansion and group hold takes for its whole length, an idle
/// gate is never one being made or used: it is what a stop between an unmount and the gate's
/// removal left. kubelet's retried NodeUnpublishVolume would remove it, but none comes after an
/// uninstall, and the LV under it could not be removed.
pub async fn sweep_idle_gates(ctx: &NodeCtx, steps: &Steps) -> Result<Vec<String>, CsiError> {
    let _gates = ctx.gate_lock.lock().await;
    let reads = NodeReads { ctx };
    let devices = reads.dm_devices().await?;
    let idle = gate::idle(&devices);
    if idle.is_empty() {
        return Ok(Vec::new());
    }
    let mounts = reads.mounts().await?;
    let mut removed = Vec::new();
    for g in idle {
        let Some(volume_id) = gate::volume_of(&g.name) else {
            continue;
        };
        let number = reads.device_number(&gate::path(volume_id)).await?;
        if mounts.iter().any(|m| m.device == number) {
            continue;
        }
        remove_gate(ctx, steps, volume_id, &g.name).await?;
        removed.push(g.name.clone());
    }
    Ok(removed)
}

/// Gate `name` of `volume_id` removed, as a journaled `gate-remove` step.
async fn remove_gate(
    ctx: &NodeCtx,
    steps: &Steps,
    volume_id: &str,
    name: &str,
) -> Result<(), CsiError> {
    let step = NodeStep::GateRemove {
        gate: name.to_string(),
    }
    .spec(volume_id);
    steps
        .run(step, || async {
            ctx.host
                .run(&gate::remove_argv(name), &[])
                .await
                .map_err(|e| UnitError::retryable("NodeCommandFailed", e.to_string()))?;
            info!(volume = %volume_id, gate = %name, "gate removed");
            Ok(Done::default())
        })
        .await
        .map(drop)
        .map_err(csi_error)
}

impl HostVolumes {
    fn reads(&self) -> NodeReads<'_> {
        NodeReads { ctx: &self.ctx }
    }

    fn steps(&self) -> Steps {
        Steps::request(
            self.journal.clone(),
            UNIT,
            Arc::new(AtomicU64::new(0)),
            Some(crate::telemetry::otel::hooks()),
        )
    }

    async fn exec(&self, argv: &[String]) -> Result<(), UnitError> {
        self.ctx
            .host
            .run(argv, &[])
            .await
            .map(drop)
            .map_err(|e| UnitError::retryable("NodeCommandFailed", e.to_string()))
    }

    /// mkfs unless a signature is there by now; true when it made the filesystem.
    async fn format(
        &self,
        spec: &PublishSpec,
        device: &str,
        fs_type: &str,
    ) -> Result<bool, CsiError> {
        let step = NodeStep::Format {
            device: device.to_string(),
            fs_type: fs_type.to_string(),
            target: spec.target.clone(),
        }
        .spec(&spec.volume_id);
        self.steps()
            .run_with(step, || async {
                // The guard next to mkfs: a signature seen now (say, a format finished before a
                // crash) is never formatted over.
                if let Some(found) = self.reads().signature(device).await.map_err(unit_err)? {
                    return Ok((Done::default().with_fact("found", found), false));
                }
                self.exec(&format_argv(fs_type, device)).await?;
                info!(volume = %spec.volume_id, %device, fs_type, "formatted");
                Ok((Done::default(), true))
            })
            .await
            .map(|(_, formatted)| formatted)
            .map_err(csi_error)
    }

    async fn mount(&self, spec: &PublishSpec, device: &str, fresh: bool) -> Result<(), CsiError> {
        let argv = mount_argv(spec, device);
        let step = NodeStep::Mount {
            device: device.to_string(),
            target: spec.target.clone(),
            argv: argv.join(" "),
        }
        .spec(&spec.volume_id);
        self.steps()
            .run(step, || async {
                let mounts = self.reads().mounts().await.map_err(unit_err)?;
                if mountinfo::at(&mounts, &spec.target).is_some() {
                    return Ok(Done::default().with_fact("found", "mounted"));
                }
                self.exec(&argv).await?;
                if fresh && !spec.readonly {
                    self.ctx
                        .host
                        .set_mode(Path::new(&spec.target), FRESH_ROOT_MODE)
                        .map_err(|e| {
                            UnitError::retryable(
                                "NodeCommandFailed",
                                format!("chmod {}: {e}", spec.target),
                            )
                        })?;
                }
                info!(volume = %spec.volume_id, target = %spec.target, "mounted");
                Ok(Done::default())
            })
            .await
            .map(drop)
            .map_err(csi_error)
    }

    /// Brings the volume's gate to its LV (made, or loaded with the LV's size); returns the
    /// gate's device path. `present`: whether the caller, holding the gate lock since it looked,
    /// saw the gate (only that lock's holders make or remove gates, so the look still holds and
    /// is not repeated).
    async fn ensure_gate(
        &self,
        volume_id: &str,
        lv: &FoundLv,
        present: bool,
    ) -> Result<String, CsiError> {
        let reads = self.reads();
        let lv_number = reads.device_number(&lv.device(volume_id)).await?;
        let bytes = lv
            .size
            .ok_or_else(|| CsiError::unavailable(format!("lvs gave no size for {volume_id}")))?;
        let current = if present {
            Some(reads.gate_table(volume_id).await?)
        } else {
            None
        };
        let name = gate::name(volume_id);
        match gate::plan(current.as_ref(), bytes / 512, &lv_number) {
            None => {}
            Some(GateStep::Create { table }) => {
                let step = NodeStep::GateCreate {
                    gate: name.clone(),
                    table: table.clone(),
                }
                .spec(volume_id);
                self.steps()
                    .run(step, || async {
                        self.exec(&gate::create_argv(&name, &table)).await?;
                        self.exec(&gate::mknodes_argv(&name)).await?;
                        info!(volume = %volume_id, gate = %name, "gate made");
                        Ok(Done::default())
                    })
                    .await
                    .map_err(csi_error)?;
            }
            Some(GateStep::Reload { table }) => {
                let step = NodeStep::GateReload {
                    gate: name.clone(),
                    table: table.clone(),
                }
                .spec(volume_id);
                let gates = [name.clone()];
                self.steps()
                    .run(step, || async {
                        self.exec(&gate::suspend_argv(&gates)).await?;
                        let loaded = self.exec(&gate::reload_argv(&name, &table)).await;
                        // Never leave the filesystem frozen, whatever the reload did.
                        self.exec(&gate::resume_argv(&gates)).await?;
                        loaded?;
                        info!(volume = %volume_id, gate = %name, %table, "gate follows its grown LV");
                        Ok(Done::default())
                    })
                    .await
                    .map_err(csi_error)?;
            }
        }
        Ok(gate::path(volume_id))
    }

    /// Activates the volume's LV when it is not active (a journaled step): after a node's
    /// reboot nothing else may have.
    async fn ensure_active(&self, volume_id: &str, lv: &FoundLv) -> Result<(), CsiError> {
        if lv.active() {
            return Ok(());
        }
        let argv = crate::node::commands::lvchange_activate(&lv.vg, volume_id)
            .map_err(|e| CsiError::internal(e.to_string()))?;
        let step = NodeStep::Activate {
            lv: format!("{}/{volume_id}", lv.vg),
        }
        .spec(volume_id);
        self.steps()
            .run(step, || async {
                self.exec(&argv).await?;
                info!(volume = %volume_id, vg = %lv.vg, "inactive LV activated");
                Ok(Done::default())
            })
            .await
            .map(drop)
            .map_err(csi_error)
    }

    async fn do_publish(&self, spec: &PublishSpec) -> Result<(), CsiError> {
        let _gates = self.ctx.gate_lock.lock().await;
        let reads = self.reads();
        let lv = reads.lv(&spec.volume_id).await?;
        self.ensure_active(&spec.volume_id, &lv).await?;
        let lv_device = lv.device(&spec.volume_id);
        let block = matches!(spec.kind, Kind::Block);
        let lv_number = reads.device_number(&lv_device).await?;
        // A filesystem lives on the volume's gate; a raw block volume is its LV.
        let has_gate = !block && reads.gate(&spec.volume_id).await?.is_some();
        let mut device = if has_gate {
            gate::path(&spec.volume_id)
        } else {
            lv_device.clone()
        };
        let number = if has_gate {
            reads.device_number(&device).await?
        } else {
            lv_number.clone()
        };
        let mounts = reads.mounts().await?;
        let target_mount = mountinfo::at(&mounts, &spec.target).cloned();
        let target_device = match (&target_mount, block) {
            (Some(_), true) => Some(reads.device_number(&spec.target).await?),
            _ => None,
        };
        let signature = if block {
            None
        } else {
            reads.signature(&device).await?
        };
        let view = PublishView {
            device: number,
            signature,
            target_mount,
            target_device,
            lv_device: (!block).then_some(lv_number),
        };
        let steps = plan_publish(spec, &view)?;
        if !block && !steps.is_empty() {
            device = self.ensure_gate(&spec.volume_id, &lv, has_gate).await?;
        }
        let mut fresh = false;
        for step in steps {
            match step {
                PublishStep::MakeTarget => self
                    .ctx
                    .host
                    .make_target(Path::new(&spec.target), !block)
                    .map_err(|e| internal("making the target")(format!("{}: {e}", spec.target)))?,
                PublishStep::Format { fs_type } => {
                    // Only a filesystem made now gets the fresh root's mode.
                    fresh = self.format(spec, &device, &fs_type).await?;
                }
                PublishStep::Mount => self.mount(spec, &device, fresh).await?,
            }
        }
        Ok(())
    }

    async fn do_unpublish(&self, volume_id: &str, target: &str) -> Result<(), CsiError> {
        let _gates = self.ctx.gate_lock.lock().await;
        // Mounts may be stacked (a publish retried by hand): take them all down, each checked
        // to be the volume's (never `umount` what someone else mounted there).
        while let Some(m) = self
            .reads()
            .volume_mount_at(volume_id, target, PathUse::Target)
            .await?
        {
            let step = NodeStep::Unmount {
                target: target.to_string(),
                source: m.source.clone(),
            }
            .spec(volume_id);
            self.steps()
                .run(step, || async {
                    self.exec(&["umount".into(), target.into()]).await?;
                    info!(volume = %volume_id, %target, "unmounted");
                    Ok(Done::default())
                })
                .await
                .map_err(csi_error)?;
        }
        // The gate goes with the last mount of its filesystem. Whether one is left is read
        // from the mount table, not from the gate's open count: a device scan holding the gate
        // for a moment would otherwise leave it behind, over an LV that then cannot be removed.
        if let Some(g) = self.reads().gate(volume_id).await?
            && !self.gate_mounted(volume_id).await?
        {
            remove_gate(&self.ctx, &self.steps(), volume_id, &g.name).await?;
        }
        self.ctx
            .host
            .remove_target(Path::new(target))
            .map(drop)
            .map_err(|e| {
                CsiError::new(
                    Code::FailedPrecondition,
                    format!("target_path {target}: {e}"),
                )
            })
    }

    /// [`sweep_idle_gates`] with this service's steps (at a stop, once the socket drained).
    pub async fn sweep_idle_gates(&self) -> Result<Vec<String>, CsiError> {
        sweep_idle_gates(&self.ctx, &self.steps()).await
    }

    /// Whether any mount on this node is of the volume's gate.
    async fn gate_mounted(&self, volume_id: &str) -> Result<bool, CsiError> {
        let reads = self.reads();
        let gate = reads.device_number(&gate::path(volume_id)).await?;
        Ok(reads.mounts().await?.iter().any(|m| m.device == gate))
    }

    async fn do_expand(&self, volume_id: &str, path: &str) -> Result<u64, CsiError> {
        let _gates = self.ctx.gate_lock.lock().await;
        let reads = self.reads();
        let lv = reads.lv(volume_id).await?;
        self.ensure_active(volume_id, &lv).await?;
        let Some(m) = reads
            .volume_mount_at(volume_id, path, PathUse::Volume)
            .await?
        else {
            return Err(CsiError::not_found(format!(
                "volume_path {path} is not a mounted volume on node {}",
                self.ctx.node
            )));
        };
        // The filesystem grows to its device: a gate first takes the LV's new size.
        if reads.gate(volume_id).await?.is_some() {
            self.ensure_gate(volume_id, &lv, true).await?;
        }
        let argv = resize_argv(&m)?;
        let step = NodeStep::ResizeFilesystem {
            target: path.to_string(),
            argv: argv.join(" "),
        }
        .spec(volume_id);
        self.steps()
            .run(step, || async {
                self.exec(&argv).await?;
                info!(volume = %volume_id, %path, "filesystem grown");
                Ok(Done::default())
            })
            .await
            .map_err(csi_error)?;
        lv.size.ok_or_else(|| {
            CsiError::new(Code::Internal, format!("lvs gave no size for {volume_id}"))
        })
    }
}

/// Which path a node RPC names: the field, and the code when another filesystem is mounted
/// there.
#[derive(Debug, Clone, Copy)]
pub enum PathUse {
    /// NodeUnpublishVolume's `target_path`: FAILED_PRECONDITION, nothing unmounted.
    Target,
    /// Stats' and expansion's `volume_path`: NOT_FOUND, as CSI names a path that is not the
    /// volume's.
    Volume,
}

impl PathUse {
    fn field(self) -> &'static str {
        match self {
            PathUse::Target => "target_path",
            PathUse::Volume => "volume_path",
        }
    }

    fn code(self) -> Code {
        match self {
            PathUse::Target => Code::FailedPrecondition,
            PathUse::Volume => Code::NotFound,
        }
    }
}

impl NodeVolumes for HostVolumes {
    fn published_at<'a>(
        &'a self,
        volume_id: &'a str,
        path: &'a str,
    ) -> BoxFuture<'a, Result<(), CsiError>> {
        Box::pin(async move {
            match self
                .reads()
                .volume_mount_at(volume_id, path, PathUse::Volume)
                .await?
            {
                Some(_) => Ok(()),
                None => Err(CsiError::not_found(format!(
                    "volume_path {path}: volume {volume_id} is not published there on node {}",
                    self.ctx.node
                ))),
            }
        })
    }

    fn lv_attr<'a>(&'a self, volume_id: &'a str) -> BoxFuture<'a, Result<Option<String>, String>> {
        Box::pin(self.stats_lvs.attr(volume_id, || attrs(&self.ctx)))
    }

    fn publish<'a>(&'a self, spec: &'a PublishSpec) -> BoxFuture<'a, Result<(), CsiError>> {
        Box::pin(self.do_publish(spec))
    }

    fn unpublish<'a>(
        &'a self,
        volume_id: &'a str,
        target: &'a str,
    ) -> BoxFuture<'a, Result<(), CsiError>> {
        Box::pin(self.do_unpublish(volume_id, target))
    }

    fn expand<'a>(
        &'a self,
        volume_id: &'a str,
        path: &'a str,
    ) -> BoxFuture<'a, Result<u64, CsiError>> {
        Box::pin(self.do_expand(volume_id, path))
    }
}

#[cfg(test)]
#[path = "node_volumes_tests.rs"]
mod tests;
