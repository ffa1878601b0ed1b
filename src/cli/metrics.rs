//! The metrics endpoint's flags, the same on both long-running processes.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::runtime::metrics_server::{MetricsServing, parse_addr};

/// `--metrics-addr`'s value: an address, or none (`off`). A type of its own: clap reads a
/// bare `Option` field as an optional flag.
#[derive(Debug, Clone, Copy)]
pub struct MetricsAddr(pub Option<SocketAddr>);

fn metrics_addr(s: &str) -> Result<MetricsAddr, String> {
    parse_addr(s).map(MetricsAddr)
}

#[derive(clap::Args, Debug, Clone)]
pub struct MetricsArgs {
    /// `/metrics` over HTTPS to clients whose bearer token the API server accepts and allows
    /// `get` on `/metrics` (ClusterRole `lvms-metrics-reader`); `off`: not served.
    #[arg(long, env = "LVMS_METRICS_ADDR", default_value = "0.0.0.0:8443", value_parser = metrics_addr)]
    pub metrics_addr: MetricsAddr,
    /// Directory with the serving certificate `tls.crt` and its key `tls.key` (the mounted
    /// Secret, LVMS's path); read again when rotated. None there: a self-signed certificate.
    #[arg(
        long,
        env = "LVMS_METRICS_CERT_DIR",
        default_value = "/tmp/k8s-metrics-server/serving-certs"
    )]
    pub metrics_cert_dir: PathBuf,
}

impl MetricsArgs {
    pub fn serving(&self) -> MetricsServing {
        MetricsServing {
            addr: self.metrics_addr.0,
            cert_dir: self.metrics_cert_dir.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        metrics: MetricsArgs,
    }

    #[test]
    fn the_flags_parse_to_where_and_with_what() {
        let d = Cli::try_parse_from(["x"]).unwrap().metrics.serving();
        assert_eq!(d.addr, Some("0.0.0.0:8443".parse().unwrap()));
        assert_eq!(
            d.cert_dir,
            PathBuf::from("/tmp/k8s-metrics-server/serving-certs")
        );
        let off = Cli::try_parse_from(["x", "--metrics-addr", "off"]).unwrap();
        assert_eq!(off.metrics.serving().addr, None);
        let e = Cli::try_parse_from(["x", "--metrics-addr", "8443"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("or off"), "{e}");
    }
}
