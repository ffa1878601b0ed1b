//! A panicking unit actor is restarted and the cluster converges; a restart storm stops at the
//! intensity limit with a clear log line and a failing /readyz.

use std::time::Duration;

use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::Api;

use lvms_testkit::fixtures::thin;
use lvms_testkit::{Scenario, eventually};

const T: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_unit_is_restarted_and_the_cluster_converges() {
    let s = Scenario::new("op-panic").await;
    let op = s.operator(&[("LVMS_PANIC_IN", "topolvm-storageclass@1")], &[]);
    s.create_cluster(thin("my-lvmcluster")).await;
    let scs: Api<StorageClass> = Api::all(s.client.clone());
    eventually(T, || async { scs.get_opt("lvms-vg1").await.unwrap() })
        .await
        .expect("StorageClass created by the restarted actor");
    let log = op.log_text();
    assert!(
        log.contains("injected panic"),
        "the panic did not happen:\n{log}"
    );
    assert!(
        log.contains("child exited; restarting"),
        "no restart logged:\n{log}"
    );
    assert_eq!(op.diagnostics_get("/readyz").unwrap().0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_storm_stops_at_the_intensity_limit() {
    let s = Scenario::new("op-storm").await;
    let op = s.operator(
        &[("LVMS_PANIC_IN", "topolvm-storageclass@always")],
        &["--max-restarts", "3", "--restart-window-secs", "60"],
    );
    s.create_cluster(thin("my-lvmcluster")).await;
    let body = eventually(T, || async {
        match op.diagnostics_get("/readyz") {
            Ok((503, body)) if body.contains("restart intensity exceeded") => Some(body),
            _ => None,
        }
    })
    .await
    .expect("/readyz never failed after the restart storm");
    assert!(body.contains("topolvm-storageclass"), "{body}");
    assert!(op.log_text().contains("restart intensity exceeded"));
    assert_eq!(
        op.diagnostics_get("/healthz").unwrap().0,
        200,
        "the process must stay up to report"
    );
}
