//! `/metrics` of a running operator: reconcile passes counted per unit as a cluster is
//! reconciled, journal gauges read at scrape time, and a supervisor restart counted.

use std::time::Duration;

use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use kube::api::Api;
use lvms::telemetry::metrics::exposition::{Exposition, parse};
use lvms_testkit::dev::operator::OperatorProcess;

use lvms_testkit::fixtures::thin;
use lvms_testkit::kubelet::{create_node, register_csi_node};
use lvms_testkit::{Scenario, eventually};

const T: Duration = Duration::from_secs(30);

/// Scrape and parse strictly; the raw text is kept in the scenario dir for a look.
fn scrape(op: &OperatorProcess, token: &str, keep: &std::path::Path) -> Exposition {
    let (code, body) = op.metrics_get(token).expect("GET /metrics");
    assert_eq!(code, 200, "{body}");
    std::fs::write(keep, &body).expect("keeping the scrape");
    parse(&body).unwrap_or_else(|e| panic!("{e}\n{body}"))
}

fn passes(e: &Exposition, unit: &str) -> f64 {
    e.value("lvms_reconcile_total", &[("unit", unit)])
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_passes_journal_and_restarts() {
    let s = Scenario::new("op-metrics").await;
    let c = &s.client;
    create_node(c, "node-a", false).await;
    register_csi_node(c, "node-a", true).await;
    // One injected panic: the restart must show in lvms_actor_restarts_total.
    let op = s.operator(&[("LVMS_PANIC_IN", "topolvm-storageclass@1")], &[]);
    eventually(T, || async {
        matches!(op.diagnostics_get("/readyz"), Ok((200, _))).then_some(())
    })
    .await
    .expect("/readyz");
    let token = s.metrics_token().await;
    let before = scrape(&op, &token, &s.dir.join("metrics-before.txt"));
    assert_eq!(before.kind("lvms_reconcile"), Some("counter"));
    assert!(
        before.value("lvms_journal_open_intents", &[]).is_some(),
        "the journal gauge is served from the start"
    );

    s.create_cluster(thin("my-lvmcluster")).await;
    eventually(T, || async {
        Api::<CSIDriver>::all(c.clone())
            .get_opt("topolvm.io")
            .await
            .unwrap()
    })
    .await
    .expect("CSIDriver");
    eventually(T, || async {
        Api::<StorageClass>::all(c.clone())
            .get_opt("lvms-vg1")
            .await
            .unwrap()
    })
    .await
    .expect("StorageClass from the restarted actor");

    let units = [
        "topolvm-csi-driver",
        "topolvm-storageclass",
        "lvmcluster",
        "lvmvg-manager",
        "status",
    ];
    let after = eventually(T, || async {
        let e = scrape(&op, &token, &s.dir.join("metrics-after.txt"));
        units
            .iter()
            .all(|u| passes(&e, u) > passes(&before, u))
            .then_some(e)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "pass counters did not grow for all of {units:?}; last scrape in {}",
            s.dir.join("metrics-after.txt").display()
        )
    });
    for u in units {
        assert!(
            after
                .value("lvms_reconcile_duration_seconds_count", &[("unit", u)])
                .unwrap_or(0.0)
                >= passes(&after, u),
            "one duration per pass of {u}"
        );
    }
    assert_eq!(
        after.value(
            "lvms_actor_restarts_total",
            &[("child", "topolvm-storageclass")]
        ),
        Some(1.0),
        "one injected panic, one restart"
    );
    let open = after
        .value("lvms_journal_open_intents", &[])
        .expect("lvms_journal_open_intents");
    assert!(open >= 0.0);
    let size = after
        .value("lvms_journal_size_bytes", &[])
        .expect("lvms_journal_size_bytes");
    assert!(size > 0.0, "journal size {size}");
    // Intents are write-ahead: flushed appends happened while objects were applied.
    assert!(
        after
            .value(
                "lvms_journal_append_duration_seconds_count",
                &[("flushed", "true")]
            )
            .unwrap_or(0.0)
            > 0.0
    );
    assert_eq!(
        after.named("topolvm_volumegroup_size_bytes").count(),
        0,
        "node gauges belong to vg-manager"
    );
    // Its API requests, by verb and resource as the API server names them: the StorageClass
    // was applied (a patch) and the caches were listed and watched.
    assert!(
        after
            .value(
                "lvms_kube_api_requests_total",
                &[("verb", "patch"), ("resource", "storageclasses")]
            )
            .unwrap_or(0.0)
            >= 1.0
    );
    for verb in ["list", "watch"] {
        assert!(
            after
                .value(
                    "lvms_kube_api_requests_total",
                    &[("verb", verb), ("resource", "nodes")]
                )
                .unwrap_or(0.0)
                >= 1.0,
            "{verb} nodes"
        );
    }
}
