//! A metrics client as Prometheus is one: HTTPS, a ServiceAccount's bearer token, the server's
//! certificate verified against a CA or (as `insecureSkipVerify`) not at all, and the token
//! made the way a user makes one (a ServiceAccount bound to a ClusterRole, a TokenRequest).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::{Patch, PatchParams};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use serde_json::json;

/// The ClusterRole the shipped manifests name for scrapers (deploy/rbac, the chart).
pub const READER_ROLE: &str = "lvms-metrics-reader";

#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `GET https://127.0.0.1:port/metrics` with `token`; the server's certificate verified for
/// `localhost` under `ca`, or not at all. (status code, body); an error when TLS or the
/// connection fails.
pub fn scrape(port: u16, token: Option<&str>, ca: Option<&Path>) -> std::io::Result<(u16, String)> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(std::io::Error::other)?;
    let config = match ca {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(ca).map_err(std::io::Error::other)? {
                roots
                    .add(cert.map_err(std::io::Error::other)?)
                    .map_err(std::io::Error::other)?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
            .with_no_client_auth(),
    };
    let name = ServerName::try_from("localhost").map_err(std::io::Error::other)?;
    let conn =
        rustls::ClientConnection::new(Arc::new(config), name).map_err(std::io::Error::other)?;
    let sock = TcpStream::connect(("127.0.0.1", port))?;
    sock.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut tls = rustls::StreamOwned::new(conn, sock);
    let auth = token
        .map(|t| format!("authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    tls.write_all(format!("GET /metrics HTTP/1.1\r\nhost: localhost\r\n{auth}\r\n").as_bytes())?;
    let mut out = Vec::new();
    match tls.read_to_end(&mut out) {
        Ok(_) => {}
        // The server closes without close_notify on some paths; what arrived is the answer.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !out.is_empty() => {}
        Err(e) => return Err(e),
    }
    let out = String::from_utf8_lossy(&out);
    let code = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    Ok((code, body.to_string()))
}

/// A token of ServiceAccount `name` in `ns` (made if missing), bound to the ClusterRole
/// `role` when given (the role made, as the manifests have it, if missing).
pub async fn token(client: &kube::Client, ns: &str, name: &str, role: Option<&str>) -> String {
    let ssa = PatchParams::apply("lvms-testkit").force();
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    sas.patch(
        name,
        &ssa,
        &Patch::Apply(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                             "metadata": {"name": name, "namespace": ns}})),
    )
    .await
    .expect("the scraper's ServiceAccount");
    if let Some(role) = role {
        let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(client.clone());
        if roles.get_opt(role).await.expect("ClusterRole").is_none() {
            roles
                .patch(
                    role,
                    &ssa,
                    &Patch::Apply(json!({"apiVersion": "rbac.authorization.k8s.io/v1",
                        "kind": "ClusterRole", "metadata": {"name": role},
                        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]})),
                )
                .await
                .expect("the reader ClusterRole");
        }
        let binding = format!("{ns}-{name}-{role}");
        let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> =
            Api::all(client.clone());
        bindings
            .patch(
                &binding,
                &ssa,
                &Patch::Apply(json!({"apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding", "metadata": {"name": binding},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                "name": role},
                    "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]})),
            )
            .await
            .expect("the scraper's binding");
    }
    let request = serde_json::from_value(json!({"spec": {"expirationSeconds": 14400}}))
        .expect("TokenRequest");
    sas.create_token_request(name, &Default::default(), &request)
        .await
        .expect("TokenRequest")
        .status
        .expect("a token")
        .token
}
