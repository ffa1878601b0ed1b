//! Prometheus metrics for `/metrics` (prometheus-client, OpenMetrics text): reconcile passes
//! per unit, journal appends, supervisor restarts, journal gauges read at scrape time, and in
//! vg-manager the node gauges LVMS exports under TopoLVM's names.

pub mod exposition;

use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use lvms_actors::{PassReport, RestartHook};
use lvms_journal::Journal;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use tracing::warn;

use crate::node::vg::gauges::{RaidGauges, VolumeGroupGauges};

/// What the encoder produces (OpenMetrics 1.0 text, which Prometheus scrapes natively).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The encoded registry, as the diagnostics server asks for it on each scrape.
pub type MetricsText = Arc<dyn Fn() -> String + Send + Sync>;

/// Which process the registry serves: only vg-manager has node gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Process {
    Operator,
    VgManager,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UnitLabel {
    unit: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    unit: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FlushedLabel {
    flushed: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ChildLabel {
    child: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OrphanLabels {
    kind: String,
    node: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabels {
    device_class: String,
    node: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;
type BytesGauges = Family<NodeLabels, Gauge>;
type PercentGauges = Family<NodeLabels, Gauge<f64, AtomicU64>>;

/// A pass takes milliseconds when nothing changes and seconds when lvm2 or the API server is
/// slow: 1 ms .. ~33 s.
fn pass_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// An unflushed append takes microseconds, an fsync milliseconds: 50 µs .. ~0.8 s.
fn append_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 15))
}

/// The gauges of one device class on one node (vg-manager only).
struct NodeGauges {
    vg_size: BytesGauges,
    vg_available: BytesGauges,
    pool_data: PercentGauges,
    pool_metadata: PercentGauges,
    pool_size: BytesGauges,
    pool_overprovisioned: BytesGauges,
    raid: [BytesGauges; 5],
    orphans: Family<OrphanLabels, Gauge>,
}

/// LVMS's RAID gauges, in the order of [`RaidGauges`]' fields.
const RAID_GAUGES: [(&str, &str); 5] = [
    (
        "lvms_raid_health_status",
        "RAID health of the device class on this node: 0 healthy, 1 degraded, 2 failed",
    ),
    (
        "lvms_raid_sync_in_progress",
        "1 while any RAID LV of the device class resynchronizes, else 0",
    ),
    (
        "lvms_raid_member_count",
        "Physical volumes in the RAID volume group",
    ),
    (
        "lvms_raid_degraded_count",
        "Missing or failed physical volumes in the RAID volume group",
    ),
    (
        "lvms_raid_sync_percent",
        "The slowest RAID LV's resynchronization, in percent",
    ),
];

struct Inner {
    registry: Registry,
    passes: Family<UnitLabel, Counter>,
    errors: Family<ErrorLabels, Counter>,
    durations: HistogramFamily<UnitLabel>,
    appends: HistogramFamily<FlushedLabel>,
    restarts: Family<ChildLabel, Counter>,
    journal: Arc<OnceLock<Arc<Journal>>>,
    node: Option<NodeGauges>,
}

/// The process's metrics; cheap to clone (one registry behind an `Arc`).
#[derive(Clone)]
pub struct Metrics(Arc<Inner>);

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    pub fn new(process: Process) -> Self {
        let mut registry = Registry::default();
        let passes = Family::<UnitLabel, Counter>::default();
        registry.register(
            "lvms_reconcile",
            "Reconcile passes run, per unit, whatever their result",
            passes.clone(),
        );
        let errors = Family::<ErrorLabels, Counter>::default();
        registry.register(
            "lvms_reconcile_errors",
            "Reconcile passes that ended in an error, per unit and error reason",
            errors.clone(),
        );
        let durations: HistogramFamily<UnitLabel> =
            Family::new_with_constructor(pass_histogram as fn() -> Histogram);
        registry.register_with_unit(
            "lvms_reconcile_duration",
            "Wall time of a reconcile pass, per unit",
            Unit::Seconds,
            durations.clone(),
        );
        let appends: HistogramFamily<FlushedLabel> =
            Family::new_with_constructor(append_histogram as fn() -> Histogram);
        registry.register_with_unit(
            "lvms_journal_append_duration",
            "Time to append one journal record, by whether the append was flushed to disk",
            Unit::Seconds,
            appends.clone(),
        );
        let restarts = Family::<ChildLabel, Counter>::default();
        registry.register(
            "lvms_actor_restarts",
            "Supervised actors restarted after they crashed, per child",
            restarts.clone(),
        );
        registry.register(
            "lvms_kube_api_requests",
            "Requests sent to the Kubernetes API server, by verb and resource",
            super::api_requests::API_REQUESTS.clone(),
        );
        let journal: Arc<OnceLock<Arc<Journal>>> = Arc::default();
        registry.register_collector(Box::new(JournalGauges(journal.clone())));
        let node = (process == Process::VgManager).then(|| node_gauges(&mut registry));
        Metrics(Arc::new(Inner {
            registry,
            passes,
            errors,
            durations,
            appends,
            restarts,
            journal,
            node,
        }))
    }

    /// Record one reconcile pass (every pass, journaled or not).
    pub fn pass(&self, pass: &PassReport<'_>) {
        let unit = UnitLabel {
            unit: pass.unit.to_string(),
        };
        self.0.passes.get_or_create(&unit).inc();
        self.0
            .durations
            .get_or_create(&unit)
            .observe(pass.duration.as_secs_f64());
        if !pass.ok {
            let labels = ErrorLabels {
                unit: unit.unit,
                reason: pass.reason.unwrap_or("Unknown").to_string(),
            };
            self.0.errors.get_or_create(&labels).inc();
        }
    }

    pub fn restart(&self, child: &str) {
        self.0
            .restarts
            .get_or_create(&ChildLabel {
                child: child.to_string(),
            })
            .inc();
    }

    /// The supervisor's restart hook, counting into `lvms_actor_restarts_total`.
    pub fn restart_hook(&self) -> RestartHook {
        let m = self.clone();
        Arc::new(move |child: &str| m.restart(child))
    }

    pub fn journal_append(&self, took: Duration, flushed: bool) {
        let label = FlushedLabel {
            flushed: flushed.to_string(),
        };
        self.0
            .appends
            .get_or_create(&label)
            .observe(took.as_secs_f64());
    }

    /// Time the journal's appends and read its gauges at each scrape. Only the first journal
    /// counts (a process has one).
    pub fn watch_journal(&self, journal: &Arc<Journal>) {
        if self.0.journal.set(journal.clone()).is_err() {
            return;
        }
        let m = self.clone();
        journal.set_append_observer(Arc::new(move |took, flushed| {
            m.journal_append(took, flushed)
        }));
    }

    /// The node gauges of one device class after a volume-group pass (no-op in the operator).
    pub fn set_volume_group(&self, device_class: &str, node: &str, g: &VolumeGroupGauges) {
        let Some(n) = &self.0.node else {
            return;
        };
        let labels = NodeLabels {
            device_class: device_class.to_string(),
            node: node.to_string(),
        };
        n.vg_size.get_or_create(&labels).set(bytes(g.size_bytes));
        n.vg_available
            .get_or_create(&labels)
            .set(bytes(g.available_bytes));
        let pool = g.thin_pool.as_ref();
        set_or_remove(&n.pool_size, &labels, pool.map(|p| bytes(p.size_bytes)));
        set_or_remove(
            &n.pool_overprovisioned,
            &labels,
            pool.map(|p| bytes(p.overprovisioned_available)),
        );
        set_or_remove(&n.pool_data, &labels, pool.and_then(|p| p.data_percent));
        set_or_remove(
            &n.pool_metadata,
            &labels,
            pool.and_then(|p| p.metadata_percent),
        );
    }

    /// The RAID gauges of a device class after a pass: set for a RAID class, gone otherwise.
    pub fn set_raid(&self, device_class: &str, node: &str, raid: Option<&RaidGauges>) {
        let Some(n) = &self.0.node else {
            return;
        };
        let labels = NodeLabels {
            device_class: device_class.to_string(),
            node: node.to_string(),
        };
        let values = raid.map(|r| {
            [
                r.health,
                r.sync_in_progress,
                r.member_count,
                r.degraded_count,
                r.sync_percent,
            ]
        });
        for (i, family) in n.raid.iter().enumerate() {
            set_or_remove(family, &labels, values.map(|v| v[i]));
        }
    }

    /// The node's last audit: one series per finding kind, zeros included.
    pub fn set_orphans<'a>(&self, node: &str, counts: impl IntoIterator<Item = (&'a str, u64)>) {
        let Some(n) = &self.0.node else {
            return;
        };
        for (kind, count) in counts {
            let labels = OrphanLabels {
                kind: kind.to_string(),
                node: node.to_string(),
            };
            n.orphans.get_or_create(&labels).set(bytes(count));
        }
    }

    /// Drop a device class's node gauges once its volume group is gone from the node.
    pub fn forget_volume_group(&self, device_class: &str, node: &str) {
        let Some(n) = &self.0.node else {
            return;
        };
        let labels = NodeLabels {
            device_class: device_class.to_string(),
            node: node.to_string(),
        };
        n.vg_size.remove(&labels);
        n.vg_available.remove(&labels);
        n.pool_size.remove(&labels);
        n.pool_overprovisioned.remove(&labels);
        n.pool_data.remove(&labels);
        n.pool_metadata.remove(&labels);
        for family in &n.raid {
            family.remove(&labels);
        }
    }

    /// The registry in the text format ([`CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.0.registry) {
            // Only a collector can fail; serve what was encoded rather than nothing.
            warn!(error = %e, "encoding metrics failed");
        }
        out
    }

    /// [`Metrics::encode`] as the diagnostics server takes it.
    pub fn text(&self) -> MetricsText {
        let m = self.clone();
        Arc::new(move || m.encode())
    }
}

fn node_gauges(registry: &mut Registry) -> NodeGauges {
    let g = NodeGauges {
        vg_size: Family::default(),
        vg_available: Family::default(),
        pool_data: Family::default(),
        pool_metadata: Family::default(),
        pool_size: Family::default(),
        pool_overprovisioned: Family::default(),
        raid: Default::default(),
        orphans: Family::default(),
    };
    registry.register(
        "lvms_orphans",
        "Findings of the node's last orphan audit, by kind (lvms audit lists them)",
        g.orphans.clone(),
    );
    for ((name, help), family) in RAID_GAUGES.iter().zip(&g.raid) {
        registry.register(*name, *help, family.clone());
    }
    registry.register_with_unit(
        "topolvm_volumegroup_size",
        "Size of the device class's volume group on this node",
        Unit::Bytes,
        g.vg_size.clone(),
    );
    registry.register_with_unit(
        "topolvm_volumegroup_available",
        "Unallocated space in the device class's volume group on this node",
        Unit::Bytes,
        g.vg_available.clone(),
    );
    registry.register(
        "topolvm_thinpool_data_percent",
        "Share of the thin pool's data space in use, in percent",
        g.pool_data.clone(),
    );
    registry.register(
        "topolvm_thinpool_metadata_percent",
        "Share of the thin pool's metadata space in use, in percent",
        g.pool_metadata.clone(),
    );
    registry.register_with_unit(
        "topolvm_thinpool_size",
        "Size of the thin pool",
        Unit::Bytes,
        g.pool_size.clone(),
    );
    registry.register(
        "topolvm_thinpool_overprovisioned_available",
        "Bytes thin volumes may still claim: pool size times overprovisionRatio, less the thin volumes' sizes",
        g.pool_overprovisioned.clone(),
    );
    g
}

fn bytes(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn set_or_remove<N, A>(family: &Family<NodeLabels, Gauge<N, A>>, labels: &NodeLabels, v: Option<N>)
where
    A: prometheus_client::metrics::gauge::Atomic<N> + Default,
{
    match v {
        Some(v) => {
            family.get_or_create(labels).set(v);
        }
        None => {
            family.remove(labels);
        }
    }
}

/// `lvms_journal_open_intents` and `lvms_journal_size_bytes`, read when scraped (both are
/// cheap: the open-intent index and sled's file sizes).
#[derive(Debug)]
struct JournalGauges(Arc<OnceLock<Arc<Journal>>>);

impl Collector for JournalGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let Some(journal) = self.0.get() else {
            return Ok(()); // not opened yet
        };
        // A read error skips the gauge: the rest of the scrape is still worth serving.
        match journal.open_intent_seqs() {
            Ok(open) => {
                let g = ConstGauge::new(i64::try_from(open.len()).unwrap_or(i64::MAX));
                let m = encoder.encode_descriptor(
                    "lvms_journal_open_intents",
                    "Journal intents without an outcome: side effects started and not yet recorded as done.",
                    None,
                    g.metric_type(),
                )?;
                g.encode(m)?;
            }
            Err(e) => warn!(error = %e, "metrics: reading the journal's open intents failed"),
        }
        match journal.size_on_disk() {
            Ok(size) => {
                let g = ConstGauge::new(bytes(size));
                let m = encoder.encode_descriptor(
                    "lvms_journal_size",
                    "Space the journal takes on disk.",
                    Some(&Unit::Bytes),
                    g.metric_type(),
                )?;
                g.encode(m)?;
            }
            Err(e) => warn!(error = %e, "metrics: reading the journal's size failed"),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::exposition::parse;
    use super::*;
    use crate::node::vg::gauges::ThinPoolGauges;

    fn report<'a>(unit: &'a str, ok: bool, reason: Option<&'a str>) -> PassReport<'a> {
        PassReport {
            unit,
            ok,
            reason,
            duration: Duration::from_millis(12),
            journaled: false,
            subject: None,
        }
    }

    #[test]
    fn passes_errors_and_restarts_are_counted() {
        let m = Metrics::new(Process::Operator);
        m.pass(&report("topolvm-csi-driver", true, None));
        m.pass(&report("topolvm-csi-driver", true, None));
        m.pass(&report("vg-manager", false, Some("ApplyFailed")));
        m.restart("status");
        m.journal_append(Duration::from_micros(80), false);
        m.journal_append(Duration::from_millis(3), true);
        let text = m.encode();
        let e = parse(&text).unwrap_or_else(|err| panic!("{err}\n{text}"));
        let csi = [("unit", "topolvm-csi-driver")];
        assert_eq!(e.value("lvms_reconcile_total", &csi), Some(2.0));
        assert_eq!(
            e.value("lvms_reconcile_total", &[("unit", "vg-manager")]),
            Some(1.0)
        );
        assert_eq!(
            e.value(
                "lvms_reconcile_errors_total",
                &[("unit", "vg-manager"), ("reason", "ApplyFailed")]
            ),
            Some(1.0)
        );
        assert_eq!(
            e.value(
                "lvms_reconcile_errors_total",
                &[("unit", "topolvm-csi-driver"), ("reason", "ApplyFailed")]
            ),
            None
        );
        assert_eq!(
            e.value("lvms_reconcile_duration_seconds_count", &csi),
            Some(2.0)
        );
        let sum = e
            .value("lvms_reconcile_duration_seconds_sum", &csi)
            .unwrap();
        assert!((sum - 0.024).abs() < 1e-9, "{sum}");
        assert_eq!(
            e.value(
                "lvms_reconcile_duration_seconds_bucket",
                &[("unit", "topolvm-csi-driver"), ("le", "+Inf")]
            ),
            Some(2.0)
        );
        assert_eq!(
            e.value("lvms_actor_restarts_total", &[("child", "status")]),
            Some(1.0)
        );
        for flushed in ["true", "false"] {
            assert_eq!(
                e.value(
                    "lvms_journal_append_duration_seconds_count",
                    &[("flushed", flushed)]
                ),
                Some(1.0)
            );
        }
        assert_eq!(e.kind("lvms_reconcile"), Some("counter"));
        assert_eq!(e.kind("lvms_reconcile_duration_seconds"), Some("histogram"));
        // No journal yet, no node gauges in the operator.
        assert!(!text.contains("lvms_journal_open_intents"));
        assert!(!text.contains("topolvm_"));
    }

    #[test]
    fn journal_gauges_are_read_at_scrape_time() {
        let dir = std::env::temp_dir().join(format!("lvms-metrics-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let journal = Arc::new(Journal::open(&dir).unwrap());
        let m = Metrics::new(Process::Operator);
        m.watch_journal(&journal);
        let intent = lvms_journal::Intent {
            unit: "u".into(),
            object: lvms_journal::ObjectRef {
                kind: "K".into(),
                namespace: String::new(),
                name: "n".into(),
                uid: String::new(),
                generation: 0,
            },
            action: "apply".into(),
            args: Vec::new(),
            idempotency_key: "k".into(),
            desired_digest: "d".into(),
            lease_epoch: 0,
            regarding: Vec::new(),
        };
        journal
            .append_intent(intent, lvms_journal::Trace::default())
            .unwrap();
        let e = parse(&m.encode()).unwrap();
        assert_eq!(e.value("lvms_journal_open_intents", &[]), Some(1.0));
        assert!(e.value("lvms_journal_size_bytes", &[]).unwrap() > 0.0);
        // The append went through the observer: one flushed (write-ahead) append.
        assert_eq!(
            e.value(
                "lvms_journal_append_duration_seconds_count",
                &[("flushed", "true")]
            ),
            Some(1.0)
        );
        drop((m, journal));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn orphan_gauges_follow_the_last_audit() {
        let m = Metrics::new(Process::VgManager);
        m.set_orphans("node-a", [("leaked-lv", 2), ("missing-lv", 0)]);
        m.set_orphans("node-a", [("leaked-lv", 1)]);
        let e = parse(&m.encode()).unwrap();
        let at = |k| [("kind", k), ("node", "node-a")];
        assert_eq!(e.value("lvms_orphans", &at("leaked-lv")), Some(1.0));
        assert_eq!(e.value("lvms_orphans", &at("missing-lv")), Some(0.0));
        // The operator has no node gauges.
        let op = Metrics::new(Process::Operator);
        op.set_orphans("node-a", [("leaked-lv", 2)]);
        assert!(!op.encode().contains("lvms_orphans"));
    }

    #[test]
    fn node_gauges_follow_the_last_pass() {
        let m = Metrics::new(Process::VgManager);
        let thin = VolumeGroupGauges {
            size_bytes: 100,
            available_bytes: 10,
            thin_pool: Some(ThinPoolGauges {
                size_bytes: 90,
                data_percent: Some(41.37),
                metadata_percent: Some(10.5),
                overprovisioned_available: 800,
            }),
        };
        m.set_volume_group("thin", "node-a", &thin);
        let at = [("device_class", "thin"), ("node", "node-a")];
        let e = parse(&m.encode()).unwrap();
        assert_eq!(e.value("topolvm_volumegroup_size_bytes", &at), Some(100.0));
        assert_eq!(
            e.value("topolvm_volumegroup_available_bytes", &at),
            Some(10.0)
        );
        assert_eq!(e.value("topolvm_thinpool_size_bytes", &at), Some(90.0));
        assert_eq!(e.value("topolvm_thinpool_data_percent", &at), Some(41.37));
        assert_eq!(
            e.value("topolvm_thinpool_metadata_percent", &at),
            Some(10.5)
        );
        assert_eq!(
            e.value("topolvm_thinpool_overprovisioned_available", &at),
            Some(800.0)
        );

        // The pool is gone from the report: its gauges go, the VG's stay.
        m.set_volume_group(
            "thin",
            "node-a",
            &VolumeGroupGauges {
                thin_pool: None,
                ..thin.clone()
            },
        );
        let e = parse(&m.encode()).unwrap();
        assert_eq!(e.value("topolvm_thinpool_size_bytes", &at), None);
        assert_eq!(e.value("topolvm_volumegroup_size_bytes", &at), Some(100.0));

        // A RAID class: LVMS's five gauges; gone when the class is no RAID (or gone).
        let raid = RaidGauges {
            health: 1,
            sync_in_progress: 1,
            member_count: 2,
            degraded_count: 1,
            sync_percent: 42,
        };
        m.set_raid("thin", "node-a", Some(&raid));
        let e = parse(&m.encode()).unwrap();
        for (name, want) in [
            ("lvms_raid_health_status", 1.0),
            ("lvms_raid_sync_in_progress", 1.0),
            ("lvms_raid_member_count", 2.0),
            ("lvms_raid_degraded_count", 1.0),
            ("lvms_raid_sync_percent", 42.0),
        ] {
            assert_eq!(e.value(name, &at), Some(want), "{name}");
        }
        m.set_raid("thin", "node-a", None);
        let e = parse(&m.encode()).unwrap();
        assert_eq!(e.value("lvms_raid_health_status", &at), None);
        m.set_raid("thin", "node-a", Some(&raid));

        m.forget_volume_group("thin", "node-a");
        let e = parse(&m.encode()).unwrap();
        assert_eq!(e.value("lvms_raid_sync_percent", &at), None);
        assert_eq!(e.value("topolvm_volumegroup_size_bytes", &at), None);
    }
}
