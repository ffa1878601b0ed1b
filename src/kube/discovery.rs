//! Which optional APIs this cluster serves: discovered at start-up, never assumed.

use kube::Client;
use kube::discovery::{ApiGroup, Discovery};

use crate::kube::kinds::{GROUP_SNAPSHOT_GROUP, GROUP_SNAPSHOT_VERSION};

/// APIs discovered at start-up (never assumed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// `snapshot.storage.k8s.io/v1` VolumeSnapshotClass is served.
    pub snapshots: bool,
    /// `groupsnapshot.storage.k8s.io/v1` VolumeGroupSnapshotClass is served (external-snapshotter
    /// v8.6 serves v1, v1beta2 and v1beta1; v8.4–v8.5 only the betas, which lvms does not write).
    pub group_snapshots: bool,
    /// `security.openshift.io/v1` SecurityContextConstraints is served.
    pub scc: bool,
}

/// The API groups discovery asks about (and only those: one request per group version).
const GROUPS: [&str; 3] = [
    "snapshot.storage.k8s.io",
    GROUP_SNAPSHOT_GROUP,
    "security.openshift.io",
];

impl Capabilities {
    /// Capabilities from `served(group, version, kind)`: each kind at the version lvms writes.
    pub fn from_served(served: impl Fn(&str, &str, &str) -> bool) -> Capabilities {
        Capabilities {
            snapshots: served("snapshot.storage.k8s.io", "v1", "VolumeSnapshotClass"),
            group_snapshots: served(
                GROUP_SNAPSHOT_GROUP,
                GROUP_SNAPSHOT_VERSION,
                "VolumeGroupSnapshotClass",
            ),
            scc: served("security.openshift.io", "v1", "SecurityContextConstraints"),
        }
    }
}

pub async fn capabilities(client: &Client) -> Result<Capabilities, kube::Error> {
    let discovery = Discovery::new(client.clone()).filter(&GROUPS).run().await?;
    Ok(Capabilities::from_served(|group, version, kind| {
        discovery
            .groups()
            .filter(|g: &&ApiGroup| g.name() == group)
            .any(|g| {
                g.versioned_resources(version)
                    .iter()
                    .any(|(r, _)| r.kind == kind)
            })
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_counts_only_at_the_version_lvms_writes() {
        // external-snapshotter v8.6: v1, v1beta2 (storage), v1beta1 of the group API.
        let v86 = [
            ("snapshot.storage.k8s.io", "v1", "VolumeSnapshotClass"),
            (GROUP_SNAPSHOT_GROUP, "v1", "VolumeGroupSnapshotClass"),
            (GROUP_SNAPSHOT_GROUP, "v1beta2", "VolumeGroupSnapshotClass"),
            (GROUP_SNAPSHOT_GROUP, "v1beta1", "VolumeGroupSnapshotClass"),
        ];
        let caps = Capabilities::from_served(|g, v, k| v86.contains(&(g, v, k)));
        assert_eq!(
            caps,
            Capabilities {
                snapshots: true,
                group_snapshots: true,
                scc: false,
            }
        );
        // external-snapshotter v8.4–v8.5 served the group API at v1beta2 and v1beta1 only.
        let old = [
            ("snapshot.storage.k8s.io", "v1", "VolumeSnapshotClass"),
            (GROUP_SNAPSHOT_GROUP, "v1beta2", "VolumeGroupSnapshotClass"),
            (GROUP_SNAPSHOT_GROUP, "v1beta1", "VolumeGroupSnapshotClass"),
        ];
        let caps = Capabilities::from_served(|g, v, k| old.contains(&(g, v, k)));
        assert!(caps.snapshots && !caps.group_snapshots);
        assert_eq!(
            Capabilities::from_served(|_, _, _| false),
            Capabilities::default()
        );
    }

    #[test]
    fn every_group_asked_about_is_one_discovery_fetches() {
        let asked = std::cell::RefCell::new(Vec::new());
        Capabilities::from_served(|g, _, _| {
            asked.borrow_mut().push(g.to_owned());
            false
        });
        for g in asked.into_inner() {
            assert!(
                GROUPS.contains(&g.as_str()),
                "{g} is filtered out of discovery"
            );
        }
    }
}
