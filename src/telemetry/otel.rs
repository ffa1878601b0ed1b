//! OpenTelemetry traces: logging + spans for one process, exported over OTLP/HTTP when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) is set.
//!
//! Spans always get real trace and span ids (an SDK provider without an exporter when export
//! is off), so journal records and log lines carry ids that line up with Jaeger whenever
//! export is on. Sampling follows `OTEL_TRACES_SAMPLER`/`_ARG` (the SDK reads them), the
//! service name `OTEL_SERVICE_NAME` (else the process's default). The batch processor exports
//! from its own thread with the blocking reqwest client: no Tokio runtime is needed there.

use std::collections::HashMap;

use lvms_journal::{SpanId, Trace, TraceId};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::{Context, Filter, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Annotation carrying the W3C traceparent of the operator pass that last changed an object
/// (the LVMVolumeGroup): vg-manager continues that trace.
pub const TRACEPARENT_ANNOTATION: &str = "lvms.topolvm.io/traceparent";

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error(
        "building the OTLP/HTTP span exporter (OTEL_EXPORTER_OTLP_ENDPOINT={endpoint}): {source}"
    )]
    Exporter {
        endpoint: String,
        source: opentelemetry_otlp::ExporterBuildError,
    },
}

/// Keeps the tracer provider alive; flushes and shuts it down when dropped (process exit).
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take() {
            tracing::debug!("flushing spans");
            if let Err(e) = p.force_flush() {
                eprintln!("lvms: flushing spans at exit: {e}");
            }
            if let Err(e) = p.shutdown() {
                eprintln!("lvms: shutting down the tracer provider: {e}");
            }
        }
    }
}

fn export_endpoint() -> Option<String> {
    [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ]
    .iter()
    .find_map(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
}

/// Logging (`RUST_LOG`, text or json on stderr) plus spans for OpenTelemetry.
pub fn init(log_format: &str, default_service: &str) -> Result<TelemetryGuard, TelemetryError> {
    let endpoint = export_endpoint();
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(default_service.to_string());
    }
    let mut builder = SdkTracerProvider::builder().with_resource(resource.build());
    if let Some(endpoint) = &endpoint {
        use opentelemetry_otlp::{Protocol, WithExportConfig};
        // The SDK appends /v1/traces to the generic endpoint from the environment itself.
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .build()
            .map_err(|source| TelemetryError::Exporter {
                endpoint: endpoint.clone(),
                source,
            })?;
        builder = builder.with_batch_exporter(exporter);
    }
    let provider = builder.build();
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let tracer = provider.tracer("lvms");

    let log_filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only on a terminal: a log redirected to a file (a node's, a pod's) stays greppable.
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let fmt = if log_format == "json" {
        fmt.json().boxed()
    } else {
        fmt.boxed()
    };
    let otel = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(SpanFilter);
    // Fails only when a subscriber is already installed (tests): that one keeps logging.
    let _ = tracing_subscriber::registry()
        .with(fmt.with_filter(log_filter))
        .with(otel)
        .try_init();
    if let Some(e) = &endpoint {
        tracing::info!(endpoint = %e, "exporting traces over OTLP/HTTP");
    }
    Ok(TelemetryGuard {
        provider: Some(provider),
    })
}

/// What reaches OpenTelemetry: the spans of lvms's own crates (info and above), and kube's
/// per-request `HTTP` spans (debug level) only inside one of ours: the long watches run
/// outside any reconcile and would each be a trace of their own. Log events stay out (they
/// go to the log).
struct SpanFilter;

impl<S> Filter<S> for SpanFilter
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn enabled(&self, meta: &tracing::Metadata<'_>, cx: &Context<'_, S>) -> bool {
        if !meta.is_span() {
            return false;
        }
        let target = meta.target();
        if target.starts_with("lvms") {
            return *meta.level() <= tracing::Level::INFO;
        }
        if target.starts_with("kube_client") && meta.name() == "HTTP" {
            return cx.lookup_current().is_some();
        }
        false
    }

    fn callsite_enabled(
        &self,
        meta: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        if meta.is_span()
            && (meta.target().starts_with("lvms") || meta.target().starts_with("kube_client"))
        {
            // Decided per span: the kube rule depends on the current span.
            tracing::subscriber::Interest::sometimes()
        } else {
            tracing::subscriber::Interest::never()
        }
    }
}

/// Ids of `span` as the journal stores them (zeros when it has none).
pub fn trace_of(span: &tracing::Span) -> Trace {
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    if !sc.is_valid() {
        return Trace::default();
    }
    Trace {
        trace_id: TraceId(sc.trace_id().to_bytes()),
        span_id: SpanId(sc.span_id().to_bytes()),
    }
}

/// The W3C traceparent of the current span, to hand the trace to another process.
pub fn current_traceparent() -> Option<String> {
    let cx = tracing::Span::current().context();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    carrier.remove("traceparent")
}

/// Make `span` continue the trace in `traceparent` (ignored when malformed).
pub fn adopt(span: &tracing::Span, traceparent: &str) {
    let carrier = HashMap::from([("traceparent".to_string(), traceparent.to_string())]);
    let cx = TraceContextPropagator::new().extract(&carrier);
    if cx.span().span_context().is_valid() {
        // Tracing only: a span that cannot adopt the parent starts its own trace.
        let _ = span.set_parent(cx);
    }
}

/// The actors' view of tracing.
pub struct OtelHooks;

impl lvms_actors::TraceHooks for OtelHooks {
    fn current(&self) -> Trace {
        trace_of(&tracing::Span::current())
    }

    fn adopt(&self, span: &tracing::Span, traceparent: &str) {
        adopt(span, traceparent);
    }
}

pub fn hooks() -> lvms_actors::TraceSource {
    std::sync::Arc::new(OtelHooks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_round_trips_through_a_span() {
        let provider = SdkTracerProvider::builder().build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        tracing::subscriber::with_default(subscriber, || {
            let parent = tracing::info_span!("parent");
            let tp = parent.in_scope(current_traceparent).expect("a traceparent");
            let ids = trace_of(&parent);
            assert_eq!(tp.len(), 55, "{tp}");
            assert!(tp.starts_with("00-"));
            assert!(tp.contains(&ids.trace_id.to_string()));

            let child = tracing::info_span!(parent: None, "child");
            adopt(&child, &tp);
            let got = trace_of(&child);
            assert_eq!(got.trace_id, ids.trace_id, "same trace");
            assert_ne!(got.span_id, ids.span_id, "its own span");

            let other = tracing::info_span!(parent: None, "other");
            adopt(&other, "garbage");
            assert_ne!(trace_of(&other).trace_id, ids.trace_id);
        });
    }
}
