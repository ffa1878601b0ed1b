//! Leader election on a Lease (kube-lease-manager). The lease's transition count becomes the
//! journal epoch, so a stale leader's intents are refused and recognisable in a post-mortem.

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;
use tracing::info;

/// LVMS's leader election id.
pub const LEASE_NAME: &str = "1136b8a6.topolvm.io";

pub struct Leadership {
    /// Flips to false when the lease is lost.
    pub leading: watch::Receiver<bool>,
    pub epoch: u64,
    _task: tokio::task::JoinHandle<
        Result<kube_lease_manager::LeaseManager, kube_lease_manager::LeaseManagerError>,
    >,
}

/// Block until this process holds the lease.
pub async fn acquire(
    client: &Client,
    namespace: &str,
    identity: &str,
) -> Result<Leadership, anyhow::Error> {
    let manager = LeaseManagerBuilder::new(client.clone(), LEASE_NAME)
        .with_namespace(namespace)
        .with_identity(identity)
        .with_duration(15)
        .with_grace(5)
        .with_field_manager("lvms-operator-lease")
        .build()
        .await?;
    let (mut leading, task) = manager.watch().await;
    info!(lease = LEASE_NAME, identity, "waiting for leadership");
    while !*leading.borrow_and_update() {
        leading.changed().await?;
    }
    let lease = Api::<Lease>::namespaced(client.clone(), namespace)
        .get(LEASE_NAME)
        .await?;
    // The Lease was just read (errors propagate); an absent count is "no transition yet".
    let transitions = lease
        .spec
        .and_then(|s| s.lease_transitions)
        .unwrap_or_default();
    let epoch = u64::try_from(transitions).unwrap_or_default() + 1;
    info!(lease = LEASE_NAME, identity, epoch, "leading");
    Ok(Leadership {
        leading,
        epoch,
        _task: task,
    })
}

/// Resolves when `leadership` is lost; never without leader election.
pub async fn lost(leadership: Option<&mut Leadership>) {
    match leadership {
        Some(l) => while l.leading.changed().await.is_ok() && *l.leading.borrow() {},
        None => std::future::pending().await,
    }
}
