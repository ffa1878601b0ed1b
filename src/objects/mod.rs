//! What both processes need to say about Kubernetes objects, below operator and vg-manager
//! alike: the journal's reference to an object, the digest of a desired object, and node
//! selector matching.

pub mod selector;

use lvms_journal::ObjectRef;
use serde_json::Value;

/// The journal's view of a Kubernetes object (with its UID, so a later object of the same
/// name is never mistaken for it).
pub fn object_ref<K: kube::Resource<DynamicType = ()>>(obj: &K) -> ObjectRef {
    ObjectRef {
        kind: K::kind(&()).into_owned(),
        namespace: obj.meta().namespace.clone().unwrap_or_default(),
        name: obj.meta().name.clone().unwrap_or_default(),
        uid: obj.meta().uid.clone().unwrap_or_default(),
        generation: obj.meta().generation.unwrap_or_default(),
    }
}

/// FNV-1a of the canonical JSON (serde_json maps are sorted), as 16 hex digits.
pub fn digest(value: &Value) -> String {
    format!("{:016x}", lvms_actors::fnv1a(value.to_string().as_bytes()))
}
