//! Reading the journals a scenario's processes wrote.

use std::path::Path;

/// The number of open intents in the operator journal under `journal_dir`.
pub fn open_intents(journal_dir: &Path) -> usize {
    let j = lvms_journal::Journal::open_copy(journal_dir.join("operator")).expect("journal copy");
    j.open_intents().expect("open intents").len()
}
