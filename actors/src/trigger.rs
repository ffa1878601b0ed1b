//! Coalescing wake-ups. Watch events bump a unit's trigger; the unit runs one pass per burst:
//! a bump while a pass is queued is absorbed, a bump during a pass queues exactly one more.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// How a trigger wakes its unit (the unit actor sends itself a run message): a callback, so
/// this module knows nothing of the actor that owns it.
pub type Wake = Arc<dyn Fn() + Send + Sync>;

#[derive(Clone, Default)]
pub struct Trigger(Arc<Inner>);

#[derive(Default)]
struct Inner {
    pending: AtomicBool,
    bumps: AtomicU64,
    reason: Mutex<String>,
    /// W3C traceparent of the first traced bump since the last pass started: the change that
    /// began the burst is the one the pass continues.
    traceparent: Mutex<Option<String>>,
    target: Mutex<Option<Wake>>,
}

// The locks hold plain values (reason text, traceparent, wake callback), set or cloned and
// never held across a call out or a panic: their poisoned arms are unreachable.
impl Trigger {
    pub fn new() -> Self {
        Self::default()
    }

    /// Ask for a pass that continues the trace `traceparent` (a W3C header value).
    pub fn bump_traced(&self, reason: &str, traceparent: Option<&str>) {
        if let Some(tp) = traceparent
            && let Ok(mut t) = self.0.traceparent.lock()
            && t.is_none()
        {
            *t = Some(tp.to_string());
        }
        self.bump(reason);
    }

    /// Ask for a pass. Cheap and idempotent while one is already queued.
    pub fn bump(&self, reason: &str) {
        self.0.bumps.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut r) = self.0.reason.lock() {
            reason.clone_into(&mut r);
        }
        if !self.0.pending.swap(true, Ordering::AcqRel) {
            self.send();
        }
    }

    /// Total bumps so far (benchmarks compare it with passes run).
    pub fn bumps(&self) -> u64 {
        self.0.bumps.load(Ordering::Relaxed)
    }

    fn send(&self) {
        let target = self.0.target.lock().ok().and_then(|t| t.clone());
        if let Some(wake) = target {
            wake();
        }
    }

    /// Called by a (re)started unit actor: from now on bumps go to it.
    pub(crate) fn attach(&self, wake: Wake) {
        if let Ok(mut t) = self.0.target.lock() {
            *t = Some(wake);
        }
        self.0.pending.store(true, Ordering::Release);
        self.send();
    }

    /// Called at the start of a pass: later bumps queue a new pass. Returns the last reason
    /// and the trace to continue, if a bump carried one.
    pub(crate) fn take(&self) -> (String, Option<String>) {
        self.0.pending.store(false, Ordering::Release);
        let reason = self.0.reason.lock().map(|r| r.clone()).unwrap_or_default();
        let traceparent = self.0.traceparent.lock().ok().and_then(|mut t| t.take());
        (reason, traceparent)
    }
}
