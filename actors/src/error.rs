use std::fmt;

/// The reason of a [`UnitError`] from an append of a superseded unit instance.
pub const SUPERSEDED: &str = "InstanceSuperseded";

/// Why a pass or a step did not complete. `reason` is a stable CamelCase word (it becomes an
/// Event reason and a condition message prefix); `message` says what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct UnitError {
    pub reason: String,
    pub message: String,
    /// False when retrying cannot help until the input changes (e.g. an invalid spec).
    pub retryable: bool,
    /// Retry at this fixed delay instead of the unit's backoff (e.g. LVMS's 10 s while a
    /// deletion gate holds).
    pub retry_after: Option<std::time::Duration>,
}

impl UnitError {
    pub fn retryable(reason: impl Into<String>, message: impl Into<String>) -> Self {
        UnitError {
            reason: reason.into(),
            message: message.into(),
            retryable: true,
            retry_after: None,
        }
    }

    pub fn permanent(reason: impl Into<String>, message: impl Into<String>) -> Self {
        UnitError {
            reason: reason.into(),
            message: message.into(),
            retryable: false,
            retry_after: None,
        }
    }

    pub fn with_retry_after(mut self, after: std::time::Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    /// A journal failure is never ignored: the pass fails and the unit retries; an instance
    /// the journal says was superseded ends instead (see [`UnitError::is_superseded`]).
    pub fn journal(err: lvms_journal::JournalError) -> Self {
        match err {
            lvms_journal::JournalError::Superseded { .. } => {
                UnitError::permanent(SUPERSEDED, err.to_string())
            }
            err => UnitError::retryable("JournalWriteFailed", err.to_string()),
        }
    }

    /// This unit instance lost its claim to a newer one: it must not retry, only end.
    pub fn is_superseded(&self) -> bool {
        self.reason == SUPERSEDED
    }
}

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

/// Marks `span` failed the OpenTelemetry way (status ERROR and the message); the span must
/// declare `otel.status_code` and `error.message` as empty fields.
pub fn record_span_error(span: &tracing::Span, error: &dyn std::fmt::Display) {
    span.record("otel.status_code", "ERROR");
    span.record("error.message", tracing::field::display(error));
}
