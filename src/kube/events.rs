//! Events (events.k8s.io/v1) for the actors' EventPublisher. One Event object per key, named
//! deterministically, so a re-write after a crash lands on the same object; repeats of the
//! same occurrence set `series.count` to the journal's count instead of creating new Events.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, Error};
use lvms_actors::{EventSink, EventSpec, SinkError};
use serde_json::json;

use crate::api::GROUP;

pub struct KubeEvents {
    pub client: Client,
    /// `reportingController` (e.g. `lvms-operator`).
    pub controller: String,
    /// `reportingInstance` (the pod name, or the host name outside a pod).
    pub instance: String,
}

/// `<object>.<16 hex of the key>`: stable, unique per key, within name limits.
pub fn event_name(spec: &EventSpec, key: &str) -> String {
    let mut base: String = spec.regarding.name.chars().take(200).collect();
    if base.is_empty() {
        base = "lvms".into();
    }
    format!("{base}.{:016x}", lvms_actors::fnv1a(key.as_bytes()))
}

fn regarding(spec: &EventSpec) -> ObjectReference {
    let o = &spec.regarding;
    let api_version = match o.kind.as_str() {
        "LVMCluster" | "LVMVolumeGroup" | "LVMVolumeGroupNodeStatus" => {
            format!("{GROUP}/v1alpha1")
        }
        "LogicalVolume" => "topolvm.io/v1".to_string(),
        "VolumeGroupSnapshot" => "groupsnapshot.storage.k8s.io/v1".to_string(),
        _ => "v1".to_string(),
    };
    ObjectReference {
        api_version: Some(api_version),
        kind: Some(o.kind.clone()),
        name: Some(o.name.clone()),
        namespace: (!o.namespace.is_empty()).then(|| o.namespace.clone()),
        uid: (!o.uid.is_empty()).then(|| o.uid.clone()),
        ..Default::default()
    }
}

/// Where an Event about the object lives: its namespace, or `default` for a cluster-scoped
/// object (a PV, a Node), as client-go's recorder does.
pub fn event_namespace(spec: &EventSpec) -> &str {
    match spec.regarding.namespace.as_str() {
        "" => "default",
        ns => ns,
    }
}

impl KubeEvents {
    fn build(&self, spec: &EventSpec, name: &str, count: u64) -> Event {
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        Event {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(event_namespace(spec).to_string()),
                ..Default::default()
            },
            event_time: Some(now.clone()),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            action: Some(spec.action.clone()),
            reason: Some(spec.reason.clone()),
            note: Some(spec.note.chars().take(1024).collect()),
            type_: Some(spec.type_.as_str().to_string()),
            regarding: Some(regarding(spec)),
            series: (count > 1).then(|| EventSeries {
                count: i32::try_from(count).unwrap_or(i32::MAX),
                last_observed_time: now,
            }),
            ..Default::default()
        }
    }
}

impl EventSink for KubeEvents {
    async fn write(&self, key: &str, spec: &EventSpec, count: u64) -> Result<(), SinkError> {
        let name = event_name(spec, key);
        let api: Api<Event> = Api::namespaced(self.client.clone(), event_namespace(spec));
        let event = self.build(spec, &name, count);
        if count > 1 {
            let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
            let patch = json!({"series": {"count": count, "lastObservedTime": now}});
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Ok(()),
                // Expired (Event TTL): write it again, carrying the count.
                Err(Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(sink_error(&name, e)),
            }
        }
        match api.create(&PostParams::default(), &event).await {
            Ok(_) => Ok(()),
            // Written before a crash, Published record lost: same name, same content.
            Err(Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(sink_error(&name, e)),
        }
    }
}

/// A terminating or missing namespace, or an invalid Event, will not get better by retrying.
fn sink_error(name: &str, e: Error) -> SinkError {
    let permanent = matches!(&e, Error::Api(s) if s.code == 403 || s.code == 404 || s.code == 422);
    let msg = format!("event {name}: {e}");
    if permanent {
        SinkError::Drop(msg)
    } else {
        SinkError::Retry(msg)
    }
}
