//! What the soak saw: every object UID, first seen when.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::Resource;
use kube::api::{Api, ObjectMeta};
use kube::runtime::watcher;

use crate::timeline::now_ms;

#[derive(Clone, Debug)]
pub(crate) struct SeenObj {
    pub(crate) kind: &'static str,
    pub(crate) name: String,
    pub(crate) first_ms: u64,
}

pub(crate) type SeenMap = Arc<Mutex<BTreeMap<String, SeenObj>>>;

pub(crate) fn record_seen(seen: &SeenMap, kind: &'static str, meta: &ObjectMeta) {
    let (Some(uid), Some(name)) = (meta.uid.clone(), meta.name.clone()) else {
        return;
    };
    if let Ok(mut m) = seen.lock() {
        m.entry(uid).or_insert(SeenObj {
            kind,
            name,
            first_ms: now_ms(),
        });
    }
}

pub(crate) fn watch_uids<K>(
    api: Api<K>,
    kind: &'static str,
    seen: SeenMap,
) -> tokio::task::JoinHandle<()>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + fmt::Debug
        + Send
        + 'static,
{
    tokio::spawn(async move {
        let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::Apply(o))
                | Ok(watcher::Event::InitApply(o))
                | Ok(watcher::Event::Delete(o)) => record_seen(&seen, kind, o.meta()),
                _ => {}
            }
        }
    })
}
