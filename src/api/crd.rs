//! The CustomResourceDefinitions lvms installs: derived schemas plus the CEL rules of
//! `rules.rs`, list semantics and cost bounds. `lvms crds` prints them; `deploy/crds/` holds them.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::{Value, json};
use thiserror::Error;

use super::rules::{self, CelRule};
use super::{LVMCluster, LVMVolumeGroup, LVMVolumeGroupNodeStatus, LogicalVolume};

#[derive(Debug, Error)]
pub enum CrdError {
    #[error(
        "CRD {crd}: schema path {path} does not exist (a field was renamed; update src/api/rules.rs)"
    )]
    MissingPath { crd: String, path: String },
    #[error("CRD {crd}: could not (de)serialize: {source}")]
    Serde {
        crd: String,
        source: serde_json::Error,
    },
    #[error("could not render CRD YAML: {0}")]
    Yaml(String),
}

/// All CRDs, in install order.
pub fn all() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    Ok(vec![
        lvmcluster()?,
        lvmvolumegroup()?,
        node_status()?,
        logical_volume()?,
    ])
}

pub fn lvmcluster() -> Result<CustomResourceDefinition, CrdError> {
    let crd = LVMCluster::crd();
    patch(crd, |name, schema| {
        let classes = walk(name, schema, &["spec", "storage", "deviceClasses"])?;
        set(classes, "x-kubernetes-list-type", json!("map"));
        set(classes, "x-kubernetes-list-map-keys", json!(["name"]));
        for (path, key, value) in rules::lvmcluster_bounds() {
            set(walk(name, schema, path)?, key, value);
        }
        apply_rules(name, schema, &rules::lvmcluster_rules())
    })
}

pub fn lvmvolumegroup() -> Result<CustomResourceDefinition, CrdError> {
    patch(LVMVolumeGroup::crd(), |name, schema| {
        apply_rules(name, schema, &rules::lvmvolumegroup_rules())
    })
}

pub fn node_status() -> Result<CustomResourceDefinition, CrdError> {
    patch(LVMVolumeGroupNodeStatus::crd(), |_, _| Ok(()))
}

pub fn logical_volume() -> Result<CustomResourceDefinition, CrdError> {
    patch(LogicalVolume::crd(), |_, _| Ok(()))
}

/// The file name a CRD has under `deploy/crds/`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.yaml", crd.metadata.name.as_deref().unwrap_or("unnamed"))
}

/// Multi-document YAML of every CRD, as checked in under `deploy/crds/`.
pub fn render_yaml(crds: &[CustomResourceDefinition]) -> Result<String, CrdError> {
    let mut out = String::new();
    for crd in crds {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(crd).map_err(|e| CrdError::Yaml(e.to_string()))?);
    }
    Ok(out)
}

fn patch(
    crd: CustomResourceDefinition,
    f: impl FnOnce(&str, &mut Value) -> Result<(), CrdError>,
) -> Result<CustomResourceDefinition, CrdError> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let serde = |source| CrdError::Serde {
        crd: name.clone(),
        source,
    };
    let mut v = serde_json::to_value(&crd).map_err(serde)?;
    let schema = v
        .pointer_mut("/spec/versions/0/schema/openAPIV3Schema")
        .ok_or_else(|| CrdError::MissingPath {
            crd: name.clone(),
            path: "openAPIV3Schema".into(),
        })?;
    f(&name, schema)?;
    strip_nullable(schema);
    serde_json::from_value(v).map_err(serde)
}

/// controller-gen emits no `nullable`; without it the API server prunes a `null` and applies
/// the field's default instead of storing null, which is what LVMS users get today.
fn strip_nullable(node: &mut Value) {
    match node {
        Value::Object(map) => {
            map.remove("nullable");
            if let Some(Value::Array(variants)) = map.get_mut("enum") {
                variants.retain(|v| !v.is_null());
            }
            map.values_mut().for_each(strip_nullable);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nullable),
        _ => {}
    }
}

fn walk<'a>(crd: &str, mut node: &'a mut Value, path: &[&str]) -> Result<&'a mut Value, CrdError> {
    for (i, seg) in path.iter().enumerate() {
        let next = if *seg == "[]" {
            node.get_mut("items")
        } else {
            node.get_mut("properties").and_then(|p| p.get_mut(*seg))
        };
        node = next.ok_or_else(|| CrdError::MissingPath {
            crd: crd.to_string(),
            path: path[..=i].join("."),
        })?;
    }
    Ok(node)
}

fn set(node: &mut Value, key: &str, value: Value) {
    if let Some(obj) = node.as_object_mut() {
        obj.insert(key.to_string(), value);
    }
}

fn apply_rules(crd: &str, schema: &mut Value, rules: &[CelRule]) -> Result<(), CrdError> {
    for r in rules {
        let node = walk(crd, schema, r.path)?;
        let mut entry = json!({ "rule": r.rule, "message": r.message });
        if let Some(fp) = r.field_path {
            entry["fieldPath"] = json!(fp);
        }
        let Some(obj) = node.as_object_mut() else {
            return Err(CrdError::MissingPath {
                crd: crd.to_string(),
                path: r.path.join("."),
            });
        };
        let list = obj
            .entry("x-kubernetes-validations")
            .or_insert_with(|| json!([]));
        if let Some(items) = list.as_array_mut() {
            items.push(entry);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `default` in a schema, by its path: what the API server writes into stored objects
    /// each time it reads them.
    fn defaults(node: &Value, path: &mut Vec<String>, out: &mut Vec<String>) {
        let Some(map) = node.as_object() else { return };
        if map.contains_key("default") {
            out.push(path.join("."));
        }
        for (k, v) in map {
            path.push(k.clone());
            defaults(v, path, out);
            path.pop();
        }
    }

    #[test]
    fn a_missing_device_discovery_policy_stays_missing_as_lvms_stored_it() {
        // LVMS 4.20/4.21 stored classes without the field, meaning Dynamic: a schema default
        // would turn them Static under lvms's CRD on the next read.
        for crd in [lvmcluster().unwrap(), lvmvolumegroup().unwrap()] {
            let v = serde_json::to_value(&crd).unwrap();
            let mut found = Vec::new();
            defaults(&v, &mut Vec::new(), &mut found);
            let policy: Vec<_> = found
                .iter()
                .filter(|p| p.ends_with("deviceDiscoveryPolicy"))
                .collect();
            assert!(
                policy.is_empty(),
                "{}: schema defaults {policy:?}",
                file_name(&crd)
            );
        }
        let class: crate::api::DeviceClass =
            serde_json::from_value(json!({"name": "vg1"})).unwrap();
        assert_eq!(class.device_discovery_policy, None);
    }
}
