//! The kubeconfig a process in the guest uses to reach the test's kube-apiserver.

use std::path::{Path, PathBuf};

use super::GUEST_HOST;

/// The host port of a kubeconfig's `server: https://127.0.0.1:PORT` (or localhost).
pub fn host_api_port(kubeconfig: &str) -> Option<u16> {
    kubeconfig.lines().find_map(|l| {
        let url = l.trim().strip_prefix("server: ")?;
        let rest = url
            .strip_prefix("https://127.0.0.1:")
            .or_else(|| url.strip_prefix("https://localhost:"))?;
        rest.trim_end_matches('/').parse().ok()
    })
}

/// A kubeconfig for a process in the guest, from one the control plane wrote on the host: the
/// server becomes the forward `GUEST_HOST:guest_port`, verified under the serving certificate's
/// own name (`localhost`), and the certificate files travel into /work. Add the returned files
/// to the [`super::Run`] or [`super::GroupSpec`].
pub fn guest_kubeconfig(host: &Path, guest_port: u16) -> (String, Vec<(String, PathBuf)>) {
    let text = std::fs::read_to_string(host)
        .unwrap_or_else(|e| panic!("kubeconfig {}: {e}", host.display()));
    let mut files = Vec::new();
    let mut out = String::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let file_key = [
            "certificate-authority: ",
            "client-certificate: ",
            "client-key: ",
        ]
        .into_iter()
        .find(|k| trimmed.starts_with(k));
        if trimmed.starts_with("server: ") {
            out.push_str(&format!(
                "{indent}server: https://{GUEST_HOST}:{guest_port}\n{indent}tls-server-name: localhost\n"
            ));
        } else if let Some(key) = file_key {
            let path = PathBuf::from(&trimmed[key.len()..]);
            let name = format!("kube-{}", key.trim_end_matches(": "));
            out.push_str(&format!("{indent}{key}/work/{name}\n"));
            files.push((name, path));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert_eq!(files.len(), 3, "unexpected kubeconfig shape:\n{text}");
    (out, files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_port_comes_from_a_loopback_server_line() {
        let kc = "clusters:\n- cluster:\n    server: https://127.0.0.1:40123\n";
        assert_eq!(host_api_port(kc), Some(40123));
        assert_eq!(host_api_port("    server: https://10.0.0.1:6443\n"), None);
    }
}
