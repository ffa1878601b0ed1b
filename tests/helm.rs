//! The Helm chart (deploy/helm/lvms) and the kustomize tree (deploy/default) install the same
//! objects: the real `helm template` and the real `kustomize build`, object by object.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::BTreeMap;
use std::path::Path;

use lvms_testkit::dev::deploy::{helm_template, render};
use serde_json::Value;

fn repo(p: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

fn key(o: &Value) -> String {
    format!(
        "{}/{}/{}",
        o["kind"].as_str().unwrap_or_default(),
        o["metadata"]["namespace"].as_str().unwrap_or_default(),
        o["metadata"]["name"].as_str().unwrap_or_default()
    )
}

fn by_key(objects: Vec<Value>) -> BTreeMap<String, Value> {
    objects.into_iter().map(|o| (key(&o), o)).collect()
}

/// The first place two documents differ, numbers compared by value (helm passes the CRD files
/// through verbatim, `minimum: 1.0`; kustomize re-serializes them, `minimum: 1`).
fn first_diff(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            (x.as_f64() != y.as_f64()).then(|| format!("{path}: {x} vs {y}"))
        }
        (Value::Object(x), Value::Object(y)) => {
            if let Some(k) = y.keys().find(|k| !x.contains_key(*k)) {
                return Some(format!("{path}/{k}: only in the second"));
            }
            for k in x.keys() {
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => {
                        if let Some(d) = first_diff(u, v, &format!("{path}/{k}")) {
                            return Some(d);
                        }
                    }
                    _ => return Some(format!("{path}/{k}: only in one of them")),
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) => {
            if x.len() != y.len() {
                return Some(format!("{path}: {} vs {} items", x.len(), y.len()));
            }
            x.iter()
                .zip(y)
                .enumerate()
                .find_map(|(i, (u, v))| first_diff(u, v, &format!("{path}[{i}]")))
        }
        _ => (a != b).then(|| format!("{path}: {a} vs {b}")),
    }
}

#[test]
fn helm_template_and_kustomize_render_the_same_objects() {
    let helm =
        by_key(helm_template(&repo("deploy/helm/lvms"), &[]).unwrap_or_else(|e| panic!("{e}")));
    let kustomize = by_key(render(&repo("deploy/default")).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(
        helm.keys().collect::<Vec<_>>(),
        kustomize.keys().collect::<Vec<_>>(),
        "different object sets"
    );
    for (k, want) in &kustomize {
        if let Some(d) = first_diff(&helm[k], want, "") {
            panic!("{k} differs between the chart and deploy/default at {d}");
        }
    }
    // The comparison itself can fail.
    let mut other = kustomize["Deployment/openshift-lvm-storage/lvms-operator"].clone();
    other["spec"]["replicas"] = 2.into();
    assert!(
        first_diff(
            &helm["Deployment/openshift-lvm-storage/lvms-operator"],
            &other,
            ""
        )
        .is_some()
    );
}

#[test]
fn chart_values_reach_the_objects() {
    let objs = by_key(
        helm_template(
            &repo("deploy/helm/lvms"),
            &[
                ("namespace", "storage"),
                ("image.tag", "v9"),
                ("logLevel", "debug"),
                ("otlpEndpoint", "http://jaeger:4318"),
                ("leaderElection", "false"),
                ("resources.limits.memory", "1Gi"),
                ("vgManagerPriorityClass", "system-node-critical"),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}")),
    );
    let d = &objs["Deployment/storage/lvms-operator"];
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(c["image"], "quay.io/lvms/lvms:v9");
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(!args.contains(&"--leader-elect"), "{args:?}");
    assert!(
        args.contains(&"--vg-manager-priority-class=system-node-critical"),
        "{args:?}"
    );
    let env: BTreeMap<&str, &Value> = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap_or_default(), &e["value"]))
        .collect();
    assert_eq!(env["RUST_LOG"], "debug");
    assert_eq!(env["OTEL_EXPORTER_OTLP_ENDPOINT"], "http://jaeger:4318");
    assert_eq!(c["resources"]["limits"]["memory"], "1Gi");
    // The namespace moves everything, binding subjects included.
    assert!(objs.contains_key("Namespace//storage"));
    assert!(objs.contains_key("RoleBinding/storage/vg-manager"));
    assert_eq!(
        objs["ClusterRoleBinding//lvms-operator"]["subjects"][0]["namespace"],
        "storage"
    );
}
