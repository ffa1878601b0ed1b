//! Fresh certificates for a loopback control plane: a serving CA + cert (SANs 127.0.0.1 and
//! localhost), a client CA that signs one cert per user (CN = user, O = groups), and the
//! service-account signing key pair. ECDSA P-256 (rcgen's default validity: these are throwaway).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum PkiError {
    #[error("generating {what}: {source}")]
    Generate { what: String, source: rcgen::Error },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

const CLIENT_CA: &str = "lvms-dev-client-ca";

/// Files of the PKI, all under one directory.
#[derive(Clone, Debug)]
pub struct Pki {
    pub dir: PathBuf,
}

fn gen_err(what: &str) -> impl Fn(rcgen::Error) -> PkiError + '_ {
    move |source| PkiError::Generate {
        what: what.to_string(),
        source,
    }
}

/// CA parameters; rebuilt from the name alone when issuing later, since an issuer is just its
/// subject and key (the authority key id is derived from the key).
fn ca_params(name: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

fn ca(name: &str) -> Result<(CertificateParams, KeyPair, String), PkiError> {
    let key = KeyPair::generate().map_err(gen_err(name))?;
    let params = ca_params(name);
    let pem = params.self_signed(&key).map_err(gen_err(name))?.pem();
    Ok((params, key, pem))
}

impl Pki {
    pub fn serving_ca(&self) -> PathBuf {
        self.dir.join("serving-ca.crt")
    }
    pub fn serving_cert(&self) -> PathBuf {
        self.dir.join("apiserver.crt")
    }
    pub fn serving_key(&self) -> PathBuf {
        self.dir.join("apiserver.key")
    }
    pub fn client_ca(&self) -> PathBuf {
        self.dir.join("client-ca.crt")
    }
    fn client_ca_key(&self) -> PathBuf {
        self.dir.join("client-ca.key")
    }
    pub fn sa_key(&self) -> PathBuf {
        self.dir.join("sa.key")
    }
    pub fn sa_pub(&self) -> PathBuf {
        self.dir.join("sa.pub")
    }

    /// Creates every file of a new PKI in `dir`.
    pub fn create(dir: &Path) -> Result<Self, PkiError> {
        let pki = Self {
            dir: dir.to_path_buf(),
        };
        std::fs::create_dir_all(dir).map_err(|source| PkiError::Write {
            path: dir.to_path_buf(),
            source,
        })?;

        let (serving_ca_params, serving_ca_key, serving_ca_pem) = ca("lvms-dev-serving-ca")?;
        let serving_issuer = Issuer::new(serving_ca_params, serving_ca_key);
        let key = KeyPair::generate().map_err(gen_err("apiserver key"))?;
        let mut params = CertificateParams::new(vec!["localhost".to_string()])
            .map_err(gen_err("apiserver cert"))?;
        // Loopback for the host; the API server as a real node's pods reach it: the
        // `kubernetes` Service's ClusterIP (10.0.0.1 of 10.0.0.0/24), and QEMU's address of the
        // host in a guest (10.0.2.100), where kube-proxy sends that Service.
        for ip in [[127, 0, 0, 1], [10, 0, 0, 1], [10, 0, 2, 100]] {
            params.subject_alt_names.push(SanType::IpAddress(ip.into()));
        }
        params
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params
            .signed_by(&key, &serving_issuer)
            .map_err(gen_err("apiserver cert"))?;
        write(&pki.serving_ca(), &serving_ca_pem)?;
        write(&pki.serving_cert(), &cert.pem())?;
        write(&pki.serving_key(), &key.serialize_pem())?;

        let (_, client_ca_key, client_ca_pem) = ca(CLIENT_CA)?;
        write(&pki.client_ca(), &client_ca_pem)?;
        write(&pki.client_ca_key(), &client_ca_key.serialize_pem())?;

        let sa = KeyPair::generate().map_err(gen_err("service-account key"))?;
        write(&pki.sa_key(), &sa.serialize_pem())?;
        write(&pki.sa_pub(), &sa.public_key_pem())?;
        Ok(pki)
    }

    /// Writes `<file>.crt` and `<file>.key` in the PKI's directory; returns their paths.
    fn write_pair(
        &self,
        file: &str,
        cert_pem: &str,
        key: &KeyPair,
    ) -> Result<(PathBuf, PathBuf), PkiError> {
        let crt = self.dir.join(format!("{file}.crt"));
        let k = self.dir.join(format!("{file}.key"));
        write(&crt, cert_pem)?;
        write(&k, &key.serialize_pem())?;
        Ok((crt, k))
    }

    /// A self-signed serving certificate for a node's kubelet (`name`, and `ips` as SANs), as
    /// kubelet would make itself, but made here: kubelet writes its own without an fsync, and a
    /// power cut soon after leaves it empty, a kubelet that cannot start again. Returns (cert
    /// path, key path).
    pub fn kubelet_serving(
        &self,
        name: &str,
        ips: &[std::net::IpAddr],
    ) -> Result<(PathBuf, PathBuf), PkiError> {
        let key = KeyPair::generate().map_err(gen_err("kubelet serving key"))?;
        let mut params = CertificateParams::new(vec![name.to_string()])
            .map_err(gen_err("kubelet serving cert"))?;
        params
            .subject_alt_names
            .extend(ips.iter().map(|ip| SanType::IpAddress(*ip)));
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{name}@lvms-dev"));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params
            .self_signed(&key)
            .map_err(gen_err("kubelet serving cert"))?;
        self.write_pair(&format!("kubelet-{}", stem(name)), &cert.pem(), &key)
    }

    /// Issues a client certificate for `user`, optionally in `group`; returns (cert path, key path).
    pub fn client_cert(
        &self,
        user: &str,
        group: Option<&str>,
    ) -> Result<(PathBuf, PathBuf), PkiError> {
        let read = |p: PathBuf| {
            std::fs::read_to_string(&p).map_err(|source| PkiError::Read { path: p, source })
        };
        let ca_key =
            KeyPair::from_pem(&read(self.client_ca_key())?).map_err(gen_err("client CA key"))?;
        let issuer = Issuer::new(ca_params(CLIENT_CA), ca_key);
        let key = KeyPair::generate().map_err(gen_err("client key"))?;
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, user);
        if let Some(g) = group {
            params.distinguished_name.push(DnType::OrganizationName, g);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params
            .signed_by(&key, &issuer)
            .map_err(gen_err("client cert"))?;
        self.write_pair(&format!("user-{}", stem(user)), &cert.pem(), &key)
    }
}

/// `name` with everything but ASCII letters and digits as `-`: a file name stem.
fn stem(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

fn write(path: &Path, contents: &str) -> Result<(), PkiError> {
    std::fs::write(path, contents).map_err(|source| PkiError::Write {
        path: path.to_path_buf(),
        source,
    })
}
