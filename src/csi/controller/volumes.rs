//! The controller's view of LogicalVolumes: an index by name and by volume id (the LV name on
//! disk, `status.volumeID`), fed by one watch, and what a LogicalVolume's status says about
//! its provisioning (pure).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tonic::Code;

use crate::api::LogicalVolume;
use crate::api::quantity::parse_quantity_bytes;

/// What a LogicalVolume's status says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provisioning {
    /// The node created the LV: its id and size.
    Ready {
        volume_id: String,
        bytes: i64,
    },
    /// The node refused or failed (TopoLVM's `status.code`, a gRPC code).
    Failed {
        code: Code,
        message: String,
    },
    Pending,
}

fn bytes_of(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> Option<i64> {
    parse_quantity_bytes(&q.0)
        .ok()
        .and_then(|b| i64::try_from(b).ok())
}

/// Spec size in bytes (None when it does not parse: a LogicalVolume lvms did not write).
pub fn spec_bytes(lv: &LogicalVolume) -> Option<i64> {
    bytes_of(&lv.spec.size)
}

/// Current size: `status.currentSize`, else the spec size (TopoLVM's fallback for volumes
/// made before currentSize existed).
pub fn current_bytes(lv: &LogicalVolume) -> Option<i64> {
    lv.status
        .as_ref()
        .and_then(|s| s.current_size.as_ref())
        .and_then(bytes_of)
        .or_else(|| spec_bytes(lv))
}

pub fn provisioning(lv: &LogicalVolume) -> Provisioning {
    let status = lv.status.clone().unwrap_or_default();
    if let Some(id) = status.volume_id.filter(|id| !id.is_empty()) {
        return Provisioning::Ready {
            volume_id: id,
            bytes: current_bytes(lv).unwrap_or(0),
        };
    }
    match status.code.filter(|c| *c != 0) {
        Some(code) => Provisioning::Failed {
            code: Code::from_i32(code),
            message: status.message.unwrap_or_default(),
        },
        None => Provisioning::Pending,
    }
}

/// TopoLVM's `IsCompatibleWith`: a second CreateVolume of the same name is the same request
/// only with the same volume name, source and size.
pub fn compatible(existing: &LogicalVolume, wanted: &LogicalVolume) -> bool {
    existing.spec.name == wanted.spec.name
        && existing.spec.source.as_deref().unwrap_or("")
            == wanted.spec.source.as_deref().unwrap_or("")
        && spec_bytes(existing) == spec_bytes(wanted)
}

fn volume_id(lv: &LogicalVolume) -> Option<&str> {
    lv.status
        .as_ref()
        .and_then(|s| s.volume_id.as_deref())
        .filter(|id| !id.is_empty())
}

#[derive(Default)]
struct Index {
    by_name: HashMap<String, Arc<LogicalVolume>>,
    by_id: HashMap<String, String>,
    ready: bool,
}

impl Index {
    fn put(&mut self, lv: LogicalVolume) {
        let Some(name) = lv.metadata.name.clone() else {
            return;
        };
        self.remove(&name);
        if let Some(id) = volume_id(&lv) {
            self.by_id.insert(id.to_string(), name.clone());
        }
        self.by_name.insert(name, Arc::new(lv));
    }

    fn remove(&mut self, name: &str) {
        if let Some(old) = self.by_name.remove(name)
            && let Some(id) = volume_id(&old)
            && self.by_id.get(id).is_some_and(|n| n == name)
        {
            self.by_id.remove(id);
        }
    }
}

/// LogicalVolumes by name and id, kept current by a watch.
pub struct Volumes {
    index: RwLock<Index>,
    changed: watch::Sender<u64>,
}

impl Volumes {
    pub fn new() -> Arc<Self> {
        Arc::new(Volumes {
            index: RwLock::default(),
            changed: watch::channel(0).0,
        })
    }

    /// Feed the index from a watch of every LogicalVolume (run as a task).
    pub async fn run(self: Arc<Self>, api: Api<LogicalVolume>) {
        let stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(crate::kube::caches::strip_meta);
        futures::pin_mut!(stream);
        let mut fresh: Option<Index> = None;
        while let Some(ev) = stream.next().await {
            let ev = match ev {
                Ok(ev) => ev,
                Err(e) => {
                    tracing::debug!(error = %e, "LogicalVolume watch error (retrying)");
                    continue;
                }
            };
            // A write lock held for map updates only; poisoned means a panic mid-update, and
            // the next relist rebuilds the index anyway.
            let mut index = self.index.write().unwrap_or_else(|p| p.into_inner());
            match ev {
                watcher::Event::Init => fresh = Some(Index::default()),
                watcher::Event::InitApply(lv) => match fresh.as_mut() {
                    Some(f) => f.put(lv),
                    None => index.put(lv),
                },
                watcher::Event::InitDone => {
                    if let Some(mut f) = fresh.take() {
                        f.ready = true;
                        *index = f;
                    }
                }
                watcher::Event::Apply(lv) => index.put(lv),
                watcher::Event::Delete(lv) => {
                    if let Some(name) = lv.metadata.name.as_deref() {
                        index.remove(name);
                    }
                }
            }
            drop(index);
            self.changed.send_modify(|n| *n += 1);
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Index> {
        self.index.read().unwrap_or_else(|p| p.into_inner())
    }

    pub fn is_ready(&self) -> bool {
        self.read().ready
    }

    pub fn get(&self, name: &str) -> Option<Arc<LogicalVolume>> {
        self.read().by_name.get(name).cloned()
    }

    pub fn by_volume_id(&self, id: &str) -> Option<Arc<LogicalVolume>> {
        let index = self.read();
        index
            .by_id
            .get(id)
            .and_then(|n| index.by_name.get(n))
            .cloned()
    }

    /// Every LogicalVolume, or None before the first full list (an unlisted index is not an
    /// empty one).
    pub fn all(&self) -> Option<Vec<Arc<LogicalVolume>>> {
        let index = self.read();
        index
            .ready
            .then(|| index.by_name.values().cloned().collect())
    }

    pub fn len(&self) -> usize {
        self.read().by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Wait (at most `timeout`) until `check` answers from the index; re-checked after every
    /// watch event. None on timeout.
    pub async fn wait_for<T>(
        &self,
        timeout: Duration,
        mut check: impl FnMut(&Volumes) -> Option<T>,
    ) -> Option<T> {
        let mut rx = self.changed.subscribe();
        let now = tokio::time::Instant::now();
        // A caller's deadline far in the future waits as long as one can.
        let deadline = now
            .checked_add(timeout)
            .unwrap_or(now + Duration::from_secs(86_400));
        loop {
            rx.borrow_and_update();
            if let Some(t) = check(self) {
                return Some(t);
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                // The feeding task ended, or time is up.
                Ok(Err(_)) | Err(_) => return check(self),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{LogicalVolumeSpec, LogicalVolumeStatus};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn lv(name: &str, size: &str, status: Option<LogicalVolumeStatus>) -> LogicalVolume {
        let mut lv = LogicalVolume::new(
            name,
            LogicalVolumeSpec {
                name: name.into(),
                node_name: "n1".into(),
                size: Quantity(size.into()),
                device_class: None,
                lvcreate_option_class: None,
                source: None,
                access_type: None,
            },
        );
        lv.status = status;
        lv
    }

    #[test]
    fn status_tells_ready_failed_or_pending() {
        assert_eq!(provisioning(&lv("a", "1Gi", None)), Provisioning::Pending);
        let ready = lv(
            "a",
            "1Gi",
            Some(LogicalVolumeStatus {
                volume_id: Some("uid-1".into()),
                current_size: Some(Quantity("2Gi".into())),
                ..Default::default()
            }),
        );
        assert_eq!(
            provisioning(&ready),
            Provisioning::Ready {
                volume_id: "uid-1".into(),
                bytes: 2 << 30
            }
        );
        let failed = lv(
            "a",
            "1Gi",
            Some(LogicalVolumeStatus {
                code: Some(Code::ResourceExhausted as i32),
                message: Some("no room".into()),
                ..Default::default()
            }),
        );
        assert_eq!(
            provisioning(&failed),
            Provisioning::Failed {
                code: Code::ResourceExhausted,
                message: "no room".into()
            }
        );
    }

    #[test]
    fn same_name_size_and_source_is_compatible() {
        assert!(compatible(
            &lv("a", "1Gi", None),
            &lv("a", "1073741824", None)
        ));
        assert!(!compatible(&lv("a", "1Gi", None), &lv("a", "2Gi", None)));
        let mut cloned = lv("a", "1Gi", None);
        cloned.spec.source = Some("src".into());
        assert!(!compatible(&lv("a", "1Gi", None), &cloned));
    }

    #[test]
    fn the_index_follows_renamed_ids_and_deletes() {
        let mut index = Index::default();
        let with_id = |id: &str| {
            lv(
                "a",
                "1Gi",
                Some(LogicalVolumeStatus {
                    volume_id: Some(id.into()),
                    ..Default::default()
                }),
            )
        };
        index.put(lv("a", "1Gi", None));
        assert!(index.by_id.is_empty());
        index.put(with_id("u1"));
        assert_eq!(index.by_id.get("u1").map(String::as_str), Some("a"));
        index.remove("a");
        assert!(index.by_id.is_empty() && index.by_name.is_empty());
    }
}
