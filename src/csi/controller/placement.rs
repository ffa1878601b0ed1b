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
    match requirements {
        Some(req) => segments(req).next().map(String::from).ok_or_else(|| {
            CsiError::invalid(format!(
                "accessibility_requirements name no {TOPOLOGY_NODE_KEY} segment; the StorageClass must use topolvm.io's topology"
            ))
        }),
        None => {
            let class = if device_class.is_empty() {
                "the default device class"
            } else {
                device_class
            };
            let (node, free) = max_node(nodes, device_class).ok_or_else(|| {
                CsiError::internal(format!(
                    "no node publishes capacity for {class}; is vg-manager running with that class?"
                ))
            })?;
            if free < bytes {
                return Err(CsiError::new(
                    Code::ResourceExhausted,
                    format!(
                        "no node has {bytes} bytes free in {class}: the most is {free} on {node}"
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
    fn the_scheduler_choice_wins() {
        let req = TopologyRequirement {
            requisite: vec![topo("b")],
            preferred: vec![topo("a")],
        };
        assert_eq!(
            choose_node(Some(&req), None, &nodes(), "ssd", 1),
            Ok("a".into())
        );
        let none = TopologyRequirement {
            requisite: vec![Topology::default()],
            preferred: vec![],
        };
        let e = choose_node(Some(&none), None, &nodes(), "ssd", 1).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
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
