//! The LVMCluster status fold (LVMS `internal/controllers/lvmcluster/status.go`), pure: the
//! spec, the World and each unit's last result in, the whole status out.
//!
//! Differences from LVMS, all deliberate:
//! - LVMS first sets both conditions to "in progress" in memory and then to their final value,
//!   which moves lastTransitionTime of a True condition on every pass. Here the previous
//!   persisted condition is compared with the final one, so the time moves only when the
//!   condition's status changes (apimachinery `SetStatusCondition` semantics).
//! - observedGeneration is set on both conditions.
//! - deviceClassStatuses are sorted (class, then node) instead of Go map order, and are also
//!   recomputed when the cluster has no device classes.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::{
    CONDITION_RESOURCES_AVAILABLE, CONDITION_VOLUME_GROUPS_READY, DeviceClassStatus, LVMCluster,
    LVMClusterStatus, LVMStateType, LVMVolumeGroupNodeStatus, NodeStatus, VGStatusType,
};
use crate::operator::nodes::{NodeInvalid, node_valid_for_class};
use crate::operator::table::UnitId;
use crate::operator::world::{Capabilities, World};

pub const REASON_RECONCILIATION_IN_PROGRESS: &str = "ReconciliationInProgress";
pub const MESSAGE_RECONCILIATION_IN_PROGRESS: &str = "Reconciliation is still in progress";
pub const REASON_RESOURCES_AVAILABLE: &str = "ResourcesAvailable";
pub const MESSAGE_RESOURCES_AVAILABLE: &str =
    "Reconciliation is complete and all the resources are available";
pub const REASON_RESOURCES_INCOMPLETE: &str = "ResourcesSyncIncomplete";
/// Prefix of the ResourcesSyncIncomplete message (LVMS wraps the joined unit errors twice).
pub const MESSAGE_RESOURCES_INCOMPLETE_PREFIX: &str = "Resources have not yet been fully synced \
     to the cluster: LVMCluster's resources are not yet fully synchronized: ";
pub const REASON_VG_READINESS_IN_PROGRESS: &str = "VGReadinessInProgress";
pub const MESSAGE_VG_READINESS_IN_PROGRESS: &str = "VG readiness check is still in progress";
pub const REASON_VGS_FAILED: &str = "VGsFailed";
pub const MESSAGE_VGS_FAILED: &str = "One or more VGs are failed";
pub const REASON_VGS_DEGRADED: &str = "VGsDegraded";
pub const MESSAGE_VGS_DEGRADED: &str = "One or more VGs are degraded";
pub const REASON_VGS_READY: &str = "VGsReady";
pub const MESSAGE_VGS_READY: &str = "All the VGs are ready";
pub const REASON_VGS_UNMANAGED: &str = "VGsUnmanaged";
pub const MESSAGE_VGS_UNMANAGED: &str =
    "VGs are unmanaged and not part of the LVMCluster, but the manager is running";

/// A unit's last pass: ok, or the error to surface in ResourcesAvailable.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnitHealth {
    pub ok: bool,
    pub message: String,
}

/// The units every pass must run on this cluster; ResourcesAvailable waits for all of them.
/// Other units in the health map count too: any failed unit fails ResourcesAvailable.
pub fn expected_units(capabilities: &Capabilities) -> Vec<&'static str> {
    crate::operator::table::units(capabilities)
        .filter(|u| u.expected())
        .map(UnitId::name)
        .collect()
}

/// The condition's (status, reason, message), before times are attached.
type Verdict = (&'static str, &'static str, String);

fn resources_available(
    capabilities: &Capabilities,
    units: &BTreeMap<String, UnitHealth>,
) -> Verdict {
    let failing: Vec<String> = units
        .iter()
        .filter(|(_, h)| !h.ok)
        .map(|(name, h)| format!("{name}: {}", h.message))
        .collect();
    if !failing.is_empty() {
        let message = format!(
            "{MESSAGE_RESOURCES_INCOMPLETE_PREFIX}{}",
            failing.join("; ")
        );
        return ("False", REASON_RESOURCES_INCOMPLETE, message);
    }
    let all_reported = expected_units(capabilities)
        .iter()
        .all(|u| units.contains_key(*u));
    if all_reported {
        (
            "True",
            REASON_RESOURCES_AVAILABLE,
            MESSAGE_RESOURCES_AVAILABLE.to_owned(),
        )
    } else {
        (
            "False",
            REASON_RECONCILIATION_IN_PROGRESS,
            MESSAGE_RECONCILIATION_IN_PROGRESS.to_owned(),
        )
    }
}

/// What `validateDeviceClassSetup` found missing (LVMS logs it; the condition message stays
/// fixed).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClassesNotReady {
    #[error(transparent)]
    Node(#[from] NodeInvalid),
    #[error("no node status found for node {node}")]
    NoNodeStatus { node: String },
    #[error("no VGStatus found for VG {class} on node {node}")]
    NoVgStatus { class: String, node: String },
    #[error("VG {class} on node {node} is not in ready state")]
    VgNotReady { class: String, node: String },
    #[error("no valid node found for device class {class}")]
    NoValidNode { class: String },
}

/// LVMS `validateDeviceClassSetup`: every class has at least one valid node, and every valid
/// node has a node status holding a Ready VGStatus for the class. Err says what is missing.
pub fn device_classes_ready(cluster: &LVMCluster, world: &World) -> Result<(), ClassesNotReady> {
    // Indexed once: the fold runs on every report, over classes x nodes.
    let by_node: std::collections::HashMap<&str, &crate::api::LVMVolumeGroupNodeStatus> = world
        .node_statuses
        .iter()
        .filter_map(|s| Some((s.metadata.name.as_deref()?, s.as_ref())))
        .collect();
    for class in &cluster.spec.storage.device_classes {
        let mut any_valid = false;
        for node in &world.nodes {
            if !node_valid_for_class(node, cluster, class)? {
                continue;
            }
            any_valid = true;
            let node_name = node.metadata.name.as_deref().unwrap_or_default();
            let status = by_node
                .get(node_name)
                .ok_or_else(|| ClassesNotReady::NoNodeStatus {
                    node: node_name.to_string(),
                })?;
            let vg = status
                .spec
                .lvm_vg_status
                .iter()
                .find(|vg| vg.name == class.name)
                .ok_or_else(|| ClassesNotReady::NoVgStatus {
                    class: class.name.clone(),
                    node: node_name.to_string(),
                })?;
            if vg.status != Some(VGStatusType::Ready) {
                return Err(ClassesNotReady::VgNotReady {
                    class: class.name.clone(),
                    node: node_name.to_string(),
                });
            }
        }
        if !any_valid {
            return Err(ClassesNotReady::NoValidNode {
                class: class.name.clone(),
            });
        }
    }
    Ok(())
}

fn volume_groups_ready(cluster: &LVMCluster, world: &World) -> Verdict {
    let verdict = |status, reason, message: &str| (status, reason, message.to_owned());
    if cluster.spec.storage.device_classes.is_empty() {
        return verdict("True", REASON_VGS_UNMANAGED, MESSAGE_VGS_UNMANAGED);
    }
    if device_classes_ready(cluster, world).is_ok() {
        return verdict("True", REASON_VGS_READY, MESSAGE_VGS_READY);
    }
    // Like LVMS, any Failed/Degraded entry counts, on any node and for any VG.
    let states: Vec<Option<VGStatusType>> = world
        .node_statuses
        .iter()
        .flat_map(|s| s.spec.lvm_vg_status.iter().map(|vg| vg.status))
        .collect();
    if states.contains(&Some(VGStatusType::Failed)) {
        verdict("False", REASON_VGS_FAILED, MESSAGE_VGS_FAILED)
    } else if states.contains(&Some(VGStatusType::Degraded)) {
        verdict("False", REASON_VGS_DEGRADED, MESSAGE_VGS_DEGRADED)
    } else {
        verdict(
            "False",
            REASON_VG_READINESS_IN_PROGRESS,
            MESSAGE_VG_READINESS_IN_PROGRESS,
        )
    }
}

/// LVMS `translateReasonToState`, folded over the reasons in order starting from Unknown:
/// Failed beats Degraded beats Progressing; Ready only if nothing worse was seen; an unknown
/// reason resets to Unknown.
pub fn fold_state<'a>(reasons: impl IntoIterator<Item = &'a str>) -> LVMStateType {
    use LVMStateType::*;
    reasons
        .into_iter()
        .fold(Unknown, |state, reason| match reason {
            REASON_VGS_FAILED => Failed,
            REASON_VGS_DEGRADED if state != Failed => Degraded,
            REASON_RECONCILIATION_IN_PROGRESS
            | REASON_VG_READINESS_IN_PROGRESS
            | REASON_RESOURCES_INCOMPLETE
                if !matches!(state, Failed | Degraded) =>
            {
                Progressing
            }
            REASON_RESOURCES_AVAILABLE | REASON_VGS_READY | REASON_VGS_UNMANAGED
                if !matches!(state, Failed | Degraded | Progressing) =>
            {
                Ready
            }
            REASON_VGS_DEGRADED
            | REASON_RECONCILIATION_IN_PROGRESS
            | REASON_VG_READINESS_IN_PROGRESS
            | REASON_RESOURCES_INCOMPLETE
            | REASON_RESOURCES_AVAILABLE
            | REASON_VGS_READY
            | REASON_VGS_UNMANAGED => state,
            _ => Unknown,
        })
}

/// Per VG name, every node's VGStatus for it (LVMS `computeDeviceClassStatuses`).
pub fn device_class_statuses(
    node_statuses: &[std::sync::Arc<LVMVolumeGroupNodeStatus>],
) -> Vec<DeviceClassStatus> {
    let mut by_class: BTreeMap<&str, Vec<NodeStatus>> = BTreeMap::new();
    for status in node_statuses {
        let node = status.metadata.name.clone().unwrap_or_default();
        for vg in &status.spec.lvm_vg_status {
            by_class.entry(&vg.name).or_default().push(NodeStatus {
                node: node.clone(),
                vg_status: vg.clone(),
            });
        }
    }
    by_class
        .into_iter()
        .map(|(name, mut nodes)| {
            nodes.sort_by(|a, b| a.node.cmp(&b.node));
            DeviceClassStatus {
                name: name.to_owned(),
                node_status: nodes,
            }
        })
        .collect()
}

/// A condition with lastTransitionTime carried over from `previous` when the status is the
/// same, `now` otherwise.
fn condition(
    previous: &[Condition],
    type_: &str,
    (status, reason, message): Verdict,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        observed_generation: generation,
        last_transition_time,
    }
}

/// The whole status of `cluster`. `units` holds each unit's last pass; a unit that has not
/// reported yet keeps ResourcesAvailable in progress. Conditions of other types already in the
/// status are kept (after ours) but do not enter the state.
pub fn fold_status(
    cluster: &LVMCluster,
    world: &World,
    units: &BTreeMap<String, UnitHealth>,
    now: &Time,
) -> LVMClusterStatus {
    with_device_classes(fold_head(cluster, world, units, now), cluster, world)
}

/// While the cluster is torn down its node statuses go away on purpose: the volume group
/// picture stays as it was when deletion began (as LVMS, which stops updating status), and only
/// ResourcesAvailable follows teardown. Re-folding would rewrite an O(nodes) status once per
/// deleted node status.
fn frozen(cluster: &LVMCluster) -> Option<&LVMClusterStatus> {
    cluster
        .metadata
        .deletion_timestamp
        .as_ref()
        .and(cluster.status.as_ref())
        .filter(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == CONDITION_VOLUME_GROUPS_READY)
        })
}

/// The status without deviceClassStatuses (left empty): state, readiness and conditions. It
/// says whether a status write is urgent without building the per-node part.
pub fn fold_head(
    cluster: &LVMCluster,
    world: &World,
    units: &BTreeMap<String, UnitHealth>,
    now: &Time,
) -> LVMClusterStatus {
    let previous = cluster
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let generation = cluster.metadata.generation;
    let kept = frozen(cluster).and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == CONDITION_VOLUME_GROUPS_READY)
            .cloned()
    });
    let vgs_ready = match kept {
        Some(kept) => kept,
        None => condition(
            previous,
            CONDITION_VOLUME_GROUPS_READY,
            volume_groups_ready(cluster, world),
            generation,
            now,
        ),
    };
    let ours = [
        condition(
            previous,
            CONDITION_RESOURCES_AVAILABLE,
            resources_available(&world.capabilities, units),
            generation,
            now,
        ),
        vgs_ready,
    ];
    let state = fold_state(ours.iter().map(|c| c.reason.as_str()));
    let our_types: BTreeSet<&str> =
        [CONDITION_RESOURCES_AVAILABLE, CONDITION_VOLUME_GROUPS_READY].into();
    let foreign = previous
        .iter()
        .filter(|c| !our_types.contains(c.type_.as_str()))
        .cloned();
    LVMClusterStatus {
        ready: state == LVMStateType::Ready,
        state: Some(state),
        conditions: ours.into_iter().chain(foreign).collect(),
        device_class_statuses: Vec::new(),
    }
}

/// `head` with its deviceClassStatuses: every node's report, or during teardown the ones
/// kept from when deletion began.
pub fn with_device_classes(
    mut head: LVMClusterStatus,
    cluster: &LVMCluster,
    world: &World,
) -> LVMClusterStatus {
    head.device_class_statuses = match frozen(cluster) {
        Some(s) => s.device_class_statuses.clone(),
        None => device_class_statuses(&world.node_statuses),
    };
    head
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{
        DeviceClass, LVMClusterSpec, LVMVolumeGroupNodeStatusSpec, Storage, VGStatus,
    };
    use crate::operator::nodes::TAINT_NODE_NOT_READY;
    use crate::operator::nodes::tests::{class, node, req, selector, taint};
    use crate::operator::owner::tests::cluster_with;
    use LVMStateType::*;
    use k8s_openapi::jiff::Timestamp;
    use std::sync::Arc;

    fn time(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    fn cluster(classes: Vec<DeviceClass>) -> LVMCluster {
        cluster_with(LVMClusterSpec {
            tolerations: vec![],
            storage: Storage {
                device_classes: classes,
            },
        })
    }

    fn ns(node: &str, vgs: &[(&str, Option<VGStatusType>)]) -> Arc<LVMVolumeGroupNodeStatus> {
        let mut s = LVMVolumeGroupNodeStatus::new(
            node,
            LVMVolumeGroupNodeStatusSpec {
                lvm_vg_status: vgs
                    .iter()
                    .map(|(name, status)| VGStatus {
                        name: name.to_string(),
                        status: *status,
                        ..Default::default()
                    })
                    .collect(),
            },
        );
        s.metadata.namespace = Some("openshift-lvm-storage".into());
        Arc::new(s)
    }

    fn world(nodes: &[&str], statuses: Vec<Arc<LVMVolumeGroupNodeStatus>>) -> World {
        World {
            nodes: nodes.iter().map(|n| node(n, &[], vec![])).collect(),
            node_statuses: statuses,
            ..Default::default()
        }
    }

    fn vg_reason(cluster: &LVMCluster, world: &World) -> &'static str {
        volume_groups_ready(cluster, world).1
    }

    fn all_ok(caps: &Capabilities) -> BTreeMap<String, UnitHealth> {
        expected_units(caps)
            .into_iter()
            .map(|u| {
                (
                    u.to_owned(),
                    UnitHealth {
                        ok: true,
                        message: String::new(),
                    },
                )
            })
            .collect()
    }

    const READY: Option<VGStatusType> = Some(VGStatusType::Ready);
    const PROGRESSING: Option<VGStatusType> = Some(VGStatusType::Progressing);
    const FAILED: Option<VGStatusType> = Some(VGStatusType::Failed);
    const DEGRADED: Option<VGStatusType> = Some(VGStatusType::Degraded);

    #[test]
    fn ready_vg_on_every_valid_node_is_ready() {
        let c = cluster(vec![class("vg1", None)]);
        let w = world(&["n1"], vec![ns("n1", &[("vg1", READY)])]);
        assert_eq!(vg_reason(&c, &w), REASON_VGS_READY);
    }

    #[test]
    fn missing_node_status_is_in_progress() {
        let c = cluster(vec![class("vg1", None)]);
        assert_eq!(
            vg_reason(&c, &world(&["n1"], vec![])),
            REASON_VG_READINESS_IN_PROGRESS
        );
    }

    #[test]
    fn missing_vg_status_is_in_progress() {
        let c = cluster(vec![class("vg1", None)]);
        let w = world(&["n1"], vec![ns("n1", &[("vg2", READY)])]);
        assert_eq!(vg_reason(&c, &w), REASON_VG_READINESS_IN_PROGRESS);
    }

    #[test]
    fn unset_vg_status_is_not_ready() {
        let c = cluster(vec![class("vg1", None)]);
        let w = world(&["n1"], vec![ns("n1", &[("vg1", None)])]);
        assert_eq!(vg_reason(&c, &w), REASON_VG_READINESS_IN_PROGRESS);
    }

    #[test]
    fn progressing_degraded_failed_single_node() {
        let c = cluster(vec![class("vg1", None)]);
        for (status, reason) in [
            (PROGRESSING, REASON_VG_READINESS_IN_PROGRESS),
            (DEGRADED, REASON_VGS_DEGRADED),
            (FAILED, REASON_VGS_FAILED),
        ] {
            let w = world(&["n1"], vec![ns("n1", &[("vg1", status)])]);
            assert_eq!(vg_reason(&c, &w), reason, "{status:?}");
        }
    }

    #[test]
    fn failed_and_degraded_is_failed() {
        let c = cluster(vec![class("vg1", None)]);
        let w = world(
            &["n1", "n2"],
            vec![ns("n1", &[("vg1", DEGRADED)]), ns("n2", &[("vg1", FAILED)])],
        );
        assert_eq!(vg_reason(&c, &w), REASON_VGS_FAILED);
    }

    #[test]
    fn progressing_and_degraded_is_degraded() {
        let c = cluster(vec![class("vg1", None)]);
        let w = world(
            &["n1", "n2"],
            vec![
                ns("n1", &[("vg1", PROGRESSING)]),
                ns("n2", &[("vg1", DEGRADED)]),
            ],
        );
        assert_eq!(vg_reason(&c, &w), REASON_VGS_DEGRADED);
    }

    #[test]
    fn progressing_and_ready_is_in_progress() {
        let c = cluster(vec![class("vg1", None), class("vg2", None)]);
        let w = world(
            &["n1", "n2"],
            vec![
                ns("n1", &[("vg1", PROGRESSING), ("vg2", PROGRESSING)]),
                ns("n2", &[("vg1", READY), ("vg2", READY)]),
            ],
        );
        assert_eq!(vg_reason(&c, &w), REASON_VG_READINESS_IN_PROGRESS);
    }

    #[test]
    fn selector_matching_no_node_is_in_progress() {
        let c = cluster(vec![class(
            "vg1",
            Some(selector(vec![vec![req(
                "kubernetes.io/hostname",
                "In",
                &["no-node"],
            )]])),
        )]);
        let w = world(&["n1", "n2"], vec![]);
        assert_eq!(vg_reason(&c, &w), REASON_VG_READINESS_IN_PROGRESS);
    }

    #[test]
    fn nodes_outside_selector_or_untolerated_are_not_required() {
        let c = cluster(vec![class(
            "vg1",
            Some(selector(vec![vec![req("zone", "In", &["a"])]])),
        )]);
        let w = World {
            nodes: vec![
                node("a", &[("zone", "a")], vec![]),
                node("b", &[("zone", "b")], vec![]),
                node("c", &[("zone", "a")], vec![taint("x", "", "NoSchedule")]),
            ],
            node_statuses: vec![ns("a", &[("vg1", READY)])],
            ..Default::default()
        };
        assert_eq!(vg_reason(&c, &w), REASON_VGS_READY);
    }

    #[test]
    fn untolerated_not_ready_node_blocks_readiness() {
        let c = cluster(vec![class("vg1", None)]);
        let w = World {
            nodes: vec![
                node("a", &[], vec![]),
                node("b", &[], vec![taint(TAINT_NODE_NOT_READY, "", "NoExecute")]),
            ],
            node_statuses: vec![ns("a", &[("vg1", READY)])],
            ..Default::default()
        };
        assert_eq!(vg_reason(&c, &w), REASON_VG_READINESS_IN_PROGRESS);
    }

    #[test]
    fn zero_classes_is_unmanaged() {
        let (status, reason, message) = volume_groups_ready(&cluster(vec![]), &World::default());
        assert_eq!(
            (status, reason, message.as_str()),
            ("True", REASON_VGS_UNMANAGED, MESSAGE_VGS_UNMANAGED)
        );
    }

    #[test]
    fn state_precedence_table() {
        let cases: &[(&[&str], LVMStateType)] = &[
            (&[], Unknown),
            (&[REASON_RESOURCES_AVAILABLE, REASON_VGS_READY], Ready),
            (&[REASON_RESOURCES_AVAILABLE, REASON_VGS_UNMANAGED], Ready),
            (
                &[REASON_RECONCILIATION_IN_PROGRESS, REASON_VGS_READY],
                Progressing,
            ),
            (
                &[REASON_VGS_READY, REASON_RECONCILIATION_IN_PROGRESS],
                Progressing,
            ),
            (
                &[REASON_RESOURCES_INCOMPLETE, REASON_VGS_READY],
                Progressing,
            ),
            (
                &[REASON_RESOURCES_AVAILABLE, REASON_VG_READINESS_IN_PROGRESS],
                Progressing,
            ),
            (
                &[REASON_RESOURCES_INCOMPLETE, REASON_VGS_DEGRADED],
                Degraded,
            ),
            (
                &[REASON_VGS_DEGRADED, REASON_RESOURCES_INCOMPLETE],
                Degraded,
            ),
            (&[REASON_RESOURCES_AVAILABLE, REASON_VGS_DEGRADED], Degraded),
            (&[REASON_RESOURCES_INCOMPLETE, REASON_VGS_FAILED], Failed),
            (&[REASON_VGS_FAILED, REASON_VGS_DEGRADED], Failed),
            (&[REASON_VGS_FAILED, REASON_RESOURCES_AVAILABLE], Failed),
            (&[REASON_RESOURCES_AVAILABLE, "SomethingElse"], Unknown),
        ];
        for (reasons, expect) in cases {
            assert_eq!(fold_state(reasons.iter().copied()), *expect, "{reasons:?}");
        }
    }

    #[test]
    fn resources_available_needs_every_expected_unit() {
        let caps = Capabilities {
            snapshots: true,
            group_snapshots: true,
            scc: false,
        };
        let units = all_ok(&caps);
        assert_eq!(
            resources_available(&caps, &units).1,
            REASON_RESOURCES_AVAILABLE
        );
        for unit in [
            UnitId::SnapshotClasses.name(),
            UnitId::GroupSnapshotClasses.name(),
        ] {
            let mut missing = units.clone();
            missing.remove(unit);
            assert_eq!(
                resources_available(&caps, &missing).1,
                REASON_RECONCILIATION_IN_PROGRESS,
                "{unit}"
            );
        }
        assert_eq!(
            resources_available(&caps, &BTreeMap::new()).1,
            REASON_RECONCILIATION_IN_PROGRESS
        );
    }

    #[test]
    fn failing_units_are_listed_in_the_message() {
        let caps = Capabilities::default();
        let mut units = all_ok(&caps);
        units.insert(
            UnitId::VgManager.name().into(),
            UnitHealth {
                ok: false,
                message: "DaemonSet is not considered ready".into(),
            },
        );
        units.insert(
            UnitId::CsiDriver.name().into(),
            UnitHealth {
                ok: false,
                message: "forbidden".into(),
            },
        );
        let (status, reason, message) = resources_available(&caps, &units);
        assert_eq!((status, reason), ("False", REASON_RESOURCES_INCOMPLETE));
        assert!(message.starts_with(MESSAGE_RESOURCES_INCOMPLETE_PREFIX));
        assert!(message.ends_with(
            "topolvm-csi-driver: forbidden; vg-manager: DaemonSet is not considered ready"
        ));
    }

    #[test]
    fn fold_gives_ready_cluster() {
        let c = cluster(vec![class("vg1", None)]);
        let w = world(&["n1"], vec![ns("n1", &[("vg1", READY)])]);
        let s = fold_status(&c, &w, &all_ok(&w.capabilities), &time(100));
        assert_eq!(s.state, Some(Ready));
        assert!(s.ready);
        assert_eq!(s.conditions.len(), 2);
        assert_eq!(s.conditions[0].type_, "ResourcesAvailable");
        assert_eq!(s.conditions[0].status, "True");
        assert_eq!(s.conditions[1].type_, "VolumeGroupsReady");
        assert_eq!(s.conditions[1].reason, "VGsReady");
        assert_eq!(s.conditions[1].observed_generation, Some(3));
        assert_eq!(s.conditions[1].last_transition_time, time(100));
    }

    #[test]
    fn fold_with_missing_units_is_progressing() {
        let c = cluster(vec![class("vg1", None)]);
        let w = world(&["n1"], vec![ns("n1", &[("vg1", READY)])]);
        let s = fold_status(&c, &w, &BTreeMap::new(), &time(100));
        assert_eq!(s.state, Some(Progressing));
        assert!(!s.ready);
    }

    #[test]
    fn failed_vg_beats_failing_units() {
        let c = cluster(vec![class("vg1", None)]);
        let w = world(&["n1"], vec![ns("n1", &[("vg1", FAILED)])]);
        let mut units = all_ok(&w.capabilities);
        units.insert(
            UnitId::VgManager.name().into(),
            UnitHealth {
                ok: false,
                message: "x".into(),
            },
        );
        assert_eq!(fold_status(&c, &w, &units, &time(1)).state, Some(Failed));
    }

    #[test]
    fn transition_time_kept_while_status_unchanged() {
        let mut c = cluster(vec![class("vg1", None)]);
        let w = world(&["n1"], vec![ns("n1", &[("vg1", PROGRESSING)])]);
        let first = fold_status(&c, &w, &BTreeMap::new(), &time(100));
        c.status = Some(first.clone());
        // Same statuses later: times stay, the whole status is identical.
        let again = fold_status(&c, &w, &BTreeMap::new(), &time(200));
        assert_eq!(again, first);
        // VolumeGroupsReady flips to True: only its time moves.
        let w = world(&["n1"], vec![ns("n1", &[("vg1", READY)])]);
        let later = fold_status(&c, &w, &BTreeMap::new(), &time(300));
        assert_eq!(later.conditions[0].last_transition_time, time(100));
        assert_eq!(later.conditions[1].last_transition_time, time(300));
        // True -> False (Degraded) moves it again.
        c.status = Some(later);
        let w = world(&["n1"], vec![ns("n1", &[("vg1", DEGRADED)])]);
        let degraded = fold_status(&c, &w, &BTreeMap::new(), &time(400));
        assert_eq!(degraded.conditions[1].reason, REASON_VGS_DEGRADED);
        assert_eq!(degraded.conditions[1].last_transition_time, time(400));
        // Degraded -> Failed is a reason change at the same status: the time stays
        // (SetStatusCondition semantics).
        c.status = Some(degraded);
        let w = world(&["n1"], vec![ns("n1", &[("vg1", FAILED)])]);
        let failed = fold_status(&c, &w, &BTreeMap::new(), &time(500));
        assert_eq!(failed.conditions[1].reason, REASON_VGS_FAILED);
        assert_eq!(failed.conditions[1].last_transition_time, time(400));
    }

    #[test]
    fn foreign_conditions_are_kept_but_ignored_for_state() {
        let mut c = cluster(vec![]);
        let foreign = Condition {
            type_: "Custom".into(),
            status: "False".into(),
            reason: "Whatever".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: time(5),
        };
        c.status = Some(LVMClusterStatus {
            conditions: vec![foreign.clone()],
            ..Default::default()
        });
        let w = World::default();
        let s = fold_status(&c, &w, &all_ok(&w.capabilities), &time(10));
        assert_eq!(s.state, Some(Ready));
        assert_eq!(s.conditions.last(), Some(&foreign));
    }

    #[test]
    fn device_class_statuses_group_by_vg_sorted() {
        let statuses = vec![
            ns("n2", &[("vg1", READY), ("vg2", FAILED)]),
            ns("n1", &[("vg1", DEGRADED)]),
        ];
        let dcs = device_class_statuses(&statuses);
        assert_eq!(dcs.len(), 2);
        assert_eq!(dcs[0].name, "vg1");
        let nodes: Vec<_> = dcs[0]
            .node_status
            .iter()
            .map(|n| (n.node.as_str(), n.vg_status.status))
            .collect();
        assert_eq!(nodes, [("n1", DEGRADED), ("n2", READY)]);
        assert_eq!(dcs[1].name, "vg2");
        assert_eq!(dcs[1].node_status[0].node, "n2");
        assert_eq!(dcs[1].node_status[0].vg_status.name, "vg2");
    }

    #[test]
    fn teardown_keeps_the_volume_group_picture_and_follows_only_resources() {
        let mut c = cluster(vec![class("vg1", None)]);
        let w = world(
            &["n1", "n2"],
            vec![ns("n1", &[("vg1", READY)]), ns("n2", &[("vg1", READY)])],
        );
        let ready = fold_status(&c, &w, &all_ok(&w.capabilities), &time(100));
        assert_eq!(ready.state, Some(Ready));
        c.status = Some(ready.clone());
        c.metadata.deletion_timestamp = Some(time(150));
        // Node statuses going away one by one during teardown change nothing ...
        let fewer = world(&["n1", "n2"], vec![ns("n2", &[("vg1", READY)])]);
        let torn = fold_status(&c, &fewer, &all_ok(&w.capabilities), &time(200));
        assert_eq!(torn, ready);
        // ... while ResourcesAvailable still follows the units (teardown's errors).
        let mut units = all_ok(&w.capabilities);
        units.insert(
            "lvmcluster".into(),
            UnitHealth {
                ok: false,
                message: "deletion pending".into(),
            },
        );
        let pending = fold_status(&c, &World::default(), &units, &time(300));
        assert_eq!(pending.conditions[0].reason, REASON_RESOURCES_INCOMPLETE);
        assert_eq!(pending.conditions[1], ready.conditions[1]);
        assert_eq!(pending.device_class_statuses, ready.device_class_statuses);
        assert_eq!(pending.state, Some(Progressing));
        // Without a status to keep (deleted before the first write) it is folded as usual.
        c.status = None;
        let first = fold_status(&c, &fewer, &all_ok(&w.capabilities), &time(400));
        assert_eq!(first.device_class_statuses.len(), 1);
        assert_eq!(first.device_class_statuses[0].node_status.len(), 1);
    }
}
