//! The processes' journals: where they are, reading them, the `lvms journal` CLI.

use std::path::PathBuf;
use std::process::Command;

use lvms_journal::{Journal, Record};
use lvms_testkit::Scenario;

use crate::who::Who;

pub(crate) fn journal_dir(s: &Scenario, who: Who) -> PathBuf {
    match who.node() {
        None => s.operator_journal(),
        Some(node) => s.vg_manager_journal(node),
    }
}

pub(crate) fn read_journal(s: &Scenario, who: Who) -> Result<Vec<Record>, String> {
    let dir = journal_dir(s, who);
    let j = Journal::open_copy(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    j.iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", dir.display()))
}

pub(crate) fn lvms_cli(args: &[&str], dir: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lvms"))
        .args(args)
        .arg(dir)
        .output()
        .unwrap_or_else(|e| panic!("running lvms {args:?}: {e}"))
}
