//! The volume-group actors' writes to the API server, as a seam: their own cleanup finalizer
//! on an LVMVolumeGroup and the per-node "wiped" annotation. [`KubeNodeApi`] is the real one;
//! unit tests record the calls instead (and can make them fail), so the paths that reach the
//! API are tested without one. The node status is not here: the actors report into
//! [`super::node_report::NodeReport`] and the node-status unit writes it.

use futures::future::BoxFuture;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use lvms_actors::{Done, UnitError};

use crate::api::LVMVolumeGroup;
use crate::kube::apply;
use crate::kube::kinds::Kind;

pub trait NodeApi: Send + Sync + 'static {
    /// Add (`present`) or remove `finalizer` on the LVMVolumeGroup `vg`.
    fn set_finalizer<'a>(
        &'a self,
        vg: &'a str,
        finalizer: &'a str,
        present: bool,
    ) -> BoxFuture<'a, Result<Done, UnitError>>;

    /// Set the annotation `key` to `value` on the LVMVolumeGroup `vg`.
    fn annotate<'a>(
        &'a self,
        vg: &'a str,
        key: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Done, UnitError>>;
}

/// The API server, in the operator's namespace.
pub struct KubeNodeApi {
    pub client: Client,
    pub namespace: String,
}

impl NodeApi for KubeNodeApi {
    fn set_finalizer<'a>(
        &'a self,
        vg: &'a str,
        finalizer: &'a str,
        present: bool,
    ) -> BoxFuture<'a, Result<Done, UnitError>> {
        Box::pin(apply::edit_finalizers(
            &self.client,
            Kind::VolumeGroup,
            &self.namespace,
            vg,
            move |f| {
                f.retain(|x| x != finalizer);
                if present {
                    f.push(finalizer.to_string());
                }
            },
        ))
    }

    fn annotate<'a>(
        &'a self,
        vg: &'a str,
        key: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Done, UnitError>> {
        Box::pin(async move {
            let api: Api<LVMVolumeGroup> = Api::namespaced(self.client.clone(), &self.namespace);
            let patch = serde_json::json!({"metadata": {"annotations": {key: value}}});
            api.patch(vg, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| Done::default())
                .map_err(|e| apply::unit_error(&format!("annotating LVMVolumeGroup {vg}"), e))
        })
    }
}

/// Records every call (`finalizer+ vg f`, `finalizer- vg f`, `annotate vg key=value`) and
/// fails them while `fail` is set, as an unreachable API server would (retryably).
#[cfg(test)]
#[derive(Default)]
pub struct RecordingApi {
    pub calls: std::sync::Mutex<Vec<String>>,
    pub fail: std::sync::atomic::AtomicBool,
}

#[cfg(test)]
impl RecordingApi {
    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    fn record(&self, call: String) -> Result<Done, UnitError> {
        if let Ok(mut c) = self.calls.lock() {
            c.push(call.clone());
        }
        if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(UnitError::retryable(
                lvms_actors::Reason::ApiUnavailable,
                format!("{call}: connection refused"),
            ));
        }
        Ok(Done::default())
    }
}

#[cfg(test)]
impl NodeApi for RecordingApi {
    fn set_finalizer<'a>(
        &'a self,
        vg: &'a str,
        finalizer: &'a str,
        present: bool,
    ) -> BoxFuture<'a, Result<Done, UnitError>> {
        let sign = if present { '+' } else { '-' };
        let r = self.record(format!("finalizer{sign} {vg} {finalizer}"));
        Box::pin(async move { r })
    }

    fn annotate<'a>(
        &'a self,
        vg: &'a str,
        key: &'a str,
        value: &'a str,
    ) -> BoxFuture<'a, Result<Done, UnitError>> {
        let r = self.record(format!("annotate {vg} {key}={value}"));
        Box::pin(async move { r })
    }
}
