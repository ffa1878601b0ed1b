//! Supervised reconcile-unit actors (filled in by the operator issue).
