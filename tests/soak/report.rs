//! Violations: collected, never stopping at the first.

use std::collections::BTreeSet;

pub(crate) fn clip(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= max {
        return s.to_string();
    }
    let head: String = s.chars().take(max).collect();
    format!("{head}…")
}

pub(crate) struct Violation {
    pub(crate) cycle: usize,
    pub(crate) kind: &'static str,
    pub(crate) detail: String,
}

#[derive(Default)]
pub(crate) struct Report {
    pub(crate) list: Vec<Violation>,
    seen_keys: BTreeSet<String>,
}

impl Report {
    /// Adds a violation unless one with the same `key` was reported already.
    pub(crate) fn add(&mut self, cycle: usize, kind: &'static str, key: &str, detail: String) {
        if self.seen_keys.insert(format!("{kind}|{key}")) {
            println!("  VIOLATION cycle {cycle} [{kind}] {detail}");
            self.list.push(Violation {
                cycle,
                kind,
                detail,
            });
        }
    }
}
