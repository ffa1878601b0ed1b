//! One LVMVolumeGroup per device class (LVMS unit `lvmvg-manager`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::{LVMCluster, LVMVolumeGroup, LVMVolumeGroupSpec};
use crate::operator::owner::controller_owner_ref;
use crate::operator::world::World;

/// Finalizer LVMS kept on volume groups before per-node finalizers (up to 4.15); it is removed
/// whenever found so old installations can still be deleted.
pub const LEGACY_VG_FINALIZER: &str = "lvm.openshift.io/lvmvolumegroup";

/// The desired volume groups: named after their class, in the operator namespace, spec copied
/// from the class. A lone class is always the default one.
pub fn volume_groups(cluster: &LVMCluster, world: &World) -> Vec<LVMVolumeGroup> {
    let classes = &cluster.spec.storage.device_classes;
    classes
        .iter()
        .map(|class| LVMVolumeGroup {
            metadata: ObjectMeta {
                name: Some(class.name.clone()),
                namespace: Some(world.settings.namespace.clone()),
                owner_references: Some(vec![controller_owner_ref(cluster)]),
                ..Default::default()
            },
            spec: LVMVolumeGroupSpec {
                device_selector: class.device_selector.clone(),
                node_selector: class.node_selector.clone(),
                thin_pool_config: class.thin_pool_config.clone(),
                raid_config: class.raid_config.clone(),
                default: classes.len() == 1 || class.default,
                device_discovery_policy: class.device_discovery_policy,
            },
            status: None,
        })
        .collect()
}

/// `finalizers` without the legacy one, or None when it was not there (nothing to update).
pub fn without_legacy_finalizer(finalizers: &[String]) -> Option<Vec<String>> {
    finalizers
        .iter()
        .any(|f| f == LEGACY_VG_FINALIZER)
        .then(|| {
            finalizers
                .iter()
                .filter(|f| *f != LEGACY_VG_FINALIZER)
                .cloned()
                .collect()
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{DeviceSelector, LVMClusterSpec, Storage, ThinPoolConfig};
    use crate::operator::nodes::tests::{class, req, selector};
    use crate::operator::owner::tests::cluster_with;
    use crate::operator::world::OperatorSettings;

    fn world() -> World {
        World {
            settings: OperatorSettings {
                namespace: "lvms-ns".into(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn one_group_per_class_with_copied_spec() {
        let mut thin = class("thin", Some(selector(vec![vec![req("z", "In", &["a"])]])));
        thin.device_selector = Some(DeviceSelector {
            paths: vec!["/dev/sdb".into()],
            ..Default::default()
        });
        thin.thin_pool_config = Some(ThinPoolConfig {
            name: "pool".into(),
            size_percent: 90,
            overprovision_ratio: 10,
            ..Default::default()
        });
        thin.default = true;
        let thick = class("thick", None);
        let cluster = cluster_with(LVMClusterSpec {
            tolerations: vec![],
            storage: Storage {
                device_classes: vec![thin.clone(), thick],
            },
        });
        let vgs = volume_groups(&cluster, &world());
        assert_eq!(vgs.len(), 2);
        let vg = &vgs[0];
        assert_eq!(vg.metadata.name.as_deref(), Some("thin"));
        assert_eq!(vg.metadata.namespace.as_deref(), Some("lvms-ns"));
        assert_eq!(vg.spec.device_selector, thin.device_selector);
        assert_eq!(vg.spec.node_selector, thin.node_selector);
        assert_eq!(vg.spec.thin_pool_config, thin.thin_pool_config);
        assert!(vg.spec.default);
        assert!(!vgs[1].spec.default, "explicitly non-default among two");
        let owner = &vg.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(owner.uid, "0000-uid");
        assert_eq!(owner.controller, Some(true));
        assert!(vg.metadata.finalizers.is_none());
    }

    #[test]
    fn single_class_is_default() {
        let cluster = cluster_with(LVMClusterSpec {
            tolerations: vec![],
            storage: Storage {
                device_classes: vec![class("only", None)],
            },
        });
        assert!(volume_groups(&cluster, &world())[0].spec.default);
    }

    #[test]
    fn legacy_finalizer_is_stripped() {
        let fins = vec![
            "cleanup.vgmanager.node.topolvm.io/n1".to_owned(),
            LEGACY_VG_FINALIZER.to_owned(),
        ];
        assert_eq!(
            without_legacy_finalizer(&fins),
            Some(vec!["cleanup.vgmanager.node.topolvm.io/n1".to_owned()])
        );
        assert_eq!(without_legacy_finalizer(&fins[..1]), None);
    }
}
