//! `lvmd.yaml`, TopoLVM's lvmd config (`cmd/lvmd/app.Config`, `pkg/lvmd/types.DeviceClass`), as
//! LVMS writes it (`lvmd/lvmd.go`, `applyLVMDConfig`). One device class per LVMVolumeGroup on this
//! node; once written, only a thin class's overprovision-ratio is updated.
//!
//! Rendering matches LVMS byte for byte: its `sigs.k8s.io/yaml` goes through JSON, so keys come
//! out sorted, unset pointers and slices as `null`, and whole floats without a fraction.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

use crate::api::{LVMVolumeGroupSpec, RaidConfig, RaidType};

/// Where vg-manager keeps lvmd.yaml (a host path, mode 0600).
pub const DEFAULT_PATH: &str = "/etc/topolvm/lvmd.yaml";
pub const MICROSHIFT_PATH: &str = "/var/lib/microshift/lvms/lvmd.yaml";
pub const FILE_MODE: u32 = 0o600;
/// LVMS refuses to read a config of 2 MiB or more.
pub const MAX_BYTES: usize = 2 << 20;

#[derive(Debug, Error)]
pub enum LvmdConfigError {
    #[error("lvmd config is not valid YAML for TopoLVM's lvmd: {0}")]
    Parse(String),
    #[error("lvmd config could not be rendered: {0}")]
    Render(String),
    #[error("the read limit is reached for lvmd config ({len} bytes, limit {MAX_BYTES})")]
    TooLarge { len: usize },
    #[error(
        "raidConfig.stripeSize of volume group {vg:?} is not a valid size: {reason}; use a power of two such as 64Ki"
    )]
    StripeSize { vg: String, reason: String },
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LvmdDeviceType {
    /// TopoLVM's default when `type` is empty.
    #[default]
    Thick,
    Thin,
}

impl Serialize for LvmdDeviceType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match self {
            Self::Thick => "thick",
            Self::Thin => "thin",
        })
    }
}

impl<'de> Deserialize<'de> for LvmdDeviceType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Option::<String>::deserialize(d)?.as_deref() {
            None | Some("") | Some("thick") => Ok(Self::Thick),
            Some("thin") => Ok(Self::Thin),
            Some(other) => Err(serde::de::Error::custom(format!(
                "device class type {other:?} is neither \"thick\" nor \"thin\""
            ))),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LvmdThinPool {
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(
        rename = "overprovision-ratio",
        default,
        serialize_with = "whole_float",
        deserialize_with = "null_as_default"
    )]
    pub overprovision_ratio: f64,
}

/// Fields in the key order LVMS's output has (sorted).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LvmdDeviceClass {
    #[serde(default, deserialize_with = "null_as_default")]
    pub default: bool,
    #[serde(rename = "lvcreate-options", default)]
    pub lvcreate_options: Option<Vec<String>>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    /// GiB TopoLVM keeps free in a thick VG; LVMS writes 0 (unset would mean 10).
    #[serde(rename = "spare-gb", default)]
    pub spare_gb: Option<u64>,
    #[serde(default)]
    pub stripe: Option<u32>,
    #[serde(rename = "stripe-size", default, deserialize_with = "null_as_default")]
    pub stripe_size: String,
    #[serde(rename = "thin-pool", default)]
    pub thin_pool: Option<LvmdThinPool>,
    #[serde(rename = "type", default)]
    pub device_type: LvmdDeviceType,
    #[serde(rename = "volume-group", default, deserialize_with = "null_as_default")]
    pub volume_group: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LvcreateOptionClass {
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(default)]
    pub options: Option<Vec<String>>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LvmdConfig {
    #[serde(
        rename = "device-classes",
        default,
        deserialize_with = "null_as_default"
    )]
    pub device_classes: Vec<LvmdDeviceClass>,
    #[serde(rename = "lvcreate-option-classes", default)]
    pub lvcreate_option_classes: Option<Vec<LvcreateOptionClass>>,
    #[serde(rename = "lvm-command-prefix", default)]
    pub lvm_command_prefix: Option<Vec<String>>,
    #[serde(rename = "socket-name", default, deserialize_with = "null_as_default")]
    pub socket_name: String,
}

impl LvmdConfig {
    pub fn device_class(&self, name: &str) -> Option<&LvmdDeviceClass> {
        self.device_classes.iter().find(|d| d.name == name)
    }
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    // An explicit null is the zero value, as Go's yaml reads it (TopoLVM's own format).
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Go's JSON prints `10` for float64 10; keep that so the file is byte-identical.
fn whole_float<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        s.serialize_i64(*v as i64)
    } else {
        s.serialize_f64(*v)
    }
}

/// Parses lvmd.yaml (also files TopoLVM or LVMS wrote, with their `null`s).
pub fn parse(text: &str) -> Result<LvmdConfig, LvmdConfigError> {
    if text.len() >= MAX_BYTES {
        return Err(LvmdConfigError::TooLarge { len: text.len() });
    }
    if text.trim().is_empty() {
        return Ok(LvmdConfig::default());
    }
    serde_saphyr::from_str(text).map_err(|e| LvmdConfigError::Parse(e.to_string()))
}

/// Renders lvmd.yaml the way LVMS does.
pub fn render(config: &LvmdConfig) -> Result<String, LvmdConfigError> {
    serde_saphyr::to_string(config).map_err(|e| LvmdConfigError::Render(e.to_string()))
}

/// LVMS `buildRAIDLVCreateOptions`: `--type raidN`, `-m` (raid1/10), `--stripes`,
/// `--stripesize <KiB>k` (raid4/5/6/10).
pub fn raid_lvcreate_options(vg: &str, rc: &RaidConfig) -> Result<Vec<String>, LvmdConfigError> {
    let mut o = vec!["--type".to_string(), rc.raid_type.as_str().to_string()];
    if matches!(rc.raid_type, RaidType::Raid1 | RaidType::Raid10) {
        o.push("-m".into());
        o.push(rc.effective_mirrors().to_string());
    }
    if rc.raid_type != RaidType::Raid1 {
        if let Some(s) = rc.stripes {
            o.push("--stripes".into());
            o.push(s.to_string());
        }
        if let Some(q) = &rc.stripe_size {
            let bytes = crate::api::quantity::parse_quantity_bytes(&q.0).map_err(|e| {
                LvmdConfigError::StripeSize {
                    vg: vg.to_string(),
                    reason: e.to_string(),
                }
            })?;
            o.push("--stripesize".into());
            o.push(format!("{}k", bytes / 1024));
        }
    }
    Ok(o)
}

/// The device class LVMS adds for a volume group.
pub fn device_class_for(
    vg_name: &str,
    spec: &LVMVolumeGroupSpec,
) -> Result<LvmdDeviceClass, LvmdConfigError> {
    let mut dc = LvmdDeviceClass {
        name: vg_name.to_string(),
        volume_group: vg_name.to_string(),
        default: spec.default,
        ..Default::default()
    };
    match &spec.thin_pool_config {
        Some(tp) => {
            dc.device_type = LvmdDeviceType::Thin;
            dc.thin_pool = Some(LvmdThinPool {
                name: tp.name.clone(),
                overprovision_ratio: f64::from(tp.overprovision_ratio),
            });
        }
        None => {
            dc.device_type = LvmdDeviceType::Thick;
            // 0, not unset: TopoLVM would otherwise keep 10 GiB free.
            dc.spare_gb = Some(0);
        }
    }
    if let Some(rc) = &spec.raid_config {
        dc.lvcreate_options = Some(raid_lvcreate_options(vg_name, rc)?);
    }
    Ok(dc)
}

/// Result of adding/updating one volume group's class.
#[derive(Clone, Debug, PartialEq)]
pub struct Applied {
    pub config: LvmdConfig,
    /// There was no config file (event LVMDConfigMissing before writing).
    pub was_missing: bool,
    /// Write the file (event LVMDConfigUpdated).
    pub changed: bool,
}

/// LVMS `applyLVMDConfig`: add the class if absent; if present, only a thin class's
/// overprovision-ratio follows the spec (default flag, pool name and type stay as written).
pub fn apply_volume_group(
    existing: Option<&LvmdConfig>,
    vg_name: &str,
    spec: &LVMVolumeGroupSpec,
) -> Result<Applied, LvmdConfigError> {
    let was_missing = existing.is_none();
    // None is a file that is not there (the caller reports any other read failure).
    let mut config = existing.cloned().unwrap_or_default();
    match config.device_classes.iter_mut().find(|d| d.name == vg_name) {
        None => config.device_classes.push(device_class_for(vg_name, spec)?),
        Some(dc) => {
            if dc.device_type == LvmdDeviceType::Thin
                && let (Some(pool), Some(tp)) = (dc.thin_pool.as_mut(), &spec.thin_pool_config)
            {
                pool.overprovision_ratio = f64::from(tp.overprovision_ratio);
            }
        }
    }
    let changed = existing != Some(&config);
    Ok(Applied {
        config,
        was_missing,
        changed,
    })
}

/// What to do with the file when a volume group is deleted (LVMS `processDelete`).
#[derive(Clone, Debug, PartialEq)]
pub enum Removal {
    /// There is no config file.
    NoConfig,
    /// The class was not in the file and others remain: leave it.
    Unchanged,
    /// Write this config (event LVMDConfigUpdated).
    Save(LvmdConfig),
    /// No class remains: delete the file (event LVMDConfigDeleted).
    Delete,
}

pub fn remove_volume_group(existing: Option<&LvmdConfig>, vg_name: &str) -> Removal {
    let Some(existing) = existing else {
        return Removal::NoConfig;
    };
    let mut config = existing.clone();
    config.device_classes.retain(|d| d.name != vg_name);
    if config.device_classes.is_empty() {
        Removal::Delete
    } else if config == *existing {
        Removal::Unchanged
    } else {
        Removal::Save(config)
    }
}

/// The whole config for the volume groups ready on this node, in the given order (as a fresh
/// node would write it, one reconcile after another).
pub fn build_config<'a>(
    volume_groups: impl IntoIterator<Item = (&'a str, &'a LVMVolumeGroupSpec)>,
) -> Result<LvmdConfig, LvmdConfigError> {
    let mut config: Option<LvmdConfig> = None;
    for (name, spec) in volume_groups {
        config = Some(apply_volume_group(config.as_ref(), name, spec)?.config);
    }
    Ok(config.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ThinPoolConfig;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn thin_spec(ratio: i32) -> LVMVolumeGroupSpec {
        LVMVolumeGroupSpec {
            default: true,
            thin_pool_config: Some(ThinPoolConfig {
                name: "thin-pool-1".into(),
                size_percent: 90,
                overprovision_ratio: ratio,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn thick_spec() -> LVMVolumeGroupSpec {
        LVMVolumeGroupSpec::default()
    }

    /// What LVMS (sigs.k8s.io/yaml v1.6.0 over TopoLVM's types) writes for a thin default class
    /// vg1 and a thick class vg2, checked with LVMS's own marshaller.
    const LVMS_THIN_AND_THICK: &str = "device-classes:
- default: true
  lvcreate-options: null
  name: vg1
  spare-gb: null
  stripe: null
  stripe-size: \"\"
  thin-pool:
    name: thin-pool-1
    overprovision-ratio: 10
  type: thin
  volume-group: vg1
- default: false
  lvcreate-options: null
  name: vg2
  spare-gb: 0
  stripe: null
  stripe-size: \"\"
  thin-pool: null
  type: thick
  volume-group: vg2
lvcreate-option-classes: null
lvm-command-prefix: null
socket-name: \"\"
";

    #[test]
    fn renders_thin_and_thick_exactly_like_lvms() {
        let cfg = build_config([("vg1", &thin_spec(10)), ("vg2", &thick_spec())]).unwrap();
        assert_eq!(render(&cfg).unwrap(), LVMS_THIN_AND_THICK);
    }

    #[test]
    fn round_trips_lvms_output() {
        let parsed = parse(LVMS_THIN_AND_THICK).unwrap();
        assert_eq!(parsed.device_classes.len(), 2);
        let thin = parsed.device_class("vg1").unwrap();
        assert_eq!(thin.device_type, LvmdDeviceType::Thin);
        assert!(thin.default);
        assert_eq!(thin.thin_pool.as_ref().unwrap().overprovision_ratio, 10.0);
        assert_eq!(thin.spare_gb, None);
        let thick = parsed.device_class("vg2").unwrap();
        assert_eq!(thick.spare_gb, Some(0));
        assert_eq!(thick.device_type, LvmdDeviceType::Thick);
        assert_eq!(render(&parsed).unwrap(), LVMS_THIN_AND_THICK);
    }

    #[test]
    fn parses_handwritten_topolvm_config() {
        let cfg = parse(
            "socket-name: /run/topolvm/lvmd.sock\ndevice-classes:\n  - name: ssd\n    volume-group: myvg1\n    spare-gb: 10\n    default: true\n  - name: thin\n    volume-group: myvg1\n    type: thin\n    thin-pool:\n      name: pool0\n      overprovision-ratio: 5.0\n",
        )
        .unwrap();
        assert_eq!(cfg.socket_name, "/run/topolvm/lvmd.sock");
        assert_eq!(cfg.device_classes[0].device_type, LvmdDeviceType::Thick);
        assert_eq!(cfg.device_classes[0].spare_gb, Some(10));
        assert_eq!(cfg.device_classes[0].lvcreate_options, None);
        assert_eq!(
            cfg.device_classes[1].thin_pool,
            Some(LvmdThinPool {
                name: "pool0".into(),
                overprovision_ratio: 5.0
            })
        );
        assert!(parse("device-classes:\n- name: a\n  type: fat\n").is_err());
        assert!(parse("device-classes: [").is_err());
        assert_eq!(parse("").unwrap(), LvmdConfig::default());
        assert!(matches!(
            parse(&" ".repeat(MAX_BYTES)),
            Err(LvmdConfigError::TooLarge { .. })
        ));
    }

    #[test]
    fn fractional_ratio_keeps_its_fraction() {
        let mut cfg = build_config([("vg1", &thin_spec(10))]).unwrap();
        cfg.device_classes[0]
            .thin_pool
            .as_mut()
            .unwrap()
            .overprovision_ratio = 1.5;
        let text = render(&cfg).unwrap();
        assert!(text.contains("overprovision-ratio: 1.5"), "{text}");
        assert_eq!(parse(&text).unwrap(), cfg);
    }

    #[test]
    fn raid_options_and_round_trip() {
        let rc = RaidConfig {
            raid_type: RaidType::Raid10,
            mirrors: Some(1),
            stripes: Some(2),
            stripe_size: Some(Quantity("64Ki".into())),
        };
        assert_eq!(
            raid_lvcreate_options("vg1", &rc).unwrap(),
            vec![
                "--type",
                "raid10",
                "-m",
                "1",
                "--stripes",
                "2",
                "--stripesize",
                "64k"
            ]
        );
        let r1 = RaidConfig {
            raid_type: RaidType::Raid1,
            mirrors: None,
            stripes: None,
            stripe_size: None,
        };
        assert_eq!(
            raid_lvcreate_options("vg1", &r1).unwrap(),
            vec!["--type", "raid1", "-m", "1"]
        );
        let r5 = RaidConfig {
            raid_type: RaidType::Raid5,
            mirrors: None,
            stripes: Some(3),
            stripe_size: Some(Quantity("bogus".into())),
        };
        assert!(raid_lvcreate_options("vg1", &r5).is_err());
        let spec = LVMVolumeGroupSpec {
            raid_config: Some(r1),
            ..Default::default()
        };
        let cfg = build_config([("vg3", &spec)]).unwrap();
        let text = render(&cfg).unwrap();
        assert_eq!(parse(&text).unwrap(), cfg, "{text}");
        assert_eq!(
            cfg.device_classes[0].lvcreate_options.as_deref(),
            Some(
                &[
                    "--type".to_string(),
                    "raid1".into(),
                    "-m".into(),
                    "1".into()
                ][..]
            )
        );
        assert_eq!(cfg.device_classes[0].spare_gb, Some(0));
    }

    #[test]
    fn renders_raid_options_like_lvms() {
        let spec = LVMVolumeGroupSpec {
            raid_config: Some(RaidConfig {
                raid_type: RaidType::Raid1,
                mirrors: None,
                stripes: None,
                stripe_size: None,
            }),
            ..Default::default()
        };
        let cfg = build_config([("vg3", &spec)]).unwrap();
        // Go's yaml quotes "1" (it would read back as a number) and leaves "-m" plain.
        assert_eq!(
            render(&cfg).unwrap(),
            "device-classes:\n- default: false\n  lvcreate-options:\n  - --type\n  - raid1\n  - -m\n  - \"1\"\n  name: vg3\n  spare-gb: 0\n  stripe: null\n  stripe-size: \"\"\n  thin-pool: null\n  type: thick\n  volume-group: vg3\nlvcreate-option-classes: null\nlvm-command-prefix: null\nsocket-name: \"\"\n"
        );
    }

    #[test]
    fn only_overprovision_ratio_is_updated_later() {
        let first = apply_volume_group(None, "vg1", &thin_spec(10)).unwrap();
        assert!(first.was_missing && first.changed);
        let again = apply_volume_group(Some(&first.config), "vg1", &thin_spec(10)).unwrap();
        assert!(!again.was_missing && !again.changed);
        let mut spec = thin_spec(1);
        spec.default = false;
        spec.thin_pool_config.as_mut().unwrap().name = "renamed".into();
        let upd = apply_volume_group(Some(&first.config), "vg1", &spec).unwrap();
        assert!(upd.changed);
        let dc = upd.config.device_class("vg1").unwrap();
        assert_eq!(dc.thin_pool.as_ref().unwrap().overprovision_ratio, 1.0);
        // Everything else stays as first written.
        assert!(dc.default);
        assert_eq!(dc.thin_pool.as_ref().unwrap().name, "thin-pool-1");

        // A thick class never changes once written.
        let thick = apply_volume_group(None, "vg2", &thick_spec()).unwrap();
        let mut s = thick_spec();
        s.default = true;
        assert!(
            !apply_volume_group(Some(&thick.config), "vg2", &s)
                .unwrap()
                .changed
        );
    }

    #[test]
    fn removal_saves_deletes_or_leaves() {
        let cfg = build_config([("vg1", &thin_spec(10)), ("vg2", &thick_spec())]).unwrap();
        let Removal::Save(left) = remove_volume_group(Some(&cfg), "vg1") else {
            panic!()
        };
        assert_eq!(left.device_classes.len(), 1);
        assert_eq!(remove_volume_group(Some(&left), "vg9"), Removal::Unchanged);
        assert_eq!(remove_volume_group(Some(&left), "vg2"), Removal::Delete);
        assert_eq!(remove_volume_group(None, "vg2"), Removal::NoConfig);
    }
}
