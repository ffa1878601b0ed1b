//! /metrics as a Prometheus in the cluster reaches it: through the chart's Services (kube-proxy
//! on the node), over HTTPS, with the token kubelet mounts into the scraper's Pod. A
//! ServiceAccount bound to the chart's `lvms-metrics-reader` reads both processes (vg-manager's
//! volume group gauges among them); one without the binding is refused.

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::Api;

use crate::ctx::{APPS, Ctx, LVMS_NS};

async fn cluster_ip(c: &Ctx, name: &str) -> String {
    Api::<Service>::namespaced(c.client.clone(), LVMS_NS)
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("Service {name}: {e}"))
        .spec
        .and_then(|s| s.cluster_ip)
        .unwrap_or_else(|| panic!("Service {name} has no ClusterIP"))
}

/// A Pod of ServiceAccount `sa` (lvms's image, for its openssl: busybox's wget speaks a TLS
/// rustls refuses, see lvms-dev's `scrape`) that GETs `/metrics` of `ips` with its own token
/// and prints each answer's status and first lines of two families (`grep` keeps it under the
/// 4 KiB termination message). Each
/// endpoint up to 10 times, 3 s apart, until it answers with an HTTP status.
fn scraper(name: &str, sa: &str, ips: &[String]) -> serde_json::Value {
    let script = format!(
        "t=$(cat /var/run/secrets/kubernetes.io/serviceaccount/token)\n\
         for ip in {}; do\n\
           echo \"== $ip\"\n\
           for i in $(seq 1 10); do\n\
             out=$(printf 'GET /metrics HTTP/1.1\\r\\nHost: x\\r\\nAuthorization: Bearer %s\\r\\nConnection: close\\r\\n\\r\\n' \"$t\" \
               | timeout 60 openssl s_client -quiet -connect \"$ip:8443\" 2>&1) && rc=0 || rc=$?\n\
             if echo \"$out\" | grep -q '^HTTP/1.1'; then break; fi\n\
             sleep 3\n\
           done\n\
           echo \"rc=$rc\"\n\
           echo \"$out\" | grep -m1 '^HTTP/1.1' || true\n\
           echo \"$out\" | grep -m1 '^topolvm_volumegroup_size_bytes' || true\n\
           echo \"$out\" | grep -m1 '^lvms_reconcile_total' || true\n\
           echo \"$out\" | grep -qE '^HTTP/1.1' || echo \"$out\" | tail -3\n\
         done",
        ips.join(" ")
    );
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": APPS},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "serviceAccountName": sa,
            "securityContext": {"runAsUser": 1000, "runAsGroup": 1000},
            "containers": [{
                "name": "scrape", "image": "localhost/lvms:dev", "imagePullPolicy": "Never",
                "command": ["sh", "-c", format!("( {script} ) >/dev/termination-log 2>&1")],
            }]
        }
    })
}

pub async fn both_endpoints_serve_a_reader_and_refuse_a_stranger(c: &mut Ctx) {
    // The chart ships the role; the helper binds the scraper to it (and would make it if not).
    Api::<ClusterRole>::all(c.client.clone())
        .get(lvms_testkit::metrics::READER_ROLE)
        .await
        .expect("the chart's ClusterRole lvms-metrics-reader");
    lvms_testkit::metrics::token(
        &c.client,
        APPS,
        "scraper",
        Some(lvms_testkit::metrics::READER_ROLE),
    )
    .await;
    lvms_testkit::metrics::token(&c.client, APPS, "stranger", None).await;
    let ips = vec![
        cluster_ip(c, "vg-manager-metrics-service").await,
        cluster_ip(c, "lvms-operator-metrics-service").await,
    ];
    let out = c.run_pod(scraper("scrape-reader", "scraper", &ips)).await;
    let (vgm, op) = out
        .split_once(&format!("== {}", ips[1]))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        vgm.contains("topolvm_volumegroup_size_bytes{") && vgm.contains("node=\"lvms-node\""),
        "vg-manager's gauges through vg-manager-metrics-service:\n{out}"
    );
    assert!(
        op.contains("lvms_reconcile_total{"),
        "the operator's passes through lvms-operator-metrics-service:\n{out}"
    );
    let out = c
        .run_pod(scraper("scrape-stranger", "stranger", &ips))
        .await;
    assert_eq!(
        out.matches("403 Forbidden").count(),
        2,
        "both refuse a ServiceAccount without lvms-metrics-reader:\n{out}"
    );
    assert!(!out.contains("lvms_reconcile_total"), "{out}");
}
