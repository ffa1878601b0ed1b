//! The capacity annotations a node publishes on its Node (TopoLVM's metrics exporter): free
//! bytes per device class as the controller's placement and GetCapacity read them, plus the
//! default class again under `capacity.topolvm.io/00default`. Pure: observations in, the
//! annotations and the patch that gets the Node there out.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use crate::api::topolvm::{
    NODE_FINALIZER, capacity_annotation, is_node_capacity_key, pool_usage_annotation,
};
use crate::node::lvmd_config::LvmdConfig;
use crate::node::report::LogicalVolume;
use crate::node::volume::space::{pool_usage, published_following_usage};

/// What one class's VG looks like now: its free bytes and its LVs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClassObservation {
    pub vg_free: u64,
    pub lvs: Vec<LogicalVolume>,
}

/// The annotations for every class of `config` that was observed. A class that was not (its
/// VG is not built yet) publishes nothing, so the controller never places a volume on it; a
/// thin class whose pool is missing publishes 0. The classes in `follow_usage` are also bounded
/// by their pool's real use ([`published_following_usage`]), which they publish too
/// (`pool-usage.lvms.topolvm.io/<class>`), for the controller to name when it refuses a claim.
pub fn annotations(
    config: &LvmdConfig,
    observed: &BTreeMap<String, ClassObservation>,
    follow_usage: &BTreeSet<String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for class in &config.device_classes {
        let Some(obs) = observed.get(&class.name) else {
            continue;
        };
        let follow = follow_usage.contains(&class.name);
        let free = published_following_usage(class, obs.vg_free, &obs.lvs, follow).unwrap_or(0);
        let usage = follow.then(|| pool_usage(class, &obs.lvs)).flatten();
        let names = std::iter::once(class.name.as_str()).chain(class.default.then_some(""));
        for name in names {
            out.insert(capacity_annotation(name), free.to_string());
            if let Some(usage) = &usage {
                out.insert(pool_usage_annotation(name), usage.clone());
            }
        }
    }
    out
}

/// The merge patch that makes the Node's capacity annotations `desired`: changed or new keys
/// set, stale `capacity.topolvm.io/*` and `pool-usage.lvms.topolvm.io/*` keys removed (a class
/// this node no longer has, or that no longer follows usage). None when the Node already says
/// exactly this.
pub fn patch(
    current: &BTreeMap<String, String>,
    desired: &BTreeMap<String, String>,
) -> Option<Value> {
    let mut changes = Map::new();
    for (k, v) in desired {
        if current.get(k) != Some(v) {
            changes.insert(k.clone(), Value::String(v.clone()));
        }
    }
    for k in current.keys() {
        if is_node_capacity_key(k) && !desired.contains_key(k) {
            changes.insert(k.clone(), Value::Null);
        }
    }
    (!changes.is_empty()).then(|| json!({"metadata": {"annotations": changes}}))
}

/// TopoLVM's exporter also puts `topolvm.io/node` on the Node (the operator cleans up a
/// deleted Node's volumes before letting it go). Adds it to `patch` when missing, guarded by
/// the resourceVersion the finalizers were read at (a merge patch replaces the whole list).
pub fn with_node_finalizer(
    patch: Option<Value>,
    finalizers: &[String],
    resource_version: Option<&str>,
) -> Option<Value> {
    if finalizers.iter().any(|f| f == NODE_FINALIZER) {
        return patch;
    }
    let mut all = finalizers.to_vec();
    all.push(NODE_FINALIZER.to_string());
    let mut patch = patch.unwrap_or_else(|| json!({"metadata": {}}));
    patch["metadata"]["finalizers"] = json!(all);
    patch["metadata"]["resourceVersion"] = json!(resource_version);
    Some(patch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::lvmd_config::{LvmdDeviceClass, LvmdDeviceType, LvmdThinPool};

    fn config() -> LvmdConfig {
        LvmdConfig {
            device_classes: vec![
                LvmdDeviceClass {
                    name: "ssd".into(),
                    volume_group: "vg1".into(),
                    default: true,
                    spare_gb: Some(1),
                    ..Default::default()
                },
                LvmdDeviceClass {
                    name: "thin".into(),
                    volume_group: "vg2".into(),
                    device_type: LvmdDeviceType::Thin,
                    thin_pool: Some(LvmdThinPool {
                        name: "pool".into(),
                        overprovision_ratio: 2.0,
                    }),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn thick_less_spare_thin_by_ratio_and_the_default_twice() {
        let pool = LogicalVolume {
            lv_name: "pool".into(),
            lv_size: Some(100),
            ..Default::default()
        };
        let observed = BTreeMap::from([
            (
                "ssd".to_string(),
                ClassObservation {
                    vg_free: 3 << 30,
                    lvs: vec![],
                },
            ),
            (
                "thin".to_string(),
                ClassObservation {
                    vg_free: 0,
                    lvs: vec![pool],
                },
            ),
        ]);
        let a = annotations(&config(), &observed, &BTreeSet::new());
        assert_eq!(a["capacity.topolvm.io/ssd"], (2u64 << 30).to_string());
        assert_eq!(a["capacity.topolvm.io/00default"], (2u64 << 30).to_string());
        assert_eq!(a["capacity.topolvm.io/thin"], "200");
        // An unobserved class says nothing rather than 0 or a guess.
        let only_ssd = BTreeMap::from([("ssd".to_string(), observed["ssd"].clone())]);
        assert!(
            !annotations(&config(), &only_ssd, &BTreeSet::new())
                .contains_key("capacity.topolvm.io/thin")
        );
    }

    #[test]
    fn a_class_following_usage_publishes_its_pools_use_and_the_others_do_not() {
        let mut config = config();
        config.device_classes[1].default = true;
        config.device_classes[0].default = false;
        let pool = LogicalVolume {
            lv_name: "pool".into(),
            vg_name: "vg2".into(),
            lv_size: Some(1000),
            data_percent: Some(96.04),
            metadata_percent: Some(11.0),
            ..Default::default()
        };
        let observed = BTreeMap::from([(
            "thin".to_string(),
            ClassObservation {
                vg_free: 0,
                lvs: vec![pool],
            },
        )]);
        let following = annotations(&config, &observed, &BTreeSet::from(["thin".to_string()]));
        let usage = "thin pool vg2/pool is 96.0% full (data) and 11.0% (metadata)";
        assert_eq!(following["pool-usage.lvms.topolvm.io/thin"], usage);
        assert_eq!(following["pool-usage.lvms.topolvm.io/00default"], usage);
        assert_eq!(
            following["capacity.topolvm.io/thin"], "0",
            "past 95 %: none"
        );
        let formula = annotations(&config, &observed, &BTreeSet::new());
        assert!(
            formula.keys().all(|k| !k.starts_with("pool-usage.")),
            "{formula:?}"
        );
        // Switched back to the formula: the Node's usage keys go.
        let p = patch(&following, &formula).expect("a change");
        assert_eq!(
            p["metadata"]["annotations"]["pool-usage.lvms.topolvm.io/thin"],
            Value::Null
        );
    }

    #[test]
    fn the_patch_sets_changes_removes_stale_keys_and_is_none_when_in_sync() {
        let desired = BTreeMap::from([("capacity.topolvm.io/ssd".to_string(), "5".to_string())]);
        let current = BTreeMap::from([
            ("capacity.topolvm.io/ssd".to_string(), "4".to_string()),
            ("capacity.topolvm.io/gone".to_string(), "9".to_string()),
        ]);
        assert_eq!(
            patch(&current, &desired),
            Some(json!({"metadata": {"annotations": {
                "capacity.topolvm.io/ssd": "5",
                "capacity.topolvm.io/gone": null,
            }}}))
        );
        assert_eq!(patch(&desired, &desired), None);
    }

    #[test]
    fn the_node_finalizer_is_added_once_keeping_the_others() {
        let ann = Some(json!({"metadata": {"annotations": {"capacity.topolvm.io/a": "1"}}}));
        let p = with_node_finalizer(ann.clone(), &["other".into()], Some("7")).unwrap();
        assert_eq!(
            p["metadata"]["finalizers"],
            json!(["other", NODE_FINALIZER])
        );
        assert_eq!(p["metadata"]["resourceVersion"], "7");
        assert_eq!(p["metadata"]["annotations"]["capacity.topolvm.io/a"], "1");
        // Already there: the capacity patch as it was, and nothing at all without one.
        let held = [NODE_FINALIZER.to_string()];
        assert_eq!(with_node_finalizer(ann.clone(), &held, Some("7")), ann);
        assert_eq!(with_node_finalizer(None, &held, Some("7")), None);
        assert!(with_node_finalizer(None, &[], None).is_some());
    }
}
