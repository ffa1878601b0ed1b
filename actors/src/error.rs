use std::fmt;

/// The reasons code acts on: matched as values, so a typo is a compile error, not a silent
/// mismatch. Other reasons (LVMS's Event reasons, a unit's own words) stay free text: they are
/// reported, never matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// An append to the journal failed: the effect did not run (or its outcome is unknown).
    JournalWriteFailed,
    /// This unit instance's claim was superseded: it must end, not retry.
    InstanceSuperseded,
    /// The API server could not be reached (no HTTP status).
    ApiUnavailable,
    /// The API server answered with an HTTP status: forbidden, not found, conflict, invalid
    /// (422) or another error.
    Forbidden,
    NotFound,
    Conflict,
    Invalid,
    ApiError,
    /// A lock poisoned by a panic, or a value a step promised and did not give.
    Internal,
}

impl Reason {
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::JournalWriteFailed => "JournalWriteFailed",
            Reason::InstanceSuperseded => "InstanceSuperseded",
            Reason::ApiUnavailable => "ApiUnavailable",
            Reason::Forbidden => "Forbidden",
            Reason::NotFound => "NotFound",
            Reason::Conflict => "Conflict",
            Reason::Invalid => "Invalid",
            Reason::ApiError => "ApiError",
            Reason::Internal => "Internal",
        }
    }
}

impl From<Reason> for String {
    fn from(r: Reason) -> String {
        r.as_str().to_string()
    }
}

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
                UnitError::permanent(Reason::InstanceSuperseded, err.to_string())
            }
            err => UnitError::retryable(Reason::JournalWriteFailed, err.to_string()),
        }
    }

    /// Whether this error's reason is `reason`.
    pub fn is(&self, reason: Reason) -> bool {
        self.reason == reason.as_str()
    }

    /// This unit instance lost its claim to a newer one: it must not retry, only end.
    pub fn is_superseded(&self) -> bool {
        self.is(Reason::InstanceSuperseded)
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
