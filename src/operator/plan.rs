//! The pure plan of an object unit: desired objects vs the owned objects in the cache →
//! apply what is missing or drifted, delete what is no longer desired.
//!
//! "In sync" = the object carries the digest of the current desired object (so a field we
//! stopped setting is noticed and dropped by server-side apply) AND every desired field has
//! the desired value (so someone else's edit of a field we own is reverted).

use serde_json::Value;

pub const DIGEST_ANNOTATION: &str = "lvms.topolvm.io/desired-digest";

#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Apply {
        namespace: String,
        name: String,
        object: Value,
        digest: String,
        /// Why: `create` or `update`.
        why: &'static str,
    },
    Delete {
        namespace: String,
        name: String,
    },
}

impl Step {
    pub fn name(&self) -> &str {
        match self {
            Step::Apply { name, .. } | Step::Delete { name, .. } => name,
        }
    }
}

pub use crate::objects::digest;

/// Stamp the digest annotation on a desired object; returns the digest.
pub fn stamp(object: &mut Value) -> String {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let now_empty = meta
            .get_mut("annotations")
            .and_then(Value::as_object_mut)
            .map(|m| {
                m.remove(DIGEST_ANNOTATION);
                m.is_empty()
            });
        if now_empty == Some(true) {
            meta.remove("annotations");
        }
    }
    let d = digest(object);
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let ann = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(map) = ann.as_object_mut() {
            map.insert(DIGEST_ANNOTATION.into(), Value::String(d.clone()));
        }
    }
    d
}

/// Every field of `desired` has the same value in `current` (extra fields in `current`,
/// e.g. server defaults, are fine; an empty desired map/list matches an absent one).
pub fn contains(current: &Value, desired: &Value) -> bool {
    match (current, desired) {
        (Value::Object(c), Value::Object(d)) => d.iter().all(|(k, dv)| match c.get(k) {
            Some(cv) => contains(cv, dv),
            None => is_empty(dv),
        }),
        (Value::Array(c), Value::Array(d)) => {
            c.len() == d.len() && c.iter().zip(d).all(|(cv, dv)| contains(cv, dv))
        }
        (Value::Null, d) => is_empty(d),
        (c, d) => c == d,
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

fn key(v: &Value) -> (String, String) {
    let meta = &v["metadata"];
    (
        meta["namespace"].as_str().unwrap_or_default().to_string(),
        meta["name"].as_str().unwrap_or_default().to_string(),
    )
}

/// Desired objects are stamped here; `current` holds only objects this unit owns.
/// O((d + c) log c): node statuses scale with the node count.
pub fn plan(desired: Vec<Value>, current: &[Value]) -> Vec<Step> {
    plan_holding(desired, current, None)
}

/// [`plan`] for a kind whose objects carry `finalizer` of ours: an undesired object someone
/// else already marked deleted (the garbage collector, when a create landed after its owner
/// was gone; a user) waits for nobody but us, so it is a delete step too, whose finalizer
/// edit lets it go (LVMS's `deleteNodeStatus` does the same). A desired one keeps it, as in
/// LVMS, until the LVMCluster goes.
pub fn plan_holding(desired: Vec<Value>, current: &[Value], finalizer: Option<&str>) -> Vec<Step> {
    let mut by_key: std::collections::BTreeMap<(String, String), &Value> =
        current.iter().map(|c| (key(c), c)).collect();
    let mut steps = Vec::new();
    for mut object in desired {
        let digest = stamp(&mut object);
        let (namespace, name) = key(&object);
        let existing = by_key.remove(&(namespace.clone(), name.clone()));
        let why = match existing {
            None => "create",
            Some(c) if c["metadata"]["deletionTimestamp"].is_string() => continue,
            Some(c) if contains(c, &object) => continue,
            Some(_) => "update",
        };
        steps.push(Step::Apply {
            namespace,
            name,
            object,
            digest,
            why,
        });
    }
    // What is left in the index is owned but no longer desired.
    for ((namespace, name), c) in by_key {
        let meta = &c["metadata"];
        let held = || {
            finalizer.is_some_and(|f| {
                meta["finalizers"]
                    .as_array()
                    .is_some_and(|all| all.iter().any(|x| x.as_str() == Some(f)))
            })
        };
        if !meta["deletionTimestamp"].is_string() || held() {
            steps.push(Step::Delete { namespace, name });
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sc(name: &str, param: &str) -> Value {
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
               "metadata": {"name": name, "labels": {"a": "b"}},
               "parameters": {"topolvm.io/device-class": param}})
    }

    fn stamped(mut v: Value) -> Value {
        stamp(&mut v);
        v
    }

    #[test]
    fn missing_is_created_and_in_sync_is_left_alone() {
        let steps = plan(vec![sc("lvms-a", "a")], &[]);
        assert!(
            matches!(&steps[..], [Step::Apply { why: "create", name, .. }] if name == "lvms-a")
        );
        // The server adds fields (uid, defaults): still in sync.
        let mut current = stamped(sc("lvms-a", "a"));
        current["metadata"]["uid"] = json!("u1");
        current["reclaimPolicy"] = json!("Delete");
        assert!(plan(vec![sc("lvms-a", "a")], &[current]).is_empty());
    }

    #[test]
    fn drift_and_dropped_fields_are_updated() {
        let mut drifted = stamped(sc("lvms-a", "a"));
        drifted["parameters"]["topolvm.io/device-class"] = json!("other");
        assert!(matches!(
            &plan(vec![sc("lvms-a", "a")], &[drifted])[..],
            [Step::Apply { why: "update", .. }]
        ));
        // A label we used to set is no longer desired: the digest differs, so apply.
        let old = stamped(sc("lvms-a", "a"));
        let mut new = sc("lvms-a", "a");
        new["metadata"]["labels"] = json!({});
        assert!(matches!(
            &plan(vec![new], &[old])[..],
            [Step::Apply { why: "update", .. }]
        ));
    }

    #[test]
    fn undesired_owned_objects_are_deleted_once() {
        let current = vec![stamped(sc("lvms-a", "a")), stamped(sc("lvms-b", "b"))];
        let steps = plan(vec![sc("lvms-a", "a")], &current);
        assert_eq!(
            steps,
            vec![Step::Delete {
                namespace: String::new(),
                name: "lvms-b".into()
            }]
        );
        let mut deleting = stamped(sc("lvms-b", "b"));
        deleting["metadata"]["deletionTimestamp"] = json!("2026-11-22T00:00:00Z");
        assert!(plan(vec![sc("lvms-a", "a")], &[current[0].clone(), deleting]).is_empty());
    }

    #[test]
    fn an_undesired_object_marked_deleted_by_another_is_released_from_our_finalizer_only() {
        let mut gc_deleted = stamped(sc("node-a", "a"));
        gc_deleted["metadata"]["deletionTimestamp"] = json!("2026-11-30T00:00:00Z");
        gc_deleted["metadata"]["finalizers"] = json!(["ours"]);
        let mut theirs = stamped(sc("node-b", "b"));
        theirs["metadata"]["deletionTimestamp"] = json!("2026-11-30T00:00:00Z");
        theirs["metadata"]["finalizers"] = json!(["someone-else"]);
        let current = vec![gc_deleted.clone(), theirs];
        assert_eq!(
            plan_holding(Vec::new(), &current, Some("ours")),
            vec![Step::Delete {
                namespace: String::new(),
                name: "node-a".into()
            }]
        );
        // Without a finalizer of ours to drop, a deleting object is left to its holders.
        assert!(plan(Vec::new(), &current).is_empty());
        // Still desired: kept (LVMS keeps it until the LVMCluster goes).
        assert!(plan_holding(vec![sc("node-a", "a")], &[gc_deleted], Some("ours")).is_empty());
    }

    #[test]
    fn stamping_is_idempotent() {
        let mut once = sc("x", "a");
        let d1 = stamp(&mut once);
        let mut twice = once.clone();
        assert_eq!(stamp(&mut twice), d1);
        assert_eq!(once, twice);
        assert_ne!(d1, stamp(&mut sc("x", "b")));
    }

    #[test]
    fn empty_desired_matches_absent() {
        assert!(contains(
            &json!({"a": 1}),
            &json!({"a": 1, "b": {}, "c": []})
        ));
        assert!(!contains(&json!({"a": 1}), &json!({"a": 1, "b": {"x": 1}})));
        assert!(!contains(&json!({"l": [1, 2]}), &json!({"l": [1]})));
    }
}
