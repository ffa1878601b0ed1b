//! The orphan audit, as a pure decision: what lvm2 reports in this node's volume groups, the
//! LogicalVolumes that name this node, and what this node's journal says it did, joined; every
//! mismatch a [`Finding`] with the records that explain it. The vg-manager's audit unit feeds
//! it observations (each read succeeded, or no audit: "nothing there" is never assumed) and
//! publishes what it returns; `lvms audit` adds the cluster's half ([`stale_volumes`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::report::LogicalVolume as Lv;

/// The tag lvms puts on every volume's LV (`lvcreate --addtag`).
pub const VOLUME_TAG: &str = "lvms-volume";

/// What kind of mismatch a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingKind {
    /// An LV lvms made (tagged `lvms-volume`, or its lvcreate is in the journal) that no
    /// LogicalVolume names: its space is lost until someone removes it.
    LeakedLv,
    /// An LV in an lvms volume group that lvms did not make (no tag, no journal record): never
    /// repaired, reported so the space it takes is explained.
    ForeignLv,
    /// A LogicalVolume whose status names an LV the volume group does not hold.
    MissingLv,
    /// A PersistentVolume of the driver whose volume no LogicalVolume names.
    StalePv,
    /// A LogicalVolume of a node that no longer exists.
    GoneNode,
    /// A journaled step left open longer than replay takes: something keeps it from closing.
    HalfFinished,
    /// A volume written off when its node was deleted or tainted out-of-service while not
    /// Ready: its data is on disks nobody sees until the node is back (then: `leaked-lv`).
    WrittenOff,
    /// A device class whose volume group lvm2 did not report during the audit (a held lock,
    /// a missing disk): its LVs and volumes are not audited, so no finding about them means
    /// nothing; the journal's half-finished steps still are.
    UnreadableVg,
}

impl FindingKind {
    pub const ALL: [FindingKind; 8] = [
        FindingKind::LeakedLv,
        FindingKind::ForeignLv,
        FindingKind::MissingLv,
        FindingKind::StalePv,
        FindingKind::GoneNode,
        FindingKind::HalfFinished,
        FindingKind::WrittenOff,
        FindingKind::UnreadableVg,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::LeakedLv => "leaked-lv",
            FindingKind::ForeignLv => "foreign-lv",
            FindingKind::MissingLv => "missing-lv",
            FindingKind::StalePv => "stale-pv",
            FindingKind::GoneNode => "gone-node",
            FindingKind::HalfFinished => "half-finished",
            FindingKind::WrittenOff => "written-off",
            FindingKind::UnreadableVg => "unreadable-vg",
        }
    }

    /// The Event reason a node's finding is published under.
    pub fn reason(self) -> &'static str {
        match self {
            FindingKind::LeakedLv => "LeakedLogicalVolume",
            FindingKind::ForeignLv => "ForeignLogicalVolume",
            FindingKind::MissingLv => "MissingLogicalVolume",
            FindingKind::StalePv => "StalePersistentVolume",
            FindingKind::GoneNode => "VolumeOnGoneNode",
            FindingKind::HalfFinished => "HalfFinishedStep",
            FindingKind::WrittenOff => "VolumeWrittenOff",
            FindingKind::UnreadableVg => "VolumeGroupUnreadable",
        }
    }
}

/// One mismatch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub kind: FindingKind,
    /// The node whose disks or journal it is about.
    pub node: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_class: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_group: Option<String>,
    /// The LV (a volume's id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lv: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_volume: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// What is wrong, in a sentence, with what to do about it.
    pub detail: String,
    /// The journal records that explain it (`#seq action object result`), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub journal: Vec<String>,
    /// The journal proves lvms made it and nothing references it: the repair policy may
    /// remove it.
    #[serde(default)]
    pub repairable: bool,
}

impl Finding {
    /// Stable identity across audits: what is reported once, and what "the same finding
    /// again" means.
    pub fn key(&self) -> String {
        let part = |o: &Option<String>| o.clone().unwrap_or_default();
        format!(
            "{}/{}/{}/{}/{}/{}",
            self.kind.as_str(),
            self.node,
            part(&self.volume_group),
            part(&self.lv),
            part(&self.logical_volume),
            part(&self.persistent_volume)
        )
    }

    pub fn new(kind: FindingKind, node: &str, detail: String) -> Self {
        Finding {
            kind,
            node: node.to_string(),
            device_class: None,
            volume_group: None,
            lv: None,
            logical_volume: None,
            persistent_volume: None,
            size_bytes: None,
            detail,
            journal: Vec::new(),
            repairable: false,
        }
    }
}

/// One device class's volume group as lvm2 reported it now.
#[derive(Clone, Debug)]
pub struct ClassVg<'a> {
    pub class: &'a str,
    pub vg: &'a str,
    /// Whether this is the node's default class (a LogicalVolume without a class uses it).
    pub default: bool,
    pub lvs: &'a [Lv],
}

/// What the audit needs of one LogicalVolume of this node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VolumeRef {
    pub name: String,
    pub uid: String,
    /// `status.volumeID`: set once its LV was made.
    pub volume_id: Option<String>,
    /// `spec.deviceClass` (empty: the default class).
    pub device_class: String,
    /// Being deleted: its LV may already be gone, lawfully.
    pub deleting: bool,
}

/// A journaled step that is still open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenStep {
    pub seq: u64,
    pub at_ms: u64,
    pub unit: String,
    pub action: String,
    pub object_kind: String,
    pub object_name: String,
    pub object_uid: String,
}

/// What the journal says happened to one LogicalVolume (by uid): its lvcreate and later steps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VolumeHistory {
    /// The LogicalVolume the steps were for.
    pub logical_volume: String,
    /// An lvcreate of it succeeded (the proof lvms made its LV).
    pub created: bool,
    /// The records, oldest first (`#seq action result`), at most [`HISTORY_LINES`].
    pub lines: Vec<String>,
}

/// Lines of a volume's journal history a finding carries (the latest).
pub const HISTORY_LINES: usize = 8;

/// What this node's journal says, as the audit reads it.
#[derive(Clone, Debug, Default)]
pub struct JournalFacts {
    pub open: Vec<OpenStep>,
    /// By LogicalVolume uid (= its LV's name).
    pub volumes: BTreeMap<String, VolumeHistory>,
}

/// The node's half of the audit: every class observed in `classes`, the LogicalVolumes whose
/// `spec.nodeName` is this node, this node's journal. `open_after_ms`: an intent open longer
/// than this is [`FindingKind::HalfFinished`] (replay closes a crash's within a pass).
pub fn audit_node(
    node: &str,
    classes: &[ClassVg<'_>],
    volumes: &[VolumeRef],
    journal: &JournalFacts,
    now_ms: u64,
    open_after_ms: u64,
) -> Vec<Finding> {
    let mut out = Vec::new();
    // Whatever a LogicalVolume names, or a step in flight is about, is not an orphan.
    let named: BTreeSet<&str> = volumes
        .iter()
        .flat_map(|v| std::iter::once(v.uid.as_str()).chain(v.volume_id.as_deref()))
        .filter(|s| !s.is_empty())
        .collect();
    let in_flight: BTreeSet<&str> = journal
        .open
        .iter()
        .map(|o| o.object_uid.as_str())
        .filter(|s| !s.is_empty())
        .collect();
    for c in classes {
        for lv in c.lvs.iter().filter(|lv| is_volume_like(lv)) {
            let name = lv.lv_name.as_str();
            if named.contains(name) || in_flight.contains(name) {
                continue;
            }
            let history = journal.volumes.get(name);
            let tagged = lv.tags.iter().any(|t| t == VOLUME_TAG);
            let proven = history.is_some_and(|h| h.created);
            let kind = if tagged || proven {
                FindingKind::LeakedLv
            } else {
                FindingKind::ForeignLv
            };
            let detail = match (kind, history) {
                (FindingKind::ForeignLv, _) => format!(
                    "LV {}/{name} is in lvms's volume group but lvms did not make it (no {VOLUME_TAG} tag, no lvcreate in this node's journal); remove it with lvremove if nothing uses it, or move it out of the volume group",
                    c.vg
                ),
                (_, Some(h)) if h.created => format!(
                    "LV {}/{name} was made by lvms for LogicalVolume {} and no LogicalVolume names it now; its space is lost until it is removed (the repair policy `leaked` removes it)",
                    c.vg, h.logical_volume
                ),
                _ => format!(
                    "LV {}/{name} carries lvms's {VOLUME_TAG} tag and no LogicalVolume names it; this node's journal no longer holds its lvcreate, so only a person may remove it (lvremove {}/{name})",
                    c.vg, c.vg
                ),
            };
            let mut f = Finding::new(kind, node, detail);
            f.device_class = Some(c.class.to_string());
            f.volume_group = Some(c.vg.to_string());
            f.lv = Some(name.to_string());
            f.size_bytes = lv.lv_size;
            if let Some(h) = history {
                f.logical_volume = Some(h.logical_volume.clone());
                f.journal = h.lines.clone();
            }
            f.repairable = kind == FindingKind::LeakedLv && proven;
            out.push(f);
        }
    }
    for v in volumes {
        let Some(id) = v.volume_id.as_deref().filter(|id| !id.is_empty()) else {
            continue;
        };
        if v.deleting || in_flight.contains(v.uid.as_str()) {
            continue;
        }
        // A class this node has not observed (not built, or unreadable) says nothing.
        let Some(c) = class_of(classes, &v.device_class) else {
            continue;
        };
        if c.lvs.iter().any(|lv| lv.lv_name == id) {
            continue;
        }
        let mut f = Finding::new(
            FindingKind::MissingLv,
            node,
            format!(
                "LogicalVolume {} says its volume is LV {}/{id}, which the volume group does not hold: the data is gone; delete the claim (and its Pods) to release it",
                v.name, c.vg
            ),
        );
        f.device_class = Some(c.class.to_string());
        f.volume_group = Some(c.vg.to_string());
        f.lv = Some(id.to_string());
        f.logical_volume = Some(v.name.clone());
        if let Some(h) = journal.volumes.get(&v.uid) {
            f.journal = h.lines.clone();
        }
        out.push(f);
    }
    for o in &journal.open {
        let age = now_ms.saturating_sub(o.at_ms);
        if age <= open_after_ms {
            continue;
        }
        let mut f = Finding::new(
            FindingKind::HalfFinished,
            node,
            // No age in the text: a finding's words are part of its identity (reported once).
            format!(
                "step {} of unit {} on {} {} has been open since {} (journal #{}): replay has not closed it; `lvms explain` on the object shows why",
                o.action,
                o.unit,
                o.object_kind,
                o.object_name,
                lvms_journal::rfc3339_utc(o.at_ms),
                o.seq
            ),
        );
        if o.object_kind == "LogicalVolume" {
            f.logical_volume = Some(o.object_name.clone());
        }
        f.journal = vec![format!("#{} {} {} open", o.seq, o.action, o.object_name)];
        out.push(f);
    }
    out.sort_by_key(Finding::key);
    out
}

/// A device class the audit could not read: (class, its volume group, the read's error
/// reason, e.g. `HostCommandTimedOut`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnreadClass {
    pub class: String,
    pub vg: String,
    pub reason: String,
}

/// One [`FindingKind::UnreadableVg`] per class the audit could not read. The words name the
/// error's reason, not its message (a finding's words are its identity: reported once).
pub fn unreadable_findings(node: &str, unread: &[UnreadClass]) -> Vec<Finding> {
    unread
        .iter()
        .map(|u| {
            let mut f = Finding::new(
                FindingKind::UnreadableVg,
                node,
                format!(
                    "volume group {} of device class {} could not be read ({}): its LVs and LogicalVolumes were not audited, only the journal's open steps; the vg-manager log names the error (a held lvm2 lock, a missing disk)",
                    u.vg, u.class, u.reason
                ),
            );
            f.device_class = Some(u.class.clone());
            f.volume_group = Some(u.vg.clone());
            f
        })
        .collect()
}

/// The class a LogicalVolume's `spec.deviceClass` resolves to among those observed.
fn class_of<'a, 'b>(classes: &'a [ClassVg<'b>], class: &str) -> Option<&'a ClassVg<'b>> {
    if class.is_empty() {
        classes.iter().find(|c| c.default)
    } else {
        classes.iter().find(|c| c.class == class)
    }
}

/// An LV that could be a volume: not a thin pool (lv_attr `t`), not a hidden one (`[..]`).
fn is_volume_like(lv: &Lv) -> bool {
    !lv.lv_attr.starts_with('t') && !lv.lv_name.starts_with('[')
}

/// What the cluster's half needs of a PersistentVolume of the driver.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PvRef {
    pub name: String,
    pub volume_handle: String,
    /// The node its affinity names (TopoLVM's `topology.topolvm.io/node`).
    pub node: Option<String>,
    pub claim: Option<String>,
}

/// What the cluster's half needs of any LogicalVolume.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterVolume {
    pub name: String,
    pub node: String,
    pub uid: String,
    pub volume_id: Option<String>,
}

/// The cluster's half: PersistentVolumes of the driver whose volume no LogicalVolume names,
/// and LogicalVolumes of nodes that are gone. `nodes` is every Node the API server has (read
/// in full: a failed read is no audit).
pub fn stale_volumes(
    pvs: &[PvRef],
    volumes: &[ClusterVolume],
    nodes: &BTreeSet<String>,
) -> Vec<Finding> {
    let named: BTreeSet<&str> = volumes
        .iter()
        .flat_map(|v| std::iter::once(v.uid.as_str()).chain(v.volume_id.as_deref()))
        .filter(|s| !s.is_empty())
        .collect();
    let mut out = Vec::new();
    for pv in pvs {
        if named.contains(pv.volume_handle.as_str()) {
            continue;
        }
        let node = pv.node.clone().unwrap_or_default();
        let claim = pv
            .claim
            .as_deref()
            .map(|c| format!(", bound to claim {c}"))
            .unwrap_or_default();
        let mut f = Finding::new(
            FindingKind::StalePv,
            &node,
            format!(
                "PersistentVolume {} (volume {}{claim}) has no LogicalVolume: lvms can neither expand nor delete it; if its LV is gone, delete the PersistentVolume",
                pv.name, pv.volume_handle
            ),
        );
        f.lv = Some(pv.volume_handle.clone());
        f.persistent_volume = Some(pv.name.clone());
        out.push(f);
    }
    for v in volumes.iter().filter(|v| !nodes.contains(&v.node)) {
        let mut f = Finding::new(
            FindingKind::GoneNode,
            &v.node,
            format!(
                "LogicalVolume {} is on node {}, which no longer exists; its claim cannot be used until it is deleted (lvms releases it once the Node's deletion runs through its finalizer)",
                v.name, v.node
            ),
        );
        f.lv = v.volume_id.clone();
        f.logical_volume = Some(v.name.clone());
        out.push(f);
    }
    out.sort_by_key(Finding::key);
    out
}

/// How many findings of each kind (every kind present, zeros included: the metric's series).
pub fn counts(findings: &[Finding]) -> BTreeMap<FindingKind, u64> {
    let mut out: BTreeMap<FindingKind, u64> = FindingKind::ALL.iter().map(|k| (*k, 0)).collect();
    for f in findings {
        *out.entry(f.kind).or_default() += 1;
    }
    out
}

/// A node's audit as it is published (the node status's annotation): when, how many of each
/// kind, and the first [`REPORT_FINDINGS`] findings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeAudit {
    pub node: String,
    /// RFC 3339, UTC.
    pub at: String,
    pub counts: BTreeMap<FindingKind, u64>,
    pub findings: Vec<Finding>,
    /// Findings left out of `findings` (the annotation stays small; counts are complete).
    #[serde(default)]
    pub omitted: u64,
    /// LVs removed by the repair policy in this audit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repaired: Vec<String>,
}

/// Findings a published audit lists (each is a few hundred bytes; annotations hold 256 KiB).
pub const REPORT_FINDINGS: usize = 100;

impl NodeAudit {
    pub fn new(node: &str, at: String, findings: Vec<Finding>, repaired: Vec<String>) -> Self {
        let counts = counts(&findings);
        let omitted = findings.len().saturating_sub(REPORT_FINDINGS) as u64;
        let findings = findings.into_iter().take(REPORT_FINDINGS).collect();
        NodeAudit {
            node: node.to_string(),
            at,
            counts,
            findings,
            omitted,
            repaired,
        }
    }
}

#[cfg(test)]
#[path = "audit_tests.rs"]
mod tests;
