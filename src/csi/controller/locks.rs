//! One request at a time per volume name or id (TopoLVM serialises CreateVolume per name and
//! the rest per id): csi-provisioner retries a slow CreateVolume while the first is waiting,
//! and the retry must find the first one's LogicalVolume, not race it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

#[derive(Default, Clone)]
pub struct KeyedLocks {
    inner: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

/// Held while a request runs; the key's entry is dropped with the last holder.
pub struct KeyGuard {
    key: String,
    locks: KeyedLocks,
    guard: Option<OwnedMutexGuard<()>>,
}

impl KeyedLocks {
    pub async fn lock(&self, key: &str) -> KeyGuard {
        let m = {
            // A poisoned map means a panic while inserting; the map itself is still usable.
            let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            map.entry(key.to_string()).or_default().clone()
        };
        let guard = m.lock_owned().await;
        KeyGuard {
            key: key.to_string(),
            locks: self.clone(),
            guard: Some(guard),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().map(|m| m.len()).unwrap_or(0)
    }
}

impl Drop for KeyGuard {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut map = self.locks.inner.lock().unwrap_or_else(|p| p.into_inner());
        // Only the map holds it now: nobody waits on this key.
        if map
            .get(&self.key)
            .is_some_and(|m| Arc::strong_count(m) == 1)
        {
            map.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn one_holder_per_key_and_no_leftover_entries() {
        let locks = KeyedLocks::default();
        let a = locks.lock("a").await;
        let _b = locks.lock("b").await;
        let waiting = {
            let locks = locks.clone();
            tokio::spawn(async move {
                let _a = locks.lock("a").await;
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "a second holder of key a got in");
        drop(a);
        waiting.await.unwrap();
        drop(_b);
        assert_eq!(locks.len(), 0);
    }
}
