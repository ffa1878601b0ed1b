//! What `lvms explain` read, as plain data: the object, its Events, and the journals' records
//! about it. The CLI fills this from the API server and journal copies.

use lvms_journal::Record;
use serde::Serialize;
use serde_json::Value;

use super::kinds::Subject;

/// Everything read about one subject.
#[derive(Debug, Clone)]
pub struct Facts {
    pub subject: Subject,
    /// The object as the API server returned it; `None` when it is not there.
    pub object: Option<Value>,
    /// For an LVMVolumeGroup: the LVMCluster that owns it (its status has the class's nodes).
    pub owner: Option<Value>,
    /// Events about the subject, as read (any order).
    pub events: Vec<EventFact>,
    pub journals: Vec<JournalFacts>,
    /// Jaeger's UI, for trace links (`http://host:16686`).
    pub jaeger: Option<String>,
}

/// One Kubernetes Event, flattened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventFact {
    /// RFC 3339 (the Event's last time seen).
    pub at: String,
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub message: String,
    pub count: i64,
    /// `Kind/namespace/name` of the object the Event is about.
    pub object: String,
}

/// The records one journal holds about the subject (and the objects it stands for).
#[derive(Debug, Clone, Default)]
pub struct JournalFacts {
    /// `operator`, or `node/<name>` for a vg-manager's journal.
    pub label: String,
    /// The node a vg-manager journal belongs to.
    pub node: Option<String>,
    pub path: String,
    /// Records with whether each (an intent) is still open.
    pub records: Vec<(Record, bool)>,
    /// Records the journal could not read back (reported, never skipped).
    pub corrupt: Vec<String>,
    /// Why the journal could not be read at all.
    pub error: Option<String>,
}
