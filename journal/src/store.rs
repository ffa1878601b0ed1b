//! The storage engine behind a small trait, so sled can be swapped (redb, fjall) without
//! touching the journal logic. One ordered keyspace; the journal partitions it by key prefix
//! (see `keys`), which lets a record and its index entries go in ONE atomic batch.

use std::path::Path;

use crate::error::StoreError;

pub type KeyValue = (Vec<u8>, Vec<u8>);

/// Atomic set of inserts/removes.
#[derive(Debug, Default)]
pub struct Batch {
    pub(crate) ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl Batch {
    pub fn insert(&mut self, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        self.ops.push((key.into(), Some(value.into())));
    }
    pub fn remove(&mut self, key: impl Into<Vec<u8>>) {
        self.ops.push((key.into(), None));
    }
    pub fn len(&self) -> usize {
        self.ops.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

pub trait Store: Send + Sync {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    /// Applies all ops atomically: after a crash either all or none are visible.
    fn apply(&self, batch: Batch) -> Result<(), StoreError>;
    /// Keys in `[from, to)`, ascending.
    fn range<'a>(
        &'a self,
        from: &[u8],
        to: &[u8],
    ) -> Box<dyn Iterator<Item = Result<KeyValue, StoreError>> + 'a>;
    /// The greatest key in `[from, to)`.
    fn last_in(&self, from: &[u8], to: &[u8]) -> Result<Option<KeyValue>, StoreError>;
    /// Returns once everything applied so far is durable.
    fn flush(&self) -> Result<(), StoreError>;
    fn size_on_disk(&self) -> Result<u64, StoreError>;
}

/// sled settings the journal exposes.
#[derive(Debug, Clone)]
pub struct SledOptions {
    /// Page cache bound; sled's own default is 1 GiB, far too much for a node agent.
    pub cache_capacity: u64,
    /// sled's background flush. Durability never relies on it; the journal flushes itself.
    pub flush_every_ms: Option<u64>,
}

impl Default for SledOptions {
    fn default() -> Self {
        Self {
            cache_capacity: 8 << 20,
            flush_every_ms: Some(500),
        }
    }
}

/// How long `open` waits for a lock held by a just-dropped handle of this process.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

pub struct SledStore {
    db: sled::Db,
}

impl SledStore {
    pub fn open(path: &Path, opts: &SledOptions) -> Result<Self, StoreError> {
        let config = sled::Config::new()
            .path(path)
            .cache_capacity(opts.cache_capacity)
            .flush_every_ms(opts.flush_every_ms);
        // A dropped Db's flusher thread keeps the file lock until its next tick (up to
        // flush_every_ms): reopening in the same process waits that out. Another live process
        // holding the lock still fails, after the wait.
        let deadline = std::time::Instant::now() + LOCK_WAIT;
        let mut set_aside = false;
        loop {
            match config.open() {
                Ok(db) => return Ok(Self { db }),
                // sled 0.34.7 reads its newest `snap.*` file, a `.generating` one included: a
                // kill while it wrote one leaves a torn file that fails every later open
                // (spacejam/sled#1527). The complete snapshot before it, and the log, are
                // intact: the torn file is moved out of sled's way (kept beside it) and the
                // open tried again, once. sled reached its snapshot, so it held the lock.
                Err(e @ sled::Error::Corruption { .. }) if !set_aside => {
                    set_aside = true;
                    let moved = set_aside_torn_snapshots(path)
                        .map_err(|e| StoreError::new("setting a torn sled snapshot aside", e))?;
                    if moved.is_empty() {
                        return Err(StoreError::new("opening sled database", e));
                    }
                    tracing::warn!(
                        path = %path.display(),
                        files = ?moved,
                        "the journal store's snapshot was torn by a kill while sled wrote it; set aside, reopening from the one before"
                    );
                }
                // sled reports it as ErrorKind::Other with this text.
                Err(sled::Error::Io(e))
                    if e.to_string().contains("could not acquire lock")
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => return Err(StoreError::new("opening sled database", e)),
            }
        }
    }
}

/// The prefix a torn snapshot is renamed with: out of the `snap.` names sled reads.
const TORN_PREFIX: &str = "torn-";

/// Renames every `snap.*.generating` file of the store at `path` to `torn-snap.*.generating`;
/// returns the new names.
fn set_aside_torn_snapshots(path: &Path) -> std::io::Result<Vec<String>> {
    let mut moved = Vec::new();
    for entry in std::fs::read_dir(path)? {
        let name = entry?.file_name().to_string_lossy().to_string();
        if name.starts_with("snap.") && name.ends_with(".generating") {
            let torn = format!("{TORN_PREFIX}{name}");
            std::fs::rename(path.join(&name), path.join(&torn))?;
            moved.push(torn);
        }
    }
    Ok(moved)
}

impl Store for SledStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.db
            .get(key)
            .map(|v| v.map(|v| v.to_vec()))
            .map_err(|e| StoreError::new("sled get", e))
    }

    fn apply(&self, batch: Batch) -> Result<(), StoreError> {
        let mut b = sled::Batch::default();
        for (k, v) in batch.ops {
            match v {
                Some(v) => b.insert(k, v),
                None => b.remove(k),
            }
        }
        self.db
            .apply_batch(b)
            .map_err(|e| StoreError::new("sled apply_batch", e))
    }

    fn range<'a>(
        &'a self,
        from: &[u8],
        to: &[u8],
    ) -> Box<dyn Iterator<Item = Result<KeyValue, StoreError>> + 'a> {
        Box::new(self.db.range(from.to_vec()..to.to_vec()).map(|r| {
            r.map(|(k, v)| (k.to_vec(), v.to_vec()))
                .map_err(|e| StoreError::new("sled range", e))
        }))
    }

    fn last_in(&self, from: &[u8], to: &[u8]) -> Result<Option<KeyValue>, StoreError> {
        match self.db.range(from.to_vec()..to.to_vec()).next_back() {
            None => Ok(None),
            Some(r) => r
                .map(|(k, v)| Some((k.to_vec(), v.to_vec())))
                .map_err(|e| StoreError::new("sled range (last)", e)),
        }
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.db
            .flush()
            .map(|_| ())
            .map_err(|e| StoreError::new("sled flush", e))
    }

    fn size_on_disk(&self) -> Result<u64, StoreError> {
        self.db
            .size_on_disk()
            .map_err(|e| StoreError::new("sled size_on_disk", e))
    }
}
