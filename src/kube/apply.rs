//! Writes: server-side apply (field manager `lvms-operator`, force), delete, finalizer edits.
//! Every function is one side effect, called from inside a journaled step.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::{Client, Error};
use lvms_actors::{Done, Reason, UnitError};
use serde_json::{Value, json};

use super::FIELD_MANAGER;
use super::kinds::Kind;

fn api(client: &Client, kind: Kind, namespace: &str) -> Api<DynamicObject> {
    let ar = kind.api_resource();
    if kind.namespaced() {
        Api::namespaced_with(client.clone(), namespace, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    }
}

/// kube errors as unit errors: the reason names the HTTP failure, the message the object.
pub fn unit_error(what: &str, err: Error) -> UnitError {
    match err {
        Error::Api(status) => {
            let reason = match status.code {
                403 => Reason::Forbidden,
                404 => Reason::NotFound,
                409 => Reason::Conflict,
                422 => Reason::Invalid,
                _ => Reason::ApiError,
            };
            UnitError::retryable(reason, format!("{what}: {}", status.message))
        }
        other => UnitError::retryable(Reason::ApiUnavailable, format!("{what}: {other}")),
    }
}

fn is_not_found(err: &Error) -> bool {
    matches!(err, Error::Api(s) if s.code == 404)
}

fn rv_detail(meta: &ObjectMeta) -> Done {
    Done::resource_version(meta.resource_version.clone())
}

fn name_of(obj: &Value) -> (&str, &str) {
    let meta = &obj["metadata"];
    (
        meta["namespace"].as_str().unwrap_or_default(),
        meta["name"].as_str().unwrap_or_default(),
    )
}

/// Server-side apply of a full desired object (must carry apiVersion and kind).
pub async fn apply(client: &Client, kind: Kind, obj: &Value) -> Result<Done, UnitError> {
    let (ns, name) = name_of(obj);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api(client, kind, ns)
        .patch(name, &params, &Patch::Apply(obj))
        .await
        .map(|o| rv_detail(&o.metadata))
        .map_err(|e| unit_error(&format!("apply {} {name}", kind.kind()), e))
}

/// Create (POST); one that exists already is applied instead. A create costs the API server
/// about half a server-side apply, which counts when thousands are written in a row. Only for
/// objects whose owned fields never shrink: fields a create sets belong to an Update manager,
/// which a later apply that drops them would not remove.
pub async fn create_or_apply(client: &Client, kind: Kind, obj: &Value) -> Result<Done, UnitError> {
    let (ns, name) = name_of(obj);
    let params = kube::api::PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    let object: DynamicObject = serde_json::from_value(obj.clone()).map_err(|e| {
        UnitError::permanent("InvalidObject", format!("{} {name}: {e}", kind.kind()))
    })?;
    match api(client, kind, ns).create(&params, &object).await {
        Ok(o) => Ok(rv_detail(&o.metadata)),
        Err(Error::Api(s)) if s.code == 409 => adopt(client, kind, obj).await,
        Err(e) => Err(unit_error(&format!("create {} {name}", kind.kind()), e)),
    }
}

/// Apply over an object that exists already. One left by an owner that is gone (a deleted and
/// re-created LVMCluster, before the garbage collector got to it) keeps that owner through any
/// apply when a create put it there (the create's Update manager owns the field), and two
/// controller owners are Invalid: its owners are replaced by the desired ones, then applied.
async fn adopt(client: &Client, kind: Kind, obj: &Value) -> Result<Done, UnitError> {
    match apply(client, kind, obj).await {
        Err(e) if e.is(Reason::Invalid) && obj["metadata"]["ownerReferences"].is_array() => {
            let (ns, name) = name_of(obj);
            let owners =
                json!({"metadata": {"ownerReferences": obj["metadata"]["ownerReferences"]}});
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            };
            api(client, kind, ns)
                .patch(name, &params, &Patch::Merge(&owners))
                .await
                .map_err(|e| unit_error(&format!("owners of {} {name}", kind.kind()), e))?;
            apply(client, kind, obj).await
        }
        other => other,
    }
}

/// What a delete or a finalizer edit left of the object. Code decides on this, never on the
/// `Done` facts (which say the same to people, in the journal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// The API server removed it at once.
    Deleted,
    /// Marked deleted; finalizers remain (or, after an edit, it is gone once its last one is).
    Deleting,
    /// It was not there.
    Gone,
    /// Edited, and still there.
    Edited,
    /// Already as wanted: nothing written.
    Unchanged,
}

impl Fate {
    fn done(self, done: Done) -> (Done, Fate) {
        let fact = match self {
            Fate::Deleted => "deleted",
            Fate::Deleting => "deleting",
            Fate::Gone => "gone",
            Fate::Unchanged => "unchanged",
            Fate::Edited => return (done, self),
        };
        (done.with_fact(fact, "true"), self)
    }
}

/// Delete; an object already gone is success ([`Fate::Gone`]).
pub async fn delete(
    client: &Client,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> Result<(Done, Fate), UnitError> {
    match api(client, kind, namespace)
        .delete(name, &DeleteParams::background())
        .await
    {
        // Left: the object as it still is (marked); Right: the server's Status of a removal.
        Ok(marked) if marked.is_left() => Ok(Fate::Deleting.done(Done::default())),
        Ok(_) => Ok(Fate::Deleted.done(Done::default())),
        Err(e) if is_not_found(&e) => Ok(Fate::Gone.done(Done::default())),
        Err(e) => Err(unit_error(&format!("delete {} {name}", kind.kind()), e)),
    }
}

pub async fn get(
    client: &Client,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> Result<Option<DynamicObject>, UnitError> {
    api(client, kind, namespace)
        .get_opt(name)
        .await
        .map_err(|e| unit_error(&format!("get {} {name}", kind.kind()), e))
}

/// Rewrite `metadata.finalizers` with `edit` applied, guarded by resourceVersion so a
/// concurrent writer's finalizer is never lost; a conflict re-reads and tries again.
pub async fn edit_finalizers(
    client: &Client,
    kind: Kind,
    namespace: &str,
    name: &str,
    edit: impl Fn(&mut Vec<String>),
) -> Result<Done, UnitError> {
    edit_finalizers_seen(client, kind, namespace, name, None, edit)
        .await
        .map(|(done, _)| done)
}

/// [`edit_finalizers`], first trying the finalizers a cache last saw, which saves a read per
/// object when many are edited; a stale view only costs the failed guard and the usual re-read.
pub async fn edit_finalizers_seen(
    client: &Client,
    kind: Kind,
    namespace: &str,
    name: &str,
    seen: Option<&[String]>,
    edit: impl Fn(&mut Vec<String>),
) -> Result<(Done, Fate), UnitError> {
    let api = api(client, kind, namespace);
    let what = format!("finalizers of {} {name}", kind.kind());
    // Only a view that needs a change is worth trying unread.
    let mut seen = seen.map(<[String]>::to_vec).filter(|before| {
        let mut after = before.clone();
        edit(&mut after);
        after != *before && !before.is_empty()
    });
    let mut attempt = 0;
    loop {
        attempt += 1;
        // Guarded either by the finalizers the cache saw (a JSON patch `test`: other changes to
        // the object, e.g. it being marked deleted, do not conflict) or by the resourceVersion
        // just read.
        let patch = match seen.take() {
            Some(before) => {
                let mut after = before.clone();
                edit(&mut after);
                let ops = json!([
                    {"op": "test", "path": "/metadata/finalizers", "value": before},
                    {"op": "replace", "path": "/metadata/finalizers", "value": after},
                ]);
                let patch: json_patch::Patch = serde_json::from_value(ops)
                    .map_err(|e| UnitError::permanent("InvalidPatch", format!("{what}: {e}")))?;
                Patch::Json::<Value>(patch)
            }
            None => {
                // Metadata only: the finalizers and resourceVersion are all this needs, and an
                // LVMCluster's status lists every node (~0.5 MB at 1000 nodes × 3 classes).
                let Some(obj) = api
                    .get_metadata_opt(name)
                    .await
                    .map_err(|e| unit_error(&what, e))?
                else {
                    return Ok(Fate::Gone.done(Done::default()));
                };
                let before = obj.metadata.finalizers.clone().unwrap_or_default();
                let mut after = before.clone();
                edit(&mut after);
                if after == before {
                    return Ok(Fate::Unchanged.done(Done::default()));
                }
                let patch = json!({"metadata": {
                    "finalizers": after,
                    "resourceVersion": obj.metadata.resource_version,
                }});
                Patch::Merge(patch)
            }
        };
        // The reply is the object's metadata only (the API server encodes no more, and the
        // operator decodes no big status tree: the last finalizer of a 1000-node LVMCluster).
        match api
            .patch_metadata(name, &PatchParams::default(), &patch)
            .await
        {
            // An object already marked deleted is gone once its last finalizer is.
            Ok(o) if o.metadata.deletion_timestamp.is_some() => {
                return Ok(Fate::Deleting.done(rv_detail(&o.metadata)));
            }
            Ok(o) => return Ok(Fate::Edited.done(rv_detail(&o.metadata))),
            // A conflict, or finalizers no longer as seen (a failed `test`): read and retry.
            Err(Error::Api(s)) if (s.code == 409 || s.code == 422) && attempt < 5 => continue,
            Err(Error::Api(s)) if s.code == 404 => {
                return Ok(Fate::Gone.done(Done::default()));
            }
            Err(e) => return Err(unit_error(&what, e)),
        }
    }
}

/// Removes `keys` from `metadata.annotations` (a merge patch setting each to null: removing is
/// idempotent, so no guard is needed). A missing object is gone, not an error.
pub async fn remove_annotations(
    client: &Client,
    kind: Kind,
    namespace: &str,
    name: &str,
    keys: &[String],
) -> Result<Done, UnitError> {
    let nulls: serde_json::Map<String, Value> =
        keys.iter().map(|k| (k.clone(), Value::Null)).collect();
    let patch = Patch::Merge(json!({"metadata": {"annotations": nulls}}));
    match api(client, kind, namespace)
        .patch_metadata(name, &PatchParams::default(), &patch)
        .await
    {
        Ok(o) => Ok(rv_detail(&o.metadata)),
        Err(e) if is_not_found(&e) => Ok(Done::default().with_fact("gone", "true")),
        Err(e) => Err(unit_error(
            &format!("annotations of {} {name}", kind.kind()),
            e,
        )),
    }
}
