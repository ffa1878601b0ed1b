//! StorageClass `lvms-<class>` per device class (LVMS unit `topolvm-storageclass`).

use std::collections::BTreeMap;

use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::api::{LVMCluster, ReclaimPolicy, StorageClassOptions, VolumeBindingMode};
use crate::operator::desired::csi_driver::CSI_DRIVER_NAME;
use crate::operator::owner::set_owner_labels;
use crate::operator::world::World;

/// Parameter naming the lvmd device class; set by the operator, never by the user.
pub const DEVICE_CLASS_PARAM: &str = "topolvm.io/device-class";
/// Parameter naming the filesystem; set by the operator, never by the user.
pub const FSTYPE_PARAM: &str = "csi.storage.k8s.io/fstype";
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
pub const DESCRIPTION_ANNOTATION: &str = "description";
pub const DESCRIPTION: &str = "Provides RWO and RWOP Filesystem & Block volumes";
/// Field manager LVMS applies StorageClasses with (server-side apply, forced).
pub const FIELD_MANAGER: &str = "lvms-operator";

fn is_default_class(sc: &StorageClass) -> bool {
    sc.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
        .is_some_and(|v| v == "true")
}

/// The desired StorageClasses. The default-class annotation is always written, "true" or
/// "false" (so the field manager owns it and can flip it later); it is "true" only for a class
/// marked `default` when no other StorageClass in the cluster is already default. Our own
/// StorageClasses do not count as "other": this pass rewrites their annotation anyway, which
/// reaches in one pass the state LVMS reaches over two when the default moves between classes.
pub fn storage_classes(cluster: &LVMCluster, world: &World) -> Vec<StorageClass> {
    let classes = &cluster.spec.storage.device_classes;
    let ours: Vec<String> = classes.iter().map(|c| c.storage_class_name()).collect();
    let foreign_default = world.storage_classes.iter().any(|sc| {
        is_default_class(sc)
            && sc
                .metadata
                .name
                .as_ref()
                .is_none_or(|name| !ours.contains(name))
    });
    // At most one of ours may be default, even if the spec (wrongly) marks several.
    let mut default_taken = foreign_default;
    classes
        .iter()
        .map(|class| {
            let options = class.storage_class_options.clone().unwrap_or_default();
            let is_default = class.default && !default_taken;
            default_taken |= is_default;
            storage_class(
                cluster,
                class.storage_class_name(),
                &class.name,
                class.fstype.as_str(),
                &options,
                is_default,
            )
        })
        .collect()
}

fn storage_class(
    cluster: &LVMCluster,
    name: String,
    device_class: &str,
    fstype: &str,
    options: &StorageClassOptions,
    is_default: bool,
) -> StorageClass {
    // User parameters first, then the operator's keys so they always win.
    let mut parameters = options.additional_parameters.clone();
    parameters.insert(DEVICE_CLASS_PARAM.to_owned(), device_class.to_owned());
    parameters.insert(FSTYPE_PARAM.to_owned(), fstype.to_owned());
    // User labels first, owner labels last so ownership cannot be spoofed.
    let mut labels = options.additional_labels.clone();
    set_owner_labels(&mut labels, cluster);
    let reclaim = match options.reclaim_policy.unwrap_or_default() {
        ReclaimPolicy::Delete => "Delete",
        ReclaimPolicy::Retain => "Retain",
    };
    let binding = match options.volume_binding_mode.unwrap_or_default() {
        VolumeBindingMode::WaitForFirstConsumer => "WaitForFirstConsumer",
        VolumeBindingMode::Immediate => "Immediate",
    };
    StorageClass {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([
                (DESCRIPTION_ANNOTATION.to_owned(), DESCRIPTION.to_owned()),
                (DEFAULT_CLASS_ANNOTATION.to_owned(), is_default.to_string()),
            ])),
            ..Default::default()
        },
        provisioner: CSI_DRIVER_NAME.to_owned(),
        reclaim_policy: Some(reclaim.to_owned()),
        volume_binding_mode: Some(binding.to_owned()),
        allow_volume_expansion: Some(true),
        parameters: Some(parameters),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{DeviceClass, DeviceFilesystemType, LVMClusterSpec, Storage};
    use crate::operator::nodes::tests::class;
    use crate::operator::owner::owned_by;
    use crate::operator::owner::tests::cluster_with;
    use std::sync::Arc;

    fn cluster(classes: Vec<DeviceClass>) -> LVMCluster {
        cluster_with(LVMClusterSpec {
            tolerations: vec![],
            storage: Storage {
                device_classes: classes,
            },
        })
    }

    fn existing_sc(name: &str, default: Option<&str>) -> Arc<StorageClass> {
        let mut sc = StorageClass::default();
        sc.metadata.name = Some(name.into());
        if let Some(v) = default {
            sc.metadata.annotations = Some(BTreeMap::from([(
                DEFAULT_CLASS_ANNOTATION.into(),
                v.into(),
            )]));
        }
        Arc::new(sc)
    }

    fn default_annotation(sc: &StorageClass) -> &str {
        &sc.metadata.annotations.as_ref().unwrap()[DEFAULT_CLASS_ANNOTATION]
    }

    fn default_class(name: &str) -> DeviceClass {
        DeviceClass {
            default: true,
            ..class(name, None)
        }
    }

    #[test]
    fn defaults_match_lvms() {
        let c = cluster(vec![class("vg1", None)]);
        let scs = storage_classes(&c, &World::default());
        assert_eq!(scs.len(), 1);
        let sc = &scs[0];
        assert_eq!(sc.metadata.name.as_deref(), Some("lvms-vg1"));
        assert_eq!(sc.provisioner, "topolvm.io");
        assert_eq!(sc.allow_volume_expansion, Some(true));
        assert_eq!(sc.reclaim_policy.as_deref(), Some("Delete"));
        assert_eq!(
            sc.volume_binding_mode.as_deref(),
            Some("WaitForFirstConsumer")
        );
        let params = sc.parameters.as_ref().unwrap();
        assert_eq!(params[DEVICE_CLASS_PARAM], "vg1");
        assert_eq!(params[FSTYPE_PARAM], "xfs");
        assert_eq!(params.len(), 2);
        // Not marked default: the annotation is still written, as "false".
        assert_eq!(default_annotation(sc), "false");
        assert_eq!(
            sc.metadata.annotations.as_ref().unwrap()["description"],
            DESCRIPTION
        );
        assert!(owned_by(sc.metadata.labels.as_ref(), &c));
    }

    #[test]
    fn options_are_applied_and_operator_params_win() {
        let mut dc = class("vg1", None);
        dc.fstype = DeviceFilesystemType::Ext4;
        dc.storage_class_options = Some(StorageClassOptions {
            reclaim_policy: Some(ReclaimPolicy::Retain),
            volume_binding_mode: Some(VolumeBindingMode::Immediate),
            additional_parameters: BTreeMap::from([
                ("custom".into(), "1".into()),
                (FSTYPE_PARAM.into(), "btrfs".into()),
                (DEVICE_CLASS_PARAM.into(), "other".into()),
            ]),
            additional_labels: BTreeMap::from([
                ("team".into(), "storage".into()),
                ("owned-by.topolvm.io/uid".into(), "spoof".into()),
            ]),
        });
        let sc = storage_classes(&cluster(vec![dc]), &World::default()).remove(0);
        assert_eq!(sc.reclaim_policy.as_deref(), Some("Retain"));
        assert_eq!(sc.volume_binding_mode.as_deref(), Some("Immediate"));
        let params = sc.parameters.unwrap();
        assert_eq!(params["custom"], "1");
        assert_eq!(params[FSTYPE_PARAM], "ext4");
        assert_eq!(params[DEVICE_CLASS_PARAM], "vg1");
        let labels = sc.metadata.labels.unwrap();
        assert_eq!(labels["team"], "storage");
        assert_eq!(labels["owned-by.topolvm.io/uid"], "0000-uid");
    }

    #[test]
    fn default_class_gets_annotation_when_no_other_default() {
        let world = World {
            storage_classes: vec![
                existing_sc("standard", Some("false")),
                existing_sc("x", None),
            ],
            ..Default::default()
        };
        let scs = storage_classes(
            &cluster(vec![default_class("vg1"), class("vg2", None)]),
            &world,
        );
        assert_eq!(default_annotation(&scs[0]), "true");
        assert_eq!(default_annotation(&scs[1]), "false");
    }

    #[test]
    fn other_default_storage_class_blocks_annotation() {
        let world = World {
            storage_classes: vec![existing_sc("standard", Some("true"))],
            ..Default::default()
        };
        let scs = storage_classes(&cluster(vec![default_class("vg1")]), &world);
        assert_eq!(default_annotation(&scs[0]), "false");
    }

    #[test]
    fn our_own_default_is_kept() {
        let world = World {
            storage_classes: vec![existing_sc("lvms-vg1", Some("true"))],
            ..Default::default()
        };
        let scs = storage_classes(&cluster(vec![default_class("vg1")]), &world);
        assert_eq!(default_annotation(&scs[0]), "true");
    }

    #[test]
    fn default_moves_between_our_classes_in_one_pass() {
        // lvms-old was default; the user made vg-new the default class.
        let world = World {
            storage_classes: vec![existing_sc("lvms-old", Some("true"))],
            ..Default::default()
        };
        let scs = storage_classes(
            &cluster(vec![class("old", None), default_class("new")]),
            &world,
        );
        assert_eq!(default_annotation(&scs[0]), "false");
        assert_eq!(default_annotation(&scs[1]), "true");
    }

    #[test]
    fn at_most_one_of_ours_is_default() {
        let scs = storage_classes(
            &cluster(vec![default_class("a"), default_class("b")]),
            &World::default(),
        );
        assert_eq!(default_annotation(&scs[0]), "true");
        assert_eq!(default_annotation(&scs[1]), "false");
    }
}
