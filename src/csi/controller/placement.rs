//! Which node a new volume goes to (TopoLVM's rules): a clone or restore goes where its source
//! is; otherwise the first `topology.topolvm.io/node` segment of the requirements (the node
//! the scheduler picked); without requirements, the node with the most free capacity.

use crate::csi::controller::capacity::{NodeCapacity, max_node};
use crate::csi::errors::CsiError;
use crate::csi::names::TOPOLOGY_NODE_KEY;
use crate::csi::proto::TopologyRequirement;
use tonic::Code;

fn segments(req: &TopologyRequirement) -> impl Iterator<Item = &str> {
    req.preferred
        .iter()
        .chain(req.requisite.iter())
        .filter_map(|t| t.segments.get(TOPOLOGY_NODE_KEY).map(String::as_str))
}

/// The node for a volume of `bytes` in `device_class`.
pub fn choose_node(
    requirements: Option<&TopologyRequirement>,
    source_node: Option<&str>,
    nodes: &[NodeCapacity],
    device_class: &str,
    bytes: i64,
) -> Result<String, CsiError> {
    if let Some(node) = source_node {
        if let Some(req) = requirements
            && !segments(req).any(|s| s == node)
        {
            return Err(CsiError::invalid(format!(
                "accessibility_requirements do not include the source volume's node {node:?}; a clone or restore is made on its source's node"
            )));
        }
        return Ok(node.to_string());
    }
    let class = if device_class.is_empty() {
        "the default device class"
    } else {
        device_class
    };
    match requirements {
        Some(req) => {
            let wanted: Vec<&str> = segments(req).collect();
            if wanted.is_empty() {
                return Err(CsiError::invalid(format!(
                    "accessibility_requirements name no {TOPOLOGY_NODE_KEY} segment; the StorageClass must use topolvm.io's topology"
                )));
            }
            // The scheduler's choice first; a node that cannot take the volume is refused
            // now (TopoLVM: no capacity there), never left to time out with its object.
            let node_at = |seg: &str| {
                nodes
                    .iter()
                    .find(|n| n.topology.as_deref() == Some(seg) || n.name == seg)
            };
            let free_on = |seg: &str| node_at(seg).and_then(|n| n.free(device_class));
            if let Some(node) = wanted
                .iter()
                .find(|seg| free_on(seg).is_some_and(|free| free >= bytes))
            {
                return Ok(node.to_string());
            }
            let first = wanted[0];
            let known = node_at(first);
            Err(match free_on(first) {
                // ResourceExhausted: csi-provisioner has the scheduler choose again.
                Some(free) => CsiError::new(
                    Code::ResourceExhausted,
                    format!(
                        "node {first:?} has {free} bytes free in {class}, not the {bytes} requested{}",
                        known
                            .map(|n| n.short_because(device_class))
                            .unwrap_or_default()
                    ),
                ),
                None if known.is_none() => CsiError::new(
                    Code::ResourceExhausted,
                    format!("node {first:?} does not exist, so it has no capacity for {class}"),
                ),
                // A node whose vg-manager has not published the class yet (a claim made the
                // moment the LVMCluster is Ready): retried in place, not rescheduled.
                None => CsiError::unavailable(format!(
                    "node {first:?} has not published capacity for {class} (capacity.topolvm.io annotation); retry once its vg-manager has, or check that the class's nodeSelector includes it"
                )),
            })
        }
        None => {
            let (node, free) = max_node(nodes, device_class).ok_or_else(|| {
                CsiError::internal(format!(
                    "no node publishes capacity for {class}; is vg-manager running with that class?"
                ))
            })?;
            if free < bytes {
                let because = nodes
                    .iter()
                    .find(|n| n.name == node)
                    .map(|n| n.short_because(device_class))
                    .unwrap_or_default();
                return Err(CsiError::new(
                    Code::ResourceExhausted,
                    format!(
                        "no node has {bytes} bytes free in {class}: the most is {free} on {node}{because}"
                    ),
                ));
            }
            Ok(node.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csi::proto::Topology;
    use std::collections::BTreeMap;

    fn topo(node: &str) -> Topology {
        Topology {
            segments: [(TOPOLOGY_NODE_KEY.to_string(), node.to_string())].into(),
        }
    }

    fn nodes() -> Vec<NodeCapacity> {
        ["a", "b"]
            .iter()
            .zip([10, 50])
            .map(|(n, free)| NodeCapacity {
                name: n.to_string(),
                topology: Some(n.to_string()),
                capacity: BTreeMap::from([(
                    "capacity.topolvm.io/ssd".to_string(),
                    free.to_string(),
                )]),
            })
            .collect()
    }

    #[test]
    fn a_refusal_names_the_pool_use_a_following_class_publishes() {
        let mut ns = nodes();
        ns[1].capacity.insert(
            "pool-usage.lvms.topolvm.io/ssd".into(),
            "thin pool vg/pool is 96.0% full (data) and 11.0% (metadata)".into(),
        );
        ns[1]
            .capacity
            .insert("capacity.topolvm.io/ssd".into(), "0".into());
        let req = TopologyRequirement {
            requisite: vec![topo("b")],
            preferred: vec![topo("b")],
        };
        let e = choose_node(Some(&req), None, &ns, "ssd", 64).unwrap_err();
        assert_eq!(e.code, Code::ResourceExhausted);
        assert!(
            e.message.contains("has 0 bytes free in ssd")
                && e.message.contains("thin pool vg/pool is 96.0% full (data)")
                && e.message.contains("capacityFollowsUsage"),
            "{e}"
        );
        // Without topology: the node with the most, named with its pool's use when it has one.
        let e = choose_node(None, None, &ns[1..], "ssd", 64).unwrap_err();
        assert!(e.message.contains("96.0% full (data)"), "{e}");
        // A hostile annotation is cut short, not repeated whole.
        ns[1]
            .capacity
            .insert("pool-usage.lvms.topolvm.io/ssd".into(), "x".repeat(100_000));
        let e = choose_node(Some(&req), None, &ns, "ssd", 64).unwrap_err();
        assert!(e.message.len() < 400, "{} bytes", e.message.len());
        // A class that does not follow usage says only the bytes.
        let e = choose_node(Some(&req), None, &nodes(), "ssd", 64).unwrap_err();
        assert!(!e.message.contains("thin pool"), "{e}");
    }

    #[test]
    fn the_scheduler_choice_wins() {
        let req = TopologyRequirement {
            requisite: vec![topo("b")],
            preferred: vec![topo("a")],
        };
        assert_eq!(
            choose_node(Some(&req), None, &nodes(), "ssd", 1),
            Ok("a".into())
        );
        // The first that fits, in the requirements' order.
        let req = TopologyRequirement {
            requisite: vec![topo("b")],
            preferred: vec![topo("a")],
        };
        assert_eq!(
            choose_node(Some(&req), None, &nodes(), "ssd", 20),
            Ok("b".into())
        );
        let none = TopologyRequirement {
            requisite: vec![Topology::default()],
            preferred: vec![],
        };
        let e = choose_node(Some(&none), None, &nodes(), "ssd", 1).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
    }

    #[test]
    fn a_node_that_cannot_take_the_volume_is_refused_at_once() {
        let on = |node: &str| TopologyRequirement {
            requisite: vec![topo(node)],
            preferred: vec![],
        };
        let e = choose_node(Some(&on("gone")), None, &nodes(), "ssd", 1).unwrap_err();
        assert_eq!(e.code, Code::ResourceExhausted);
        assert!(e.message.contains("\"gone\" does not exist"), "{e}");
        let e = choose_node(Some(&on("a")), None, &nodes(), "ssd", 11).unwrap_err();
        assert_eq!(e.code, Code::ResourceExhausted);
        assert!(e.message.contains("10 bytes free"), "{e}");
        // A node that has not published the class yet: retried, not rescheduled.
        let e = choose_node(Some(&on("a")), None, &nodes(), "thin", 1).unwrap_err();
        assert_eq!(e.code, Code::Unavailable);
        assert!(e.message.contains("has not published capacity"), "{e}");
    }

    #[test]
    fn without_topology_the_roomiest_node_is_taken_if_it_fits() {
        assert_eq!(choose_node(None, None, &nodes(), "ssd", 40), Ok("b".into()));
        let e = choose_node(None, None, &nodes(), "ssd", 60).unwrap_err();
        assert_eq!(e.code, Code::ResourceExhausted);
        assert!(e.message.contains("50 on b"), "{e}");
        assert_eq!(
            choose_node(None, None, &nodes(), "thin", 1)
                .unwrap_err()
                .code,
            Code::Internal
        );
    }

    #[test]
    fn clones_stay_on_their_source_node() {
        assert_eq!(choose_node(None, Some("a"), &[], "", 1), Ok("a".into()));
        let req = TopologyRequirement {
            requisite: vec![topo("b")],
            preferred: vec![],
        };
        assert_eq!(
            choose_node(Some(&req), Some("a"), &[], "", 1)
                .unwrap_err()
                .code,
            Code::InvalidArgument
        );
        let req = TopologyRequirement {
            requisite: vec![topo("a")],
            preferred: vec![],
        };
        assert_eq!(
            choose_node(Some(&req), Some("a"), &[], "", 1),
            Ok("a".into())
        );
    }
}
