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
