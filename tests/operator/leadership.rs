//! Leader election: a second operator waits for the Lease; when the leader dies it takes
//! over with a higher epoch, which every one of its intents carries. SIGTERM is graceful.

use std::time::Duration;

use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams};
use lvms_journal::{Body, Journal};

use lvms_testkit::fixtures::thin;
use lvms_testkit::journal::open_intents;
use lvms_testkit::{Scenario, eventually};

const T: Duration = Duration::from_secs(45);

fn epochs(dir: &std::path::Path) -> Vec<u64> {
    let j = Journal::open_copy(dir.join("operator")).expect("journal");
    j.iter()
        .filter_map(Result::ok)
        .filter_map(|r| match r.body {
            Body::Intent(i) => Some(i.lease_epoch),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_with_a_higher_epoch_when_the_leader_dies() {
    let s = Scenario::new("op-lease").await;
    let mut leader = s.operator(&[], &["--leader-elect"]);
    s.create_cluster(thin("my-lvmcluster")).await;
    let scs: Api<StorageClass> = Api::all(s.client.clone());
    eventually(T, || async { scs.get_opt("lvms-vg1").await.unwrap() })
        .await
        .expect("leader reconciles");
    assert_eq!(leader.diagnostics_get("/readyz").unwrap().0, 200);

    // The standby has its own journal (its own pod) and does nothing while the lease is held.
    let standby_dir = s.dir.join("standby-journal");
    let standby = s.operator_with_journal(&standby_dir, &[], &["--leader-elect"]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        standby.diagnostics_get("/readyz").unwrap().0,
        503,
        "standby claims readiness"
    );
    assert!(!standby_dir.join("operator").exists() || epochs(&standby_dir).is_empty());

    leader.kill(); // SIGKILL: no lease release, the standby waits for it to expire
    scs.delete("lvms-vg1", &DeleteParams::default())
        .await
        .expect("delete SC");
    eventually(T, || async { scs.get_opt("lvms-vg1").await.unwrap() })
        .await
        .expect("the new leader recreated the StorageClass");
    let leader_epochs = epochs(&s.journal_dir);
    let standby_epochs = epochs(&standby_dir);
    let old = leader_epochs.iter().max().copied().unwrap_or_default();
    assert!(old >= 1, "leader intents carry no epoch: {leader_epochs:?}");
    assert!(
        !standby_epochs.is_empty() && standby_epochs.iter().all(|e| *e > old),
        "new leader epochs {standby_epochs:?} not above {old}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_shuts_down_gracefully() {
    let s = Scenario::new("op-term").await;
    let mut op = s.operator(&[], &[]);
    s.create_cluster(thin("my-lvmcluster")).await;
    let scs: Api<StorageClass> = Api::all(s.client.clone());
    eventually(T, || async { scs.get_opt("lvms-vg1").await.unwrap() })
        .await
        .expect("reconciled");
    let status = op
        .terminate(Duration::from_secs(10))
        .expect("no exit within 10 s of SIGTERM");
    assert!(
        status.success(),
        "exit status {status:?}\n{}",
        op.log_text()
    );
    assert!(op.log_text().contains("shutting down"));
    assert_eq!(open_intents(&s.journal_dir), 0);
}
