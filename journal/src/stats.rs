//! `stats()`: counts for `lvms journal stats` (one full scan).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::{JournalError, Result};
use crate::journal::Journal;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    pub records: u64,
    /// Keyed by `intent|outcome|published|snapshot|corrupt`.
    pub by_kind: BTreeMap<String, u64>,
    pub by_unit: BTreeMap<String, u64>,
    pub open_intents: u64,
    pub oldest_ms: Option<u64>,
    pub newest_ms: Option<u64>,
    pub size_on_disk: u64,
}

impl Journal {
    pub fn stats(&self) -> Result<Stats> {
        let mut st = Stats::default();
        for item in self.iter() {
            st.records += 1;
            match item {
                Ok(rec) => {
                    *st.by_kind.entry(rec.body.kind_name().into()).or_default() += 1;
                    if let Some(u) = rec.unit() {
                        *st.by_unit.entry(u.into()).or_default() += 1;
                    }
                    st.oldest_ms = Some(st.oldest_ms.map_or(rec.at_ms, |o| o.min(rec.at_ms)));
                    st.newest_ms = Some(st.newest_ms.map_or(rec.at_ms, |n| n.max(rec.at_ms)));
                }
                Err(JournalError::Corrupt(_)) => {
                    *st.by_kind.entry("corrupt".into()).or_default() += 1
                }
                Err(e) => return Err(e),
            }
        }
        st.open_intents = self.open_intent_seqs()?.len() as u64;
        st.size_on_disk = self.size_on_disk()?;
        Ok(st)
    }
}
