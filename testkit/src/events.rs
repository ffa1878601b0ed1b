//! Assertions on Kubernetes Events (events.k8s.io/v1).

use std::collections::BTreeMap;

use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;

/// No two Event objects for the same (object, reason, note): repeats are a series.
pub fn assert_no_duplicate_events(events: &[Event]) {
    let mut seen: BTreeMap<(String, String, String), String> = BTreeMap::new();
    for e in events {
        let key = (
            e.regarding
                .as_ref()
                .and_then(|r| r.uid.clone())
                .unwrap_or_default(),
            e.reason.clone().unwrap_or_default(),
            e.note.clone().unwrap_or_default(),
        );
        if let Some(other) = seen.insert(key.clone(), e.name_any()) {
            panic!("duplicate Events {other} and {} for {key:?}", e.name_any());
        }
    }
}

/// How many occurrences an Event stands for: its series count, else 1.
pub fn series_count(e: &Event) -> u64 {
    e.series
        .as_ref()
        .map(|s| u64::try_from(s.count).unwrap_or(0))
        .unwrap_or(1)
}

/// The Events with this reason about a Node (they go to `default`), by the Node's uid: a Node
/// of the same name made again is another object.
pub async fn about_node(client: &kube::Client, uid: &str, reason: &str) -> Vec<Event> {
    kube::Api::<Event>::namespaced(client.clone(), "default")
        .list(&kube::api::ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid))
        .collect()
}
