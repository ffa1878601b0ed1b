//! Node selector matching (component-helpers `MatchNodeSelectorTerms`), shared by the
//! operator (which nodes get a node status) and vg-manager (which volume groups concern it).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};

/// A malformed requirement (apimachinery's messages): it invalidates its whole term.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequirementError {
    /// A matchExpressions requirement: its key, its operator and what is wrong with it.
    #[error("{key:?} {operator}: {why}")]
    Label {
        key: String,
        operator: String,
        why: &'static str,
    },
    #[error("unexpected number of values ({count}) for node field selector {key:?}")]
    FieldValueCount { key: String, count: usize },
    #[error("{operator:?} is not a valid node field selector operator")]
    FieldOperator { operator: String },
}

/// Every malformed term of a selector none of whose terms matched, in term order (joined
/// with "; ").
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", join(.terms))]
pub struct SelectorError {
    pub terms: Vec<RequirementError>,
}

fn join(errors: &[RequirementError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whether `node` matches `selector` (component-helpers `MatchNodeSelectorTerms`): terms are
/// ORed, requirements inside a term ANDed, an empty term matches nothing. A malformed term is
/// skipped; its error is returned only if no other term matches.
pub fn selector_matches(node: &Node, selector: &NodeSelector) -> Result<bool, SelectorError> {
    let mut errors = Vec::new();
    for term in &selector.node_selector_terms {
        match term_matches(node, term) {
            Ok(true) => return Ok(true),
            Ok(false) => {}
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(false)
    } else {
        Err(SelectorError { terms: errors })
    }
}

fn term_matches(node: &Node, term: &NodeSelectorTerm) -> Result<bool, RequirementError> {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return Ok(false);
    }
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    // Parse everything first: a malformed requirement invalidates the whole term.
    let mut matched = true;
    for req in expressions {
        matched &= label_requirement_matches(labels, req)?;
    }
    for req in fields {
        matched &= field_requirement_matches(node, req)?;
    }
    Ok(matched)
}

fn label_requirement_matches(
    labels: &BTreeMap<String, String>,
    req: &NodeSelectorRequirement,
) -> Result<bool, RequirementError> {
    let values = req.values.as_deref().unwrap_or_default();
    let label = labels.get(&req.key);
    let invalid = |why: &'static str| {
        Err(RequirementError::Label {
            key: req.key.clone(),
            operator: req.operator.clone(),
            why,
        })
    };
    match req.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => invalid("values set can't be empty"),
        "In" => Ok(label.is_some_and(|l| values.contains(l))),
        "NotIn" => Ok(label.is_none_or(|l| !values.contains(l))),
        "Exists" | "DoesNotExist" if !values.is_empty() => invalid("values set must be empty"),
        "Exists" => Ok(label.is_some()),
        "DoesNotExist" => Ok(label.is_none()),
        "Gt" | "Lt" => {
            let [bound] = values else {
                return invalid("exactly one value is required");
            };
            let Ok(bound) = bound.parse::<i64>() else {
                return invalid("value must be an integer");
            };
            // A missing or non-integer label never matches.
            Ok(match label.and_then(|l| l.parse::<i64>().ok()) {
                Some(v) if req.operator == "Gt" => v > bound,
                Some(v) => v < bound,
                None => false,
            })
        }
        _ => invalid("not a valid node selector operator"),
    }
}

/// matchFields support only In/NotIn with one value; the only node field is `metadata.name`.
fn field_requirement_matches(
    node: &Node,
    req: &NodeSelectorRequirement,
) -> Result<bool, RequirementError> {
    let values = req.values.as_deref().unwrap_or_default();
    let [value] = values else {
        return Err(RequirementError::FieldValueCount {
            key: req.key.clone(),
            count: values.len(),
        });
    };
    let field = match req.key.as_str() {
        "metadata.name" => node_name(node),
        _ => "",
    };
    match req.operator.as_str() {
        "In" => Ok(field == value),
        "NotIn" => Ok(field != value),
        op => Err(RequirementError::FieldOperator {
            operator: op.to_string(),
        }),
    }
}

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}
