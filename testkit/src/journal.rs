//! Reading the journals a scenario's processes wrote.

use std::path::Path;

/// The number of open intents in the operator journal under `journal_dir`.
pub fn open_intents(journal_dir: &Path) -> usize {
    open_intent_lines(journal_dir).len()
}

/// The operator journal's open intents, one line each (unit, action, object): for assertion
/// messages.
pub fn open_intent_lines(journal_dir: &Path) -> Vec<String> {
    let j = lvms_journal::Journal::open_copy(journal_dir.join("operator")).expect("journal copy");
    j.open_intents()
        .expect("open intents")
        .iter()
        .map(|r| match &r.body {
            lvms_journal::Body::Intent(i) => {
                format!(
                    "{} {} {} (seq {})",
                    r.unit().unwrap_or("-"),
                    i.action,
                    i.object,
                    r.seq
                )
            }
            other => format!("{} {:?}", r.unit().unwrap_or("-"), other.kind_name()),
        })
        .collect()
}

/// What the intents of one action came to, after every crash and replay.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Effects {
    /// Intents that took effect: ran, or were closed by replay as already done (they ran once,
    /// before a crash).
    pub took: usize,
    /// One verdict per intent (`seq N: ran`, `replay=not-done`, `failed (...)`, `open`), for
    /// assertion messages.
    pub verdicts: Vec<String>,
}

/// Per action of `unit`: how many of its intents took effect. "Nothing done twice" is
/// `took <= 1` for a step that must not repeat.
pub fn effects(
    recs: &[lvms_journal::Record],
    unit: &str,
) -> std::collections::BTreeMap<String, Effects> {
    use lvms_journal::{Body, OutcomeResult, Replayed};
    let outcomes: std::collections::BTreeMap<u64, &OutcomeResult> = recs
        .iter()
        .filter_map(|r| match &r.body {
            Body::Outcome(o) => Some((o.intent_seq, &o.result)),
            _ => None,
        })
        .collect();
    let mut out: std::collections::BTreeMap<String, Effects> = Default::default();
    for r in recs {
        let Body::Intent(i) = &r.body else { continue };
        if i.unit != unit {
            continue;
        }
        let (took, verdict) = match outcomes.get(&r.seq) {
            None => (false, "open".to_string()),
            Some(OutcomeResult::Err { reason, .. }) => (false, format!("failed ({reason})")),
            Some(OutcomeResult::Ok(d)) => match d.replay {
                None => (true, "ran".to_string()),
                Some(Replayed::AlreadyDone) => {
                    (true, "already-done (ran once, before a crash)".to_string())
                }
                Some(v) => (false, format!("replay={v}")),
            },
        };
        let e = out.entry(i.action.clone()).or_default();
        e.took += usize::from(took);
        e.verdicts.push(format!("seq {}: {verdict}", r.seq));
    }
    out
}

/// A copy of the journal at `path` once it has no open intent: a running process may be in
/// the middle of a pass (an intent open until its effect returns), so "nothing left open" is
/// checked when the process is at rest, waiting up to `timeout`. Panics naming what stayed
/// open.
pub fn settled(path: &Path, timeout: std::time::Duration) -> lvms_journal::Journal {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let j = lvms_journal::Journal::open_copy(path).expect("journal copy");
        let open = j.open_intents().expect("open intents");
        if open.is_empty() {
            return j;
        }
        if std::time::Instant::now() > deadline {
            let lines: Vec<String> = open
                .iter()
                .map(|r| match &r.body {
                    lvms_journal::Body::Intent(i) => {
                        format!("{} {} {} (seq {})", i.unit, i.action, i.object, r.seq)
                    }
                    other => format!("{:?}", other.kind_name()),
                })
                .collect();
            panic!("{}: intents still open: {lines:?}", path.display());
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
