//! When a Node's volumes are written off, as pure decisions. TopoLVM lets a Node's claims go
//! only when the Node object is deleted, at once, even while its kubelet still reports Ready
//! (a `kubectl delete node` of a working node loses every claim on it); a node that died
//! without its object being deleted keeps its claims bound forever (topolvm#868). lvms writes
//! a node's volumes off on either sign that the node is gone for good, deletion (TopoLVM's
//! finalizer) or Kubernetes's own `node.kubernetes.io/out-of-service` taint (non-graceful
//! shutdown), but only once the node has not been Ready for `--dead-node-grace`. What was
//! written off is recorded on the Node (annotation [`WRITTEN_OFF_ANNOTATION`]) for `lvms audit`
//! until the node is back and its own audit reports the leftovers.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::api::LogicalVolume;
use crate::api::topolvm::NODE_FINALIZER;
use crate::node::audit::{Finding, FindingKind};

/// Kubernetes's taint for a node shut down without a drain (KEP-2268): the admin says it
/// will not come back as it was.
pub const OUT_OF_SERVICE_TAINT: &str = "node.kubernetes.io/out-of-service";

/// On a Node: the volumes lvms wrote off, JSON [`WrittenOff`].
pub use crate::api::topolvm::WRITTEN_OFF_ANNOTATION;

/// At most this many volumes are listed in the record (the annotation stays small; the count
/// is exact and the operator's journal names every one).
pub const RECORD_VOLUMES: usize = 100;

/// Why a node's volumes are written off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Trigger {
    /// The Node object is being deleted and TopoLVM's finalizer holds it.
    Deleted,
    /// The Node carries `node.kubernetes.io/out-of-service`.
    OutOfService,
}

impl Trigger {
    /// Its name in journal args (and in the record: serde's kebab-case).
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Deleted => "deleted",
            Trigger::OutOfService => "out-of-service",
        }
    }

    pub fn parse(s: &str) -> Option<Trigger> {
        [Trigger::Deleted, Trigger::OutOfService]
            .into_iter()
            .find(|t| t.as_str() == s)
    }

    pub fn describe(self) -> &'static str {
        match self {
            Trigger::Deleted => "deleted",
            Trigger::OutOfService => "tainted node.kubernetes.io/out-of-service",
        }
    }
}

/// What a pass does about one Node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing.
    Alive,
    /// Deleted or out of service, yet its kubelet reports Ready: a live node's volumes are
    /// never written off (the finalizer holds a deleted one until it stops).
    StillReady(Trigger),
    /// Not Ready for less than the grace: look again after this long.
    Wait { trigger: Trigger, after: Duration },
    /// Its claims deleted and its LogicalVolumes released (and, when deleted, the finalizer off).
    WriteOff(Trigger),
    /// It carries a record of written-off volumes but is Ready again, untainted, since after
    /// the record: its vg-manager's audit reports what is left from now on.
    Back,
}

/// The Node's Ready condition as the cache keeps it: whether it is True, and since when.
/// `None`: no kubelet ever reported (no condition), so nothing is alive to wait for.
fn ready(node: &Node) -> Option<(bool, Option<Timestamp>)> {
    let c = node
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?;
    Some((
        c.status == "True",
        c.last_transition_time.as_ref().map(|t| t.0),
    ))
}

fn tainted_out_of_service(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == OUT_OF_SERVICE_TAINT))
}

/// The record on the Node, if it has one that parses (one that does not is reported by the
/// caller and overwritten by the next write-off).
pub fn record(node: &Node) -> Option<Result<WrittenOff, serde_json::Error>> {
    node.metadata
        .annotations
        .as_ref()?
        .get(WRITTEN_OFF_ANNOTATION)
        .map(|s| serde_json::from_str(s))
}

/// The decision for one Node at `now`.
pub fn verdict(node: &Node, now: Timestamp, grace: Duration) -> Verdict {
    let deleted = node.metadata.deletion_timestamp.is_some()
        && node
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == NODE_FINALIZER);
    let trigger = if deleted {
        Trigger::Deleted
    } else if tainted_out_of_service(node) {
        Trigger::OutOfService
    } else {
        return match (record(node), ready(node)) {
            // Condition times have whole seconds: Ready within the record's second is after it
            // (the record was made while the cache saw the node not Ready). A record dated
            // after this clock's now cannot be compared (written by hand, or by a clock far
            // ahead): on a Ready node it would otherwise stay forever.
            (Some(Ok(r)), Some((true, since)))
                if r.at > now || since.is_some_and(|s| s.as_second() >= r.at.as_second()) =>
            {
                Verdict::Back
            }
            // A record that does not parse is nothing to keep once the node is Ready again.
            (Some(Err(_)), Some((true, _))) => Verdict::Back,
            _ => Verdict::Alive,
        };
    };
    match ready(node) {
        None => Verdict::WriteOff(trigger),
        Some((true, _)) => Verdict::StillReady(trigger),
        // Not Ready with no time: the grace cannot be measured from it, so it runs from now
        // on the next look (a condition always carries one from the node lifecycle controller).
        Some((false, None)) if !grace.is_zero() => Verdict::Wait {
            trigger,
            after: grace,
        },
        Some((false, None)) => Verdict::WriteOff(trigger),
        Some((false, Some(since))) => {
            // A condition time ahead of this clock: down for no time yet.
            let down = now.duration_since(since);
            let down = if down.is_negative() {
                Duration::ZERO
            } else {
                down.unsigned_abs()
            };
            match grace.checked_sub(down) {
                Some(left) if !left.is_zero() => Verdict::Wait {
                    trigger,
                    after: left,
                },
                _ => Verdict::WriteOff(trigger),
            }
        }
    }
}

/// One written-off volume, as the record lists it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WrittenOffVolume {
    pub logical_volume: String,
    /// The LV's name in the VG (`status.volumeID`), when it was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_id: Option<String>,
    pub device_class: String,
    pub size: String,
}

/// What lvms wrote off on a node: when, why, how many and which.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WrittenOff {
    pub at: Timestamp,
    pub trigger: Trigger,
    pub count: u64,
    pub volumes: Vec<WrittenOffVolume>,
}

/// The node's LogicalVolumes a write-off releases, as the record lists them.
pub fn volumes_of(node: &str, volumes: &[std::sync::Arc<LogicalVolume>]) -> Vec<WrittenOffVolume> {
    let mut out: Vec<WrittenOffVolume> = volumes
        .iter()
        .filter(|v| v.spec.node_name == node)
        .map(|v| WrittenOffVolume {
            logical_volume: v.metadata.name.clone().unwrap_or_default(),
            volume_id: v
                .status
                .as_ref()
                .and_then(|s| s.volume_id.clone())
                .filter(|s| !s.is_empty()),
            device_class: v.spec.device_class.clone().unwrap_or_default(),
            size: v.spec.size.0.clone(),
        })
        .collect();
    out.sort();
    out
}

/// The volumes `earlier` does not list yet.
pub fn new_volumes(
    earlier: Option<&WrittenOff>,
    volumes: &[WrittenOffVolume],
) -> Vec<WrittenOffVolume> {
    let known: BTreeSet<&str> = earlier
        .iter()
        .flat_map(|r| r.volumes.iter().map(|v| v.logical_volume.as_str()))
        .collect();
    volumes
        .iter()
        .filter(|v| !known.contains(v.logical_volume.as_str()))
        .cloned()
        .collect()
}

/// A stable name for a set of volumes (FNV-1a over their names): the record step's key, so a
/// write-off of the same volumes is reported once whether its replay or the next pass gets
/// there first.
pub fn volumes_digest(volumes: &[WrittenOffVolume]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for v in volumes {
        for b in v.logical_volume.bytes().chain(std::iter::once(0)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{}x{h:016x}", volumes.len())
}

/// The record after writing off `volumes` at `now`: the earlier record's volumes kept (a
/// node can die twice before it is back), the new ones added; `None` when every one is
/// already recorded (nothing to write, no second Event).
pub fn merged(
    earlier: Option<&WrittenOff>,
    volumes: &[WrittenOffVolume],
    trigger: Trigger,
    now: Timestamp,
) -> Option<WrittenOff> {
    let new = new_volumes(earlier, volumes);
    if new.is_empty() {
        return None;
    }
    let mut all: Vec<WrittenOffVolume> = earlier.map(|r| r.volumes.clone()).unwrap_or_default();
    all.extend(new.iter().cloned());
    all.sort();
    let count = earlier
        .map(|r| r.count)
        .unwrap_or(0)
        .saturating_add(new.len() as u64);
    all.truncate(RECORD_VOLUMES);
    Some(WrittenOff {
        at: now,
        trigger,
        count,
        volumes: all,
    })
}

/// The Warning a write-off publishes about the Node.
pub fn written_off_note(node: &str, new: &[WrittenOffVolume], trigger: Trigger) -> String {
    let mut names: Vec<String> = new
        .iter()
        .take(10)
        .map(|v| match &v.volume_id {
            Some(id) => format!(
                "{} (LV {id}, {}, {})",
                v.logical_volume, v.device_class, v.size
            ),
            None => format!("{} ({}, {})", v.logical_volume, v.device_class, v.size),
        })
        .collect();
    if new.len() > 10 {
        names.push(format!("and {} more", new.len() - 10));
    }
    format!(
        "node {node} was {} and not Ready: its claims were deleted and {} LogicalVolume(s) released: {}. Their data stays on the node's disks; if the node comes back, its vg-manager's audit reports each LV as leaked-lv (`lvms audit`), and `--audit-repair leaked` removes them",
        trigger.describe(),
        new.len(),
        names.join(", ")
    )
}

/// `lvms audit`'s findings for a Node's record: one per listed volume (the record's count says
/// if the list was cut), at most [`RECORD_VOLUMES`] whatever the annotation holds. The record is
/// an annotation anyone with Node write access can edit: a listed LogicalVolume that
/// `live_on` (the node of a LogicalVolume of that name that exists now) places on another
/// node was never written off here, so it is not reported as such; one finding names those.
pub fn written_off_findings(
    node: &str,
    r: &WrittenOff,
    live_on: impl Fn(&str) -> Option<String>,
) -> Vec<Finding> {
    let (elsewhere, here): (Vec<&WrittenOffVolume>, Vec<&WrittenOffVolume>) = r
        .volumes
        .iter()
        .take(RECORD_VOLUMES)
        .partition(|v| live_on(&v.logical_volume).is_some_and(|n| n != node));
    let cut = r.count.saturating_sub(r.volumes.len() as u64);
    let mut out: Vec<Finding> = here
        .into_iter()
        .map(|v| {
            let more = if cut > 0 {
                format!(" ({cut} more written off with it are not listed: the operator's journal names them, `release-logical-volume` steps)")
            } else {
                String::new()
            };
            let mut f = Finding::new(
                FindingKind::WrittenOff,
                node,
                format!(
                    "LogicalVolume {} ({}, {}) was written off at {} when node {node} was {} and not Ready: its data stays on the node's disks; if the node comes back, its vg-manager's audit reports the LV as leaked-lv and `--audit-repair leaked` removes it{more}",
                    v.logical_volume,
                    v.device_class,
                    v.size,
                    r.at,
                    r.trigger.describe()
                ),
            );
            f.device_class = Some(v.device_class.clone());
            f.lv = v.volume_id.clone();
            f.logical_volume = Some(v.logical_volume.clone());
            f
        })
        .collect();
    if !elsewhere.is_empty() {
        let names: Vec<String> = elsewhere
            .iter()
            .take(10)
            .map(|v| {
                let on = live_on(&v.logical_volume).unwrap_or_default();
                format!("{} (on node {on})", v.logical_volume)
            })
            .collect();
        out.push(Finding::new(
            FindingKind::WrittenOff,
            node,
            format!(
                "Node {node}'s annotation {WRITTEN_OFF_ANNOTATION} lists {} LogicalVolume(s) that live on other nodes, not written off here and not reported as such: {}{}. The annotation was edited by hand or copied from another Node; remove it once this node is Ready (`kubectl annotate node {node} {WRITTEN_OFF_ANNOTATION}-`)",
                elsewhere.len(),
                names.join(", "),
                if elsewhere.len() > 10 { ", …" } else { "" }
            ),
        ));
    }
    out
}

/// A grace as its flag takes it (`0s`, `90s`, `5m`, `2h`, `500ms`).
pub fn grace_text(d: Duration) -> String {
    match d.as_millis() {
        0 => "0s".into(),
        ms if ms % 1000 != 0 => format!("{ms}ms"),
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms => format!("{}s", ms / 1000),
    }
}

#[cfg(test)]
#[path = "dead_node_tests.rs"]
mod tests;
