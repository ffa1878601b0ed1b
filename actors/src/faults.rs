//! Crash points for the SIGKILL tests. `LVMS_CRASH_AT=<point>[:<unit>][#<action>][@<n>]`
//! makes the process SIGKILL itself the n-th time (default 1st) it reaches `<point>` (in
//! `<unit>`, for steps with `<action>`, when given). Unset in production: the check is one OnceLock read.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// After an Intent is durable, before its side effect.
pub const INTENT_DURABLE: &str = "intent-durable";
/// After the side effect, before its Outcome is appended.
pub const APPLIED: &str = "applied";
/// After a step's Outcome, before the rest of its pass (e.g. the status it leads to).
pub const STEP_OUTCOME: &str = "step-outcome";
/// After a pass Outcome, before its Event is published.
pub const OUTCOME: &str = "outcome";
/// After an Event was written to the API, before its Published record.
pub const EVENT_WRITTEN: &str = "event-written";

struct Spec {
    point: String,
    unit: Option<String>,
    /// `#<action>`: only steps with this action (e.g. `vgcreate`).
    action: Option<String>,
    nth: u32,
    seen: AtomicU32,
}

// Test-only fault injection: an unset variable is "no fault", a malformed count means 1.
fn spec() -> Option<&'static Spec> {
    static SPEC: OnceLock<Option<Spec>> = OnceLock::new();
    SPEC.get_or_init(|| parse(&std::env::var("LVMS_CRASH_AT").ok()?))
        .as_ref()
}

fn parse(raw: &str) -> Option<Spec> {
    let raw = raw.trim();
    if raw.is_empty() {
        return None;
    }
    let (head, nth) = match raw.split_once('@') {
        Some((h, n)) => (h, n.parse().unwrap_or(1)),
        None => (raw, 1),
    };
    let (head, action) = match head.split_once('#') {
        Some((h, a)) => (h, Some(a.to_string())),
        None => (head, None),
    };
    let (point, unit) = match head.split_once(':') {
        Some((p, u)) => (p.to_string(), Some(u.to_string())),
        None => (head.to_string(), None),
    };
    Some(Spec {
        point,
        unit,
        action,
        nth,
        seen: AtomicU32::new(0),
    })
}

/// SIGKILL this process if the configured crash point is reached.
pub fn crash_point(point: &str, unit: &str) {
    crash_point_in(point, unit, "")
}

/// Like [`crash_point`], for a step with this action.
pub fn crash_point_in(point: &str, unit: &str, action: &str) {
    let Some(spec) = spec() else { return };
    if spec.point != point
        || spec.unit.as_deref().is_some_and(|u| u != unit)
        || spec.action.as_deref().is_some_and(|a| a != action)
    {
        return;
    }
    if spec.seen.fetch_add(1, Ordering::SeqCst) + 1 == spec.nth {
        tracing::warn!(point, unit, "LVMS_CRASH_AT reached: SIGKILL");
        // SAFETY: kill(2) on our own pid; SIGKILL cannot be caught, which is the point.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
}

/// `LVMS_PANIC_IN=<unit>[@<n>|@always]`: the unit's actor panics on its n-th pass (default
/// 1st) after each (re)start, or on every pass — to prove supervision and its intensity limit.
pub fn panic_point(unit: &str, pass: u64) {
    static SPEC: OnceLock<Option<(String, Option<u64>)>> = OnceLock::new();
    // Test-only, as `LVMS_CRASH_AT`: unset is "no panic", a malformed count means 1.
    let spec = SPEC.get_or_init(|| {
        let raw = std::env::var("LVMS_PANIC_IN").ok()?;
        let (u, n) = match raw.split_once('@') {
            Some((u, "always")) => (u.to_string(), None),
            Some((u, n)) => (u.to_string(), Some(n.parse().unwrap_or(1))),
            None => (raw, Some(1)),
        };
        Some((u, n))
    });
    let Some((u, n)) = spec else { return };
    if u != unit {
        return;
    }
    static FIRED: AtomicU32 = AtomicU32::new(0);
    let fire = match n {
        None => true,
        // Once per process: the restarted actor must then converge.
        Some(n) => pass == *n && FIRED.fetch_add(1, Ordering::SeqCst) == 0,
    };
    if fire {
        panic!("LVMS_PANIC_IN: injected panic in unit {unit} (pass {pass})");
    }
}

/// `LVMS_STALL_IN=<unit>#<action>=<ms>`: the first step of `<unit>` with `<action>` waits
/// `<ms>` between its durable intent and its effect, once per process: a write slowed by a
/// busy API server, to prove what overlaps it (a teardown ending while a create is in flight).
pub fn stall_for(unit: &str, action: &str) -> Option<std::time::Duration> {
    static SPEC: OnceLock<Option<(String, String, u64)>> = OnceLock::new();
    // Test-only, as `LVMS_CRASH_AT`: unset or malformed is "no stall".
    let spec = SPEC.get_or_init(|| {
        let raw = std::env::var("LVMS_STALL_IN").ok()?;
        let (target, ms) = raw.trim().split_once('=')?;
        let (u, a) = target.split_once('#')?;
        Some((u.to_string(), a.to_string(), ms.parse().ok()?))
    });
    let (u, a, ms) = spec.as_ref()?;
    static FIRED: AtomicU32 = AtomicU32::new(0);
    (u == unit && a == action && FIRED.fetch_add(1, Ordering::SeqCst) == 0)
        .then(|| std::time::Duration::from_millis(*ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_point_unit_and_count() {
        let s = parse("applied:storage-classes@3").unwrap();
        assert_eq!(
            (s.point.as_str(), s.unit.as_deref(), s.nth),
            ("applied", Some("storage-classes"), 3)
        );
        let s = parse("applied:vg/a1#vgcreate").unwrap();
        assert_eq!(
            (s.unit.as_deref(), s.action.as_deref(), s.nth),
            (Some("vg/a1"), Some("vgcreate"), 1)
        );
        let s = parse("outcome").unwrap();
        assert_eq!((s.point.as_str(), s.unit, s.nth), ("outcome", None, 1));
        assert!(parse("  ").is_none());
    }
}
