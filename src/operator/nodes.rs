//! Which nodes an LVMCluster uses: Kubernetes toleration and node-selector semantics, as LVMS
//! applies them (`internal/controllers/lvmcluster/selector`, and `isNodeValid` in its status).
//!
//! LVMS checks *every* taint of a node, whatever its effect (PreferNoSchedule included), against
//! `spec.tolerations`. An untolerated `node.kubernetes.io/not-ready` taint is reported as an
//! error rather than a silent exclusion, so a NotReady node keeps the cluster Progressing.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeSelector, Taint, Toleration};

use crate::api::{DeviceClass, LVMCluster};

/// The taint the node lifecycle controller puts on NotReady nodes.
pub const TAINT_NODE_NOT_READY: &str = "node.kubernetes.io/not-ready";

/// Whether one toleration tolerates one taint (core/v1 `Toleration.ToleratesTaint`, with the
/// numeric `Gt`/`Lt` operators enabled as LVMS enables them).
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    let value = toleration.value.as_deref().unwrap_or_default();
    let taint_value = taint.value.as_deref().unwrap_or_default();
    match toleration.operator.as_deref().unwrap_or_default() {
        // An empty operator means Equal.
        "" | "Equal" => value == taint_value,
        "Exists" => true,
        op @ ("Gt" | "Lt") => match (decimal_integer(value), decimal_integer(taint_value)) {
            (Some(tol), Some(tnt)) if op == "Gt" => tnt > tol,
            (Some(tol), Some(tnt)) => tnt < tol,
            _ => false,
        },
        _ => false,
    }
}

/// A canonical decimal integer (optional `-`, no leading zeros), as `content.IsDecimalInteger`.
fn decimal_integer(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if canonical { s.parse().ok() } else { None }
}

/// Outcome of checking a node's taints against the cluster's tolerations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaintVerdict {
    /// Every taint is tolerated.
    Tolerated,
    /// Some taint is not tolerated.
    Untolerated,
    /// The first untolerated taint is `node.kubernetes.io/not-ready` (LVMS reports an error).
    NotReady,
}

/// LVMS `ToleratesAllTaints`: every taint must be tolerated by some toleration.
pub fn check_taints(taints: &[Taint], tolerations: &[Toleration]) -> TaintVerdict {
    for taint in taints {
        if !tolerations.iter().any(|t| tolerates(t, taint)) {
            return if taint.key == TAINT_NODE_NOT_READY {
                TaintVerdict::NotReady
            } else {
                TaintVerdict::Untolerated
            };
        }
    }
    TaintVerdict::Tolerated
}

fn node_taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

pub use crate::objects::selector::{SelectorError, selector_matches};

/// The OR of every class's nodeSelector terms; None (= every node) when any class has no
/// selector or no terms were collected (LVMS `ExtractNodeSelectorAndTolerations`).
pub fn combined_node_selector(cluster: &LVMCluster) -> Option<NodeSelector> {
    let mut terms = Vec::new();
    for class in &cluster.spec.storage.device_classes {
        terms.extend(class.node_selector.as_ref()?.node_selector_terms.clone());
    }
    (!terms.is_empty()).then_some(NodeSelector {
        node_selector_terms: terms,
    })
}

/// Nodes whose taints are all tolerated by `spec.tolerations` (class selectors not applied).
pub fn valid_nodes<'a>(cluster: &LVMCluster, nodes: &'a [Arc<Node>]) -> Vec<&'a Node> {
    nodes
        .iter()
        .map(Arc::as_ref)
        .filter(|n| {
            check_taints(node_taints(n), &cluster.spec.tolerations) == TaintVerdict::Tolerated
        })
        .collect()
}

/// Of `valid_nodes`, those matching the class's nodeSelector (all of them when it has none).
/// A malformed selector matches nothing.
pub fn nodes_for_class<'a>(class: &DeviceClass, valid_nodes: &[&'a Node]) -> Vec<&'a Node> {
    valid_nodes
        .iter()
        .copied()
        .filter(|n| match &class.node_selector {
            None => true,
            Some(sel) => selector_matches(n, sel).unwrap_or(false),
        })
        .collect()
}

/// Nodes chosen for the cluster plus the problems found while choosing them.
#[derive(Clone, Debug, Default)]
pub struct NodeSelection<'a> {
    pub nodes: Vec<&'a Node>,
    /// Untolerated not-ready taints and selector errors; the unit reports them as its error.
    pub errors: Vec<String>,
}

/// LVMS `ValidNodes`, used by the node-status unit: nodes tolerating every taint and matching
/// the combined selector of all classes. A NotReady node is left out and reported; a selector
/// error empties the selection, as in LVMS.
pub fn valid_nodes_for_any_class<'a>(
    cluster: &LVMCluster,
    nodes: &'a [Arc<Node>],
) -> NodeSelection<'a> {
    let selector = combined_node_selector(cluster);
    let mut selection = NodeSelection::default();
    for node in nodes.iter().map(Arc::as_ref) {
        match check_taints(node_taints(node), &cluster.spec.tolerations) {
            TaintVerdict::Tolerated => {}
            TaintVerdict::Untolerated => continue,
            TaintVerdict::NotReady => {
                selection.errors.push(not_ready_error(node));
                continue;
            }
        }
        match selector.as_ref().map(|s| selector_matches(node, s)) {
            None | Some(Ok(true)) => selection.nodes.push(node),
            Some(Ok(false)) => {}
            Some(Err(e)) => {
                return NodeSelection {
                    nodes: Vec::new(),
                    errors: vec![format!("node {}: {e}", node_name(node))],
                };
            }
        }
    }
    selection
}

fn not_ready_error(node: &Node) -> String {
    NodeInvalid::NotReady {
        node: node_name(node).to_string(),
    }
    .to_string()
}

/// Why a node cannot be judged for a device class (LVMS `isNodeValid`'s errors).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NodeInvalid {
    #[error("node {node} has a {} taint", TAINT_NODE_NOT_READY)]
    NotReady { node: String },
    #[error("error matching node selector terms: {0}")]
    Selector(#[source] SelectorError),
}

/// LVMS `isNodeValid` for the status fold: tolerated taints plus the class's own selector.
/// Err for an untolerated not-ready taint or a malformed selector.
pub fn node_valid_for_class(
    node: &Node,
    cluster: &LVMCluster,
    class: &DeviceClass,
) -> Result<bool, NodeInvalid> {
    match check_taints(node_taints(node), &cluster.spec.tolerations) {
        TaintVerdict::Tolerated => {}
        TaintVerdict::Untolerated => return Ok(false),
        TaintVerdict::NotReady => {
            return Err(NodeInvalid::NotReady {
                node: node_name(node).to_string(),
            });
        }
    }
    match &class.node_selector {
        None => Ok(true),
        Some(sel) => selector_matches(node, sel).map_err(NodeInvalid::Selector),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::api::{LVMClusterSpec, Storage};
    use crate::operator::owner::tests::cluster_with;
    use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, NodeSpec};

    pub(crate) fn node(name: &str, labels: &[(&str, &str)], taints: Vec<Taint>) -> Arc<Node> {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        n.spec = Some(NodeSpec {
            taints: Some(taints),
            ..Default::default()
        });
        Arc::new(n)
    }

    pub(crate) fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: (!value.is_empty()).then(|| value.into()),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn toleration(key: &str, op: &str, value: &str, effect: &str) -> Toleration {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_owned());
        Toleration {
            key: opt(key),
            operator: opt(op),
            value: opt(value),
            effect: opt(effect),
            toleration_seconds: None,
        }
    }

    pub(crate) fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    pub(crate) fn selector(terms: Vec<Vec<NodeSelectorRequirement>>) -> NodeSelector {
        NodeSelector {
            node_selector_terms: terms
                .into_iter()
                .map(|exprs| NodeSelectorTerm {
                    match_expressions: Some(exprs),
                    match_fields: None,
                })
                .collect(),
        }
    }

    pub(crate) fn class(name: &str, sel: Option<NodeSelector>) -> DeviceClass {
        DeviceClass {
            name: name.into(),
            device_selector: None,
            node_selector: sel,
            thin_pool_config: None,
            raid_config: None,
            default: false,
            fstype: Default::default(),
            device_discovery_policy: None,
            storage_class_options: None,
        }
    }

    fn cluster(classes: Vec<DeviceClass>, tolerations: Vec<Toleration>) -> LVMCluster {
        cluster_with(LVMClusterSpec {
            tolerations,
            storage: Storage {
                device_classes: classes,
            },
        })
    }

    #[test]
    fn toleration_semantics() {
        let t = taint("dedicated", "storage", "NoSchedule");
        // Equal (explicit and empty operator) compares values.
        assert!(tolerates(
            &toleration("dedicated", "Equal", "storage", ""),
            &t
        ));
        assert!(tolerates(&toleration("dedicated", "", "storage", ""), &t));
        assert!(!tolerates(&toleration("dedicated", "", "db", ""), &t));
        // Exists ignores the value; an empty key with Exists matches every taint.
        assert!(tolerates(&toleration("dedicated", "Exists", "", ""), &t));
        assert!(tolerates(&toleration("", "Exists", "", ""), &t));
        assert!(!tolerates(&toleration("other", "Exists", "", ""), &t));
        // An empty effect matches all effects; a set one must be equal.
        assert!(tolerates(
            &toleration("dedicated", "Exists", "", "NoSchedule"),
            &t
        ));
        assert!(!tolerates(
            &toleration("dedicated", "Exists", "", "NoExecute"),
            &t
        ));
        // Numeric comparison: taint value against toleration value.
        let n = taint("gen", "5", "NoSchedule");
        assert!(tolerates(&toleration("gen", "Gt", "4", ""), &n));
        assert!(!tolerates(&toleration("gen", "Gt", "5", ""), &n));
        assert!(tolerates(&toleration("gen", "Lt", "6", ""), &n));
        assert!(!tolerates(&toleration("gen", "Lt", "05", ""), &n));
        assert!(!tolerates(&toleration("gen", "Bogus", "5", ""), &n));
    }

    #[test]
    fn every_taint_effect_counts_and_not_ready_is_flagged() {
        let prefer = [taint("soft", "", "PreferNoSchedule")];
        assert_eq!(check_taints(&prefer, &[]), TaintVerdict::Untolerated);
        assert_eq!(
            check_taints(&prefer, &[toleration("soft", "Exists", "", "")]),
            TaintVerdict::Tolerated
        );
        let not_ready = [taint(TAINT_NODE_NOT_READY, "", "NoExecute")];
        assert_eq!(check_taints(&not_ready, &[]), TaintVerdict::NotReady);
        assert_eq!(check_taints(&[], &[]), TaintVerdict::Tolerated);
    }

    #[test]
    fn no_schedule_taint_excludes_node_unless_tolerated() {
        let nodes = vec![
            node("plain", &[], vec![]),
            node(
                "tainted",
                &[],
                vec![taint("node-role.kubernetes.io/master", "", "NoSchedule")],
            ),
        ];
        fn names(ns: Vec<&Node>) -> Vec<&str> {
            ns.into_iter().map(node_name).collect()
        }
        let c = cluster(vec![class("vg1", None)], vec![]);
        assert_eq!(names(valid_nodes(&c, &nodes)), ["plain"]);
        let c = cluster(
            vec![class("vg1", None)],
            vec![toleration(
                "node-role.kubernetes.io/master",
                "Exists",
                "",
                "NoSchedule",
            )],
        );
        assert_eq!(names(valid_nodes(&c, &nodes)), ["plain", "tainted"]);
    }

    #[test]
    fn selector_operators() {
        let n = node("n1", &[("zone", "a"), ("gen", "7")], vec![]);
        let m = |r: NodeSelectorRequirement| selector_matches(&n, &selector(vec![vec![r]]));
        assert_eq!(m(req("zone", "In", &["a", "b"])), Ok(true));
        assert_eq!(m(req("zone", "In", &["b"])), Ok(false));
        assert_eq!(m(req("zone", "NotIn", &["b"])), Ok(true));
        assert_eq!(m(req("missing", "NotIn", &["b"])), Ok(true));
        assert_eq!(m(req("zone", "NotIn", &["a"])), Ok(false));
        assert_eq!(m(req("zone", "Exists", &[])), Ok(true));
        assert_eq!(m(req("zone", "DoesNotExist", &[])), Ok(false));
        assert_eq!(m(req("missing", "DoesNotExist", &[])), Ok(true));
        assert_eq!(m(req("gen", "Gt", &["6"])), Ok(true));
        assert_eq!(m(req("gen", "Gt", &["7"])), Ok(false));
        assert_eq!(m(req("gen", "Lt", &["8"])), Ok(true));
        assert_eq!(m(req("zone", "Gt", &["1"])), Ok(false));
        assert!(m(req("gen", "Gt", &["x"])).is_err());
        assert!(m(req("zone", "In", &[])).is_err());
        assert!(m(req("zone", "Exists", &["a"])).is_err());
        assert!(m(req("zone", "Near", &["a"])).is_err());
    }

    #[test]
    fn terms_are_ored_and_requirements_anded() {
        let n = node("n1", &[("zone", "a"), ("disk", "ssd")], vec![]);
        let and_fail = selector(vec![vec![
            req("zone", "In", &["a"]),
            req("disk", "In", &["hdd"]),
        ]]);
        assert_eq!(selector_matches(&n, &and_fail), Ok(false));
        let or_ok = selector(vec![
            vec![req("zone", "In", &["b"])],
            vec![req("disk", "In", &["ssd"])],
        ]);
        assert_eq!(selector_matches(&n, &or_ok), Ok(true));
        // An empty term matches nothing; a malformed term is skipped when another matches.
        let empty = selector(vec![vec![]]);
        assert_eq!(selector_matches(&n, &empty), Ok(false));
        let bad_then_good = selector(vec![
            vec![req("zone", "In", &[])],
            vec![req("zone", "In", &["a"])],
        ]);
        assert_eq!(selector_matches(&n, &bad_then_good), Ok(true));
    }

    #[test]
    fn match_fields_on_metadata_name() {
        let n = node("worker-1", &[], vec![]);
        let fields = |op: &str, values: &[&str]| NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: None,
                match_fields: Some(vec![req("metadata.name", op, values)]),
            }],
        };
        assert_eq!(selector_matches(&n, &fields("In", &["worker-1"])), Ok(true));
        assert_eq!(
            selector_matches(&n, &fields("In", &["worker-2"])),
            Ok(false)
        );
        assert_eq!(
            selector_matches(&n, &fields("NotIn", &["worker-2"])),
            Ok(true)
        );
        assert!(selector_matches(&n, &fields("In", &["a", "b"])).is_err());
        assert!(selector_matches(&n, &fields("Exists", &["a"])).is_err());
    }

    #[test]
    fn nodes_for_class_applies_only_that_class_selector() {
        let nodes = [
            node("a", &[("zone", "a")], vec![]),
            node("b", &[("zone", "b")], vec![]),
        ];
        let valid: Vec<&Node> = nodes.iter().map(Arc::as_ref).collect();
        let zone_a = class("vg1", Some(selector(vec![vec![req("zone", "In", &["a"])]])));
        let picked: Vec<_> = nodes_for_class(&zone_a, &valid)
            .into_iter()
            .map(node_name)
            .collect();
        assert_eq!(picked, ["a"]);
        assert_eq!(nodes_for_class(&class("vg2", None), &valid).len(), 2);
    }

    #[test]
    fn combined_selector_ors_classes_and_drops_when_one_has_none() {
        let a = class("a", Some(selector(vec![vec![req("zone", "In", &["a"])]])));
        let b = class("b", Some(selector(vec![vec![req("zone", "In", &["b"])]])));
        let combined = combined_node_selector(&cluster(vec![a.clone(), b.clone()], vec![]))
            .expect("both classes have selectors");
        assert_eq!(combined.node_selector_terms.len(), 2);
        assert!(combined_node_selector(&cluster(vec![a, class("c", None)], vec![])).is_none());
        assert!(combined_node_selector(&cluster(vec![], vec![])).is_none());
    }

    #[test]
    fn valid_nodes_for_any_class_uses_union_and_reports_not_ready() {
        let nodes = vec![
            node("a", &[("zone", "a")], vec![]),
            node("b", &[("zone", "b")], vec![]),
            node("c", &[("zone", "c")], vec![]),
            node(
                "d",
                &[("zone", "a")],
                vec![taint(TAINT_NODE_NOT_READY, "", "NoSchedule")],
            ),
        ];
        let c = cluster(
            vec![
                class("x", Some(selector(vec![vec![req("zone", "In", &["a"])]]))),
                class("y", Some(selector(vec![vec![req("zone", "In", &["b"])]]))),
            ],
            vec![],
        );
        let sel = valid_nodes_for_any_class(&c, &nodes);
        let names: Vec<_> = sel.nodes.iter().map(|n| node_name(n)).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(sel.errors.len(), 1);
        assert!(sel.errors[0].contains("node d"), "{:?}", sel.errors);
    }

    #[test]
    fn node_valid_for_class_matches_lvms_is_node_valid() {
        let c = cluster(vec![], vec![toleration("t", "", "v", "")]);
        let zone_a = class("vg1", Some(selector(vec![vec![req("zone", "In", &["a"])]])));
        let ok = node("n", &[("zone", "a")], vec![taint("t", "v", "NoSchedule")]);
        assert_eq!(node_valid_for_class(&ok, &c, &zone_a), Ok(true));
        let other_zone = node("n", &[("zone", "b")], vec![]);
        assert_eq!(node_valid_for_class(&other_zone, &c, &zone_a), Ok(false));
        let untolerated = node("n", &[("zone", "a")], vec![taint("t", "x", "NoSchedule")]);
        assert_eq!(node_valid_for_class(&untolerated, &c, &zone_a), Ok(false));
        let not_ready = node("n", &[], vec![taint(TAINT_NODE_NOT_READY, "", "NoExecute")]);
        assert!(node_valid_for_class(&not_ready, &c, &zone_a).is_err());
    }
}
