//! CRDs install and are served; the samples are accepted and come back with LVMS's defaults.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams};
use lvms::api::{
    ChunkSizeCalculationPolicy, DeviceFilesystemType, LVMCluster, MetadataSizePolicy,
    ReclaimPolicy, VolumeBindingMode,
};

use lvms_testkit::{TestNs, client};

fn sample(name: &str) -> LVMCluster {
    let path = format!("{}/deploy/samples/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[tokio::test]
async fn every_crd_is_established() {
    lvms_testkit::env();
    let api: Api<CustomResourceDefinition> = Api::all(client().await);
    for crd in lvms::api::crd::all().unwrap() {
        let name = crd.metadata.name.unwrap();
        let live = api
            .get(&name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let conditions = live.status.and_then(|s| s.conditions).unwrap_or_default();
        for wanted in ["Established", "NamesAccepted"] {
            assert!(
                conditions
                    .iter()
                    .any(|c| c.type_ == wanted && c.status == "True"),
                "{name} is not {wanted}: {conditions:?}"
            );
        }
    }
}

async fn apply_sample(ns: &TestNs, file: &str) -> LVMCluster {
    let api: Api<LVMCluster> = Api::namespaced(ns.client.clone(), &ns.name);
    let mut obj = sample(file);
    obj.metadata.namespace = Some(ns.name.clone());
    let name = obj.metadata.name.clone().unwrap();
    api.patch(&name, &PatchParams::apply("lvms-test"), &Patch::Apply(&obj))
        .await
        .unwrap_or_else(|e| panic!("sample {file} rejected: {e}"));
    api.get(&name).await.unwrap()
}

#[tokio::test]
async fn thin_sample_is_accepted_with_defaults() {
    let ns = TestNs::new("sample-thin").await;
    let got = apply_sample(&ns, "lvmcluster-thin.yaml").await;
    let dc = &got.spec.storage.device_classes[0];
    let thin = dc.thin_pool_config.as_ref().expect("thin pool");
    assert_eq!(thin.size_percent, 90);
    assert_eq!(
        thin.chunk_size_calculation_policy,
        ChunkSizeCalculationPolicy::Static
    );
    assert_eq!(
        thin.metadata_size_calculation_policy,
        MetadataSizePolicy::Host
    );
    assert_eq!(
        thin.effective_chunk_size().unwrap(),
        Some(128 * 1024),
        "Static policy without chunkSize means 128Ki"
    );
    assert_eq!(dc.fstype, DeviceFilesystemType::Xfs);
    let opts = dc
        .storage_class_options
        .as_ref()
        .expect("storageClassOptions defaulted to {}");
    assert_eq!(opts.reclaim_policy, Some(ReclaimPolicy::Delete));
    assert_eq!(
        opts.volume_binding_mode,
        Some(VolumeBindingMode::WaitForFirstConsumer)
    );
}

#[tokio::test]
async fn thick_sample_is_accepted_with_defaults() {
    let ns = TestNs::new("sample-thick").await;
    let got = apply_sample(&ns, "lvmcluster-thick.yaml").await;
    let dc = &got.spec.storage.device_classes[0];
    assert!(dc.thin_pool_config.is_none());
    assert_eq!(dc.fstype, DeviceFilesystemType::Ext4);
    // No schema default: an unset policy stays unset (Dynamic), as LVMS stored it.
    assert_eq!(dc.device_discovery_policy, None);
    assert!(dc.storage_class_options.is_some());
}

#[tokio::test]
async fn two_class_sample_is_accepted_with_defaults() {
    let ns = TestNs::new("sample-two").await;
    let got = apply_sample(&ns, "lvmcluster-two-classes.yaml").await;
    let classes = &got.spec.storage.device_classes;
    assert_eq!(classes.len(), 2);
    assert_eq!(
        classes[1].fstype,
        DeviceFilesystemType::Xfs,
        "fstype defaults to xfs"
    );
    let bulk = classes[1].storage_class_options.as_ref().unwrap();
    assert_eq!(bulk.reclaim_policy, Some(ReclaimPolicy::Retain));
    assert_eq!(bulk.volume_binding_mode, Some(VolumeBindingMode::Immediate));
    assert_eq!(
        classes[0].thin_pool_config.as_ref().unwrap().size_percent,
        90
    );
}
