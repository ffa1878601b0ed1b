//! OpenShift SecurityContextConstraints `lvms-vgmanager` (LVMS unit `topolvm-scc`), only where
//! `security.openshift.io/v1` is served. It lets the vg-manager service account run privileged
//! with host PID/IPC and hostPath volumes.

use kube::api::{ApiResource, DynamicObject};
use serde_json::json;

use crate::api::LVMCluster;
use crate::operator::desired::daemonset::VG_MANAGER_SERVICE_ACCOUNT;
use crate::operator::owner::owner_labels;
use crate::operator::world::World;

pub const SCC_NAME: &str = "lvms-vgmanager";

pub fn scc_resource() -> ApiResource {
    ApiResource {
        group: "security.openshift.io".to_owned(),
        version: "v1".to_owned(),
        api_version: "security.openshift.io/v1".to_owned(),
        kind: "SecurityContextConstraints".to_owned(),
        plural: "securitycontextconstraints".to_owned(),
    }
}

/// The SCC's `users`; LVMS resets this field on every pass when someone edits it.
pub fn scc_users(namespace: &str) -> Vec<String> {
    vec![format!(
        "system:serviceaccount:{namespace}:{VG_MANAGER_SERVICE_ACCOUNT}"
    )]
}

/// The desired SCC, or None unless the SCC API is served.
pub fn vg_manager_scc(cluster: &LVMCluster, world: &World) -> Option<DynamicObject> {
    if !world.capabilities.scc {
        return None;
    }
    // Field for field what LVMS sets; the three nulls are required-but-nullable in the SCC CRD.
    let data = json!({
        "priority": null,
        "allowPrivilegedContainer": true,
        "allowHostNetwork": false,
        "allowHostDirVolumePlugin": true,
        "allowHostPorts": false,
        "allowHostPID": true,
        "allowHostIPC": true,
        "readOnlyRootFilesystem": false,
        "allowedCapabilities": null,
        "defaultAddCapabilities": null,
        "requiredDropCapabilities": [],
        "runAsUser": { "type": "RunAsAny" },
        "seLinuxContext": { "type": "MustRunAs" },
        "fsGroup": { "type": "MustRunAs" },
        "supplementalGroups": { "type": "RunAsAny" },
        "volumes": ["configMap", "emptyDir", "hostPath", "secret"],
        "users": scc_users(&world.settings.namespace),
    });
    let mut scc = DynamicObject::new(SCC_NAME, &scc_resource()).data(data);
    scc.metadata.labels = Some(owner_labels(cluster));
    Some(scc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::owner::owned_by;
    use crate::operator::owner::tests::cluster_with;
    use crate::operator::world::{Capabilities, OperatorSettings};

    fn world(scc: bool) -> World {
        World {
            settings: OperatorSettings {
                namespace: "openshift-lvm-storage".into(),
                ..Default::default()
            },
            capabilities: Capabilities {
                scc,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn scc_matches_lvms() {
        let c = cluster_with(Default::default());
        let scc = vg_manager_scc(&c, &world(true)).expect("scc API served");
        assert_eq!(scc.metadata.name.as_deref(), Some("lvms-vgmanager"));
        assert!(scc.metadata.namespace.is_none());
        assert!(owned_by(scc.metadata.labels.as_ref(), &c));
        let d = &scc.data;
        assert_eq!(d["allowPrivilegedContainer"], true);
        assert_eq!(d["allowHostPID"], true);
        assert_eq!(d["allowHostIPC"], true);
        assert_eq!(d["allowHostDirVolumePlugin"], true);
        assert_eq!(d["allowHostNetwork"], false);
        assert_eq!(d["allowHostPorts"], false);
        assert_eq!(d["runAsUser"]["type"], "RunAsAny");
        assert_eq!(d["seLinuxContext"]["type"], "MustRunAs");
        assert_eq!(d["fsGroup"]["type"], "MustRunAs");
        assert_eq!(d["supplementalGroups"]["type"], "RunAsAny");
        assert_eq!(
            d["volumes"],
            json!(["configMap", "emptyDir", "hostPath", "secret"])
        );
        assert_eq!(
            d["users"],
            json!(["system:serviceaccount:openshift-lvm-storage:vg-manager"])
        );
        let v = serde_json::to_value(&scc).unwrap();
        assert_eq!(v["apiVersion"], "security.openshift.io/v1");
        assert_eq!(v["allowHostPID"], true);
    }

    #[test]
    fn no_scc_off_openshift() {
        assert!(vg_manager_scc(&cluster_with(Default::default()), &world(false)).is_none());
    }
}
