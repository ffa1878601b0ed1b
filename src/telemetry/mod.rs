//! What people observe lvms with: traces (OpenTelemetry, Jaeger) and metrics (Prometheus).

pub mod metrics;
pub mod otel;
