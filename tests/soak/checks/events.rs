//! Checks 5 and 6: Events regard objects of their own cycle, and their series counts match
//! the journals' Published records.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use lvms_actors::{EventSpec, EventType};
use lvms_journal::{Body, PublishKind, Record};
use lvms_testkit::events::series_count;

use crate::cycle::Soak;
use crate::report::clip;
use crate::timeline::now_ms;
use crate::who::Who;

/// kube-apiserver's default --event-ttl is 1 h: older Events may legitimately be gone.
const EVENT_TTL_MARGIN_MS: u64 = 55 * 60 * 1000;

impl Soak<'_> {
    pub(crate) async fn check_events(&mut self, journals: &[(Who, Vec<Record>)]) {
        struct Pub {
            who: Who,
            seq: u64,
            source_seq: u64,
            count: u64,
            at_ms: u64,
            dropped: bool,
        }
        let mut outcome_at: BTreeMap<(usize, u64), (u64, String)> = BTreeMap::new();
        let mut pubs: BTreeMap<String, Vec<Pub>> = BTreeMap::new();
        for (who, recs) in journals {
            for r in recs {
                match &r.body {
                    Body::Outcome(o) => {
                        outcome_at.insert((who.idx(), r.seq), (r.at_ms, o.unit.clone()));
                    }
                    Body::Published(p) if p.kind == PublishKind::Event => {
                        let spec = EventSpec {
                            regarding: p.object.clone().unwrap_or_default(),
                            type_: EventType::Normal,
                            reason: String::new(),
                            note: String::new(),
                            action: String::new(),
                        };
                        let name = lvms::kube::events::event_name(&spec, &p.dedupe_key);
                        pubs.entry(name).or_default().push(Pub {
                            who: *who,
                            seq: r.seq,
                            source_seq: p.source_seq,
                            count: p.count,
                            at_ms: r.at_ms,
                            dropped: p.summary.starts_with("dropped"),
                        });
                    }
                    _ => {}
                }
            }
        }
        let events = Api::<Event>::namespaced(self.s.client.clone(), &self.s.ns.name)
            .list(&ListParams::default())
            .await
            .expect("listing Events")
            .items;
        let seen = self.seen.lock().map(|m| m.clone()).unwrap_or_default();
        let mut names = BTreeSet::new();
        for e in &events {
            let name = e.name_any();
            names.insert(name.clone());
            let reg = e.regarding.clone().unwrap_or_default();
            let (kind, rname, uid) = (
                reg.kind.unwrap_or_default(),
                reg.name.unwrap_or_default(),
                reg.uid.unwrap_or_default(),
            );
            let what = format!(
                "Event {name} ({} {} on {kind}/{rname}: {:?})",
                e.type_.as_deref().unwrap_or("?"),
                e.reason.as_deref().unwrap_or("?"),
                clip(e.note.as_deref().unwrap_or_default(), 140)
            );
            let ev_ms = e
                .event_time
                .as_ref()
                .map(|t| t.0.as_millisecond().max(0) as u64)
                .or_else(|| {
                    e.metadata
                        .creation_timestamp
                        .as_ref()
                        .map(|t| t.0.as_millisecond().max(0) as u64)
                })
                .unwrap_or(0);
            let ev_cycle = self.timeline.cycle_of(ev_ms);
            let mine = pubs.get(&name).map(Vec::as_slice).unwrap_or_default();

            // 5. Only objects of the Event's own cycle.
            match seen.get(&uid) {
                None => {
                    if matches!(
                        kind.as_str(),
                        "LVMCluster" | "LVMVolumeGroup" | "LVMVolumeGroupNodeStatus"
                    ) {
                        self.report.add(
                            ev_cycle,
                            "event-unknown-object",
                            &name,
                            format!(
                                "{what}, created at {}, regards uid {uid:?} the soak never saw",
                                self.timeline.offset(ev_ms)
                            ),
                        );
                    }
                }
                Some(o) => {
                    let oc = self.timeline.object_cycles(o.first_ms);
                    let obj_at = self.timeline.offset(o.first_ms);
                    if !oc.contains(&ev_cycle) {
                        self.report.add(
                            ev_cycle,
                            "event-other-cycle",
                            &name,
                            format!(
                                "{what} created at {} regards an object first seen at {obj_at}",
                                self.timeline.offset(ev_ms)
                            ),
                        );
                    }
                    if let Some((p, src_ms, unit)) = mine.iter().find_map(|p| {
                        let (ms, unit) = outcome_at
                            .get(&(p.who.idx(), p.source_seq))
                            .cloned()
                            .unwrap_or((p.at_ms, "?".into()));
                        (!oc.contains(&self.timeline.cycle_of(ms))).then_some((p, ms, unit))
                    }) {
                        self.report.add(
                            ev_cycle,
                            "event-reaimed",
                            &name,
                            format!(
                                "{what} regards an object first seen at {obj_at} but projects the {} journal's outcome seq {} (unit {unit}) written at {} (published at {})",
                                p.who,
                                p.source_seq,
                                self.timeline.offset(src_ms),
                                self.timeline.offset(p.at_ms)
                            ),
                        );
                    }
                }
            }

            // 6. series.count = number of Published records for its key.
            let count = series_count(e);
            if mine.len() as u64 != count {
                let recs: Vec<String> = mine
                    .iter()
                    .map(|p| format!("{} seq {} count {}", p.who, p.seq, p.count))
                    .collect();
                self.report.add(
                    ev_cycle,
                    "event-count",
                    &format!("{name}/{count}/{}", mine.len()),
                    format!(
                        "{what}: series count {count} but {} Published record(s) [{}]",
                        mine.len(),
                        recs.join(", ")
                    ),
                );
            }
        }
        let now = now_ms();
        for (name, ps) in &pubs {
            if names.contains(name) {
                continue;
            }
            let Some(last) = ps.iter().max_by_key(|p| p.at_ms) else {
                continue;
            };
            if last.dropped || now.saturating_sub(last.at_ms) > EVENT_TTL_MARGIN_MS {
                continue;
            }
            self.report.add(
                self.timeline.cycle_of(last.at_ms),
                "event-missing",
                name,
                format!(
                    "{} journal published Event {name} (seq {}, count {}) at {} but there is no such Event",
                    last.who,
                    last.seq,
                    last.count,
                    self.timeline.offset(last.at_ms)
                ),
            );
        }
    }
}
