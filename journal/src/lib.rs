//! The lvms reconcile journal.
