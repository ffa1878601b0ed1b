//! Every LVMS validation rule that can be judged from the object alone, as CEL
//! `x-kubernetes-validations` for the API server. Rules that need other objects (singleton,
//! namespace) are the operator's. Each message names the field and says what to do.
//!
//! Rules are data: a schema path plus the rule. `crd.rs` places them into the generated schema
//! and fails loudly if a path no longer exists, so a renamed field cannot drop a rule silently.

/// A path into the OpenAPI schema: property names, `[]` for array items.
pub type SchemaPath = &'static [&'static str];

#[derive(Clone, Debug)]
pub struct CelRule {
    pub path: SchemaPath,
    pub rule: String,
    pub message: String,
    /// Relative path of the field the error is reported on (must be a child of `path`).
    pub field_path: Option<&'static str>,
}

fn rule(path: SchemaPath, rule: impl Into<String>, message: impl Into<String>) -> CelRule {
    CelRule {
        path,
        rule: rule.into(),
        message: message.into(),
        field_path: None,
    }
}

impl CelRule {
    fn at(mut self, field_path: &'static str) -> Self {
        self.field_path = Some(field_path);
        self
    }
}

/// Upper bounds that keep CEL cost estimates inside the API server's budget (it rejects a CRD
/// whose rules could cost too much on a worst-case object). LVMS declares none; these are far
/// beyond real clusters, which run a handful of classes and disks per node.
pub const MAX_DEVICE_CLASSES: u64 = 16;
pub const MAX_PATHS: u64 = 32;
pub const MAX_PATH_LEN: u64 = 256;
pub const MAX_QUANTITY_LEN: u64 = 32;
pub const MAX_NODE_SELECTOR_TERMS: u64 = 8;
pub const MAX_SELECTOR_REQUIREMENTS: u64 = 16;
pub const MAX_SELECTOR_VALUES: u64 = 32;

/// (schema path, keyword, value) bounds placed next to the rules.
pub fn lvmcluster_bounds() -> Vec<(SchemaPath, &'static str, serde_json::Value)> {
    use serde_json::json;
    const NS: &[&str] = &[
        "spec",
        "storage",
        "deviceClasses",
        "[]",
        "nodeSelector",
        "nodeSelectorTerms",
    ];
    let mut out: Vec<(SchemaPath, &'static str, serde_json::Value)> = vec![
        (CLASSES, "maxItems", json!(MAX_DEVICE_CLASSES)),
        (
            &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "deviceSelector",
                "paths",
            ],
            "maxItems",
            json!(MAX_PATHS),
        ),
        (
            &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "deviceSelector",
                "paths",
            ],
            "x-kubernetes-list-type",
            json!("set"),
        ),
        (
            &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "deviceSelector",
                "optionalPaths",
            ],
            "x-kubernetes-list-type",
            json!("set"),
        ),
        (
            &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "deviceSelector",
                "paths",
                "[]",
            ],
            "maxLength",
            json!(MAX_PATH_LEN),
        ),
        (
            &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "deviceSelector",
                "optionalPaths",
            ],
            "maxItems",
            json!(MAX_PATHS),
        ),
        (
            &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "deviceSelector",
                "optionalPaths",
                "[]",
            ],
            "maxLength",
            json!(MAX_PATH_LEN),
        ),
        // LVM names are at most 127 characters.
        (
            &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "thinPoolConfig",
                "name",
            ],
            "maxLength",
            json!(127),
        ),
        (
            &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "thinPoolConfig",
                "chunkSize",
            ],
            "maxLength",
            json!(MAX_QUANTITY_LEN),
        ),
        (
            &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "thinPoolConfig",
                "metadataSize",
            ],
            "maxLength",
            json!(MAX_QUANTITY_LEN),
        ),
        (
            &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "raidConfig",
                "stripeSize",
            ],
            "maxLength",
            json!(MAX_QUANTITY_LEN),
        ),
        (
            &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "storageClassOptions",
                "additionalParameters",
            ],
            "maxProperties",
            json!(16),
        ),
        (
            &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "storageClassOptions",
                "additionalParameters",
            ],
            "additionalProperties",
            json!({"type": "string", "maxLength": 1024}),
        ),
        (
            &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "storageClassOptions",
                "additionalLabels",
            ],
            "maxProperties",
            json!(16),
        ),
        // Label values are checked by the schema itself: a regex over map keys would cost too much
        // in CEL, and the API server names the offending key in the error anyway.
        (
            &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "storageClassOptions",
                "additionalLabels",
            ],
            "additionalProperties",
            json!({"type": "string", "maxLength": 63, "pattern": LABEL_VALUE_RE_SCHEMA}),
        ),
        (NS, "maxItems", json!(MAX_NODE_SELECTOR_TERMS)),
    ];
    for field in ["matchExpressions", "matchFields"] {
        let list: SchemaPath = match field {
            "matchExpressions" => &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "nodeSelector",
                "nodeSelectorTerms",
                "[]",
                "matchExpressions",
            ],
            _ => &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "nodeSelector",
                "nodeSelectorTerms",
                "[]",
                "matchFields",
            ],
        };
        out.push((list, "maxItems", json!(MAX_SELECTOR_REQUIREMENTS)));
    }
    for (key, values, vitem) in [
        (
            &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "nodeSelector",
                "nodeSelectorTerms",
                "[]",
                "matchExpressions",
                "[]",
                "key",
            ][..],
            &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "nodeSelector",
                "nodeSelectorTerms",
                "[]",
                "matchExpressions",
                "[]",
                "values",
            ][..],
            &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "nodeSelector",
                "nodeSelectorTerms",
                "[]",
                "matchExpressions",
                "[]",
                "values",
                "[]",
            ][..],
        ),
        (
            &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "nodeSelector",
                "nodeSelectorTerms",
                "[]",
                "matchFields",
                "[]",
                "key",
            ][..],
            &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "nodeSelector",
                "nodeSelectorTerms",
                "[]",
                "matchFields",
                "[]",
                "values",
            ][..],
            &[
                "spec",
                "storage",
                "deviceClasses",
                "[]",
                "nodeSelector",
                "nodeSelectorTerms",
                "[]",
                "matchFields",
                "[]",
                "values",
                "[]",
            ][..],
        ),
    ] {
        out.push((key, "maxLength", json!(317)));
        out.push((values, "maxItems", json!(MAX_SELECTOR_VALUES)));
        out.push((vitem, "maxLength", json!(253)));
    }
    out
}

/// StorageClass parameter keys lvms owns (same as LVMS).
pub const OWNED_PARAMETER_KEYS: [&str; 2] =
    ["topolvm.io/device-class", "csi.storage.k8s.io/fstype"];
/// StorageClass label keys lvms owns (same as LVMS), plus the owner-label prefix.
pub const RESERVED_LABEL_KEYS: [&str; 4] = [
    "app.kubernetes.io/name",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/part-of",
    "app.kubernetes.io/component",
];
pub const OWNED_BY_LABEL_PREFIX: &str = "owned-by.topolvm.io/";

const CLASSES: SchemaPath = &["spec", "storage", "deviceClasses"];
const CLASS: SchemaPath = &["spec", "storage", "deviceClasses", "[]"];
const SELECTOR: SchemaPath = &["spec", "storage", "deviceClasses", "[]", "deviceSelector"];
const THIN: SchemaPath = &["spec", "storage", "deviceClasses", "[]", "thinPoolConfig"];
const RAID: SchemaPath = &["spec", "storage", "deviceClasses", "[]", "raidConfig"];
const SC_OPTS: SchemaPath = &[
    "spec",
    "storage",
    "deviceClasses",
    "[]",
    "storageClassOptions",
];

/// `paths + optionalPaths` of a device selector expression `s` (absent lists count as empty).
fn all_paths(s: &str) -> String {
    format!(
        "((has({s}.paths) ? {s}.paths : []) + (has({s}.optionalPaths) ? {s}.optionalPaths : []))"
    )
}

fn has_paths(class: &str) -> String {
    format!(
        "(has({class}.deviceSelector) && {}.size() > 0)",
        all_paths(&format!("{class}.deviceSelector"))
    )
}

/// A quantity field (int or string) as a CEL quantity.
fn q(field: &str) -> String {
    format!("quantity(string({field}))")
}

fn quantity_in_range(field: &str, min: &str, max: &str) -> String {
    format!(
        "!has(self.{field}) || (isQuantity(string(self.{field})) && {v}.compareTo(quantity('{min}')) >= 0 && {v}.compareTo(quantity('{max}')) <= 0)",
        v = q(&format!("self.{field}"))
    )
}

/// Static metadata size of a thin pool config expression, with LVMS's 1Gi default.
fn metadata_size(t: &str) -> String {
    format!(
        "(has({t}.metadataSize) ? {} : quantity('1Gi'))",
        q(&format!("{t}.metadataSize"))
    )
}

/// CEL for "the minimum device count of this raidConfig" (LVMS `MinDeviceCount`).
fn raid_min_devices(r: &str) -> String {
    let mirrors = format!("(has({r}.mirrors) ? {r}.mirrors : 1)");
    format!(
        "({r}.type == 'raid1' ? {mirrors} + 1 : ({r}.type == 'raid4' || {r}.type == 'raid5') ? (has({r}.stripes) ? {r}.stripes : 2) + 1 : {r}.type == 'raid6' ? (has({r}.stripes) ? {r}.stripes : 3) + 2 : 2 * ({mirrors} + 1))"
    )
}

const LABEL_VALUE_RE_SCHEMA: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";

/// Rules of the LVMCluster CRD.
pub fn lvmcluster_rules() -> Vec<CelRule> {
    let list = |xs: &[&str]| {
        format!(
            "[{}]",
            xs.iter()
                .map(|x| format!("'{x}'"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let powers_of_two = format!(
        "[{}]",
        (0..=40)
            .map(|i| (1u64 << i).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    vec![
        // ---- the whole list of classes ----
        rule(
            CLASSES,
            "self.filter(c, has(c.default) && c.default).size() <= 1",
            "spec.storage.deviceClasses: only one default deviceClass is allowed; set default: true on at most one class",
        ),
        rule(
            CLASSES,
            format!("self.size() <= 1 || self.all(c, {})", has_paths("c")),
            "spec.storage.deviceClasses: with more than one device class every class needs deviceSelector.paths or deviceSelector.optionalPaths; add device paths to each class",
        ),
        rule(
            CLASSES,
            format!(
                "self.all(a, self.all(b, a.name == b.name || !has(a.deviceSelector) || !has(b.deviceSelector) || has(a.nodeSelector) != has(b.nodeSelector) || (has(a.nodeSelector) && a.nodeSelector != b.nodeSelector) || !{pa}.exists(p, p in {pb})))",
                pa = all_paths("a.deviceSelector"),
                pb = all_paths("b.deviceSelector"),
            ),
            "spec.storage.deviceClasses: a device path is used by two device classes with the same nodeSelector; give each device to one class only",
        ),
        // ---- one class ----
        rule(
            CLASS,
            "!(has(self.thinPoolConfig) && has(self.raidConfig))",
            "raidConfig and thinPoolConfig are mutually exclusive: RAID classes are thick-provisioned; remove one of them",
        )
        .at(".raidConfig"),
        rule(
            CLASS,
            format!("!has(self.raidConfig) || {}", has_paths("self")),
            "raidConfig needs at least one of deviceSelector.paths or deviceSelector.optionalPaths; list the RAID member devices",
        )
        .at(".raidConfig"),
        rule(
            CLASS,
            format!(
                "!has(self.raidConfig) || !has(self.deviceSelector) || {}.size() >= {}",
                all_paths("self.deviceSelector"),
                raid_min_devices("self.raidConfig")
            ),
            "deviceSelector: too few devices for raidConfig: raid1 needs mirrors+1, raid4/raid5 stripes+1 (3 by default), raid6 stripes+2 (5 by default), raid10 2*(mirrors+1); add device paths or lower mirrors/stripes",
        )
        .at(".deviceSelector"),
        rule(
            CLASS,
            "!has(self.raidConfig) || self.raidConfig.type != 'raid10' || !has(self.deviceSelector) || (has(self.deviceSelector.optionalPaths) && self.deviceSelector.optionalPaths.size() > 0) || (has(self.deviceSelector.paths) ? self.deviceSelector.paths.size() : 0) % ((has(self.raidConfig.mirrors) ? self.raidConfig.mirrors : 1) + 1) == 0",
            "deviceSelector: raid10 needs a device count that is a multiple of mirrors+1; add or remove paths",
        )
        .at(".deviceSelector"),
        // Transition rules of one class (oldSelf is the class with the same name).
        rule(
            CLASS,
            "has(self.thinPoolConfig) == has(oldSelf.thinPoolConfig)",
            "thinPoolConfig can not be added to or removed from an existing device class; create a new device class instead",
        )
        .at(".thinPoolConfig"),
        rule(
            CLASS,
            "has(self.raidConfig) == has(oldSelf.raidConfig)",
            "raidConfig can not be added to or removed from an existing device class; create a new device class instead",
        )
        .at(".raidConfig"),
        rule(
            CLASS,
            "has(self.nodeSelector) == has(oldSelf.nodeSelector) && (!has(self.nodeSelector) || self.nodeSelector == oldSelf.nodeSelector)",
            "nodeSelector can not be changed; create a new device class for other nodes",
        )
        .at(".nodeSelector"),
        rule(
            CLASS,
            "(has(self.deviceSelector) && has(self.deviceSelector.forceWipeDevicesAndDestroyAllData)) == (has(oldSelf.deviceSelector) && has(oldSelf.deviceSelector.forceWipeDevicesAndDestroyAllData)) && (!has(self.deviceSelector) || !has(self.deviceSelector.forceWipeDevicesAndDestroyAllData) || self.deviceSelector.forceWipeDevicesAndDestroyAllData == oldSelf.deviceSelector.forceWipeDevicesAndDestroyAllData)",
            "deviceSelector.forceWipeDevicesAndDestroyAllData can not be changed after creation; restore its previous value",
        )
        .at(".deviceSelector"),
        rule(
            CLASS,
            format!("{} || !{}", has_paths("oldSelf"), has_paths("self")),
            "deviceSelector: device paths can not be added after a device class was created without paths; create a new device class with paths",
        )
        .at(".deviceSelector"),
        rule(
            CLASS,
            format!("!{} || {}", has_paths("oldSelf"), has_paths("self")),
            "deviceSelector: cannot remove all device paths from a device class; at least one path in paths or optionalPaths must remain",
        )
        .at(".deviceSelector"),
        rule(
            CLASS,
            "has(oldSelf.storageClassOptions) || !has(self.storageClassOptions) || ((!has(self.storageClassOptions.reclaimPolicy) || self.storageClassOptions.reclaimPolicy == 'Delete') && (!has(self.storageClassOptions.volumeBindingMode) || self.storageClassOptions.volumeBindingMode == 'WaitForFirstConsumer') && (!has(self.storageClassOptions.additionalParameters) || self.storageClassOptions.additionalParameters.size() == 0))",
            "storageClassOptions: reclaimPolicy, volumeBindingMode and additionalParameters are immutable once the StorageClass exists; only additionalLabels may be set on an existing device class",
        )
        .at(".storageClassOptions"),
        rule(&["spec", "storage", "deviceClasses", "[]", "fstype"], "self == oldSelf", "fstype is immutable; create a new device class for another filesystem"),
        // ---- device selector ----
        rule(
            SELECTOR,
            format!("{}.size() > 0", all_paths("self")),
            "deviceSelector: either paths or optionalPaths must be specified when deviceSelector is set; add a device path or remove deviceSelector",
        ),
        // Duplicates inside one list are rejected by `x-kubernetes-list-type: set`.
        rule(
            SELECTOR,
            "!has(self.paths) || !has(self.optionalPaths) || !self.paths.exists(p, p in self.optionalPaths)",
            "deviceSelector: a device path is listed in both paths and optionalPaths; list each device once",
        ),
        rule(
            &["spec", "storage", "deviceClasses", "[]", "deviceSelector", "paths"],
            "self.all(p, p.startsWith('/dev/'))",
            "every entry of paths must be an absolute device path starting with /dev/ (prefer /dev/disk/by-id/...)",
        ),
        rule(
            &["spec", "storage", "deviceClasses", "[]", "deviceSelector", "optionalPaths"],
            "self.all(p, p.startsWith('/dev/'))",
            "every entry of optionalPaths must be an absolute device path starting with /dev/ (prefer /dev/disk/by-id/...)",
        ),
        // ---- thin pool ----
        rule(
            THIN,
            "!(has(self.chunkSize) && self.chunkSizeCalculationPolicy == 'Host')",
            "chunkSize can not be set when chunkSizeCalculationPolicy is Host; remove chunkSize or use the Static policy",
        )
        .at(".chunkSize"),
        rule(THIN, quantity_in_range("chunkSize", "64Ki", "1Gi"), "chunkSize must be a quantity between 64Ki and 1Gi")
            .at(".chunkSize"),
        rule(
            THIN,
            "!(has(self.metadataSize) && self.metadataSizeCalculationPolicy == 'Host')",
            "metadataSize can not be set when metadataSizeCalculationPolicy is Host; remove metadataSize or use the Static policy",
        )
        .at(".metadataSize"),
        rule(THIN, quantity_in_range("metadataSize", "2Mi", "16Gi"), "metadataSize must be a quantity between 2Mi and 16Gi")
            .at(".metadataSize"),
        rule(THIN, "self.name == oldSelf.name", "thinPoolConfig.name can not be changed after creation; restore the previous name")
            .at(".name"),
        rule(
            THIN,
            "self.sizePercent == oldSelf.sizePercent",
            "thinPoolConfig.sizePercent can not be changed after creation; restore the previous value",
        )
        .at(".sizePercent"),
        rule(
            THIN,
            "self.chunkSizeCalculationPolicy == oldSelf.chunkSizeCalculationPolicy",
            "thinPoolConfig.chunkSizeCalculationPolicy can not be changed after creation; restore the previous value",
        )
        .at(".chunkSizeCalculationPolicy"),
        rule(
            THIN,
            "has(self.chunkSize) == has(oldSelf.chunkSize) && (!has(self.chunkSize) || string(self.chunkSize) == string(oldSelf.chunkSize))",
            "thinPoolConfig.chunkSize can not be changed after creation; restore the previous value",
        )
        .at(".chunkSize"),
        rule(
            THIN,
            format!(
                "self.metadataSizeCalculationPolicy != 'Static' || oldSelf.metadataSizeCalculationPolicy != 'Static' || !isQuantity(string(has(self.metadataSize) ? self.metadataSize : '1Gi')) || !isQuantity(string(has(oldSelf.metadataSize) ? oldSelf.metadataSize : '1Gi')) || {}.compareTo({}) >= 0",
                metadata_size("self"),
                metadata_size("oldSelf")
            ),
            "thinPoolConfig.metadataSize can only be increased; set a size at least as large as before",
        )
        .at(".metadataSize"),
        // ---- RAID ----
        rule(RAID, "self == oldSelf", "raidConfig is immutable after creation; create a new device class for another RAID layout"),
        rule(
            RAID,
            "!has(self.mirrors) || self.type == 'raid1' || self.type == 'raid10'",
            "mirrors is only valid for raid1 and raid10; remove mirrors",
        )
        .at(".mirrors"),
        rule(RAID, "!has(self.stripes) || self.type != 'raid1'", "stripes is only valid for raid4, raid5, raid6, and raid10; remove stripes")
            .at(".stripes"),
        rule(
            RAID,
            "!has(self.stripeSize) || self.type != 'raid1'",
            "stripeSize is only valid for raid4, raid5, raid6, and raid10; remove stripeSize",
        )
        .at(".stripeSize"),
        rule(
            RAID,
            format!(
                "!has(self.stripeSize) || (isQuantity(string(self.stripeSize)) && {v}.isInteger() && {powers_of_two}.exists(p, p == {v}.asInteger()))",
                v = q("self.stripeSize")
            ),
            "stripeSize must be a power of 2 (e.g., 64Ki, 128Ki, 256Ki, 512Ki)",
        )
        .at(".stripeSize"),
        // ---- StorageClass options ----
        rule(
            &["spec", "storage", "deviceClasses", "[]", "storageClassOptions", "reclaimPolicy"],
            "self == oldSelf",
            "reclaimPolicy is immutable once set; restore the previous value",
        ),
        rule(
            &["spec", "storage", "deviceClasses", "[]", "storageClassOptions", "volumeBindingMode"],
            "self == oldSelf",
            "volumeBindingMode is immutable once set; restore the previous value",
        ),
        rule(
            &["spec", "storage", "deviceClasses", "[]", "storageClassOptions", "additionalParameters"],
            "self == oldSelf",
            "additionalParameters is immutable once set; restore the previous parameters",
        ),
        rule(
            &["spec", "storage", "deviceClasses", "[]", "storageClassOptions", "additionalParameters"],
            format!("self.all(k, k != '' && !(k in {}))", list(&OWNED_PARAMETER_KEYS)),
            format!(
                "additionalParameters: keys must be non-empty and must not be one of {} (they are managed by lvms)",
                OWNED_PARAMETER_KEYS.join(", ")
            ),
        ),
        rule(
            SC_OPTS,
            format!(
                "!has(self.additionalLabels) || self.additionalLabels.all(k, !(k in {}) && !k.startsWith('{OWNED_BY_LABEL_PREFIX}'))",
                list(&RESERVED_LABEL_KEYS)
            ),
            format!(
                "additionalLabels: keys {} and the prefix {OWNED_BY_LABEL_PREFIX} are operator-reserved and cannot be set",
                RESERVED_LABEL_KEYS.join(", ")
            ),
        )
        .at(".additionalLabels"),
        // ---- removal of classes (whole spec, old vs new) ----
        rule(
            &["spec", "storage"],
            "!has(oldSelf.deviceClasses) || oldSelf.deviceClasses.size() == 0 || (has(self.deviceClasses) && self.deviceClasses.size() > 0)",
            "spec.storage.deviceClasses: cannot remove all device classes; at least one device class must remain (delete the LVMCluster instead)",
        )
        .at(".deviceClasses"),
        rule(
            &["spec", "storage"],
            "!has(oldSelf.deviceClasses) || oldSelf.deviceClasses.all(o, !(has(o.default) && o.default) || (has(self.deviceClasses) && self.deviceClasses.exists(c, c.name == o.name)))",
            "spec.storage.deviceClasses: the default device class cannot be removed; make another class default first or keep it",
        )
        .at(".deviceClasses"),
    ]
}

/// Rules of the LVMVolumeGroup CRD (LVMS keeps only these two; vg-manager defends the rest).
pub fn lvmvolumegroup_rules() -> Vec<CelRule> {
    vec![
        rule(
            &["spec"],
            "!(has(self.raidConfig) && has(self.thinPoolConfig))",
            "raidConfig and thinPoolConfig are mutually exclusive",
        ),
        rule(
            &["spec", "raidConfig"],
            "self == oldSelf",
            "raidConfig is immutable after creation",
        ),
        // The LVMCluster's rule, on the object vg-manager reads: one written by hand (or by
        // anyone who may write LVMVolumeGroups) cannot name a file outside /dev/ either.
        rule(
            &["spec", "deviceSelector", "paths"],
            "self.all(p, p.startsWith('/dev/'))",
            "every entry of paths must be an absolute device path starting with /dev/ (prefer /dev/disk/by-id/...)",
        ),
        rule(
            &["spec", "deviceSelector", "optionalPaths"],
            "self.all(p, p.startsWith('/dev/'))",
            "every entry of optionalPaths must be an absolute device path starting with /dev/ (prefer /dev/disk/by-id/...)",
        ),
    ]
}
