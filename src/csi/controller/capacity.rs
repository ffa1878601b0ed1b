//! Capacity as TopoLVM's controller reads it: each node's vg-manager publishes the free bytes
//! of every device class as a Node annotation (`capacity.topolvm.io/<class>`); GetCapacity and
//! node choice only read those.

use std::collections::BTreeMap;

use crate::csi::names::{TOPOLOGY_NODE_KEY, capacity_annotation};

/// The most of a pool-usage annotation a refusal repeats (vg-manager writes ~70 characters).
const MAX_USAGE_CHARS: usize = 160;

/// What the controller keeps of a Node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeCapacity {
    pub name: String,
    /// The node's `topology.topolvm.io/node` label (set by kubelet from NodeGetInfo).
    pub topology: Option<String>,
    /// `capacity.topolvm.io/*` and `pool-usage.lvms.topolvm.io/*` annotations only.
    pub capacity: BTreeMap<String, String>,
}

impl NodeCapacity {
    /// From a Node's name, labels and annotations (everything else is dropped).
    pub fn from_meta(
        name: &str,
        labels: Option<&BTreeMap<String, String>>,
        annotations: Option<&BTreeMap<String, String>>,
    ) -> Self {
        NodeCapacity {
            name: name.to_string(),
            topology: labels.and_then(|l| l.get(TOPOLOGY_NODE_KEY).cloned()),
            capacity: crate::api::topolvm::node_capacity_annotations(annotations),
        }
    }

    /// Free bytes of `device_class` on this node; None when the node publishes none for it
    /// (not a vg-manager node, or not this class) or the value does not parse.
    pub fn free(&self, device_class: &str) -> Option<i64> {
        self.capacity
            .get(&capacity_annotation(device_class))
            .and_then(|v| v.parse::<i64>().ok())
    }

    /// Why `device_class` has no more room here, when its capacity follows its thin pool's
    /// real use: `: thin pool vg/pool is 96.0% full (data) ...`, to end a refusal with; empty
    /// otherwise.
    pub fn short_because(&self, device_class: &str) -> String {
        self.capacity
            .get(&crate::api::topolvm::pool_usage_annotation(device_class))
            // A Node annotation anyone with Node patch rights can write: bounded in the message.
            .map(|u| {
                let u: String = u.chars().take(MAX_USAGE_CHARS).collect();
                format!(": {u}, and the class's capacity follows that use (capacityFollowsUsage)")
            })
            .unwrap_or_default()
    }
}

/// GetCapacity without topology: the sum over every node (unknown counts as 0).
pub fn total(nodes: &[NodeCapacity], device_class: &str) -> i64 {
    nodes
        .iter()
        .filter_map(|n| n.free(device_class))
        .fold(0i64, i64::saturating_add)
}

/// GetCapacity for a topology segment value: the node with that `topology.topolvm.io/node`
/// label; 0 when there is none or it publishes nothing for the class (TopoLVM's answer).
pub fn for_topology(nodes: &[NodeCapacity], topology: &str, device_class: &str) -> i64 {
    nodes
        .iter()
        .find(|n| n.topology.as_deref() == Some(topology))
        .and_then(|n| n.free(device_class))
        .unwrap_or(0)
}

/// The node with the most free bytes for the class (ties: the first by name).
pub fn max_node<'a>(nodes: &'a [NodeCapacity], device_class: &str) -> Option<(&'a str, i64)> {
    let mut best: Option<(&str, i64)> = None;
    let mut sorted: Vec<&NodeCapacity> = nodes.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    for n in sorted {
        let Some(free) = n.free(device_class) else {
            continue;
        };
        if best.is_none_or(|(_, b)| free > b) {
            best = Some((n.name.as_str(), free));
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, topo: Option<&str>, caps: &[(&str, &str)]) -> NodeCapacity {
        NodeCapacity {
            name: name.into(),
            topology: topo.map(String::from),
            capacity: caps
                .iter()
                .map(|(k, v)| (format!("capacity.topolvm.io/{k}"), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn capacity_is_read_per_class_and_node() {
        let nodes = [
            node("a", Some("a"), &[("ssd", "100"), ("00default", "100")]),
            node("b", Some("b"), &[("ssd", "300"), ("thin", "garbage")]),
            node("c", None, &[]),
        ];
        assert_eq!(total(&nodes, "ssd"), 400);
        assert_eq!(total(&nodes, ""), 100);
        assert_eq!(for_topology(&nodes, "b", "ssd"), 300);
        assert_eq!(for_topology(&nodes, "b", "thin"), 0);
        assert_eq!(for_topology(&nodes, "zzz", "ssd"), 0);
        assert_eq!(max_node(&nodes, "ssd"), Some(("b", 300)));
        assert_eq!(max_node(&nodes, "nvme"), None);
    }

    #[test]
    fn only_capacity_annotations_and_the_topology_label_are_kept() {
        let labels = BTreeMap::from([(TOPOLOGY_NODE_KEY.to_string(), "n1".to_string())]);
        let ann = BTreeMap::from([
            ("capacity.topolvm.io/ssd".to_string(), "5".to_string()),
            ("other".to_string(), "x".to_string()),
        ]);
        let n = NodeCapacity::from_meta("n1", Some(&labels), Some(&ann));
        assert_eq!(n.topology.as_deref(), Some("n1"));
        assert_eq!(n.capacity.len(), 1);
        assert_eq!(n.free("ssd"), Some(5));
    }
}
