//! What a LogicalVolume needs next on its node (TopoLVM's LogicalVolume reconciler and lvmd,
//! as one pure decision): one step per call, from the object and what lvm2 reports. The actor
//! runs the step, observes again and asks again until the answer is [`Plan::Done`].

use std::borrow::Cow;

use tonic::Code;

use crate::node::commands::CommandError;
use crate::node::lvmd_config::{LvmdConfig, LvmdDeviceClass, LvmdDeviceType};
use crate::node::report::LogicalVolume as LvRow;
use crate::node::volume::actions::VolumeAction;
use crate::node::volume::commands::{self as cmd, CreateOptions};
use crate::node::volume::space::{free_for_create, pool_full};

/// The LogicalVolume as the planner sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VolumeView {
    pub name: String,
    /// The LV's name on disk (TopoLVM names it after the object's uid).
    pub uid: String,
    /// `spec.size` in bytes (None: it does not parse).
    pub size: Option<u64>,
    pub device_class: String,
    pub option_class: String,
    pub source: Option<String>,
    pub access_type: Option<String>,
    pub volume_id: Option<String>,
    pub current_size: Option<u64>,
    pub code: i32,
    pub finalized: bool,
    pub labelled: bool,
    pub deleting: bool,
    pub pending_deletion: bool,
    /// The volume group snapshot this snapshot is a member of: it is taken with the others
    /// at one instant ([`crate::node::volume::group_plan`]), never on its own.
    pub group: Option<String>,
}

/// The node as one pass observed it, borrowed from the pass (a pass plans every volume of the
/// node against the same observation: a copy per volume would make a pass quadratic in them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostView<'a> {
    pub config: Cow<'a, LvmdConfig>,
    /// Every LV of the class's VG (empty when the class is unknown).
    pub lvs: Cow<'a, [LvRow]>,
    pub vg_free: u64,
    /// For a snapshot or clone: the source LogicalVolume's volume id, or why there is none.
    pub source_volume_id: Option<Result<String, SourceError>>,
}

/// Why a snapshot's or clone's source has no volume id here
/// ([`crate::node::volume::view::source_volume_id`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    #[error("source LogicalVolume {name} is not on this node")]
    NotOnNode { name: String },
    #[error("source LogicalVolume {name} has no volume yet")]
    NoVolume { name: String },
}

/// A status write: a provisioned volume, or a refusal (gRPC code, message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusWrite {
    Ready {
        volume_id: String,
        current_size: u64,
    },
    Refused {
        code: Code,
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    Done,
    AddFinalizer,
    Host {
        action: VolumeAction,
        argv: Vec<String>,
    },
    Status(StatusWrite),
    RemoveFinalizer,
    /// The LV the status names is not on disk: reported, never recreated over lost data.
    Missing(String),
}

/// A class a volume names that this node's lvmd.yaml does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClassError {
    #[error("no default device class on this node (lvmd.yaml has none marked default)")]
    NoDefault,
    #[error("device class {0:?} does not exist on this node")]
    UnknownDeviceClass(String),
    #[error("lvcreate option class {0:?} does not exist on this node")]
    UnknownOptionClass(String),
}

/// The class a volume names (empty: the config's default class).
pub fn resolve_class<'a>(
    config: &'a LvmdConfig,
    class: &str,
) -> Result<&'a LvmdDeviceClass, ClassError> {
    if class.is_empty() {
        config
            .device_classes
            .iter()
            .find(|d| d.default)
            .ok_or(ClassError::NoDefault)
    } else {
        config
            .device_class(class)
            .ok_or_else(|| ClassError::UnknownDeviceClass(class.to_string()))
    }
}

fn refuse(code: Code, message: impl Into<String>) -> Plan {
    Plan::Status(StatusWrite::Refused {
        code,
        message: message.into(),
    })
}

/// The refusal of a new volume of `want` bytes the class cannot hold (TopoLVM's lvmd check).
fn no_room(h: &HostView, class: &LvmdDeviceClass, want: u64) -> Option<Plan> {
    if let Some(full) = pool_full(class, &h.lvs) {
        return Some(refuse(Code::ResourceExhausted, full));
    }
    let free = free_for_create(class, h.vg_free, &h.lvs).unwrap_or(0);
    (free < want).then(|| {
        refuse(
            Code::ResourceExhausted,
            format!(
                "not enough space in device class {}: {free} bytes free, {want} requested",
                class.name
            ),
        )
    })
}

fn host(action: VolumeAction, argv: Result<Vec<String>, CommandError>) -> Plan {
    match argv {
        Ok(argv) => Plan::Host { action, argv },
        Err(e) => refuse(Code::Internal, e.to_string()),
    }
}

fn create_options(
    config: &LvmdConfig,
    class: &LvmdDeviceClass,
    option_class: &str,
) -> Result<CreateOptions, ClassError> {
    if !option_class.is_empty() {
        let oc = config
            .lvcreate_option_classes
            .iter()
            .flatten()
            .find(|o| o.name == option_class)
            .ok_or_else(|| ClassError::UnknownOptionClass(option_class.to_string()))?;
        return Ok(CreateOptions {
            extra: oc.options.clone().unwrap_or_default(),
            ..CreateOptions::default()
        });
    }
    Ok(CreateOptions {
        stripe: class.stripe,
        stripe_size: class.stripe_size.clone(),
        extra: class.lvcreate_options.clone().unwrap_or_default(),
    })
}

fn attr(lv: &LvRow, i: usize) -> char {
    lv.lv_attr.chars().nth(i).unwrap_or('-')
}

/// Whether a thin LV's pool is active. Only then can anything be activated: with activation
/// off (a host without device-mapper) asking would never end.
fn pool_active(lv: &LvRow, h: &HostView) -> bool {
    lv.pool_lv
        .as_deref()
        .and_then(|p| h.lvs.iter().find(|l| l.lv_name == p))
        .is_some_and(|p| attr(p, 4) == 'a')
}

/// The next step for `v`.
pub fn plan(v: &VolumeView, h: &HostView) -> Plan {
    if v.pending_deletion {
        return Plan::Done;
    }
    let class = resolve_class(&h.config, &v.device_class);
    let on_disk = h.lvs.iter().find(|l| l.lv_name == v.uid);
    if v.deleting {
        if !v.finalized {
            return Plan::Done;
        }
        return match (class, on_disk) {
            (Ok(c), Some(_)) => host(
                VolumeAction::Lvremove,
                cmd::lvremove_volume(&c.volume_group, &v.uid),
            ),
            // Gone, or its class is gone with its VG (TopoLVM: NotFound is removed).
            _ => Plan::RemoveFinalizer,
        };
    }
    if !v.finalized || !v.labelled {
        return Plan::AddFinalizer;
    }
    let class = match class {
        Ok(c) => c,
        Err(m) if v.volume_id.is_none() && v.code == 0 => {
            return refuse(Code::NotFound, m.to_string());
        }
        Err(_) => return Plan::Done,
    };
    let vg = class.volume_group.as_str();
    let Some(want) = v.size else {
        return if v.code == 0 && v.volume_id.is_none() {
            refuse(
                Code::InvalidArgument,
                format!(
                    "LogicalVolume {}: spec.size does not parse as a quantity of bytes",
                    v.name
                ),
            )
        } else {
            Plan::Done
        };
    };
    match &v.volume_id {
        None => {
            if v.code != 0 {
                // Refused already: the controller deletes it and the RPC reports why.
                return Plan::Done;
            }
            if let Some(lv) = on_disk {
                return finish(v, h, class, lv, want);
            }
            match &v.source {
                // A group member waits for its group's hold.
                Some(_) if v.group.is_some() => Plan::Done,
                Some(_) => plan_snapshot(v, h, class, want),
                None => {
                    if let Some(no_room) = no_room(h, class, want) {
                        return no_room;
                    }
                    let opts = match create_options(&h.config, class, &v.option_class) {
                        Ok(o) => o,
                        Err(m) => return refuse(Code::Internal, m.to_string()),
                    };
                    let argv = match (class.device_type, &class.thin_pool) {
                        (LvmdDeviceType::Thin, Some(tp)) => {
                            cmd::lvcreate_thin(vg, &tp.name, &v.uid, want, &opts)
                        }
                        (LvmdDeviceType::Thin, None) => {
                            return refuse(
                                Code::Internal,
                                format!(
                                    "thin device class {} has no thin-pool in lvmd.yaml",
                                    class.name
                                ),
                            );
                        }
                        (LvmdDeviceType::Thick, _) => cmd::lvcreate_thick(vg, &v.uid, want, &opts),
                    };
                    host(VolumeAction::Lvcreate, argv)
                }
            }
        }
        Some(id) => {
            let Some(lv) = h.lvs.iter().find(|l| &l.lv_name == id) else {
                return Plan::Missing(format!(
                    "LV {vg}/{id} of LogicalVolume {} is not on this node",
                    v.name
                ));
            };
            let size = lv.lv_size.unwrap_or(0);
            if size >= want {
                return if v.current_size != Some(size) || v.code != 0 {
                    Plan::Status(StatusWrite::Ready {
                        volume_id: id.clone(),
                        current_size: size,
                    })
                } else {
                    Plan::Done
                };
            }
            let free = free_for_create(class, h.vg_free, &h.lvs).unwrap_or(0);
            let full = pool_full(class, &h.lvs);
            if free < want - size || full.is_some() {
                let message = full.unwrap_or_else(|| format!(
                    "not enough space in device class {} to grow to {want} bytes: {free} bytes free, {} more needed",
                    class.name,
                    want - size
                ));
                return if v.code == Code::ResourceExhausted as i32 {
                    Plan::Done
                } else {
                    refuse(Code::ResourceExhausted, message)
                };
            }
            host(VolumeAction::Lvresize, cmd::lvresize(vg, id, want))
        }
    }
}

fn plan_snapshot(v: &VolumeView, h: &HostView, class: &LvmdDeviceClass, want: u64) -> Plan {
    let vg = class.volume_group.as_str();
    match v.access_type.as_deref() {
        Some("ro") | Some("rw") => {}
        other => {
            return refuse(
                Code::InvalidArgument,
                format!(
                    "accessType {other:?} is not ro or rw; a snapshot is ro, a clone or restore rw"
                ),
            );
        }
    }
    if class.device_type != LvmdDeviceType::Thin {
        return refuse(
            Code::Unimplemented,
            format!(
                "device class {} is thick: snapshots, clones and restores need a thin device class",
                class.name
            ),
        );
    }
    let source_id = match &h.source_volume_id {
        Some(Ok(id)) => id,
        Some(Err(m)) => return refuse(Code::NotFound, m.to_string()),
        None => return refuse(Code::NotFound, "the source LogicalVolume is not known"),
    };
    let Some(src) = h.lvs.iter().find(|l| &l.lv_name == source_id) else {
        return refuse(
            Code::NotFound,
            format!("source LV {vg}/{source_id} is not on this node"),
        );
    };
    if attr(src, 0) != 'V' {
        return refuse(
            Code::Unimplemented,
            format!(
                "source LV {vg}/{source_id} is not a thin volume; only thin volumes can be snapshotted"
            ),
        );
    }
    let src_size = src.lv_size.unwrap_or(0);
    if want < src_size {
        return refuse(
            Code::OutOfRange,
            format!("requested {want} bytes is smaller than the source ({src_size} bytes)"),
        );
    }
    if let Some(no_room) = no_room(h, class, want) {
        return no_room;
    }
    host(
        VolumeAction::LvcreateSnapshot,
        cmd::lvcreate_snapshot(vg, source_id, &v.uid),
    )
}

/// The LV exists but the status does not say so yet: a snapshot or clone is grown and given
/// its access first, then the status is written (also adopting an LV a crash left behind).
fn finish(v: &VolumeView, h: &HostView, class: &LvmdDeviceClass, lv: &LvRow, want: u64) -> Plan {
    let vg = class.volume_group.as_str();
    let size = lv.lv_size.unwrap_or(0);
    if v.source.is_some() {
        if size < want {
            return host(VolumeAction::Lvresize, cmd::lvresize(vg, &v.uid, want));
        }
        match v.access_type.as_deref() {
            Some("ro") if attr(lv, 1) == 'w' => {
                return host(VolumeAction::Lvchange, cmd::lvchange_read_only(vg, &v.uid));
            }
            Some("rw") if attr(lv, 4) != 'a' && pool_active(lv, h) => {
                return host(
                    VolumeAction::Lvchange,
                    cmd::lvchange_activate_clone(vg, &v.uid),
                );
            }
            _ => {}
        }
    }
    // lvcreate leaves a thin volume active; one that is not, in an active pool, may be what a
    // killed lvcreate left: an LV whose device the pool never made. Activating it tells (the
    // actor removes it and creates it again when the device is missing: `thin_repair`), before
    // it is handed out as a volume nothing can open.
    if attr(lv, 0) == 'V' && attr(lv, 4) != 'a' && pool_active(lv, h) {
        return host(VolumeAction::Lvchange, cmd::lvchange_activate(vg, &v.uid));
    }
    Plan::Status(StatusWrite::Ready {
        volume_id: v.uid.clone(),
        current_size: size,
    })
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
