//! Which optional APIs this cluster serves: discovered at start-up, never assumed.

use kube::Client;
use kube::discovery::{ApiGroup, Discovery};

/// APIs discovered at start-up (never assumed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// `snapshot.storage.k8s.io/v1` VolumeSnapshotClass is served.
    pub snapshots: bool,
    /// `security.openshift.io/v1` SecurityContextConstraints is served.
    pub scc: bool,
}

pub async fn capabilities(client: &Client) -> Result<Capabilities, kube::Error> {
    let discovery = Discovery::new(client.clone())
        .filter(&["snapshot.storage.k8s.io", "security.openshift.io"])
        .run()
        .await?;
    let serves = |group: &str, kind: &str| {
        discovery
            .groups()
            .filter(|g: &&ApiGroup| g.name() == group)
            .any(|g| g.recommended_kind(kind).is_some())
    };
    Ok(Capabilities {
        snapshots: serves("snapshot.storage.k8s.io", "VolumeSnapshotClass"),
        scc: serves("security.openshift.io", "SecurityContextConstraints"),
    })
}
