//! Returning freed heap to the system once a burst of work is over. glibc keeps pages it has
//! freed inside its heap (between live allocations) resident until told otherwise; after a
//! burst over a large cluster (thousands of objects decoded, planned and encoded) that is
//! most of the process's RSS. After each tick with activity `malloc_trim` hands those pages
//! back (about a millisecond on a heap of tens of MiB).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// Marks activity (a reconcile pass ended) and trims after it.
#[derive(Clone, Default)]
pub struct Trimmer {
    active: Arc<AtomicBool>,
    woken: Arc<Notify>,
}

impl Trimmer {
    /// Something allocated and freed a lot just now (a pass ended).
    pub fn mark(&self) {
        self.active.store(true, Ordering::Relaxed);
        self.woken.notify_one();
    }

    /// Trims at the end of every `tick` that saw activity, until the returned handle is
    /// dropped: during a long burst too, whose freed pages would otherwise pile up until it
    /// ends. Between bursts it sleeps without a timer, so an idle process stays idle.
    pub fn spawn(&self, tick: Duration) -> Trimming {
        self.spawn_with(tick, trim)
    }

    fn spawn_with(&self, tick: Duration, trim: fn()) -> Trimming {
        let (active, woken) = (self.active.clone(), self.woken.clone());
        Trimming(tokio::spawn(async move {
            loop {
                woken.notified().await;
                loop {
                    tokio::time::sleep(tick).await;
                    if !active.swap(false, Ordering::Relaxed) {
                        break;
                    }
                    trim();
                }
            }
        }))
    }
}

/// The running trimmer; dropping it stops it.
pub struct Trimming(tokio::task::JoinHandle<()>);

impl Drop for Trimming {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Hands freed heap pages back to the system (glibc only; elsewhere the allocator decides).
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists under its locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    static TRIMS: AtomicUsize = AtomicUsize::new(0);

    fn count() {
        TRIMS.fetch_add(1, Ordering::SeqCst);
    }

    #[tokio::test(start_paused = true)]
    async fn trims_once_per_busy_tick_and_never_when_quiet() {
        let t = Trimmer::default();
        let _running = t.spawn_with(Duration::from_millis(100), count);
        // A little over one tick: the trimmer's timer fires first.
        let tick = || tokio::time::sleep(Duration::from_millis(110));
        tick().await;
        tick().await;
        assert_eq!(TRIMS.load(Ordering::SeqCst), 0, "quiet: no trim");
        // Three passes within one tick: one trim at its end.
        t.mark();
        t.mark();
        t.mark();
        tick().await;
        assert_eq!(TRIMS.load(Ordering::SeqCst), 1);
        tick().await;
        tick().await;
        assert_eq!(TRIMS.load(Ordering::SeqCst), 1, "quiet again");
        // A burst over several ticks trims during it, not only at its end.
        for _ in 0..5 {
            t.mark();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(TRIMS.load(Ordering::SeqCst) >= 3, "{TRIMS:?}");
    }
}
