//! LVMS's webhook and CEL rules, enforced by the real API server through the CRD schema.
//! Every rejection must name the offending field; valid day-2 edits must go through.

use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::{Api, Client};
use lvms::api::LVMCluster;
use serde_json::{Value, json};

use lvms_testkit::TestNs;
use lvms_testkit::fixtures::{lvm_cluster, volume_group};

fn api(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &ApiResource::erase::<LVMCluster>(&()))
}

fn cluster(name: &str, classes: Value) -> DynamicObject {
    serde_json::from_value(lvm_cluster(name, classes)).expect("test object")
}

fn thin_class() -> Value {
    json!({
        "name": "vg1", "default": true,
        "deviceSelector": {"paths": ["/dev/sdb", "/dev/sdc"]},
        "thinPoolConfig": {"name": "tp", "overprovisionRatio": 10, "chunkSizeCalculationPolicy": "Static",
                           "chunkSize": "128Ki", "metadataSizeCalculationPolicy": "Static", "metadataSize": "1Gi"}
    })
}

fn with(mut base: Value, patch: Value) -> Value {
    merge(&mut base, patch);
    base
}

/// JSON merge patch semantics (null deletes).
fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(&k);
                } else {
                    merge(t.entry(k).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p,
    }
}

fn raid_class(raid: Value, paths: &[&str]) -> Value {
    json!({"name": "r", "default": true, "deviceSelector": {"paths": paths}, "raidConfig": raid})
}

async fn expect_rejected(
    api: &Api<DynamicObject>,
    case: &str,
    obj: &DynamicObject,
    fields: &[&str],
) {
    let err = api
        .create(&PostParams::default(), obj)
        .await
        .err()
        .unwrap_or_else(|| panic!("{case}: accepted, want rejected"));
    let msg = err.to_string();
    assert!(
        msg.contains("422") || msg.contains("Invalid"),
        "{case}: want a validation error, got {msg}"
    );
    for f in fields {
        assert!(msg.contains(f), "{case}: error does not name {f:?}: {msg}");
    }
}

#[tokio::test]
async fn invalid_lvmclusters_are_rejected_on_create() {
    let ns = TestNs::new("invalid-create").await;
    let api = api(&ns.client, &ns.name);
    let c = thin_class;
    let cases: Vec<(&str, Value, &[&str])> = vec![
        (
            "two defaults",
            json!([
                c(),
                with(
                    c(),
                    json!({"name": "vg2", "deviceSelector": {"paths": ["/dev/sdd"]}})
                )
            ]),
            &["deviceClasses", "default"],
        ),
        (
            "selector without paths",
            json!([with(c(), json!({"deviceSelector": {"paths": null}}))]),
            &["deviceSelector", "paths or optionalPaths"],
        ),
        (
            "second class without paths",
            json!([c(), {"name": "vg2", "thinPoolConfig": {"name": "tp", "overprovisionRatio": 2}}]),
            &["deviceClasses", "deviceSelector.paths"],
        ),
        (
            "relative path",
            json!([with(c(), json!({"deviceSelector": {"paths": ["sdb"]}}))]),
            &["paths", "/dev/"],
        ),
        (
            "relative optional path",
            json!([with(
                c(),
                json!({"deviceSelector": {"optionalPaths": ["disk/by-id/x"]}})
            )]),
            &["optionalPaths", "/dev/"],
        ),
        (
            "duplicate path",
            json!([with(
                c(),
                json!({"deviceSelector": {"paths": ["/dev/sdb", "/dev/sdb"]}})
            )]),
            &["paths", "Duplicate"],
        ),
        (
            "path in paths and optionalPaths",
            json!([with(
                c(),
                json!({"deviceSelector": {"optionalPaths": ["/dev/sdb"]}})
            )]),
            &["deviceSelector", "both paths and optionalPaths"],
        ),
        (
            "path shared by two classes on the same nodes",
            json!([
                c(),
                with(
                    c(),
                    json!({"name": "vg2", "default": false, "deviceSelector": {"paths": ["/dev/sdc"]}})
                )
            ]),
            &["deviceClasses", "two device classes"],
        ),
        (
            "chunk size below 64Ki",
            json!([with(c(), json!({"thinPoolConfig": {"chunkSize": "32Ki"}}))]),
            &["chunkSize", "64Ki"],
        ),
        (
            "chunk size above 1Gi",
            json!([with(c(), json!({"thinPoolConfig": {"chunkSize": "2Gi"}}))]),
            &["chunkSize", "1Gi"],
        ),
        (
            "chunk size with Host policy",
            json!([with(
                c(),
                json!({"thinPoolConfig": {"chunkSizeCalculationPolicy": "Host"}})
            )]),
            &["chunkSize", "Host"],
        ),
        (
            "sizePercent below 10",
            json!([with(c(), json!({"thinPoolConfig": {"sizePercent": 5}}))]),
            &["sizePercent"],
        ),
        (
            "overprovisionRatio 0",
            json!([with(
                c(),
                json!({"thinPoolConfig": {"overprovisionRatio": 0}})
            )]),
            &["overprovisionRatio"],
        ),
        (
            "overprovisionRatio 101",
            json!([with(
                c(),
                json!({"thinPoolConfig": {"overprovisionRatio": 101}})
            )]),
            &["overprovisionRatio"],
        ),
        (
            "metadata size with Host policy",
            json!([with(
                c(),
                json!({"thinPoolConfig": {"metadataSizeCalculationPolicy": "Host"}})
            )]),
            &["metadataSize", "Host"],
        ),
        (
            "metadata size below 2Mi",
            json!([with(
                c(),
                json!({"thinPoolConfig": {"metadataSize": "1Mi"}})
            )]),
            &["metadataSize", "2Mi"],
        ),
        (
            "raid and thin together",
            json!([with(c(), json!({"raidConfig": {"type": "raid1"}}))]),
            &["raidConfig", "mutually exclusive"],
        ),
        (
            "mirrors on raid5",
            json!([raid_class(
                json!({"type": "raid5", "mirrors": 2}),
                &["/dev/a", "/dev/b", "/dev/c"]
            )]),
            &["mirrors", "raid1"],
        ),
        (
            "stripes on raid1",
            json!([raid_class(
                json!({"type": "raid1", "stripes": 2}),
                &["/dev/a", "/dev/b"]
            )]),
            &["stripes"],
        ),
        (
            "stripeSize not a power of two",
            json!([raid_class(
                json!({"type": "raid5", "stripeSize": "96Ki"}),
                &["/dev/a", "/dev/b", "/dev/c"]
            )]),
            &["stripeSize", "power of 2"],
        ),
        (
            "raid1 with one device",
            json!([raid_class(json!({"type": "raid1"}), &["/dev/a"])]),
            &["deviceSelector", "too few devices"],
        ),
        (
            "raid10 with a device count not a multiple of mirrors+1",
            json!([raid_class(
                json!({"type": "raid10"}),
                &["/dev/a", "/dev/b", "/dev/c", "/dev/d", "/dev/e"]
            )]),
            &["deviceSelector", "raid10"],
        ),
        (
            "raid without paths",
            json!([{"name": "r", "default": true, "raidConfig": {"type": "raid1"}}]),
            &["raidConfig", "paths"],
        ),
        (
            "owned StorageClass parameter",
            json!([with(
                c(),
                json!({"storageClassOptions": {"additionalParameters": {"topolvm.io/device-class": "x"}}})
            )]),
            &["additionalParameters", "topolvm.io/device-class"],
        ),
        (
            "reserved StorageClass label",
            json!([with(
                c(),
                json!({"storageClassOptions": {"additionalLabels": {"app.kubernetes.io/name": "x"}}})
            )]),
            &["additionalLabels", "operator-reserved"],
        ),
        (
            "owner-label prefix",
            json!([with(
                c(),
                json!({"storageClassOptions": {"additionalLabels": {"owned-by.topolvm.io/uid": "x"}}})
            )]),
            &["additionalLabels", "owned-by.topolvm.io/"],
        ),
        (
            "invalid label value",
            json!([with(
                c(),
                json!({"storageClassOptions": {"additionalLabels": {"tier": "not a label!"}}})
            )]),
            &["additionalLabels"],
        ),
        (
            "device class name not a DNS label",
            json!([with(c(), json!({"name": "VG_1"}))]),
            &["name"],
        ),
        (
            "unsupported fstype",
            json!([with(c(), json!({"fstype": "btrfs"}))]),
            &["fstype"],
        ),
    ];
    assert!(cases.len() >= 20);
    for (i, (case, classes, fields)) in cases.iter().enumerate() {
        expect_rejected(
            &api,
            case,
            &cluster(&format!("c{i}"), classes.clone()),
            fields,
        )
        .await;
    }
}

/// Creates `before`, then tries to replace its spec with `after`.
async fn update(
    api: &Api<DynamicObject>,
    name: &str,
    before: Value,
    after: Value,
) -> Result<DynamicObject, kube::Error> {
    let created = api
        .create(&PostParams::default(), &cluster(name, before))
        .await
        .expect("valid base object");
    let mut next = cluster(name, after);
    next.metadata.resource_version = created.metadata.resource_version;
    api.replace(name, &PostParams::default(), &next).await
}

fn two_classes() -> Value {
    json!([thin_class(), {"name": "bulk", "deviceSelector": {"paths": ["/dev/sdx"]}, "nodeSelector": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "disk", "operator": "In", "values": ["hdd"]}]}]}}])
}

#[tokio::test]
async fn invalid_updates_are_rejected() {
    let ns = TestNs::new("invalid-update").await;
    let api = api(&ns.client, &ns.name);
    let c = thin_class;
    let set = |patch: Value| json!([with(c(), patch)]);
    let cases: Vec<(&str, Value, Value, &[&str])> = vec![
        (
            "fstype changed",
            json!([c()]),
            set(json!({"fstype": "ext4"})),
            &["fstype", "immutable"],
        ),
        (
            "thin pool renamed",
            json!([c()]),
            set(json!({"thinPoolConfig": {"name": "other"}})),
            &["thinPoolConfig.name"],
        ),
        (
            "sizePercent changed",
            json!([c()]),
            set(json!({"thinPoolConfig": {"sizePercent": 80}})),
            &["sizePercent"],
        ),
        (
            "chunk policy changed",
            json!([c()]),
            set(
                json!({"thinPoolConfig": {"chunkSizeCalculationPolicy": "Host", "chunkSize": null}}),
            ),
            &["chunkSizeCalculationPolicy"],
        ),
        (
            "chunk size changed",
            json!([c()]),
            set(json!({"thinPoolConfig": {"chunkSize": "256Ki"}})),
            &["chunkSize"],
        ),
        (
            "metadata size shrunk",
            json!([c()]),
            set(json!({"thinPoolConfig": {"metadataSize": "512Mi"}})),
            &["metadataSize", "increased"],
        ),
        (
            "thin pool removed",
            json!([c()]),
            set(json!({"thinPoolConfig": null})),
            &["thinPoolConfig", "removed"],
        ),
        (
            "nodeSelector changed",
            two_classes(),
            json!([c(), {"name": "bulk", "deviceSelector": {"paths": ["/dev/sdx"]}}]),
            &["nodeSelector"],
        ),
        (
            "forceWipe changed",
            json!([c()]),
            set(json!({"deviceSelector": {"forceWipeDevicesAndDestroyAllData": true}})),
            &["forceWipeDevicesAndDestroyAllData"],
        ),
        (
            "paths added to a pathless class",
            json!([{"name": "vg1", "default": true}]),
            json!([{"name": "vg1", "default": true, "deviceSelector": {"paths": ["/dev/sdb"]}}]),
            &["deviceSelector", "can not be added"],
        ),
        (
            "reclaimPolicy changed",
            json!([c()]),
            set(json!({"storageClassOptions": {"reclaimPolicy": "Retain"}})),
            &["reclaimPolicy", "immutable"],
        ),
        (
            "additionalParameters changed",
            json!([c()]),
            set(json!({"storageClassOptions": {"additionalParameters": {"foo": "bar"}}})),
            &["additionalParameters", "immutable"],
        ),
        (
            "raidConfig changed",
            json!([raid_class(
                json!({"type": "raid1"}),
                &["/dev/a", "/dev/b", "/dev/c"]
            )]),
            json!([raid_class(
                json!({"type": "raid1", "mirrors": 2}),
                &["/dev/a", "/dev/b", "/dev/c"]
            )]),
            &["raidConfig", "immutable"],
        ),
        (
            "default class removed",
            two_classes(),
            json!([two_classes()[1].clone()]),
            &["deviceClasses", "default device class"],
        ),
        (
            "last class removed",
            json!([c()]),
            json!([]),
            &["deviceClasses", "at least one device class"],
        ),
    ];
    for (i, (case, before, after, fields)) in cases.into_iter().enumerate() {
        let err = update(&api, &format!("u{i}"), before, after)
            .await
            .err()
            .unwrap_or_else(|| panic!("{case}: accepted"));
        let msg = err.to_string();
        for f in fields {
            assert!(msg.contains(f), "{case}: error does not name {f:?}: {msg}");
        }
    }
}

#[tokio::test]
async fn valid_day2_edits_are_accepted() {
    let ns = TestNs::new("valid-update").await;
    let api = api(&ns.client, &ns.name);
    let c = thin_class;
    let cases: Vec<(&str, Value, Value)> = vec![
        (
            "overprovisionRatio changed",
            json!([c()]),
            json!([with(
                c(),
                json!({"thinPoolConfig": {"overprovisionRatio": 20}})
            )]),
        ),
        (
            "additionalLabels changed",
            json!([c()]),
            json!([with(
                c(),
                json!({"storageClassOptions": {"additionalLabels": {"team": "storage"}}})
            )]),
        ),
        ("non-default class removed", two_classes(), json!([c()])),
        (
            "one path removed while another remains",
            json!([c()]),
            json!([with(
                c(),
                json!({"deviceSelector": {"paths": ["/dev/sdb"]}})
            )]),
        ),
        (
            "metadata size grown",
            json!([c()]),
            json!([with(
                c(),
                json!({"thinPoolConfig": {"metadataSize": "2Gi"}})
            )]),
        ),
    ];
    for (i, (case, before, after)) in cases.into_iter().enumerate() {
        let got = update(&api, &format!("ok{i}"), before, after.clone())
            .await
            .unwrap_or_else(|e| panic!("{case}: rejected: {e}"));
        let classes = got.data["spec"]["storage"]["deviceClasses"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            classes.len(),
            after.as_array().map(Vec::len).unwrap_or(0),
            "{case}: class count after update"
        );
    }
}

#[tokio::test]
async fn lvmvolumegroup_keeps_lvms_rules() {
    use lvms::api::LVMVolumeGroup;
    let ns = TestNs::new("lvmvg").await;
    let api: Api<DynamicObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &ApiResource::erase::<LVMVolumeGroup>(&()),
    );
    let vg = |name: &str, spec: Value| -> DynamicObject {
        serde_json::from_value(volume_group(name, spec)).unwrap()
    };
    let both = vg(
        "both",
        json!({"thinPoolConfig": {"name": "tp", "overprovisionRatio": 2}, "raidConfig": {"type": "raid1"}}),
    );
    let msg = api
        .create(&PostParams::default(), &both)
        .await
        .expect_err("raid+thin must be rejected")
        .to_string();
    assert!(
        msg.contains("raidConfig and thinPoolConfig are mutually exclusive"),
        "{msg}"
    );

    let created = api
        .create(
            &PostParams::default(),
            &vg("raid", json!({"raidConfig": {"type": "raid1"}})),
        )
        .await
        .expect("raid VG");
    let mut changed = vg(
        "raid",
        json!({"raidConfig": {"type": "raid1", "mirrors": 2}}),
    );
    changed.metadata.resource_version = created.metadata.resource_version;
    let msg = api
        .replace("raid", &PostParams::default(), &changed)
        .await
        .expect_err("raidConfig is immutable")
        .to_string();
    assert!(
        msg.contains("spec.raidConfig") && msg.contains("immutable"),
        "{msg}"
    );

    // The LVMCluster's /dev/ rule holds on the object vg-manager reads, written directly.
    for field in ["paths", "optionalPaths"] {
        let msg = api
            .create(
                &PostParams::default(),
                &vg(
                    &format!("host-file-{}", field.to_lowercase()),
                    json!({"deviceSelector": {field: ["/etc/passwd"]}}),
                ),
            )
            .await
            .expect_err("a path outside /dev/ must be rejected")
            .to_string();
        assert!(
            msg.contains(&format!("spec.deviceSelector.{field}"))
                && msg.contains("starting with /dev/"),
            "{msg}"
        );
    }
}
