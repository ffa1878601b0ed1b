//! One actor per LVMVolumeGroup on this node (LVMS's vg-manager reconcile): observe the host
//! (lsblk, pvs, vgs), decide with the pure `node::` functions, and run each host mutation as a
//! journaled step. After a crash an open intent is resolved by reading the host first: a
//! vgcreate that happened is seen in `vgs` and never repeated.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::runtime::reflector::Store;
use lvms_actors::{Action, Done, EventNote, Pass, StepSpec, Steps, Unit, UnitError};
use lvms_journal::{Intent, ObjectRef};

use super::host::HostOps;
use super::node_report::NodeReport;
use crate::api::{LVMVolumeGroup, LVMVolumeGroupNodeStatus, NODE_CLEANUP_FINALIZER_PREFIX};
use crate::api::{RaidHealthStatus, RaidStatus};
use crate::kube::apply;
use crate::kube::kinds::Kind;
use crate::node::actions::{VolumeGroupAction as A, recorded_argv};
use crate::node::discovery::{self, DiscoveryInput, Plan, VgAction};
use crate::node::events::EventReason;
use crate::node::filter::{FilterContext, FilteredDevices, filter_devices};
use crate::node::gauges;
use crate::node::lsblk::{BlockDevice, flatten, parse_lsblk};
use crate::node::report::{
    ExistingVg, LvReport, PhysicalVolume, find_vg, join_vgs, parse_lvs, parse_pvs, parse_vgs,
};
use crate::node::resolve::{ResolvedPaths, paths_to_resolve};
use crate::node::teardown::{self, Teardown, TeardownView};
use crate::node::vg_status::{Phase, raid_status, vg_status};
use crate::node::{allowlist, commands, lvmd_config, replay, thin, validate, wipe};
use crate::objects::object_ref;
use crate::telemetry::metrics::Metrics;

/// The journal's object kind for this node's host (commands, lvmd.yaml).
pub const HOST_KIND: &str = "Host";

/// What every volume-group actor on this node shares.
pub struct NodeCtx {
    pub client: Client,
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
    /// Gates ([`crate::node::gate`]) are made, grown, removed and held by one task at a time:
    /// a group snapshot's hold never races a publish.
    pub gate_lock: tokio::sync::Mutex<()>,
    /// `--device-allowlist`: when set, the only devices this node may look at.
    pub device_allowlist: Option<PathBuf>,
    /// Replaces LVMS's 30 s requeue (`--reconcile-interval`).
    pub reconcile_interval: Duration,
    /// Where each pass leaves the node gauges (`topolvm_volumegroup_*`, `topolvm_thinpool_*`).
    pub metrics: Metrics,
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

pub struct VolumeGroupUnit {
    pub unit: String,
    pub vg: String,
    pub ctx: Arc<NodeCtx>,
    /// Time spent in host commands during the current pass (passes of one actor are serial).
    pub host_clock: HostClock,
    /// The operator traceparent last continued: a pass joins the operator's trace once per
    /// change, not on every later requeue.
    pub continued_trace: std::sync::Mutex<Option<String>>,
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

/// The host as one reconcile sees it.
struct Observed {
    devices: Vec<BlockDevice>,
    pvs: Vec<PhysicalVolume>,
    existing: Option<ExistingVg>,
    resolved: ResolvedPaths,
    loop_back_files: BTreeMap<String, String>,
    holders: BTreeMap<String, Vec<String>>,
}

pub(super) fn host_err(what: &str) -> impl Fn(super::host::HostError) -> UnitError + '_ {
    move |e| UnitError::retryable("HostCommandFailed", format!("{what}: {e}"))
}

pub(super) fn cmd_err(e: commands::CommandError) -> UnitError {
    UnitError::permanent("InvalidCommand", e.to_string())
}

fn warn(reason: EventReason, message: String) -> UnitError {
    UnitError::retryable(reason.as_str(), message)
}

/// Whether a failed path lookup means the path is not there (a fact the planner may act on),
/// rather than a lookup that failed (permissions, I/O, a symlink loop: an error to retry).
fn is_absent(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

/// The names in a device's sysfs `holders` directory. Unreadable is not "no holders" (that
/// would offer a held device as free): the error stands in for the holders, so the filter
/// refuses the device with it as the reason until a later pass can read them (as an
/// unreadable blkid probe). Per device: a device gone since lsblk must not fail the pass.
fn holders_of(host: &dyn HostOps, dir: &std::path::Path) -> Vec<String> {
    host.read_dir_names(dir)
        .unwrap_or_else(|e| vec![format!("unknown holders ({}: {e})", dir.display())])
}

/// The back-file in `losetup <dev> -O BACK-FILE --json` output; unparsable output or an
/// empty back-file is an error, never a back-file that passes the Kubernetes-volume check.
fn first_back_file(stdout: &str) -> Result<String, String> {
    crate::node::lsblk::parse_losetup_back_files(stdout)
        .map_err(|e| e.to_string())?
        .into_iter()
        .next()
        .filter(|f| !f.is_empty())
        .ok_or_else(|| "losetup reported no back-file".to_string())
}

impl VolumeGroupUnit {
    fn finalizer(&self) -> String {
        format!("{NODE_CLEANUP_FINALIZER_PREFIX}{}", self.ctx.node)
    }

    fn host_object(&self, what: &str) -> ObjectRef {
        ObjectRef {
            kind: HOST_KIND.into(),
            namespace: String::new(),
            name: format!("{}/{what}", self.ctx.node),
            uid: String::new(),
            generation: 0,
        }
    }

    /// Every host command of this actor goes through here (timed for the pass figures).
    async fn exec(
        &self,
        argv: &[String],
        ok_codes: &[i32],
    ) -> Result<super::host::HostOutput, super::host::HostError> {
        let started = std::time::Instant::now();
        let out = self.ctx.host.run(argv, ok_codes).await;
        self.host_clock.add(started.elapsed());
        out
    }

    async fn run_host(&self, argv: &[String]) -> Result<String, UnitError> {
        self.exec(argv, &[])
            .await
            .map(|o| o.stdout)
            .map_err(host_err(
                argv.first().map(String::as_str).unwrap_or("command"),
            ))
    }

    async fn observe(&self, vg: &LVMVolumeGroup) -> Result<Observed, UnitError> {
        let lsblk = self.run_host(&commands::lsblk()).await?;
        let mut devices =
            parse_lsblk(&lsblk).map_err(|e| UnitError::retryable("LsblkFailed", e.to_string()))?;
        if let Some(allowed) = self.allowed_devices()? {
            allowlist::retain_allowed(&mut devices, &allowed);
        }
        // lsblk's FSTYPE comes from udev, which containers and CI lack: read the signatures
        // from the devices themselves (blkid exits 2 when there is none).
        let mut probed = BTreeMap::new();
        let knames: Vec<String> = flatten(&devices).keys().cloned().collect();
        for kname in knames {
            // Exit 2 is "no signature"; any other failure leaves the device unknown, and an
            // unknown device must not pass the filesystem filter as an empty one: it is
            // excluded, with the error as its reason, until a later pass can read it.
            let probe = match self.exec(&commands::blkid_probe(&kname), &[2]).await {
                Ok(out) => crate::node::lsblk::parse_blkid_export(&out.stdout),
                Err(e) => crate::node::lsblk::BlkidProbe {
                    fstype: Some(format!("unknown (blkid -p failed: {e})")),
                    pttype: None,
                },
            };
            probed.insert(kname, probe);
        }
        tracing::debug!(?probed, "signatures probed with blkid");
        crate::node::lsblk::apply_probes(&mut devices, &probed);
        let (pvs, existing) = self.read_pvs_and_vg().await?;
        let mut resolved = ResolvedPaths::new();
        for p in paths_to_resolve(vg.spec.device_selector.as_ref(), &pvs) {
            match self.ctx.host.canonicalize(std::path::Path::new(&p)) {
                Ok(t) => resolved.insert(p, t.to_string_lossy().into_owned()),
                // The planner reads an unresolved path as absent (an optional path that is not
                // there, a PV name to compare otherwise): only a path that is not there is.
                Err(e) if is_absent(&e) => resolved.insert_error(p, e.to_string()),
                Err(e) => {
                    return Err(UnitError::retryable(
                        "PathResolveFailed",
                        format!("resolving {p}: {e}"),
                    ));
                }
            };
        }
        let flat = flatten(&devices);
        let mut loop_back_files = BTreeMap::new();
        let mut holders = BTreeMap::new();
        for (kname, dev) in &flat {
            let short = kname.trim_start_matches("/dev/");
            // Unreadable holders are not "no holders" (see `holders_of`).
            let h = holders_of(
                self.ctx.host.as_ref(),
                std::path::Path::new(&format!("/sys/class/block/{short}/holders")),
            );
            if !h.is_empty() {
                holders.insert(kname.clone(), h);
            }
            if dev.device_type == crate::node::lsblk::TYPE_LOOP {
                // A back-file that cannot be read, or none, is left out: the filter then
                // refuses the device as an unusable loop, the safe side. Never an empty
                // back-file, which would pass the Kubernetes-volume check. Per device, as
                // blkid: a loop device detached meanwhile must not fail the whole pass.
                let back_file = match self.exec(&commands::losetup_back_file(kname), &[]).await {
                    Ok(out) => first_back_file(&out.stdout),
                    Err(e) => Err(e.to_string()),
                };
                match back_file {
                    Ok(f) => {
                        loop_back_files.insert(kname.clone(), f);
                    }
                    Err(e) => {
                        tracing::warn!(device = %kname, error = %e, "loop device back-file unreadable; refused as unusable");
                    }
                }
            }
        }
        Ok(Observed {
            devices,
            pvs,
            existing,
            resolved,
            loop_back_files,
            holders,
        })
    }

    /// The resolved `--device-allowlist`, re-read every pass so devices can be added live.
    fn allowed_devices(&self) -> Result<Option<BTreeSet<String>>, UnitError> {
        let Some(path) = &self.ctx.device_allowlist else {
            return Ok(None);
        };
        let text = self.ctx.host.read_to_string(path).map_err(|e| {
            UnitError::retryable(
                "DeviceAllowlistUnreadable",
                format!(
                    "--device-allowlist {}: {e}; fix the file or drop the flag",
                    path.display()
                ),
            )
        })?;
        // A listed path that is not there is no device of this node: nothing to allow. One
        // that cannot be looked up is an error to retry, not a device taken off the list.
        let mut allowed = BTreeSet::new();
        for p in allowlist::parse(&text) {
            match self.ctx.host.canonicalize(std::path::Path::new(&p)) {
                Ok(k) => {
                    allowed.insert(k.to_string_lossy().into_owned());
                }
                Err(e) if is_absent(&e) => {}
                Err(e) => {
                    return Err(UnitError::retryable(
                        "DeviceAllowlistUnreadable",
                        format!("--device-allowlist {}: {p}: {e}", path.display()),
                    ));
                }
            }
        }
        Ok(Some(allowed))
    }

    /// LVMS's 30 s requeue, or the node's `--reconcile-interval` in its place.
    fn requeue(&self, after: Option<Duration>) -> Option<Duration> {
        after.map(|d| {
            if d == discovery::RECONCILE_INTERVAL {
                self.ctx.reconcile_interval
            } else {
                d
            }
        })
    }

    /// LVMS's filters over what `observe` saw.
    fn filter(&self, vg: &LVMVolumeGroup, obs: &Observed) -> FilteredDevices {
        let ctx = FilterContext {
            vg_name: &self.vg,
            selector: vg.spec.device_selector.as_ref(),
            resolved: &obs.resolved,
            pvs: &obs.pvs,
            loop_back_files: &obs.loop_back_files,
            holders: &obs.holders,
        };
        filter_devices(&obs.devices, &ctx)
    }

    /// One host mutation under a write-ahead intent; the argv is the intent's args.
    async fn host_step(
        &self,
        steps: &Steps,
        action: A,
        argv: Vec<String>,
        event: Option<EventNote>,
    ) -> Result<(), UnitError> {
        let spec = StepSpec::new(self.host_object(&self.vg), action).args(argv.clone());
        steps
            .run(spec, || async {
                let out = self
                    .exec(&argv, &[])
                    .await
                    .map_err(host_err(action.name()))?;
                Ok(Done {
                    event,
                    ..Done::default()
                }
                .with_fact("host_ms", out.took.as_millis().to_string()))
            })
            .await?;
        Ok(())
    }

    fn has_finalizer(&self, vg: &LVMVolumeGroup) -> bool {
        let fin = self.finalizer();
        vg.metadata.finalizers.iter().flatten().any(|f| *f == fin)
    }

    /// Add or remove this node's cleanup finalizer, as one journaled step.
    async fn set_finalizer(
        &self,
        steps: &Steps,
        vg: &LVMVolumeGroup,
        present: bool,
    ) -> Result<(), UnitError> {
        let fin = self.finalizer();
        let action = if present {
            A::AddFinalizer
        } else {
            A::RemoveFinalizer
        };
        let spec = StepSpec::new(object_ref(vg), action).args(vec![fin.clone()]);
        let (client, ns) = (&self.ctx.client, &self.ctx.namespace);
        steps
            .run(spec, || {
                apply::edit_finalizers(client, Kind::VolumeGroup, ns, &self.vg, |f| {
                    f.retain(|x| *x != fin);
                    if present {
                        f.push(fin.clone());
                    }
                })
            })
            .await?;
        Ok(())
    }

    /// The node's PVs and this volume group joined with its PVs (when it exists), from one
    /// `pvs` and one `vgs`. Unreadable is an error to retry, never "no PVs" or "no VG".
    async fn read_pvs_and_vg(
        &self,
    ) -> Result<(Vec<PhysicalVolume>, Option<ExistingVg>), UnitError> {
        let pvs = parse_pvs(&self.run_host(&commands::pvs(None)).await?)
            .map_err(|e| UnitError::retryable("PvsFailed", e.to_string()))?;
        let vgs = self.read_vgs().await?;
        let existing = find_vg(&join_vgs(&vgs, &pvs), &self.vg).cloned();
        Ok((pvs, existing))
    }

    /// `vgs` of the node. Unreadable is an error to retry, never "no VGs".
    async fn read_vgs(&self) -> Result<Vec<crate::node::report::VolumeGroupRow>, UnitError> {
        parse_vgs(&self.run_host(&commands::vgs(true)).await?)
            .map_err(|e| UnitError::retryable("VgsFailed", e.to_string()))
    }

    /// The devices this node put into the volume group, from its own journal (for a teardown
    /// that finds the VG already gone).
    fn devices_from_journal(&self, steps: &Steps) -> Result<BTreeSet<String>, UnitError> {
        let mut recorded = Vec::new();
        for rec in steps.journal().iter() {
            // A corrupt record is reported, not skipped: it may be one of ours.
            let rec = rec.map_err(UnitError::journal)?;
            if let lvms_journal::Body::Intent(i) = rec.body
                && i.unit == self.unit
                && i.object.kind == HOST_KIND
            {
                let action = i
                    .action_as::<A>()
                    .map_err(|e| UnitError::permanent("UnknownAction", e))?;
                recorded.push((action, recorded_argv(&i.args, &i.desired_digest)));
            }
        }
        Ok(replay::devices_from_journal(&recorded))
    }

    /// `lvs` of this volume group.
    async fn read_lvs(&self) -> Result<LvReport, UnitError> {
        let out = self
            .run_host(&commands::lvs(&self.vg).map_err(cmd_err)?)
            .await?;
        parse_lvs(&out).map_err(|e| UnitError::retryable("LvsFailed", e.to_string()))
    }

    /// Thin pool create/extend + validateLVs (thick classes: nothing). Returns the validated
    /// `lvs` report of a thin class (the pool's figures for the metrics).
    async fn thin_pool(
        &self,
        steps: &Steps,
        vg: &LVMVolumeGroup,
    ) -> Result<Option<LvReport>, UnitError> {
        let Some(tp) = &vg.spec.thin_pool_config else {
            return Ok(None);
        };
        let lvs = self.read_lvs().await?;
        let vgs = self.read_vgs().await?;
        let size = vgs
            .iter()
            .find(|v| v.vg_name == self.vg)
            .and_then(|v| v.vg_size);
        match thin::plan_thin_pool(&self.vg, tp, &lvs, size)
            .map_err(|e| warn(EventReason::ThinPoolCreateOrExtendFailed, e.to_string()))?
        {
            thin::ThinPoolAction::Create(argv) => self
                .host_step(steps, A::LvcreateThinPool, argv, None)
                .await
                .map_err(|e| warn(EventReason::ThinPoolCreateOrExtendFailed, e.message))?,
            thin::ThinPoolAction::Extend(argv) => self
                .host_step(steps, A::LvextendThinPool, argv, None)
                .await
                .map_err(|e| warn(EventReason::ThinPoolCreateOrExtendFailed, e.message))?,
            thin::ThinPoolAction::UpToDate => {}
        }
        let inconsistent =
            |e: validate::ValidateError| warn(EventReason::InconsistentLVs, e.status_message());
        let mut lvs = self.read_lvs().await?;
        let mut v = validate::validate_lvs(&self.vg, tp, &lvs).map_err(inconsistent)?;
        if v.activate {
            let activation_failed = |lvs: &LvReport| {
                inconsistent(validate::ValidateError::ActivationFailed {
                    lv_attr: lvs
                        .all()
                        .find(|lv| lv.lv_name == tp.name)
                        .map(|lv| lv.lv_attr.clone())
                        .unwrap_or_default(),
                })
            };
            let argv = commands::lvchange_activate(&self.vg, &tp.name).map_err(cmd_err)?;
            if let Err(e) = self.host_step(steps, A::LvchangeActivate, argv, None).await {
                tracing::warn!(error = %e, "lvchange -ay of the thin pool failed");
                return Err(activation_failed(&lvs));
            }
            // The metadata fill can only be read from the active pool.
            lvs = self.read_lvs().await?;
            v = validate::validate_lvs(&self.vg, tp, &lvs).map_err(inconsistent)?;
            if v.activate {
                return Err(activation_failed(&lvs));
            }
        }
        if let Some(bytes) = v.extend_metadata_to {
            let argv =
                commands::lvextend_pool_metadata(&self.vg, &tp.name, bytes).map_err(cmd_err)?;
            self.host_step(steps, A::LvextendPoolMetadata, argv, None)
                .await?;
        }
        Ok(Some(lvs))
    }

    fn read_lvmd(&self) -> Result<Option<lvmd_config::LvmdConfig>, UnitError> {
        self.ctx.read_lvmd()
    }

    /// Written atomically (temp file + rename): a crash never leaves a half-written lvmd.yaml.
    fn write_file(&self, text: Option<&str>) -> Result<Done, UnitError> {
        let path = &self.ctx.lvmd_path;
        let io = |e: std::io::Error| {
            UnitError::retryable("LVMDConfigWriteFailed", format!("{}: {e}", path.display()))
        };
        match text {
            Some(t) => self
                .ctx
                .host
                .write_atomic(path, t, lvmd_config::FILE_MODE)
                .map_err(io)?,
            None => self.ctx.host.remove_file(path).map_err(io)?,
        }
        Ok(Done::default().with_fact("path", path.display().to_string()))
    }

    async fn write_lvmd(&self, steps: &Steps, vg: &LVMVolumeGroup) -> Result<(), UnitError> {
        let _guard = self.ctx.lvmd_lock.lock().await;
        let existing = self.read_lvmd()?;
        let applied = lvmd_config::apply_volume_group(existing.as_ref(), &self.vg, &vg.spec)
            .map_err(|e| UnitError::permanent("LVMDConfigInvalid", e.to_string()))?;
        if !applied.changed {
            return Ok(());
        }
        let text = lvmd_config::render(&applied.config)
            .map_err(|e| UnitError::permanent("LVMDConfigInvalid", e.to_string()))?;
        let spec = StepSpec::new(self.host_object("lvmd.yaml"), A::WriteLvmdConfig).digest(
            crate::objects::digest(&serde_json::Value::String(text.clone())),
        );
        steps
            .run(spec, || async {
                Ok(self.write_file(Some(&text))?.with_event(EventNote::normal(
                    EventReason::LVMDConfigUpdated.as_str(),
                    crate::node::events::MSG_LVMD_CONFIG_UPDATED,
                )))
            })
            .await?;
        Ok(())
    }

    fn set_status(
        &self,
        vg: &LVMVolumeGroup,
        phase: Phase,
        obs: &Observed,
        devices: &FilteredDevices,
    ) {
        self.set_status_raid(vg, phase, obs, devices, None);
    }

    fn set_status_raid(
        &self,
        vg: &LVMVolumeGroup,
        phase: Phase,
        obs: &Observed,
        devices: &FilteredDevices,
        raid: Option<RaidStatus>,
    ) {
        self.ctx.report.set(vg_status(
            &self.vg,
            &vg.spec,
            phase,
            obs.existing.as_ref(),
            devices,
            raid,
        ));
    }

    /// LVMS `buildRAIDStatus` for RAID classes: `lvs` health of the RAID LVs and missing PVs.
    async fn raid_health(
        &self,
        vg: &LVMVolumeGroup,
        obs: &Observed,
    ) -> Result<Option<RaidStatus>, UnitError> {
        let (Some(rc), Some(existing)) = (&vg.spec.raid_config, &obs.existing) else {
            return Ok(None);
        };
        let lvs = self.read_lvs().await?;
        let all: Vec<_> = lvs.all().cloned().collect();
        raid_status(&all, &existing.pvs, rc.raid_type)
            .map_err(|e| UnitError::retryable("LvsFailed", format!("lvs of {}: {e}", self.vg)))
    }

    /// forceWipeDevicesAndDestroyAllData, once per node (LVMS): dmsetup remove of mappings
    /// under the selected devices, wipefs of each, then the per-node annotation that stops it
    /// from ever happening again. Returns whether it wiped (the next pass creates the VG).
    async fn wipe(
        &self,
        steps: &Steps,
        vg: &LVMVolumeGroup,
        obs: &Observed,
    ) -> Result<bool, UnitError> {
        let annotations = vg.metadata.annotations.clone().unwrap_or_default();
        if !wipe::should_wipe(&vg.spec, &annotations, &self.ctx.node) {
            return Ok(false);
        }
        let plan = wipe::wipe_plan(&vg.spec, &obs.resolved, &obs.devices)
            .map_err(|e| UnitError::retryable("DeviceWipeFailed", e.to_string()))?;
        for (dev, why) in &plan.refused {
            tracing::warn!(device = %dev, reason = %why, "not wiped");
        }
        for step in &plan.steps {
            match step {
                wipe::WipeStep::DmsetupRemove(dev) => {
                    let argv = commands::dmsetup_remove(dev).map_err(cmd_err)?;
                    let spec = StepSpec::new(self.host_object(&self.vg), A::DmsetupRemove)
                        .args(argv.clone());
                    steps
                        .run(spec, || async {
                            match self.exec(&argv, &[]).await {
                                Ok(_) => Ok(Done::default()),
                                // Nothing mapped there is what we want.
                                Err(e) if commands::dmsetup_reference_not_found(&e.to_string()) => {
                                    Ok(Done::default().with_fact("not-found", "true"))
                                }
                                Err(e) => {
                                    Err(UnitError::retryable("DeviceWipeFailed", e.to_string()))
                                }
                            }
                        })
                        .await?;
                }
                wipe::WipeStep::Wipefs(dev) => {
                    let argv = commands::wipefs(dev).map_err(cmd_err)?;
                    self.host_step(steps, A::Wipefs, argv, None).await?;
                }
            }
        }
        if !plan.wipes_anything() {
            return Ok(false);
        }
        let key = wipe::wiped_annotation_key(&self.ctx.node);
        let value = wipe::wiped_annotation_value(&k8s_openapi::jiff::Timestamp::now().to_string());
        let spec = StepSpec::new(object_ref(vg), A::AnnotateWiped).args(vec![key.clone()]);
        let api: kube::Api<LVMVolumeGroup> =
            kube::Api::namespaced(self.ctx.client.clone(), &self.ctx.namespace);
        let patch = serde_json::json!({"metadata": {"annotations": {key: value}}});
        steps
            .run(spec, || async {
                api.patch(
                    &self.vg,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&patch),
                )
                .await
                .map(|_| Done::default())
                .map_err(|e| {
                    apply::unit_error(&format!("annotating LVMVolumeGroup {}", self.vg), e)
                })
            })
            .await?;
        Ok(true)
    }

    async fn reconcile_present(
        &self,
        steps: &Steps,
        vg: &LVMVolumeGroup,
    ) -> Result<Pass, UnitError> {
        if !self.has_finalizer(vg) {
            self.set_finalizer(steps, vg, true).await?;
        }
        let obs = self.observe(vg).await?;
        if self.wipe(steps, vg, &obs).await? {
            return Ok(Pass {
                summary: format!("devices of {} wiped", self.vg),
                requeue_after: Some(Duration::from_millis(200)),
            });
        }
        let filtered = self.filter(vg, &obs);
        let input = DiscoveryInput {
            node: &self.ctx.node,
            vg_name: &self.vg,
            spec: &vg.spec,
            resolved: &obs.resolved,
            existing_vg: obs.existing.as_ref(),
            vgcreate_assume_yes: false,
        };
        let decision = discovery::plan(&input, filtered);
        match decision.plan {
            Plan::Fail {
                event,
                error,
                requeue_after,
            } => {
                self.set_status(
                    vg,
                    Phase::Failed(error.to_string()),
                    &obs,
                    &decision.devices,
                );
                let reason = event.map(|e| e.as_str()).unwrap_or("VolumeGroupFailed");
                let mut err = UnitError::retryable(reason, error.to_string());
                err.retry_after = requeue_after;
                Err(err)
            }
            Plan::Grow {
                action,
                requeue_after,
            } => {
                self.set_status(vg, Phase::Progressing, &obs, &decision.devices);
                let (name, argv) = match &action {
                    VgAction::Create {
                        devices,
                        assume_yes,
                    } => (
                        A::Vgcreate,
                        commands::vgcreate(&self.vg, devices, *assume_yes),
                    ),
                    VgAction::Extend { devices } => {
                        (A::Vgextend, commands::vgextend(&self.vg, devices))
                    }
                };
                let argv = argv.map_err(cmd_err)?;
                // LVMS reports a failed vgcreate/vgextend as the class's Failed status, not
                // only as an Event: a device lvm2 refuses (e.g. one that shrank to nothing)
                // must not leave the node Progressing for good.
                self.host_step(steps, name, argv, None).await.map_err(|e| {
                    self.set_status(
                        vg,
                        Phase::Failed(e.message.clone()),
                        &obs,
                        &decision.devices,
                    );
                    warn(EventReason::VGCreateOrExtendFailed, e.message)
                })?;
                self.finish(steps, vg, self.requeue(Some(requeue_after)))
                    .await
            }
            Plan::Steady {
                remove,
                requeue_after,
            } => {
                for pv in &remove {
                    let reduce = commands::vgreduce(&self.vg, pv).map_err(cmd_err)?;
                    self.host_step(steps, A::Vgreduce, reduce, None)
                        .await
                        .map_err(|e| warn(EventReason::DeviceRemovalFailed, e.message))?;
                    let pvremove = commands::pvremove(std::slice::from_ref(pv)).map_err(cmd_err)?;
                    let note =
                        crate::node::events::device_removed_message(std::slice::from_ref(pv));
                    self.host_step(
                        steps,
                        A::Pvremove,
                        pvremove,
                        Some(EventNote::normal(EventReason::DeviceRemoved.as_str(), note)),
                    )
                    .await
                    .map_err(|e| warn(EventReason::DeviceRemovalFailed, e.message))?;
                }
                self.finish(steps, vg, self.requeue(requeue_after)).await
            }
        }
    }

    /// Thin pool, lvmd.yaml, then Ready with a fresh look at the host.
    async fn finish(
        &self,
        steps: &Steps,
        vg: &LVMVolumeGroup,
        requeue_after: Option<Duration>,
    ) -> Result<Pass, UnitError> {
        let lvs = match self.thin_pool(steps, vg).await {
            Ok(lvs) => lvs,
            Err(e) => {
                let obs = self.observe(vg).await?;
                self.set_status(
                    vg,
                    Phase::Failed(e.message.clone()),
                    &obs,
                    &Default::default(),
                );
                return Err(e);
            }
        };
        self.write_lvmd(steps, vg).await?;
        let obs = self.observe(vg).await?;
        let filtered = self.filter(vg, &obs);
        let raid = self.raid_health(vg, &obs).await?;
        // Gauges first: whoever sees the Ready status can scrape this pass's figures.
        if let Some(existing) = &obs.existing {
            let thin = vg.spec.thin_pool_config.as_ref().zip(lvs.as_ref());
            self.ctx.metrics.set_volume_group(
                &self.vg,
                &self.ctx.node,
                &gauges::volume_group_gauges(existing, thin),
            );
        }
        self.set_status_raid(vg, Phase::Ready, &obs, &filtered, raid.clone());
        if let Some(r) = raid.filter(|r| r.status != RaidHealthStatus::Healthy) {
            // The entry already says Degraded/Failed; the Warning tells people why, every
            // RAID requeue until it heals (one Event object with a growing count).
            let mut e = warn(
                EventReason::RAIDHealthCheckFailed,
                format!(
                    "RAID volume group {} is {:?}: {} of {} member(s) degraded",
                    self.vg, r.status, r.degraded_member_count, r.member_count
                ),
            );
            e.retry_after = Some(discovery::RAID_RECONCILE_INTERVAL);
            return Err(e);
        }
        Ok(Pass {
            summary: format!("volume group {} ready", self.vg),
            requeue_after,
        })
    }

    /// LVMS processDelete: refuse while user volumes exist, else pool → VG → PVs → lvmd.yaml
    /// → status entry → finalizer.
    async fn delete(&self, steps: &Steps, vg: &LVMVolumeGroup) -> Result<Pass, UnitError> {
        if !self.has_finalizer(vg) {
            self.ctx.report.remove(&self.vg);
            return Ok(Pass {
                summary: "not ours to clean up".into(),
                requeue_after: None,
            });
        }
        let (pvs, existing) = self.read_pvs_and_vg().await?;
        let pool = vg.spec.thin_pool_config.as_ref().map(|t| t.name.as_str());
        let plan = match &existing {
            Some(existing) => {
                let lvs = self.read_lvs().await?;
                teardown::plan(
                    &self.vg,
                    pool,
                    TeardownView::Present {
                        vg: existing,
                        lvs: &lvs,
                    },
                )
            }
            // Gone already (a kill after vgremove): its former devices may still be labelled.
            None => {
                let recorded = self.devices_from_journal(steps)?;
                teardown::plan(
                    &self.vg,
                    pool,
                    TeardownView::Gone {
                        recorded: &recorded,
                        pvs: &pvs,
                    },
                )
            }
        }
        .map_err(cmd_err)?;
        match plan {
            Teardown::Refuse { volumes } => {
                return Err(warn(
                    EventReason::ManualCleanupRequired,
                    teardown::refusal_message(&self.vg, &volumes),
                ));
            }
            Teardown::Steps(host_steps) => {
                for (action, argv) in host_steps {
                    self.host_step(steps, action, argv, None).await?;
                }
            }
        }
        {
            let _guard = self.ctx.lvmd_lock.lock().await;
            let existing = self.read_lvmd()?;
            use crate::node::events::{
                MSG_LVMD_CONFIG_DELETED, MSG_LVMD_CONFIG_UPDATED_AFTER_REMOVAL,
            };
            // LVMS: LVMDConfigUpdated when other classes remain, LVMDConfigDeleted with the last.
            let text =
                match lvmd_config::remove_volume_group(existing.as_ref(), &self.vg) {
                    lvmd_config::Removal::NoConfig | lvmd_config::Removal::Unchanged => None,
                    lvmd_config::Removal::Save(c) => Some((
                        Some(lvmd_config::render(&c).map_err(|e| {
                            UnitError::permanent("LVMDConfigInvalid", e.to_string())
                        })?),
                        EventReason::LVMDConfigUpdated,
                        MSG_LVMD_CONFIG_UPDATED_AFTER_REMOVAL,
                    )),
                    lvmd_config::Removal::Delete => Some((
                        None,
                        EventReason::LVMDConfigDeleted,
                        MSG_LVMD_CONFIG_DELETED,
                    )),
                };
            if let Some((text, reason, note)) = text {
                let spec = StepSpec::new(self.host_object("lvmd.yaml"), A::WriteLvmdConfig)
                    .args(vec!["remove".into(), self.vg.clone()]);
                steps
                    .run(spec, || async {
                        Ok(self
                            .write_file(text.as_deref())?
                            .with_event(EventNote::normal(reason.as_str(), note)))
                    })
                    .await?;
            }
        }
        self.ctx.report.remove(&self.vg);
        self.ctx
            .metrics
            .forget_volume_group(&self.vg, &self.ctx.node);
        self.set_finalizer(steps, vg, false).await?;
        // Removal is told by its steps' Events (LVMDConfig*), not as VolumeGroupReady.
        steps.quiet();
        Ok(Pass {
            summary: format!("volume group {} removed from this node", self.vg),
            requeue_after: None,
        })
    }
}

impl Unit for VolumeGroupUnit {
    fn name(&self) -> &str {
        &self.unit
    }

    fn traceparent(&self) -> Option<String> {
        let vg = self
            .ctx
            .volume_groups
            .state()
            .into_iter()
            .find(|v| v.metadata.name.as_deref() == Some(self.vg.as_str()))?;
        let tp = vg
            .metadata
            .annotations
            .as_ref()?
            .get(crate::telemetry::otel::TRACEPARENT_ANNOTATION)?
            .clone();
        // Tracing only: a poisoned lock just means the pass starts its own trace.
        let mut last = self.continued_trace.lock().ok()?;
        if last.as_deref() == Some(tp.as_str()) {
            return None;
        }
        *last = Some(tp.clone());
        Some(tp)
    }

    async fn reconcile(&self, steps: &Steps) -> Result<Pass, UnitError> {
        let Some(vg) = self
            .ctx
            .volume_groups
            .state()
            .into_iter()
            .find(|v| v.metadata.name.as_deref() == Some(self.vg.as_str()))
        else {
            self.ctx.report.remove(&self.vg);
            return Ok(Pass {
                summary: "LVMVolumeGroup gone".into(),
                requeue_after: None,
            });
        };
        steps.begin(object_ref(vg.as_ref()));
        // The node status and LVMCluster as they are now: this pass's Events go to them even
        // if they are published after a restart, when newer objects may carry their names.
        let node_status = self
            .ctx
            .node_statuses
            .state()
            .into_iter()
            .find(|n| n.metadata.name.as_deref() == Some(self.ctx.node.as_str()));
        steps.regard(super::events::regarded(&vg, node_status.as_deref()));
        self.host_clock.reset();
        let started = std::time::Instant::now();
        let result = if vg.metadata.deletion_timestamp.is_some() {
            self.delete(steps, &vg).await
        } else {
            self.reconcile_present(steps, &vg).await
        };
        let took = started.elapsed();
        let (host, commands) = self.host_clock.read();
        // The split the benchmark reports: lvm2 and friends vs lvms itself (journal, API,
        // decisions).
        tracing::debug!(
            volume_group = %self.vg,
            took_us = took.as_micros() as u64,
            host_us = host.as_micros() as u64,
            lvms_us = took.saturating_sub(host).as_micros() as u64,
            host_commands = commands,
            ok = result.is_ok(),
            "volume group pass"
        );
        result
    }

    /// Read the host before anything is redone: a VG change that happened is recorded as
    /// done (`already-done`); one that did not is left to the next pass, which decides again
    /// from the host (`not-done`).
    async fn replay(&self, intent: &Intent, _steps: &Steps) -> Result<Done, UnitError> {
        // An action this release does not know is reported on the intent, never guessed at.
        let action = intent
            .action_as::<A>()
            .map_err(|e| UnitError::permanent("UnknownAction", e))?;
        let argv = recorded_argv(&intent.args, &intent.desired_digest);
        let (pvs, existing) = self.read_pvs_and_vg().await?;
        let verdict = replay::verdict(action, &argv, &self.vg, &pvs, existing.as_ref());
        let mut done = Done::replayed(verdict.into());
        // A day-2 device removal that happened still gets its Event (the outcome that would
        // have carried it was lost with the process).
        if verdict == replay::Verdict::AlreadyDone && action == A::Pvremove {
            let devices: Vec<String> = replay::devices_in(&argv)
                .into_iter()
                .map(String::from)
                .collect();
            done.event = Some(EventNote::normal(
                EventReason::DeviceRemoved.as_str(),
                crate::node::events::device_removed_message(&devices),
            ));
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system temp dir (removed by the caller).
    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("lvms-vg-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir); // leftovers of an earlier run, if any
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn only_a_path_that_is_not_there_counts_as_absent() {
        let dir = scratch("absent");
        let file = dir.join("file");
        std::fs::write(&file, "").unwrap();
        let lookup = |p: std::path::PathBuf| std::fs::canonicalize(p).unwrap_err();
        assert!(is_absent(&lookup(dir.join("missing"))));
        assert!(is_absent(&lookup(file.join("below-a-file"))));
        // A symlink loop is a failed lookup, not an absent path.
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        assert!(!is_absent(&lookup(a)));
        assert!(!is_absent(&std::io::Error::from(
            std::io::ErrorKind::PermissionDenied
        )));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unreadable_holders_refuse_the_device_instead_of_freeing_it() {
        use super::super::host::Host;
        let dir = scratch("holders");
        assert_eq!(holders_of(&Host::default(), &dir), Vec::<String>::new());
        std::fs::create_dir(dir.join("dm-3")).unwrap();
        assert_eq!(holders_of(&Host::default(), &dir), vec!["dm-3".to_string()]);
        let gone = holders_of(&Host::default(), &dir.join("missing"));
        assert_eq!(gone.len(), 1);
        assert!(gone[0].starts_with("unknown holders ("), "{gone:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_loop_back_file_that_cannot_be_read_is_an_error_not_an_empty_one() {
        assert_eq!(
            first_back_file(r#"{"loopdevices":[{"back-file":"/var/disk.img"}]}"#),
            Ok("/var/disk.img".to_string())
        );
        for out in [
            r#"{"loopdevices":[]}"#,
            r#"{"loopdevices":[{"back-file":null}]}"#,
            r#"{"loopdevices":[{}]}"#,
            r#"{}"#,
            "losetup: /dev/loop9: No such device or address",
        ] {
            assert!(first_back_file(out).is_err(), "{out}");
        }
    }
}
