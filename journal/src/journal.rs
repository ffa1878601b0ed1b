//! The journal: a single writer assigning seqs, framed records and their indexes written in
//! one atomic batch, and reads that report corruption instead of skipping it.

use std::fmt;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::claim::Claim;
use crate::codec;
use crate::error::{CorruptRecord, JournalError, Result};
use crate::index;
use crate::keys;
use crate::record::*;
use crate::store::{Batch, SledOptions, SledStore, Store};

/// Compiles to a `fail` point only with the `failpoints` feature; the "return" action
/// makes the enclosing function return `Err(JournalError::FailPoint(name))`.
macro_rules! fail_point {
    ($name:literal) => {
        #[cfg(feature = "failpoints")]
        {
            fail::fail_point!($name, |_| Err(JournalError::FailPoint($name)));
        }
    };
}

/// When non-intent appends are flushed. Intents are always flushed before `append_intent` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushPolicy {
    /// Flush after every append.
    Always,
    /// Flush once this many appends are unflushed (group commit).
    Every(usize),
    /// Only when the caller calls [`Journal::flush`] (or an intent forces it).
    Manual,
}

/// Source of record timestamps (unix millis); replaceable so tests control time.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> u64 + Send + Sync>);

impl Clock {
    pub fn system() -> Self {
        // A clock before 1970 stamps 0: timestamps are shown and aged, never ordered on.
        Clock(Arc::new(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0)
        }))
    }
    pub fn from_fn(f: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        Clock(Arc::new(f))
    }
    pub fn now_ms(&self) -> u64 {
        (self.0)()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Clock")
    }
}

#[derive(Debug, Clone)]
pub struct JournalConfig {
    pub flush: FlushPolicy,
    pub sled: SledOptions,
    pub clock: Clock,
}

impl Default for JournalConfig {
    fn default() -> Self {
        Self {
            flush: FlushPolicy::Every(32),
            sled: SledOptions::default(),
            clock: Clock::system(),
        }
    }
}

/// Told of every successful append: how long it took (encode, write, and the flush if any)
/// and whether it flushed. The binary turns this into a histogram; the journal stays free of
/// any metrics library.
pub type AppendObserver = Arc<dyn Fn(Duration, bool) + Send + Sync>;

pub(crate) struct Writer {
    pub(crate) next_seq: Seq,
    unflushed: usize,
    epoch: u64,
    /// Group commit: records staged (encoded, indexed, seqs assigned in order) but not yet
    /// applied to the store; the next committer applies them all in one batch.
    pending: Batch,
    pending_last: Seq,
    /// Intents closed by staged or applying outcomes (intent seq → outcome seq), so a second
    /// outcome is refused before the first reaches the store.
    closing: std::collections::BTreeMap<Seq, Seq>,
    /// Set when a store write failed: its effect is unknown, so nothing more is appended.
    failed: Option<String>,
    /// What an outcome copies from its intent, for intents staged by this process and not yet
    /// closed (so closing one needs no store read); others are read from the store.
    open_here: std::collections::HashMap<Seq, (String, ObjectRef, Vec<ObjectRef>)>,
    /// Unit → the instance that holds its claim now (see [`Claim`]).
    claims: std::collections::HashMap<Arc<str>, u64>,
    last_instance: u64,
}

pub struct Journal {
    // Declared before `_copy` so the store closes before the copied directory is deleted.
    store: Box<dyn Store>,
    writer: Mutex<Writer>,
    /// Group commit: whether an appender is applying the staged records and flushing (the
    /// committer). While it waits for the disk, others stage theirs and wait on
    /// `committed`; the next committer takes everything staged meanwhile.
    committing: Mutex<bool>,
    committed: Condvar,
    /// The highest seq applied to the store (every lower one is applied too).
    applied: AtomicU64,
    /// The highest seq known durable.
    durable: AtomicU64,
    cfg: JournalConfig,
    path: PathBuf,
    observer: OnceLock<AppendObserver>,
    /// Records from this seq on are in the object index; older ones (written before format 4)
    /// are found by scanning.
    object_index_from: Seq,
    /// The first seq this process could write: lower ones were written by earlier processes.
    opened_at: Seq,
    _copy: Option<tempfile::TempDir>,
}

impl fmt::Debug for Journal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Journal")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn meta_u64(store: &dyn Store, key: &'static [u8], name: &'static str) -> Result<Option<u64>> {
    match store.get(key)? {
        None => Ok(None),
        Some(v) => keys::parse_u64(&v)
            .map(Some)
            .ok_or_else(|| JournalError::Meta {
                key: name,
                reason: format!("expected 8 bytes, found {}", v.len()),
            }),
    }
}

impl Journal {
    /// Open (or create) the journal at `path` with default settings.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, JournalConfig::default())
    }

    pub fn open_with(path: impl AsRef<Path>, cfg: JournalConfig) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let store = SledStore::open(&path, &cfg.sled)?;
        Self::from_store(Box::new(store), cfg, path, None)
    }

    /// Open a private copy of a journal for read-only inspection.
    ///
    /// sled takes an exclusive lock on its directory, so a running operator's journal cannot
    /// be opened directly. This copies the directory into a fresh temporary directory (deleted
    /// when the returned journal drops) and opens the copy; the original is only read.
    ///
    /// The copy must stand for one instant. A copy taken while the owner writes mixes files
    /// (and parts of files) from different moments, and sled may then refuse it as corrupt,
    /// silently recover an older prefix, or panic reading it. So the copy starts only once no
    /// file has changed for [`COPY_QUIET`] (longer than the kernel's mtime tick, so any write
    /// during the copy moves a modification time), and is kept only if nothing changed while
    /// it was taken; that copy is what a crash at that instant would leave, and whatever
    /// opening it says (corruption included) is the journal's own state. An owner that never
    /// pauses for [`COPY_PATIENCE`] gets [`JournalError::CopyMoving`], never a torn copy.
    pub fn open_copy(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_copy_within(path, COPY_PATIENCE)
    }

    /// [`Journal::open_copy`], waiting up to `patience` for a still moment.
    pub fn open_copy_within(path: impl AsRef<Path>, patience: std::time::Duration) -> Result<Self> {
        Self::open_copy_in(path, &std::env::temp_dir(), patience)
    }

    /// [`Journal::open_copy_within`], with the private copy in a new directory under `parent`
    /// (a tmpfs spares writing the copy to disk: opening it makes sled sync the whole file).
    pub fn open_copy_in(
        path: impl AsRef<Path>,
        parent: &Path,
        patience: std::time::Duration,
    ) -> Result<Self> {
        let from = path.as_ref();
        let tmp = tempfile::Builder::new()
            .prefix("lvms-journal-copy-")
            .tempdir_in(parent)
            .map_err(|source| JournalError::Copy {
                from: from.to_path_buf(),
                to: parent.to_path_buf(),
                source,
            })?;
        let to = tmp.path().join("journal");
        Self::copy_still(from, &to, patience)?;
        let cfg = JournalConfig {
            flush: FlushPolicy::Manual,
            ..JournalConfig::default()
        };
        let store = SledStore::open(&to, &cfg.sled)?;
        Self::from_store(Box::new(store), cfg, to, Some(tmp))
    }

    /// Copy the journal directory `from` to `to` (created; replaced if there) as it was at one
    /// still instant (see [`Journal::open_copy`]): a copy a bundle can keep and `lvms journal`
    /// can open later.
    pub fn copy_still(from: &Path, to: &Path, patience: std::time::Duration) -> Result<()> {
        let copy_err = |to: &Path, source| JournalError::Copy {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
            source,
        };
        if !from.is_dir() {
            let e = std::io::Error::new(std::io::ErrorKind::NotFound, "no such journal directory");
            return Err(copy_err(to, e));
        }
        let started = std::time::Instant::now();
        // The fingerprint of the last look; `None` before the first (or after a look that met a
        // file being replaced).
        let mut seen: Option<Fingerprint> = None;
        let mut first = true;
        loop {
            if !first {
                std::thread::sleep(COPY_QUIET);
            }
            if started.elapsed() >= patience {
                return Err(JournalError::CopyMoving {
                    from: from.to_path_buf(),
                    waited: started.elapsed(),
                });
            }
            // A file the owner removes between listing and reading (sled replaces its
            // snapshot file) is a moving journal, not an error.
            let before = fingerprint(from).map_err(|e| copy_err(from, e))?;
            // Still: unchanged since the last look a quiet period ago, or (first look, a
            // resting owner) nothing modified within the quiet period.
            let still = match (&before, &seen) {
                (Some(b), Some(prev)) => b == prev,
                (Some(b), None) => first && rested(b),
                (None, _) => false,
            };
            first = false;
            let before = match before {
                Some(b) if still => b,
                other => {
                    seen = other;
                    continue;
                }
            };
            if to.exists() {
                std::fs::remove_dir_all(to).map_err(|e| copy_err(to, e))?;
            }
            let copied = copy_dir(from, to);
            let after = fingerprint(from).map_err(|e| copy_err(from, e))?;
            if after.as_ref() == Some(&before) {
                return copied.map_err(|e| copy_err(to, e));
            }
            seen = after;
        }
    }

    /// Open over any [`Store`].
    pub fn from_store(
        store: Box<dyn Store>,
        cfg: JournalConfig,
        path: PathBuf,
        copy: Option<tempfile::TempDir>,
    ) -> Result<Self> {
        let (lo, hi) = keys::span(keys::LOG);
        let last = store.last_in(&lo, &hi)?;
        match store.get(keys::META_FORMAT)? {
            Some(v) => {
                let found = *v.first().ok_or(JournalError::Meta {
                    key: "format",
                    reason: "empty value".into(),
                })?;
                if found > codec::FORMAT_VERSION {
                    return Err(JournalError::NewerFormat {
                        found,
                        supported: codec::FORMAT_VERSION,
                    });
                }
                if found < codec::OLDEST_READABLE_FORMAT {
                    return Err(JournalError::UnsupportedFormat {
                        found,
                        supported: codec::FORMAT_VERSION,
                    });
                }
                if found < codec::FORMAT_VERSION {
                    // Older records stay as they are (their frames say their version); new
                    // ones are written in the current format, so an older release must now
                    // refuse this journal rather than misread it.
                    let mut b = Batch::default();
                    b.insert(keys::META_FORMAT, vec![codec::FORMAT_VERSION]);
                    store.apply(b)?;
                    store.flush()?;
                }
            }
            None if last.is_none() => {
                let mut b = Batch::default();
                b.insert(keys::META_FORMAT, vec![codec::FORMAT_VERSION]);
                store.apply(b)?;
                store.flush()?;
            }
            None => {
                return Err(JournalError::Meta {
                    key: "format",
                    reason: "missing in a journal that has records".into(),
                });
            }
        }
        let next_seq = Self::derive_next_seq(store.as_ref())?;
        let object_index_from = match meta_u64(
            store.as_ref(),
            keys::META_OBJECT_INDEX_FROM,
            "object_index_from",
        )? {
            Some(from) => from,
            None => {
                // First open by a release that keeps the object index: it covers what comes next.
                let mut b = Batch::default();
                b.insert(
                    keys::META_OBJECT_INDEX_FROM,
                    next_seq.to_be_bytes().to_vec(),
                );
                store.apply(b)?;
                store.flush()?;
                next_seq
            }
        };
        let epoch = meta_u64(store.as_ref(), keys::META_EPOCH, "lease_epoch")?.unwrap_or(0);
        Ok(Self {
            store,
            writer: Mutex::new(Writer {
                next_seq,
                unflushed: 0,
                epoch,
                pending: Batch::default(),
                pending_last: 0,
                closing: Default::default(),
                failed: None,
                open_here: Default::default(),
                claims: Default::default(),
                last_instance: 0,
            }),
            committing: Mutex::new(false),
            committed: Condvar::new(),
            applied: AtomicU64::new(next_seq.saturating_sub(1)),
            durable: AtomicU64::new(next_seq.saturating_sub(1)),
            cfg,
            path,
            observer: OnceLock::new(),
            object_index_from,
            opened_at: next_seq,
            _copy: copy,
        })
    }

    /// Seqs continue after both the last stored key and the recorded high water, so a seq is
    /// never reused even if compaction removed the newest records.
    fn derive_next_seq(store: &dyn Store) -> Result<Seq> {
        let (lo, hi) = keys::span(keys::LOG);
        let last_key = match store.last_in(&lo, &hi)? {
            Some((k, _)) => keys::parse_seq_key(&k).ok_or_else(|| JournalError::Meta {
                key: "log key",
                reason: format!("malformed log key {k:?}"),
            })?,
            None => 0,
        };
        let hw = meta_u64(store, keys::META_HIGH_WATER, "high_water")?.unwrap_or(0);
        Ok(last_key.max(hw) + 1)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn config(&self) -> &JournalConfig {
        &self.cfg
    }

    /// Install the append observer. The first one stays: returns false if one was already set.
    pub fn set_append_observer(&self, observer: AppendObserver) -> bool {
        self.observer.set(observer).is_ok()
    }

    pub(crate) fn store(&self) -> &dyn Store {
        self.store.as_ref()
    }

    pub(crate) fn lock(&self) -> Result<MutexGuard<'_, Writer>> {
        self.writer.lock().map_err(|_| JournalError::Poisoned)
    }

    /// The first seq this process could have written: every record below it was written
    /// before this journal was opened (by an earlier process).
    pub fn opened_at(&self) -> Seq {
        self.opened_at
    }

    /// Become the one live writer of `unit` in this process: appends under any earlier claim
    /// of it are refused from now on ([`JournalError::Superseded`]).
    pub fn claim(&self, unit: &str) -> Result<Claim> {
        let mut w = self.lock()?;
        w.last_instance += 1;
        let claim = Claim {
            unit: Arc::from(unit),
            instance: w.last_instance,
            since: w.next_seq,
        };
        w.claims.insert(claim.unit.clone(), claim.instance);
        Ok(claim)
    }

    /// Refuses an append for `unit` under `claim` unless that claim is the unit's current one.
    fn check_claim(w: &Writer, claim: Option<&Claim>, unit: &str) -> Result<()> {
        let Some(c) = claim else { return Ok(()) };
        if &*c.unit != unit {
            return Err(JournalError::ClaimMismatch {
                claimed: c.unit.to_string(),
                unit: unit.to_string(),
            });
        }
        match w.claims.get(unit) {
            Some(&current) if current == c.instance => Ok(()),
            current => Err(JournalError::Superseded {
                unit: unit.to_string(),
                instance: c.instance,
                current: current.copied().unwrap_or(0),
            }),
        }
    }

    /// The seq the next append will get.
    pub fn next_seq(&self) -> Result<Seq> {
        Ok(self.lock()?.next_seq)
    }

    /// Records with seq <= this may have been deleted by compaction.
    pub fn compacted_through(&self) -> Result<Seq> {
        Ok(meta_u64(self.store(), keys::META_COMPACTED, "compacted_through")?.unwrap_or(0))
    }

    // ---- appends ------------------------------------------------------------------------

    /// Write-ahead: returns only after the intent is flushed to disk. Run the side effect
    /// only after this returns `Ok`.
    pub fn append_intent(&self, intent: Intent, trace: Trace) -> Result<Seq> {
        let started = Instant::now();
        let seq = {
            let mut w = self.lock()?;
            Self::check_epoch(&w, &intent)?;
            self.stage(&mut w, Body::Intent(intent), trace)?
        };
        self.commit(seq, true, started, "intent")
    }

    /// Write-ahead for several intents at once: consecutive seqs, one flush for all of them
    /// (a pass that is about to run many independent steps). Returns their seqs in order.
    pub fn append_intents(&self, intents: Vec<Intent>, trace: Trace) -> Result<Vec<Seq>> {
        self.append_intents_traced(intents.into_iter().map(|i| (i, trace)).collect())
    }

    /// [`Journal::append_intents`] with a trace context per intent (intents of different
    /// spans made durable by one flush: a pass's own intent and its first step's).
    pub fn append_intents_traced(&self, intents: Vec<(Intent, Trace)>) -> Result<Vec<Seq>> {
        self.append_intents_claimed(None, intents)
    }

    /// [`Journal::append_intents_traced`] by the holder of `claim` (a unit's instance): refused
    /// as a whole, before anything is staged, when that claim has been superseded.
    pub fn append_intents_claimed(
        &self,
        claim: Option<&Claim>,
        intents: Vec<(Intent, Trace)>,
    ) -> Result<Vec<Seq>> {
        let started = Instant::now();
        let mut seqs = Vec::with_capacity(intents.len());
        {
            let mut w = self.lock()?;
            for (intent, _) in &intents {
                Self::check_epoch(&w, intent)?;
                Self::check_claim(&w, claim, &intent.unit)?;
            }
            for (intent, trace) in intents {
                seqs.push(self.stage(&mut w, Body::Intent(intent), trace)?);
            }
        }
        if let Some(&last) = seqs.last() {
            self.commit(last, true, started, "intent")?;
        }
        Ok(seqs)
    }

    fn check_epoch(w: &Writer, intent: &Intent) -> Result<()> {
        if intent.lease_epoch < w.epoch {
            return Err(JournalError::StaleEpoch {
                epoch: intent.lease_epoch,
                current: w.epoch,
            });
        }
        Ok(())
    }

    /// Close an open intent. Fails with `IntentNotOpen` for unknown or already closed intents.
    pub fn append_outcome(
        &self,
        intent_seq: Seq,
        result: OutcomeResult,
        duration: Duration,
        trace: Trace,
    ) -> Result<Seq> {
        self.append_outcome_claimed(None, intent_seq, result, duration, trace)
    }

    /// [`Journal::append_outcome`] by the holder of `claim`: refused when that claim has been
    /// superseded (the intent stays open for the current instance to resolve).
    pub fn append_outcome_claimed(
        &self,
        claim: Option<&Claim>,
        intent_seq: Seq,
        result: OutcomeResult,
        duration: Duration,
        trace: Trace,
    ) -> Result<Seq> {
        let started = Instant::now();
        let (seq, durable) = {
            let mut w = self.lock()?;
            if w.closing.contains_key(&intent_seq) {
                return Err(JournalError::IntentNotOpen { seq: intent_seq });
            }
            // Staged here: the claim is checked against its unit before it leaves the map.
            if let Some((unit, _, _)) = w.open_here.get(&intent_seq) {
                Self::check_claim(&w, claim, unit)?;
            }
            let (unit, object, regarding) = match w.open_here.remove(&intent_seq) {
                Some(header) => header,
                None => {
                    if self
                        .store
                        .get(&keys::seq_key(keys::OPEN, intent_seq))?
                        .is_none()
                    {
                        return Err(JournalError::IntentNotOpen { seq: intent_seq });
                    }
                    match self.get(intent_seq)? {
                        Some(Record {
                            body: Body::Intent(i),
                            ..
                        }) => {
                            Self::check_claim(&w, claim, &i.unit)?;
                            (i.unit, i.object, i.regarding)
                        }
                        _ => return Err(JournalError::IntentNotOpen { seq: intent_seq }),
                    }
                }
            };
            let body = Body::Outcome(Outcome {
                intent_seq,
                unit,
                object,
                result,
                duration_ms: duration.as_millis().try_into().unwrap_or(u64::MAX),
                regarding,
            });
            let seq = self.stage(&mut w, body, trace)?;
            w.closing.insert(intent_seq, seq);
            (seq, self.flush_due(&mut w))
        };
        self.commit(seq, durable, started, "outcome")
    }

    pub fn append_published(&self, published: Published, trace: Trace) -> Result<Seq> {
        let started = Instant::now();
        let (seq, durable) = {
            let mut w = self.lock()?;
            let seq = self.stage(&mut w, Body::Published(published), trace)?;
            (seq, self.flush_due(&mut w))
        };
        self.commit(seq, durable, started, "published")
    }

    /// Whether this non-durable append also flushes ([`FlushPolicy`]).
    fn flush_due(&self, w: &mut Writer) -> bool {
        w.unflushed += 1;
        let due = match self.cfg.flush {
            FlushPolicy::Always => true,
            FlushPolicy::Every(n) => w.unflushed >= n.max(1),
            FlushPolicy::Manual => false,
        };
        if due {
            w.unflushed = 0;
        }
        due
    }

    /// Encode and index one record as the next seq and stage it for the next commit (writer
    /// lock held). Nothing reaches the store here; a failure leaves the seq unused.
    fn stage(&self, w: &mut Writer, body: Body, trace: Trace) -> Result<Seq> {
        if let Some(reason) = &w.failed {
            return Err(JournalError::WriterFailed {
                reason: reason.clone(),
            });
        }
        let seq = w.next_seq;
        let record = Record {
            seq,
            at_ms: self.cfg.clock.now_ms(),
            trace,
            body,
        };
        let bytes = codec::encode_record(&record)?;
        fail_point!("journal::append::before_write");
        let mut batch = Batch::default();
        batch.insert(keys::seq_key(keys::LOG, seq), bytes);
        batch.insert(keys::META_HIGH_WATER, seq.to_be_bytes().to_vec());
        fail_point!("journal::index::before_update");
        index::stage(&record, &mut batch);
        if let Body::Intent(i) = &record.body
            && i.lease_epoch > w.epoch
        {
            batch.insert(keys::META_EPOCH, i.lease_epoch.to_be_bytes().to_vec());
            w.epoch = i.lease_epoch;
        }
        if let Body::Intent(i) = record.body {
            w.open_here.insert(seq, (i.unit, i.object, i.regarding));
        }
        w.pending.ops.extend(batch.ops);
        w.pending_last = seq;
        w.next_seq = seq + 1;
        Ok(seq)
    }

    /// Group commit: returns once `seq` is applied (and durable, if asked). The committer
    /// applies everything staged so far in one store batch and flushes once; appenders that
    /// staged meanwhile wait for it and find themselves covered, or share the next commit.
    fn commit(&self, seq: Seq, durable: bool, started: Instant, kind: &'static str) -> Result<Seq> {
        let span = tracing::info_span!("journal.append", kind, flushed = durable, seq);
        let _entered = span.enter();
        let done = |j: &Self| {
            j.applied.load(Ordering::Acquire) >= seq
                && (!durable || j.durable.load(Ordering::Acquire) >= seq)
        };
        while !done(self) {
            let mut committing = self.committing.lock().map_err(|_| JournalError::Poisoned)?;
            if done(self) {
                break;
            }
            if *committing {
                // Woken (all at once, not one by one through a lock) when that commit ends.
                drop(
                    self.committed
                        .wait(committing)
                        .map_err(|_| JournalError::Poisoned)?,
                );
                continue;
            }
            *committing = true;
            drop(committing);
            let _turn = CommitTurn(self);
            self.commit_staged(durable)?;
        }
        if let Some(observe) = self.observer.get() {
            observe(started.elapsed(), durable);
        }
        Ok(seq)
    }

    /// The committer's work: apply what is staged, then flush if this appender needs it.
    fn commit_staged(&self, durable: bool) -> Result<()> {
        {
            let mut w = self.lock()?;
            self.apply_staged(&mut w)?;
        }
        fail_point!("journal::append::before_flush");
        if durable {
            let upto = self.applied.load(Ordering::Acquire);
            self.store.flush()?;
            self.durable.fetch_max(upto, Ordering::AcqRel);
        }
        Ok(())
    }

    /// Apply every staged record in one batch (committer and writer locks held; the store
    /// write is quick, the flush comes after the writer lock is released).
    fn apply_staged(&self, w: &mut Writer) -> Result<()> {
        if w.pending.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut w.pending);
        let last = w.pending_last;
        if let Err(e) = self.store.apply(batch) {
            // Whether it landed is unknown: refuse every later append rather than reuse a seq
            // or leave a gap; reopening derives the next seq from what is stored.
            w.failed = Some(e.to_string());
            return Err(e.into());
        }
        self.applied.fetch_max(last, Ordering::AcqRel);
        w.closing.retain(|_, outcome| *outcome > last);
        Ok(())
    }

    /// For snapshot and compaction: no appends while `f` runs, and everything staged before
    /// it is in the store.
    pub(crate) fn exclusive<T>(&self, f: impl FnOnce(&mut Writer) -> Result<T>) -> Result<T> {
        // Become the committer (waiting out a running one), so no commit runs meanwhile.
        let mut committing = self.committing.lock().map_err(|_| JournalError::Poisoned)?;
        while *committing {
            committing = self
                .committed
                .wait(committing)
                .map_err(|_| JournalError::Poisoned)?;
        }
        *committing = true;
        drop(committing);
        let _turn = CommitTurn(self);
        let mut w = self.lock()?;
        self.apply_staged(&mut w)?;
        f(&mut w)
    }

    /// Stage and apply a durable record while [`Journal::exclusive`] (snapshots).
    pub(crate) fn append_exclusive(&self, w: &mut Writer, body: Body, trace: Trace) -> Result<Seq> {
        let seq = self.stage(w, body, trace)?;
        self.apply_staged(w)?;
        self.store.flush()?;
        self.durable.fetch_max(seq, Ordering::AcqRel);
        Ok(seq)
    }

    /// Make every append so far durable.
    pub fn flush(&self) -> Result<()> {
        let upto = {
            let mut w = self.lock()?;
            w.unflushed = 0;
            w.next_seq.saturating_sub(1)
        };
        if upto == 0 {
            return Ok(());
        }
        self.commit(upto, true, Instant::now(), "flush").map(|_| ())
    }

    // ---- reads ----------------------------------------------------------------------------

    pub(crate) fn decode_at(seq: Seq, bytes: &[u8]) -> Result<Record, CorruptRecord> {
        let rec = codec::decode_record(bytes).map_err(|e| CorruptRecord {
            seq,
            reason: e.to_string(),
        })?;
        if rec.seq != seq {
            return Err(CorruptRecord {
                seq,
                reason: format!(
                    "payload carries seq {} but is stored under seq {seq}",
                    rec.seq
                ),
            });
        }
        Ok(rec)
    }

    /// One record; `Ok(None)` if absent, `Err(Corrupt)` if present but bad.
    pub fn get(&self, seq: Seq) -> Result<Option<Record>> {
        match self.store.get(&keys::seq_key(keys::LOG, seq))? {
            None => Ok(None),
            Some(bytes) => Ok(Some(Self::decode_at(seq, &bytes)?)),
        }
    }

    /// Records in seq order. A bad record yields `Err(Corrupt { seq, .. })` and iteration
    /// continues with the next one.
    pub fn iter_range(
        &self,
        range: impl RangeBounds<Seq>,
    ) -> impl Iterator<Item = Result<Record>> + '_ {
        let from = match range.start_bound() {
            Bound::Included(s) => keys::seq_key(keys::LOG, *s),
            Bound::Excluded(s) => keys::seq_key(keys::LOG, s.saturating_add(1)),
            Bound::Unbounded => vec![keys::LOG],
        };
        let to = match range.end_bound() {
            Bound::Included(s) if *s < Seq::MAX => keys::seq_key(keys::LOG, s + 1),
            Bound::Excluded(s) => keys::seq_key(keys::LOG, *s),
            _ => vec![keys::LOG + 1],
        };
        self.store.range(&from, &to).map(|kv| {
            let (k, v) = kv?;
            let seq = keys::parse_seq_key(&k).ok_or_else(|| CorruptRecord {
                seq: 0,
                reason: format!("malformed log key {k:?}"),
            })?;
            Ok(Self::decode_at(seq, &v)?)
        })
    }

    pub fn iter(&self) -> impl Iterator<Item = Result<Record>> + '_ {
        self.iter_range(..)
    }

    /// Seqs of open intents, from the index (O(open)).
    pub fn open_intent_seqs(&self) -> Result<Vec<Seq>> {
        let (lo, hi) = keys::span(keys::OPEN);
        self.store
            .range(&lo, &hi)
            .map(|kv| {
                let (k, _) = kv?;
                keys::parse_seq_key(&k).ok_or_else(|| {
                    JournalError::Corrupt(CorruptRecord {
                        seq: 0,
                        reason: format!("malformed open-intent key {k:?}"),
                    })
                })
            })
            .collect()
    }

    /// Open intents in seq order. A missing or corrupt intent is an error, never skipped.
    /// Every readable open intent. One whose record is corrupt or missing is left out (see
    /// [`Journal::unreadable_open_intents`]): nothing can replay an intent it cannot read, and
    /// failing the whole list would keep every unit from replaying, and so from ever running
    /// again (a teardown blocked for good by one bad record). A store that cannot be read at
    /// all is still an error.
    pub fn open_intents(&self) -> Result<Vec<Record>> {
        Ok(self.open_intents_checked()?.0)
    }

    /// The open intents that cannot be read: what `lvms journal verify` also reports.
    pub fn unreadable_open_intents(&self) -> Result<Vec<CorruptRecord>> {
        Ok(self.open_intents_checked()?.1)
    }

    /// Both at once, from one read of the open-intent index: the readable open intents and
    /// the ones that cannot be read.
    pub fn open_intents_checked(&self) -> Result<(Vec<Record>, Vec<CorruptRecord>)> {
        let (mut readable, mut corrupt) = (Vec::new(), Vec::new());
        for seq in self.open_intent_seqs()? {
            match self.get(seq) {
                Ok(Some(r)) => readable.push(r),
                Ok(None) => corrupt.push(CorruptRecord {
                    seq,
                    reason: "open-intent index points at a missing record".into(),
                }),
                Err(JournalError::Corrupt(c)) => corrupt.push(c),
                Err(e) => return Err(e),
            }
        }
        Ok((readable, corrupt))
    }

    /// What a restarted unit must replay: its intents that have no outcome.
    pub fn open_intents_for(&self, unit: &str) -> Result<Vec<Record>> {
        Ok(self
            .open_intents()?
            .into_iter()
            .filter(|r| r.unit() == Some(unit))
            .collect())
    }

    pub fn is_open(&self, intent_seq: Seq) -> Result<bool> {
        Ok(self
            .store
            .get(&keys::seq_key(keys::OPEN, intent_seq))?
            .is_some())
    }

    /// The last Published record for a dedupe key (O(1) via the index).
    pub fn last_published(&self, dedupe_key: &str) -> Result<Option<Record>> {
        self.indexed(keys::str_key(keys::PUBLISHED, dedupe_key))
    }

    /// The latest intent appended with this idempotency key (O(1) via the index).
    pub fn intent_by_key(&self, idempotency_key: &str) -> Result<Option<Record>> {
        self.indexed(keys::str_key(keys::IDEMPOTENCY, idempotency_key))
    }

    pub(crate) fn indexed(&self, key: Vec<u8>) -> Result<Option<Record>> {
        match self.index_seq(&key)? {
            Some(seq) => self.get(seq),
            None => Ok(None),
        }
    }

    /// The seq a single-valued index entry points at.
    pub(crate) fn index_seq(&self, key: &[u8]) -> Result<Option<Seq>> {
        let Some(v) = self.store.get(key)? else {
            return Ok(None);
        };
        let seq = keys::parse_u64(&v).ok_or_else(|| CorruptRecord {
            seq: 0,
            reason: format!("index entry {key:?} is malformed"),
        })?;
        Ok(Some(seq))
    }

    /// The highest seq applied to the store (appends staged but not yet committed excluded).
    pub(crate) fn applied_seq(&self) -> Seq {
        self.applied.load(Ordering::Acquire)
    }

    /// The first seq the object index covers.
    pub fn object_index_from(&self) -> Seq {
        self.object_index_from
    }

    pub fn size_on_disk(&self) -> Result<u64> {
        Ok(self.store.size_on_disk()?)
    }

    // ---- test support ---------------------------------------------------------------------

    /// Test helper for this and other crates: flip a byte in the stored value of `seq`
    /// (bypassing the codec) so corruption handling can be exercised. Returns false if absent.
    #[doc(hidden)]
    pub fn testing_corrupt_record(&self, seq: Seq) -> Result<bool> {
        let key = keys::seq_key(keys::LOG, seq);
        let Some(mut bytes) = self.store.get(&key)? else {
            return Ok(false);
        };
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        let mut b = Batch::default();
        b.insert(key, bytes);
        self.store.apply(b)?;
        self.store.flush()?;
        Ok(true)
    }

    /// Test helper: store raw bytes under `seq` (e.g. a truncated frame).
    #[doc(hidden)]
    pub fn testing_put_raw(&self, seq: Seq, bytes: Vec<u8>) -> Result<()> {
        let mut b = Batch::default();
        b.insert(keys::seq_key(keys::LOG, seq), bytes);
        self.store.apply(b)?;
        Ok(self.store.flush()?)
    }

    /// Test helper: pretend a newer build wrote this journal.
    #[doc(hidden)]
    pub fn testing_set_format_version(&self, version: u8) -> Result<()> {
        let mut b = Batch::default();
        b.insert(keys::META_FORMAT, vec![version]);
        self.store.apply(b)?;
        Ok(self.store.flush()?)
    }
}

/// The committer's turn: ends (and wakes the waiters) however the commit ends, unwinding
/// included, so a failed or panicking commit never leaves the others waiting forever.
struct CommitTurn<'a>(&'a Journal);

impl Drop for CommitTurn<'_> {
    fn drop(&mut self) {
        // Only held for a flag flip, never across a panic: poison cannot carry bad state.
        let mut committing = self
            .0
            .committing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *committing = false;
        self.0.committed.notify_all();
    }
}

/// How long a journal's files must stay unchanged before [`Journal::open_copy`] copies them.
pub const COPY_QUIET: std::time::Duration = std::time::Duration::from_millis(25);

/// How long [`Journal::open_copy`] waits for a still moment before giving up.
pub const COPY_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

type Fingerprint = Vec<(PathBuf, u64, std::time::SystemTime)>;

/// Every file under `dir` with its size and modification time, sorted by path: equal
/// fingerprints before and after a copy mean nothing was written in between. `None` when a
/// file vanished while it was listed (the owner is replacing it).
fn fingerprint(dir: &Path) -> std::io::Result<Option<Fingerprint>> {
    fn walk(dir: &Path, out: &mut Fingerprint) -> std::io::Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                walk(&entry.path(), out)?;
            } else {
                out.push((entry.path(), meta.len(), meta.modified()?));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    match walk(dir, &mut out) {
        Ok(()) => {
            out.sort();
            Ok(Some(out))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Nothing under the fingerprint was modified within [`COPY_QUIET`] of now (a modification
/// time in the future, after a clock step, is not rest).
fn rested(fp: &Fingerprint) -> bool {
    let now = std::time::SystemTime::now();
    fp.iter()
        .all(|(_, _, m)| now.duration_since(*m).is_ok_and(|d| d >= COPY_QUIET))
}

/// Bytes of every file under `dir`, as [`fingerprint`] lists them (0 when it cannot be
/// listed: copying it reports why): a journal's size as its copy costs it.
pub fn dir_bytes(dir: &Path) -> u64 {
    match fingerprint(dir) {
        Ok(Some(files)) => files.iter().map(|(_, len, _)| len).sum(),
        _ => 0,
    }
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}
