//! lvm2's word on a volume's LV for NodeGetVolumeStats (its volume condition), from one report
//! of this node's VGs shared by every stats call within a short window. kubelet asks each
//! mounted volume for its stats every `volumeStatsAggPeriod` (1 min by default, staggered per
//! Pod): one `lvs` per call made a node with many volumes run lvm2 all the time, beside the
//! publishes of new Pods. Only a healthy LV is answered from a shared report: a volume it does
//! not hold (made since) or an LV it shows unhealthy is read again at once, so sharing can delay
//! a condition turning abnormal by at most the window, and never reports one that is not.
//! Publish, unpublish and expansion never use it: they read lvm2 themselves.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use crate::csi::node::stats::unhealthy;

/// How long one report answers stats calls: well under kubelet's shortest sensible period.
pub const WINDOW: Duration = Duration::from_secs(10);

/// One read of every LV of this node's VGs: LV name → lv_attr.
struct Report {
    read_at: Instant,
    attrs: BTreeMap<String, String>,
}

/// The attr the shared `report` may answer for `volume_id` at `now`: only from a report younger
/// than `window` that shows the LV healthy.
fn answered<'a>(
    report: Option<&'a Report>,
    volume_id: &str,
    now: Instant,
    window: Duration,
) -> Option<&'a str> {
    let r = report?;
    if now.saturating_duration_since(r.read_at) >= window {
        return None;
    }
    let attr = r.attrs.get(volume_id)?;
    unhealthy(attr).is_none().then_some(attr.as_str())
}

pub struct StatsLvs {
    window: Duration,
    /// Held while a report is read: calls arriving meanwhile wait and share it.
    report: tokio::sync::Mutex<Option<Report>>,
}

impl Default for StatsLvs {
    fn default() -> Self {
        Self::new(WINDOW)
    }
}

impl StatsLvs {
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            report: tokio::sync::Mutex::new(None),
        }
    }

    /// `volume_id`'s lv_attr (None: no LV of that name in this node's VGs), from the shared
    /// report when it may answer, else from `read` (every LV of this node's VGs), which then
    /// becomes the shared report. A failed read is an error, never "no such LV", and keeps
    /// nothing.
    pub async fn attr<F, Fut>(&self, volume_id: &str, read: F) -> Result<Option<String>, String>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<BTreeMap<String, String>, String>>,
    {
        let mut report = self.report.lock().await;
        if let Some(attr) = answered(report.as_ref(), volume_id, Instant::now(), self.window) {
            return Ok(Some(attr.to_string()));
        }
        let read_at = Instant::now();
        let attrs = match read().await {
            Ok(a) => a,
            Err(e) => {
                *report = None;
                return Err(e);
            }
        };
        let attr = attrs.get(volume_id).cloned();
        *report = Some(Report { read_at, attrs });
        Ok(attr)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    const HEALTHY: &str = "Vwi-aotz--";
    const PARTIAL: &str = "-wi-ao--p-";

    fn attrs(lvs: &[(&str, &str)]) -> BTreeMap<String, String> {
        lvs.iter()
            .map(|(n, a)| (n.to_string(), a.to_string()))
            .collect()
    }

    fn report(age: Duration, lvs: &[(&str, &str)]) -> (Report, Instant) {
        let now = Instant::now() + Duration::from_secs(100);
        let r = Report {
            read_at: now - age,
            attrs: attrs(lvs),
        };
        (r, now)
    }

    #[test]
    fn only_a_young_report_showing_the_lv_healthy_answers() {
        let w = Duration::from_secs(10);
        let (r, now) = report(Duration::from_secs(3), &[("a", HEALTHY), ("b", PARTIAL)]);
        assert_eq!(answered(Some(&r), "a", now, w), Some(HEALTHY));
        assert_eq!(
            answered(Some(&r), "b", now, w),
            None,
            "unhealthy: read again"
        );
        assert_eq!(
            answered(Some(&r), "c", now, w),
            None,
            "not in it: read again"
        );
        assert_eq!(answered(None, "a", now, w), None);
        let (old, now) = report(w, &[("a", HEALTHY)]);
        assert_eq!(
            answered(Some(&old), "a", now, w),
            None,
            "as old as the window"
        );
    }

    /// A read that counts itself and answers `lvs` as the node has them.
    fn reader(
        reads: &Arc<AtomicU32>,
        lvs: &[(&str, &str)],
    ) -> impl FnOnce() -> std::future::Ready<Result<BTreeMap<String, String>, String>> {
        let reads = reads.clone();
        let attrs = attrs(lvs);
        move || {
            reads.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Ok(attrs))
        }
    }

    /// `id`'s attr from `cache`, the node holding `lvs` should it read.
    async fn ask(
        cache: &StatsLvs,
        reads: &Arc<AtomicU32>,
        id: &str,
        lvs: &[(&str, &str)],
    ) -> Option<String> {
        cache.attr(id, reader(reads, lvs)).await.unwrap()
    }

    #[tokio::test]
    async fn stats_calls_within_the_window_share_one_read() {
        let cache = StatsLvs::new(Duration::from_secs(60));
        let reads = Arc::new(AtomicU32::new(0));
        let node = [("a", HEALTHY), ("b", HEALTHY)];
        for id in ["a", "b", "a", "b"] {
            let attr = ask(&cache, &reads, id, &node).await;
            assert_eq!(attr.as_deref(), Some(HEALTHY));
        }
        assert_eq!(reads.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_new_volume_an_unhealthy_one_and_an_old_report_are_read_again() {
        let reads = Arc::new(AtomicU32::new(0));
        let cache = StatsLvs::new(Duration::from_secs(60));
        ask(&cache, &reads, "a", &[("a", HEALTHY)]).await;
        // Made since the report: the next read has it.
        let b = ask(&cache, &reads, "b", &[("a", HEALTHY), ("b", HEALTHY)]).await;
        assert_eq!(
            (b.as_deref(), reads.load(Ordering::SeqCst)),
            (Some(HEALTHY), 2)
        );
        // Gone from the node: said so, from a read, not from the older report.
        let gone = cache.attr("c", reader(&reads, &[("a", HEALTHY)])).await;
        assert_eq!((gone, reads.load(Ordering::SeqCst)), (Ok(None), 3));

        // An unhealthy LV is always read again (it may have been repaired).
        let reads = Arc::new(AtomicU32::new(0));
        let cache = StatsLvs::new(Duration::from_secs(60));
        let first = ask(&cache, &reads, "a", &[("a", PARTIAL)]).await;
        let again = ask(&cache, &reads, "a", &[("a", HEALTHY)]).await;
        assert_eq!(
            (
                first.as_deref(),
                again.as_deref(),
                reads.load(Ordering::SeqCst)
            ),
            (Some(PARTIAL), Some(HEALTHY), 2)
        );

        let reads = Arc::new(AtomicU32::new(0));
        let short = StatsLvs::new(Duration::ZERO);
        ask(&short, &reads, "a", &[("a", HEALTHY)]).await;
        ask(&short, &reads, "a", &[("a", HEALTHY)]).await;
        assert_eq!(
            reads.load(Ordering::SeqCst),
            2,
            "an expired report answers nothing"
        );
    }

    #[tokio::test]
    async fn a_failed_read_is_an_error_and_keeps_no_report() {
        let reads = Arc::new(AtomicU32::new(0));
        let cache = StatsLvs::new(Duration::from_secs(60));
        ask(&cache, &reads, "a", &[("a", HEALTHY)]).await;
        let failed = cache
            .attr("b", || std::future::ready(Err("lvs: exit 5".to_string())))
            .await;
        assert_eq!(failed, Err("lvs: exit 5".to_string()));
        // The report before the failure is not trusted either: "a" is read again.
        ask(&cache, &reads, "a", &[("a", HEALTHY)]).await;
        assert_eq!(reads.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn calls_arriving_during_a_read_wait_for_it_and_share_it() {
        let cache = Arc::new(StatsLvs::new(Duration::from_secs(60)));
        let reads = Arc::new(AtomicU32::new(0));
        let (go, wait) = tokio::sync::oneshot::channel::<()>();
        let first = {
            let (cache, reads) = (cache.clone(), reads.clone());
            tokio::spawn(async move {
                cache
                    .attr("a", || async move {
                        reads.fetch_add(1, Ordering::SeqCst);
                        let _ = wait.await;
                        Ok([("a".to_string(), HEALTHY.to_string())].into())
                    })
                    .await
            })
        };
        // The first call holds the report's lock, its read under way.
        while reads.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        let second = {
            let (cache, reads) = (cache.clone(), reads.clone());
            tokio::spawn(async move { cache.attr("a", reader(&reads, &[("a", HEALTHY)])).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _ = go.send(());
        assert_eq!(first.await.unwrap().unwrap().as_deref(), Some(HEALTHY));
        assert_eq!(second.await.unwrap().unwrap().as_deref(), Some(HEALTHY));
        assert_eq!(reads.load(Ordering::SeqCst), 1);
    }
}
