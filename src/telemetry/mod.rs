//! What people observe lvms with: traces (OpenTelemetry, Jaeger) and metrics (Prometheus).

pub mod api_requests;
pub mod metrics;
pub mod otel;
