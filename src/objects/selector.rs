//! Node selector matching (component-helpers `MatchNodeSelectorTerms`), shared by the
//! operator (which nodes get a node status) and vg-manager (which volume groups concern it).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};

/// Whether `node` matches `selector` (component-helpers `MatchNodeSelectorTerms`): terms are
/// ORed, requirements inside a term ANDed, an empty term matches nothing. A malformed term is
/// skipped; its error is returned only if no other term matches.
pub fn selector_matches(node: &Node, selector: &NodeSelector) -> Result<bool, String> {
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
        Err(errors.join("; "))
    }
}

fn term_matches(node: &Node, term: &NodeSelectorTerm) -> Result<bool, String> {
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
) -> Result<bool, String> {
    let values = req.values.as_deref().unwrap_or_default();
    let label = labels.get(&req.key);
    let invalid = |why: &str| Err(format!("{:?} {}: {why}", req.key, req.operator));
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
fn field_requirement_matches(node: &Node, req: &NodeSelectorRequirement) -> Result<bool, String> {
    let values = req.values.as_deref().unwrap_or_default();
    let [value] = values else {
        return Err(format!(
            "unexpected number of values ({}) for node field selector {:?}",
            values.len(),
            req.key
        ));
    };
    let field = match req.key.as_str() {
        "metadata.name" => node_name(node),
        _ => "",
    };
    match req.operator.as_str() {
        "In" => Ok(field == value),
        "NotIn" => Ok(field != value),
        op => Err(format!(
            "{op:?} is not a valid node field selector operator"
        )),
    }
}

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}
