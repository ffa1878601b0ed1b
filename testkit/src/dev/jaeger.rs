//! A local Jaeger v2 (built from its Go module by `deploy/dev/build-test-bins.sh`) with
//! in-memory storage, every port on 127.0.0.1: OTLP/HTTP in, the query HTTP API out. For the
//! tracing test and `make traces`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use super::process::{self, Lifetime};

/// Jaeger module version built (`github.com/jaegertracing/jaeger` v1.76.0 = Jaeger v2.13.0;
/// the v2 tags are not on the module proxy under this path).
pub const JAEGER_MODULE_VERSION: &str = "v1.76.0";

#[derive(Debug, thiserror::Error)]
pub enum JaegerError {
    #[error(
        "no jaeger binary at {0}: run deploy/dev/build-test-bins.sh (builds it from the Go module proxy into the cache) or set LVMS_JAEGER_BIN"
    )]
    Missing(PathBuf),
    #[error("jaeger: {what}: {source}")]
    Io {
        what: &'static str,
        source: std::io::Error,
    },
    #[error("jaeger did not become healthy in {0:?}; log: {1}")]
    NotReady(Duration, PathBuf),
    #[error("GET {path}: {message}")]
    Http { path: String, message: String },
}

/// `$LVMS_JAEGER_BIN`, else the cached build.
pub fn jaeger_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("LVMS_JAEGER_BIN") {
        return PathBuf::from(p);
    }
    super::control_plane::test_bins_cache()
        .join(format!("jaeger-{JAEGER_MODULE_VERSION}"))
        .join("bin/jaeger")
}

fn free_port() -> Result<u16, JaegerError> {
    process::free_port().map_err(|source| JaegerError::Io {
        what: "picking a port",
        source,
    })
}

pub struct Jaeger {
    child: Child,
    /// OTLP/HTTP receiver: `OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:<otlp_port>`.
    pub otlp_port: u16,
    /// Query API (`/api/traces`, `/api/services`).
    pub query_port: u16,
    pub log: PathBuf,
}

impl Jaeger {
    pub fn start(dir: &Path, lifetime: Lifetime) -> Result<Jaeger, JaegerError> {
        let bin = jaeger_bin();
        if !bin.is_file() {
            return Err(JaegerError::Missing(bin));
        }
        let io = |what| move |source| JaegerError::Io { what, source };
        std::fs::create_dir_all(dir).map_err(io("creating its directory"))?;
        let (otlp_port, query_port) = (free_port()?, free_port()?);
        let (grpc_port, health_port) = (free_port()?, free_port()?);
        let config = dir.join("jaeger.yaml");
        std::fs::write(
            &config,
            config_yaml(otlp_port, query_port, grpc_port, health_port),
        )
        .map_err(io("writing its config"))?;
        let log = dir.join("jaeger.log");
        let mut cmd = Command::new(&bin);
        cmd.arg("--config").arg(&config);
        let child = process::spawn(cmd, &log, lifetime).map_err(io("starting it"))?;
        let j = Jaeger {
            child,
            otlp_port,
            query_port,
            log,
        };
        let timeout = Duration::from_secs(30);
        let started = Instant::now();
        while started.elapsed() < timeout {
            if http_get(health_port, "/status").is_ok_and(|(c, _)| c == 200) {
                return Ok(j);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(JaegerError::NotReady(timeout, j.log.clone()))
    }

    pub fn otlp_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.otlp_port)
    }

    /// GET on the query API; the body as JSON.
    pub fn query(&self, path: &str) -> Result<serde_json::Value, JaegerError> {
        let err = |message: String| JaegerError::Http {
            path: path.to_string(),
            message,
        };
        let (code, body) = http_get(self.query_port, path).map_err(|e| err(e.to_string()))?;
        if code != 200 {
            return Err(err(format!("status {code}: {body}")));
        }
        serde_json::from_str(&body).map_err(|e| err(e.to_string()))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn detach(self) {
        std::mem::forget(self);
    }
}

impl Drop for Jaeger {
    fn drop(&mut self) {
        process::terminate_child(&mut self.child, Duration::from_secs(5));
    }
}

/// In-memory storage, OTLP/HTTP in, query out; nothing on non-loopback addresses and no
/// self-metrics port.
fn config_yaml(otlp: u16, query: u16, grpc: u16, health: u16) -> String {
    format!(
        r#"service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: 127.0.0.1:{query}
    grpc:
      endpoint: 127.0.0.1:{grpc}
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 100000
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:{health}
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp}
processors:
  batch:
    timeout: 200ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
"#
    )
}

/// A plain HTTP/1.1 GET on loopback (no client library for a test peer's JSON API).
pub fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n").as_bytes(),
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Ok((code, body))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        let (Some(chunk), Some(next)) = (rest.get(..n), rest.get(n..)) else {
            break;
        };
        if n == 0 {
            break;
        }
        out.push_str(chunk);
        body = next.trim_start_matches("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_bodies_are_joined() {
        assert_eq!(
            dechunk("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
            "hello world"
        );
        assert_eq!(dechunk(""), "");
    }

    #[test]
    fn config_binds_loopback_only() {
        let c = config_yaml(1, 2, 3, 4);
        assert!(c.contains("endpoint: 127.0.0.1:1"));
        assert!(!c.contains("0.0.0.0"));
    }
}
