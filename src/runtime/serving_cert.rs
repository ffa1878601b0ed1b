//! The metrics endpoint's certificate: `tls.crt` and `tls.key` from the mounted Secret's
//! directory (OpenShift's service CA writes them, as for LVMS; cert-manager or a user on other
//! clusters), read again when `tls.crt` changes so a rotated certificate is served without a
//! restart; a self-signed one made at start when the directory has none (what
//! controller-runtime does too), so metrics are never served in the clear.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rustls::crypto::ring::sign::any_supported_type;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tracing::{info, warn};

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("{path}: {what}: put a PEM certificate chain in tls.crt and its key in tls.key")]
    Read { path: PathBuf, what: String },
    #[error("making a self-signed metrics certificate: {0}")]
    SelfSigned(String),
}

/// The certificate and key PEM files of `dir`, parsed.
pub fn load(dir: &Path) -> Result<CertifiedKey, CertError> {
    let crt = dir.join("tls.crt");
    let key = dir.join("tls.key");
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&crt)
        .and_then(|i| i.collect())
        .map_err(|e| CertError::Read {
            path: crt.clone(),
            what: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(CertError::Read {
            path: crt,
            what: "no certificate".into(),
        });
    }
    let der = PrivateKeyDer::from_pem_file(&key).map_err(|e| CertError::Read {
        path: key.clone(),
        what: e.to_string(),
    })?;
    let signer = any_supported_type(&der).map_err(|e| CertError::Read {
        path: key,
        what: e.to_string(),
    })?;
    Ok(CertifiedKey::new(chain, signer))
}

/// A certificate for `names`, signed by its own key (ECDSA P-256).
pub fn self_signed(names: &[String]) -> Result<CertifiedKey, CertError> {
    let made = rcgen::generate_simple_self_signed(names.to_vec())
        .map_err(|e| CertError::SelfSigned(e.to_string()))?;
    let der = PrivateKeyDer::try_from(made.signing_key.serialize_der())
        .map_err(|e| CertError::SelfSigned(e.to_string()))?;
    let signer = any_supported_type(&der).map_err(|e| CertError::SelfSigned(e.to_string()))?;
    Ok(CertifiedKey::new(vec![made.cert.der().clone()], signer))
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Serves the directory's certificate, read again when `tls.crt`'s modification time moves;
/// a rotation that does not parse keeps the last good one (and says so).
#[derive(Debug)]
pub struct Resolver {
    dir: Option<PathBuf>,
    current: Mutex<(Option<SystemTime>, Arc<CertifiedKey>)>,
}

impl Resolver {
    /// From `dir` when it holds `tls.crt`, else self-signed for `names`.
    pub fn new(dir: &Path, names: &[String]) -> Result<Self, CertError> {
        let crt = dir.join("tls.crt");
        if crt.is_file() {
            let stamp = modified(&crt);
            let key = load(dir)?;
            info!(dir = %dir.display(), "metrics certificate from the directory");
            return Ok(Resolver {
                dir: Some(dir.to_path_buf()),
                current: Mutex::new((stamp, Arc::new(key))),
            });
        }
        info!(
            dir = %dir.display(),
            "no tls.crt there: metrics served with a self-signed certificate"
        );
        Ok(Resolver {
            dir: None,
            current: Mutex::new((None, Arc::new(self_signed(names)?))),
        })
    }

    fn current(&self) -> Option<Arc<CertifiedKey>> {
        let mut cur = self.current.lock().ok()?;
        if let Some(dir) = &self.dir {
            let stamp = modified(&dir.join("tls.crt"));
            if stamp != cur.0 {
                match load(dir) {
                    Ok(key) => {
                        info!(dir = %dir.display(), "metrics certificate rotated");
                        *cur = (stamp, Arc::new(key));
                    }
                    Err(e) => {
                        warn!(error = %e, "rotated metrics certificate unreadable; serving the last one");
                        cur.0 = stamp;
                    }
                }
            }
        }
        Some(cur.1.clone())
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current()
    }
}

/// TLS 1.2 and 1.3 (scrapers still speak 1.2), ring as kube's client.
pub fn server_config(resolver: Arc<Resolver>) -> Result<rustls::ServerConfig, rustls::Error> {
    let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_cert_resolver(resolver);
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path, names: &[&str]) {
        let made = rcgen::generate_simple_self_signed(
            names.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
        .unwrap();
        std::fs::write(dir.join("tls.crt"), made.cert.pem()).unwrap();
        std::fs::write(dir.join("tls.key"), made.signing_key.serialize_pem()).unwrap();
    }

    #[test]
    fn the_directory_pair_is_served_and_read_again_when_rotated() {
        let dir = tempfile::tempdir().unwrap();
        write_pair(dir.path(), &["a.example"]);
        let r = Resolver::new(dir.path(), &[]).unwrap();
        let first = r.current().unwrap().cert[0].clone();
        assert_eq!(r.current().unwrap().cert[0], first, "unchanged: the same");
        // Rotated (a later mtime): the new pair. A broken one keeps the last good pair.
        std::thread::sleep(std::time::Duration::from_millis(20));
        write_pair(dir.path(), &["b.example"]);
        let second = r.current().unwrap().cert[0].clone();
        assert_ne!(second, first);
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(dir.path().join("tls.crt"), "not pem").unwrap();
        assert_eq!(r.current().unwrap().cert[0], second);
    }

    #[test]
    fn an_empty_directory_means_self_signed_and_a_broken_pair_names_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let r = Resolver::new(dir.path(), &["localhost".into()]).unwrap();
        assert_eq!(r.current().unwrap().cert.len(), 1);
        std::fs::write(dir.path().join("tls.crt"), "-----BEGIN CERTIFICATE-----\n").unwrap();
        let e = Resolver::new(dir.path(), &[]).unwrap_err().to_string();
        assert!(e.contains("tls.crt"), "{e}");
        write_pair(dir.path(), &["x"]);
        std::fs::write(dir.path().join("tls.key"), "").unwrap();
        let e = Resolver::new(dir.path(), &[]).unwrap_err().to_string();
        assert!(e.contains("tls.key"), "{e}");
    }
}
