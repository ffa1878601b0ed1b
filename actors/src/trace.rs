//! The tracing backend as the actors see it: a leaf module, so steps and units both use it
//! without depending on each other.

use std::sync::Arc;

use lvms_journal::Trace;

/// The tracing backend as the actors see it (OpenTelemetry in the binary; this crate stays
/// free of it).
pub trait TraceHooks: Send + Sync + 'static {
    /// Trace and span id of the current span (zeros when tracing is off).
    fn current(&self) -> Trace;
    /// Make `span` a child of the remote span in a W3C `traceparent`.
    fn adopt(&self, span: &tracing::Span, traceparent: &str);
}

pub type TraceSource = Arc<dyn TraceHooks>;
