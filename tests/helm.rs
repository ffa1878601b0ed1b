//! The Helm chart (deploy/helm/lvms) and the kustomize tree (deploy/default) install the same
//! objects: the real `helm template` and the real `kustomize build`, object by object.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::BTreeMap;
use std::path::Path;

use lvms_testkit::dev::deploy::{helm_template, helm_template_args, render};
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

/// Kinds kustomize v5.8.0's built-in schema does not know to be cluster-scoped, so its
/// `namespace:` stamps them; the API server drops a namespace on a cluster-scoped object, so
/// the installed objects are the same as the chart's.
const CLUSTER_SCOPED_UNKNOWN_TO_KUSTOMIZE: [&str; 2] = [
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
];

fn by_key(objects: Vec<Value>) -> BTreeMap<String, Value> {
    objects
        .into_iter()
        .map(|mut o| {
            let kind = o["kind"].as_str().unwrap_or_default().to_string();
            if CLUSTER_SCOPED_UNKNOWN_TO_KUSTOMIZE.contains(&kind.as_str())
                && let Some(m) = o["metadata"].as_object_mut()
            {
                m.remove("namespace");
            }
            (key(&o), o)
        })
        .collect()
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

/// csi-snapshotter's arguments in the operator Deployment of `objs`.
/// The operator Deployment among rendered objects.
fn operator_deployment(objs: &[Value]) -> &Value {
    objs.iter()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "lvms-operator")
        .expect("the operator Deployment")
}

fn snapshotter_args(objs: &[Value]) -> Vec<String> {
    let c = operator_deployment(objs)["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "csi-snapshotter")
        .expect("csi-snapshotter");
    c["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect()
}

const GATE: &str = "--feature-gates=CSIVolumeGroupSnapshot=true";

/// With the gate, csi-snapshotter v8.6 waits for the groupsnapshot.storage.k8s.io/v1 caches
/// before it handles any VolumeSnapshot: on a cluster without that API backups would stop. The
/// chart's `auto` turns it on only where helm's discovery finds the API; `true`/`false` force it.
#[test]
fn group_snapshots_are_on_only_where_the_v1_group_snapshot_api_is_served() {
    let chart = repo("deploy/helm/lvms");
    let render = |set: &[(&str, &str)], args: &[&str]| {
        snapshotter_args(&helm_template_args(&chart, set, args).unwrap_or_else(|e| panic!("{e}")))
    };
    let served = ["--api-versions", "groupsnapshot.storage.k8s.io/v1"];
    let beta_only = ["--api-versions", "groupsnapshot.storage.k8s.io/v1beta1"];
    assert!(!render(&[], &[]).iter().any(|a| a == GATE), "auto, no API");
    assert!(
        !render(&[], &beta_only).iter().any(|a| a == GATE),
        "auto, v1beta1 only"
    );
    assert!(
        render(&[], &served).iter().any(|a| a == GATE),
        "auto, v1 served"
    );
    assert!(
        render(&[("groupSnapshots", "true")], &[])
            .iter()
            .any(|a| a == GATE)
    );
    assert!(
        !render(&[("groupSnapshots", "false")], &served)
            .iter()
            .any(|a| a == GATE)
    );
    let bad = helm_template(&chart, &[("groupSnapshots", "maybe")])
        .unwrap_err()
        .to_string();
    assert!(
        bad.contains("groupSnapshots") && bad.contains("auto, true or false"),
        "{bad}"
    );
}

/// deploy/default leaves the gate off (as LVMS); the component turns it on, on csi-snapshotter.
#[test]
fn the_group_snapshots_component_turns_the_gate_on_in_the_kustomize_tree() {
    assert!(
        !snapshotter_args(&render(&repo("deploy/default")).unwrap())
            .iter()
            .any(|a| a == GATE)
    );
    // An overlay as a user writes one (kustomize takes only relative paths).
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let up = "../".repeat(root.components().count().saturating_sub(1));
    let rel = |p: &str| {
        let abs = std::fs::canonicalize(repo(p)).unwrap();
        format!("{up}{}", abs.to_string_lossy().trim_start_matches('/'))
    };
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [{}]\ncomponents: [{}]\n",
            rel("deploy/default"),
            rel("deploy/components/group-snapshots")
        ),
    )
    .unwrap();
    let args = snapshotter_args(&render(dir.path()).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(args.iter().filter(|a| *a == GATE).count(), 1, "{args:?}");
}

/// OpenShift's restricted-v2 SCC assigns the uid and refuses a fixed one outside the
/// namespace's range: the operator Pod names none (the image's numeric USER is the uid elsewhere).
/// The operator Pod's spec as the chart (default values) and the kustomize tree render it.
fn operator_pod_specs() -> Vec<Value> {
    [
        helm_template(&repo("deploy/helm/lvms"), &[]).unwrap(),
        render(&repo("deploy/default")).unwrap(),
    ]
    .iter()
    .map(|objs| operator_deployment(objs)["spec"]["template"]["spec"].clone())
    .collect()
}

#[test]
fn the_operator_pod_pins_no_uid() {
    for spec in &operator_pod_specs() {
        assert!(spec["securityContext"]["runAsUser"].is_null(), "{spec}");
        assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
        for c in spec["containers"].as_array().unwrap() {
            assert!(c["securityContext"]["runAsUser"].is_null(), "{c}");
        }
    }
}

#[test]
fn every_scratch_volume_of_the_operator_is_bounded() {
    for spec in &operator_pod_specs() {
        let scratch: Vec<&Value> = spec["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| !v["emptyDir"].is_null())
            .collect();
        assert!(!scratch.is_empty(), "{spec}");
        for v in scratch {
            assert!(
                v["emptyDir"]["sizeLimit"].is_string(),
                "emptyDir {} has no sizeLimit",
                v["name"]
            );
        }
    }
}

/// The chart's ServiceMonitor and its scraper RBAC: rendered where helm's discovery finds the
/// Prometheus operator's API (or forced), the same objects as deploy/prometheus's, and never
/// where the API is missing (a ServiceMonitor there fails the install).
#[test]
fn the_service_monitor_follows_the_prometheus_operator_api_and_matches_deploy_prometheus() {
    let chart = repo("deploy/helm/lvms");
    let monitoring = |objs: Vec<Value>| -> BTreeMap<String, Value> {
        by_key(objs)
            .into_iter()
            .filter(|(k, _)| {
                k.contains("lvms-operator-metrics-monitor") || k.contains("prometheus-k8s")
            })
            .collect()
    };
    let render = |set: &[(&str, &str)], args: &[&str]| {
        monitoring(helm_template_args(&chart, set, args).unwrap_or_else(|e| panic!("{e}")))
    };
    let served = ["--api-versions", "monitoring.coreos.com/v1/ServiceMonitor"];
    assert!(render(&[], &[]).is_empty(), "auto, no API");
    let helm = render(&[], &served);
    assert_eq!(helm.len(), 4, "{:?}", helm.keys());
    assert_eq!(render(&[("serviceMonitor.enabled", "true")], &[]).len(), 4);
    assert!(render(&[("serviceMonitor.enabled", "false")], &served).is_empty());
    let kustomize = monitoring(render_kustomize("deploy/prometheus"));
    assert_eq!(
        helm.keys().collect::<Vec<_>>(),
        kustomize.keys().collect::<Vec<_>>()
    );
    for (k, want) in &kustomize {
        if let Some(d) = first_diff(&helm[k], want, "") {
            panic!("{k} differs between the chart and deploy/prometheus at {d}");
        }
    }
    // Self-signed endpoints (no serving Secrets): verification off, the token still sent.
    let insecure = render(&[("serviceMonitor.insecureSkipVerify", "true")], &served);
    let sm = &insecure["ServiceMonitor/openshift-lvm-storage/lvms-operator-metrics-monitor"];
    for e in sm["spec"]["endpoints"].as_array().unwrap() {
        assert_eq!(e["tlsConfig"]["insecureSkipVerify"], true, "{e}");
        assert!(e["bearerTokenFile"].is_string(), "{e}");
    }
}

fn render_kustomize(dir: &str) -> Vec<Value> {
    render(&repo(dir)).unwrap_or_else(|e| panic!("{e}"))
}

/// The audit's settings reach vg-manager through the operator's `--vg-manager-command`; the
/// `leaked` policy, and only it, lets vg-manager list PersistentVolumes. The dead-node grace
/// reaches the operator.
#[test]
fn the_audit_policy_reaches_vg_manager_and_grants_only_what_it_needs() {
    let chart = repo("deploy/helm/lvms");
    let objs = |set: &[(&str, &str)]| helm_template(&chart, set).unwrap_or_else(|e| panic!("{e}"));
    let manager_args = |objs: &[Value]| -> Vec<String> {
        operator_deployment(objs)["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "manager")
            .expect("manager")["args"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect()
    };
    let lists_pvs = |objs: &[Value]| {
        objs.iter()
            .filter(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == "vg-manager")
            .flat_map(|o| o["rules"].as_array().cloned().unwrap_or_default())
            .any(|r| {
                r["resources"]
                    .as_array()
                    .is_some_and(|rs| rs.iter().any(|x| x == "persistentvolumes"))
            })
    };
    let default = objs(&[]);
    assert!(
        !manager_args(&default)
            .iter()
            .any(|a| a.starts_with("--vg-manager-command")),
        "defaults: vg-manager's own defaults"
    );
    assert!(
        !lists_pvs(&default),
        "report only: no PersistentVolume access"
    );
    let leaked = objs(&[("audit.repair", "leaked"), ("audit.interval", "2m")]);
    assert!(
        manager_args(&leaked).contains(
            &"--vg-manager-command=/usr/bin/lvms vg-manager --audit-interval=2m --audit-repair=leaked"
                .to_string()
        ),
        "{:?}",
        manager_args(&leaked)
    );
    assert!(lists_pvs(&leaked));
    let bad = helm_template(&chart, &[("audit.repair", "everything")])
        .unwrap_err()
        .to_string();
    assert!(
        bad.contains("audit.repair") && bad.contains("none or leaked"),
        "{bad}"
    );

    // The dead-node grace: the operator's own flag, only when it is not the default.
    assert!(
        !manager_args(&default)
            .iter()
            .any(|a| a.starts_with("--dead-node-grace"))
    );
    let graced = objs(&[("deadNode.grace", "5m")]);
    assert!(
        manager_args(&graced).contains(&"--dead-node-grace=5m".to_string()),
        "{:?}",
        manager_args(&graced)
    );
    let bad = helm_template(&chart, &[("deadNode.grace", "five minutes")])
        .unwrap_err()
        .to_string();
    assert!(
        bad.contains("deadNode.grace") && bad.contains("duration"),
        "{bad}"
    );
}
