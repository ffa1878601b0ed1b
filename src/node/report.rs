//! lvm2 JSON reports (`pvs`/`vgs`/`lvs --reportformat json --units b --nosuffix`) as typed rows.
//!
//! lvm2 prints every value as a string; with `--units b --nosuffix` sizes are whole bytes and an
//! empty string means "no value" (a PV without VG, a linear LV's metadata_percent). Sizes are
//! parsed strictly: a suffix such as `<475.94g` means the command was run without those flags.

use serde::Deserialize;
use thiserror::Error;

/// Tag lvms (like LVMS) puts on the VGs it creates; `vgs` prints it without the `@`.
pub const LVMS_TAG: &str = "@lvms";
const LVMS_TAG_NAME: &str = "lvms";

#[derive(Debug, Error)]
pub enum ReportError {
    #[error(
        "{command} output is not an lvm2 JSON report: {source}; run it with --reportformat json"
    )]
    Json {
        command: &'static str,
        source: serde_json::Error,
    },
    #[error(
        "{command} row {row:?}: field {field} = {value:?} is not a whole number; run {command} with --units b --nosuffix"
    )]
    Number {
        command: &'static str,
        row: String,
        field: &'static str,
        value: String,
    },
    #[error("{command} row {row:?}: field {field} = {value:?} is not a percentage")]
    Percent {
        command: &'static str,
        row: String,
        field: &'static str,
        value: String,
    },
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct PhysicalVolume {
    pub pv_name: String,
    /// Used to drop the PV from lvm's devices file (`lvmdevices --delpvid`).
    pub pv_uuid: String,
    /// None when the PV belongs to no VG.
    pub vg_name: Option<String>,
    pub pv_fmt: String,
    pub pv_attr: String,
    pub pv_size: Option<u64>,
    pub pv_free: Option<u64>,
    pub dev_size: Option<u64>,
    /// `pv_missing` is non-empty ("missing") when lvm cannot find the device of a VG member.
    pub missing: bool,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct VolumeGroupRow {
    pub vg_name: String,
    pub vg_size: Option<u64>,
    /// Only present when the command asked for `vg_free` (LVMS's does not).
    pub vg_free: Option<u64>,
    /// Only present when the command asked for `vg_extent_size` (LVMS's does not).
    pub vg_extent_size: Option<u64>,
    /// `vg_tags` split on commas, without the `@`.
    pub tags: Vec<String>,
}

impl VolumeGroupRow {
    pub fn has_lvms_tag(&self) -> bool {
        self.tags.iter().any(|t| t == LVMS_TAG_NAME)
    }
}

/// A VG with its PVs (LVMS `lvm.VolumeGroup` as `ListVGs` builds it).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExistingVg {
    pub name: String,
    pub size: Option<u64>,
    pub free: Option<u64>,
    pub tags: Vec<String>,
    pub pvs: Vec<PhysicalVolume>,
}

impl ExistingVg {
    /// A member PV's device is gone (`pv_missing` set).
    pub fn is_missing_devices(&self) -> bool {
        self.pvs.iter().any(|p| p.missing)
    }

    pub fn pv_names(&self) -> Vec<String> {
        self.pvs.iter().map(|p| p.pv_name.clone()).collect()
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogicalVolume {
    pub lv_name: String,
    pub vg_name: String,
    pub pool_lv: Option<String>,
    pub lv_attr: String,
    pub lv_size: Option<u64>,
    /// A thin pool's data usage (TopoLVM's `topolvm_thinpool_data_percent`); empty otherwise.
    pub data_percent: Option<f64>,
    pub metadata_percent: Option<f64>,
    pub chunk_size: Option<u64>,
    pub lv_metadata_size: Option<u64>,
    pub sync_percent: Option<f64>,
    pub lv_health_status: Option<String>,
    pub lv_layout: Option<String>,
    pub raid_sync_action: Option<String>,
    /// A thin volume's device id in its pool (what lvm2 asks the kernel for by number): how a
    /// device the kernel has but lvm2 no longer names is told apart from a volume's.
    pub thin_id: Option<u64>,
    /// `lv_tags` split on commas (lvms tags each volume's LV `lvms-volume`): what the audit
    /// tells a volume lvms made from an LV someone else put in the VG.
    pub tags: Vec<String>,
}

/// `lvs` output keeps its `report[].lv[]` nesting: validateLVs tells "no report" from "a report
/// without LVs".
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LvReport {
    pub reports: Vec<Vec<LogicalVolume>>,
}

impl LvReport {
    pub fn all(&self) -> impl Iterator<Item = &LogicalVolume> {
        self.reports.iter().flatten()
    }

    pub fn find(&self, lv_name: &str) -> Option<&LogicalVolume> {
        self.all().find(|lv| lv.lv_name == lv_name)
    }
}

// No serde defaults on the document and its items: lvm2 prints `"report": [{"pv": []}]` even
// when nothing matches, so a document without them is not lvm2's report, and reading it as
// "no PVs/VGs/LVs" would be an empty host.
#[derive(Deserialize)]
struct Doc<T> {
    report: Vec<T>,
}

#[derive(Deserialize)]
struct PvItem {
    pv: Vec<RawPv>,
}
#[derive(Deserialize)]
struct VgItem {
    vg: Vec<RawVg>,
}
#[derive(Deserialize)]
struct LvItem {
    lv: Vec<RawLv>,
}

#[derive(Deserialize)]
struct RawPv {
    #[serde(default)]
    pv_name: String,
    #[serde(default)]
    pv_uuid: String,
    #[serde(default)]
    vg_name: String,
    #[serde(default)]
    pv_fmt: String,
    #[serde(default)]
    pv_attr: String,
    #[serde(default)]
    pv_size: String,
    #[serde(default)]
    pv_free: String,
    #[serde(default)]
    dev_size: String,
    #[serde(default)]
    pv_missing: String,
}

#[derive(Deserialize)]
struct RawVg {
    #[serde(default)]
    vg_name: String,
    #[serde(default)]
    vg_size: String,
    #[serde(default)]
    vg_free: String,
    #[serde(default)]
    vg_extent_size: String,
    #[serde(default)]
    vg_tags: String,
}

#[derive(Deserialize)]
struct RawLv {
    #[serde(default)]
    lv_name: String,
    #[serde(default)]
    vg_name: String,
    #[serde(default)]
    pool_lv: String,
    #[serde(default)]
    lv_attr: String,
    #[serde(default)]
    lv_size: String,
    #[serde(default)]
    data_percent: String,
    #[serde(default)]
    metadata_percent: String,
    #[serde(default)]
    chunk_size: String,
    #[serde(default)]
    lv_metadata_size: String,
    #[serde(default)]
    sync_percent: String,
    #[serde(default)]
    lv_health_status: String,
    #[serde(default)]
    lv_layout: String,
    #[serde(default)]
    raid_sync_action: String,
    #[serde(default)]
    thin_id: String,
    #[serde(default)]
    lv_tags: String,
}

/// A `*_tags` column: comma-separated, empty when there are none.
fn split_tags(raw: &str) -> Vec<String> {
    raw.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(String::from)
        .collect()
}

fn opt(s: String) -> Option<String> {
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_string())
}

fn bytes(
    command: &'static str,
    row: &str,
    field: &'static str,
    value: &str,
) -> Result<Option<u64>, ReportError> {
    let t = value.trim();
    if t.is_empty() {
        return Ok(None);
    }
    t.parse().map(Some).map_err(|_| ReportError::Number {
        command,
        row: row.to_string(),
        field,
        value: value.to_string(),
    })
}

fn percent(
    command: &'static str,
    row: &str,
    field: &'static str,
    value: &str,
) -> Result<Option<f64>, ReportError> {
    let t = value.trim();
    if t.is_empty() {
        return Ok(None);
    }
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(Some(v)),
        _ => Err(ReportError::Percent {
            command,
            row: row.to_string(),
            field,
            value: value.to_string(),
        }),
    }
}

fn doc<T: for<'de> Deserialize<'de>>(
    command: &'static str,
    json: &str,
) -> Result<Vec<T>, ReportError> {
    serde_json::from_str::<Doc<T>>(json)
        .map(|d| d.report)
        .map_err(|source| ReportError::Json { command, source })
}

/// `pvs --units b --nosuffix -v --reportformat json -o +pv_missing`.
pub fn parse_pvs(json: &str) -> Result<Vec<PhysicalVolume>, ReportError> {
    const C: &str = "pvs";
    let mut out = Vec::new();
    for item in doc::<PvItem>(C, json)? {
        for r in item.pv {
            let row = r.pv_name.clone();
            out.push(PhysicalVolume {
                pv_size: bytes(C, &row, "pv_size", &r.pv_size)?,
                pv_free: bytes(C, &row, "pv_free", &r.pv_free)?,
                dev_size: bytes(C, &row, "dev_size", &r.dev_size)?,
                missing: !r.pv_missing.trim().is_empty(),
                pv_name: r.pv_name,
                pv_uuid: r.pv_uuid,
                vg_name: opt(r.vg_name),
                pv_fmt: r.pv_fmt,
                pv_attr: r.pv_attr,
            });
        }
    }
    Ok(out)
}

/// `vgs -o vg_name,vg_size[,vg_free,vg_extent_size],vg_tags --units b --nosuffix --reportformat json [@lvms]`.
pub fn parse_vgs(json: &str) -> Result<Vec<VolumeGroupRow>, ReportError> {
    const C: &str = "vgs";
    let mut out = Vec::new();
    for item in doc::<VgItem>(C, json)? {
        for r in item.vg {
            let row = r.vg_name.clone();
            out.push(VolumeGroupRow {
                vg_size: bytes(C, &row, "vg_size", &r.vg_size)?,
                vg_free: bytes(C, &row, "vg_free", &r.vg_free)?,
                vg_extent_size: bytes(C, &row, "vg_extent_size", &r.vg_extent_size)?,
                tags: r
                    .vg_tags
                    .split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_string)
                    .collect(),
                vg_name: r.vg_name,
            });
        }
    }
    Ok(out)
}

/// `lvs -S vgname=<vg> --units b --nosuffix --reportformat json -o <LVMS's 12 columns,data_percent,thin_id>`.
pub fn parse_lvs(json: &str) -> Result<LvReport, ReportError> {
    const C: &str = "lvs";
    let mut reports = Vec::new();
    for item in doc::<LvItem>(C, json)? {
        let mut lvs = Vec::new();
        for r in item.lv {
            let row = format!("{}/{}", r.vg_name, r.lv_name);
            lvs.push(LogicalVolume {
                lv_size: bytes(C, &row, "lv_size", &r.lv_size)?,
                data_percent: percent(C, &row, "data_percent", &r.data_percent)?,
                metadata_percent: percent(C, &row, "metadata_percent", &r.metadata_percent)?,
                chunk_size: bytes(C, &row, "chunk_size", &r.chunk_size)?,
                lv_metadata_size: bytes(C, &row, "lv_metadata_size", &r.lv_metadata_size)?,
                sync_percent: percent(C, &row, "sync_percent", &r.sync_percent)?,
                thin_id: bytes(C, &row, "thin_id", &r.thin_id)?,
                lv_name: r.lv_name,
                vg_name: r.vg_name,
                pool_lv: opt(r.pool_lv),
                lv_attr: r.lv_attr,
                lv_health_status: opt(r.lv_health_status),
                lv_layout: opt(r.lv_layout),
                raid_sync_action: opt(r.raid_sync_action),
                tags: split_tags(&r.lv_tags),
            });
        }
        reports.push(lvs);
    }
    Ok(LvReport { reports })
}

/// Joins `vgs` rows with their PVs, in `vgs` order (LVMS `ListVGs`). Pass the tagged listing
/// (`vgs ... @lvms`) to get only lvms's VGs.
pub fn join_vgs(vgs: &[VolumeGroupRow], pvs: &[PhysicalVolume]) -> Vec<ExistingVg> {
    vgs.iter()
        .map(|vg| ExistingVg {
            name: vg.vg_name.clone(),
            size: vg.vg_size,
            free: vg.vg_free,
            tags: vg.tags.clone(),
            pvs: pvs
                .iter()
                .filter(|p| p.vg_name.as_deref() == Some(vg.vg_name.as_str()))
                .cloned()
                .collect(),
        })
        .collect()
}

/// The lvms-tagged VG of that name, if lvm knows it.
pub fn find_vg<'a>(vgs: &'a [ExistingVg], name: &str) -> Option<&'a ExistingVg> {
    vgs.iter().find(|v| v.name == name)
}

/// `lv_attr`, the 10 characters of `lvs -o lv_attr` (see lvs(8)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LvAttr {
    /// `t` thin pool, `V` thin volume, `r`/`R` RAID, `-` plain, ...
    pub volume_type: char,
    pub permissions: char,
    pub allocation_policy: char,
    pub fixed_minor: char,
    /// `a` active, `s` suspended, `-` inactive, `X` unknown (activation disabled), ...
    pub state: char,
    pub open: char,
    pub target_type: char,
    pub zero: char,
    /// `p` partial, `r` refresh needed, `m` mismatches, `w` writemostly, `X` unknown, `-` ok.
    pub health: char,
    pub skip_activation: char,
}

pub const VOLUME_TYPE_THIN_POOL: char = 't';
pub const VOLUME_TYPE_RAID: char = 'r';
pub const VOLUME_TYPE_RAID_NO_INITIAL_SYNC: char = 'R';
pub const STATE_ACTIVE: char = 'a';
pub const HEALTH_PARTIAL: char = 'p';

#[derive(Debug, Error, PartialEq, Eq)]
#[error("{0} is an invalid length lv_attr")]
pub struct LvAttrError(pub String);

impl LvAttr {
    /// LVMS `ParsedLvAttr`: exactly 10 characters.
    pub fn parse(raw: &str) -> Result<Self, LvAttrError> {
        let c: Vec<char> = raw.chars().collect();
        if c.len() != 10 {
            return Err(LvAttrError(raw.to_string()));
        }
        Ok(Self {
            volume_type: c[0],
            permissions: c[1],
            allocation_policy: c[2],
            fixed_minor: c[3],
            state: c[4],
            open: c[5],
            target_type: c[6],
            zero: c[7],
            health: c[8],
            skip_activation: c[9],
        })
    }

    pub fn is_thin_pool(&self) -> bool {
        self.volume_type == VOLUME_TYPE_THIN_POOL
    }

    pub fn is_raid(&self) -> bool {
        self.volume_type == VOLUME_TYPE_RAID || self.volume_type == VOLUME_TYPE_RAID_NO_INITIAL_SYNC
    }

    pub fn is_active(&self) -> bool {
        self.state == STATE_ACTIVE
    }
}

impl std::fmt::Display for LvAttr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for c in [
            self.volume_type,
            self.permissions,
            self.allocation_policy,
            self.fixed_minor,
            self.state,
            self.open,
            self.target_type,
            self.zero,
            self.health,
            self.skip_activation,
        ] {
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::fixture;

    #[test]
    fn pvs_real_output() {
        let pvs = parse_pvs(&fixture("pvs.json")).unwrap();
        assert_eq!(pvs.len(), 4);
        let p0 = &pvs[0];
        assert_eq!(p0.pv_name, "/dev/loop0");
        assert_eq!(p0.vg_name.as_deref(), Some("lvmsfix-thick"));
        assert_eq!(p0.pv_size, Some(205_520_896));
        // A full PV prints "0", never LVMS's "0G", under --units b --nosuffix.
        assert_eq!(p0.pv_free, Some(0));
        assert_eq!(p0.dev_size, Some(209_715_200));
        assert_eq!(p0.pv_fmt, "lvm2");
        assert_eq!(p0.pv_uuid.len(), 38);
        assert!(!p0.missing);
        // A bare PV: empty vg_name means no VG, and the whole device is free.
        assert_eq!(pvs[2].vg_name, None);
        assert_eq!(pvs[2].pv_free, pvs[2].pv_size);
        assert_eq!(pvs[2].pv_attr, "---");
    }

    #[test]
    fn pv_missing_is_a_non_empty_string() {
        let json = r#"{"report":[{"pv":[{"pv_name":"[unknown]","vg_name":"vg1","pv_size":"0","pv_free":"0","pv_uuid":"u","pv_missing":"missing"}]}]}"#;
        assert!(parse_pvs(json).unwrap()[0].missing);
    }

    #[test]
    fn sizes_with_units_are_refused_with_the_fix() {
        let json = r#"{"report":[{"pv":[{"pv_name":"/dev/sda","pv_size":"<475.94g"}]}]}"#;
        let err = parse_pvs(json).unwrap_err().to_string();
        assert!(
            err.contains("pv_size") && err.contains("--units b --nosuffix"),
            "{err}"
        );
        assert!(parse_pvs("WARNING: not json").is_err());
    }

    #[test]
    fn a_document_without_the_report_is_an_error_not_an_empty_host() {
        // lvm2 prints the report and its item even when nothing matches (lvs_empty.json).
        assert!(parse_pvs(r#"{"report":[{"pv":[]}]}"#).unwrap().is_empty());
        assert!(
            parse_lvs(&fixture("lvs_empty.json"))
                .unwrap()
                .all()
                .next()
                .is_none()
        );
        // Anything less is not what was asked for.
        for json in [r#"{}"#, r#"{"log":[]}"#, r#"{"report":[{}]}"#] {
            assert!(parse_pvs(json).is_err(), "pvs {json}");
            assert!(parse_vgs(json).is_err(), "vgs {json}");
            assert!(parse_lvs(json).is_err(), "lvs {json}");
        }
        // A vgs report handed to the pvs parser is refused, not read as "no PVs".
        assert!(parse_pvs(r#"{"report":[{"vg":[]}]}"#).is_err());
    }

    #[test]
    fn vgs_real_output_tags_and_join() {
        let tagged = parse_vgs(&fixture("vgs_tagged.json")).unwrap();
        assert_eq!(tagged.len(), 1);
        assert_eq!(tagged[0].vg_name, "lvmsfix-thick");
        assert_eq!(tagged[0].vg_size, Some(411_041_792));
        assert_eq!(tagged[0].vg_free, None);
        assert!(tagged[0].has_lvms_tag());

        let all = parse_vgs(&fixture("vgs_with_free.json")).unwrap();
        assert_eq!(all[0].vg_name, "lvmsfix-other");
        assert!(all[0].tags.is_empty() && !all[0].has_lvms_tag());
        assert_eq!(all[1].vg_free, Some(205_520_896));

        let pvs = parse_pvs(&fixture("pvs.json")).unwrap();
        let joined = join_vgs(&tagged, &pvs);
        assert_eq!(joined[0].pv_names(), vec!["/dev/loop0", "/dev/loop1"]);
        assert!(!joined[0].is_missing_devices());
        assert!(find_vg(&joined, "lvmsfix-thick").is_some());
        assert!(find_vg(&joined, "lvmsfix-other").is_none());
    }

    #[test]
    fn vg_tags_split_on_commas() {
        let json = r#"{"report":[{"vg":[{"vg_name":"a","vg_size":"1","vg_tags":"foo,lvms"}]}]}"#;
        let vgs = parse_vgs(json).unwrap();
        assert_eq!(vgs[0].tags, vec!["foo", "lvms"]);
        assert!(vgs[0].has_lvms_tag());
    }

    #[test]
    fn lvs_real_linear_rows() {
        let r = parse_lvs(&fixture("lvs_linear.json")).unwrap();
        assert_eq!(r.reports.len(), 1);
        let lv1 = r.find("lv1").unwrap();
        assert_eq!(lv1.vg_name, "lvmsfix-thick");
        assert_eq!(lv1.lv_size, Some(41_943_040));
        assert_eq!(lv1.metadata_percent, None);
        assert_eq!(lv1.lv_metadata_size, None);
        assert_eq!(lv1.chunk_size, Some(0));
        assert_eq!(lv1.pool_lv, None);
        assert_eq!(lv1.lv_layout.as_deref(), Some("linear"));
        let attr = LvAttr::parse(&lv1.lv_attr).unwrap();
        // activation=0: lvm cannot know the state and prints X.
        assert_eq!(attr.state, 'X');
        assert!(!attr.is_thin_pool());
    }

    #[test]
    fn lvs_empty_and_thin_rows() {
        let empty = parse_lvs(&fixture("lvs_empty.json")).unwrap();
        assert_eq!(empty.reports, vec![Vec::<LogicalVolume>::new()]);
        assert_eq!(parse_lvs(r#"{"report":[]}"#).unwrap().reports.len(), 0);

        let thin = parse_lvs(&fixture("lvs_thin.json")).unwrap();
        let pool = thin.find("thin-pool-1").unwrap();
        assert_eq!(pool.metadata_percent, Some(10.52));
        assert_eq!(pool.data_percent, Some(41.37));
        assert_eq!(pool.chunk_size, Some(131_072));
        assert_eq!(pool.lv_metadata_size, Some(1 << 30));
        let attr = LvAttr::parse(&pool.lv_attr).unwrap();
        assert!(attr.is_thin_pool() && attr.is_active());
        let thin_lv = thin.all().nth(1).unwrap();
        assert_eq!(thin_lv.pool_lv.as_deref(), Some("thin-pool-1"));

        let raid = parse_lvs(&fixture("lvs_raid1.json")).unwrap();
        let r0 = raid.all().next().unwrap();
        assert_eq!(r0.sync_percent, Some(42.5));
        assert_eq!(r0.lv_health_status.as_deref(), Some("partial"));
        assert!(LvAttr::parse(&r0.lv_attr).unwrap().is_raid());
    }

    #[test]
    fn bad_percent_is_refused() {
        let json =
            r#"{"report":[{"lv":[{"lv_name":"p","vg_name":"v","metadata_percent":"ten"}]}]}"#;
        let err = parse_lvs(json).unwrap_err().to_string();
        assert!(
            err.contains("metadata_percent") && err.contains("v/p"),
            "{err}"
        );
    }

    #[test]
    fn lv_attr_needs_ten_characters() {
        assert_eq!(
            LvAttr::parse("twi-a-tz-").unwrap_err().to_string(),
            "twi-a-tz- is an invalid length lv_attr"
        );
        let a = LvAttr::parse("twi-s-tz--").unwrap();
        assert!(a.is_thin_pool() && !a.is_active());
        assert_eq!(a.to_string(), "twi-s-tz--");
    }
}
