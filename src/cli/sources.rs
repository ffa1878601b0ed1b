//! The journals a post-mortem command reads: the operator's and any vg-manager's, named.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct JournalSources {
    /// The operator's journal directory (`<--journal-dir>/operator`). Repeatable.
    #[arg(long = "journal", value_name = "DIR")]
    pub journal: Vec<PathBuf>,
    /// A vg-manager's journal directory, as NODE=DIR (`<--journal-dir>/vg-manager` on the
    /// node). Repeatable.
    #[arg(long = "node-journal", value_name = "NODE=DIR")]
    pub node_journal: Vec<String>,
}

/// One journal to read: its label (`operator`, `node/<name>`), node, and directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub label: String,
    pub node: Option<String>,
    pub path: PathBuf,
}

impl JournalSources {
    pub fn sources(&self) -> anyhow::Result<Vec<Source>> {
        let mut out = Vec::new();
        for (i, p) in self.journal.iter().enumerate() {
            out.push(Source {
                label: if i == 0 {
                    "operator".into()
                } else {
                    format!("operator-{}", i + 1)
                },
                node: None,
                path: p.clone(),
            });
        }
        for nj in &self.node_journal {
            let (node, dir) = nj
                .split_once('=')
                .filter(|(n, d)| !n.is_empty() && !d.is_empty())
                .ok_or_else(|| {
                    anyhow::anyhow!("--node-journal takes NODE=DIR (e.g. node-a=/var/lib/lvms/journal/vg-manager), got {nj:?}")
                })?;
            out.push(Source {
                label: format!("node/{node}"),
                node: Some(node.to_string()),
                path: PathBuf::from(dir),
            });
        }
        Ok(out)
    }
}

/// Jaeger's UI from an OTLP endpoint on the same host (`http://jaeger:4318` →
/// `http://jaeger:16686`), the way the README deploys Jaeger.
pub fn jaeger_from_otlp(endpoint: &str) -> Option<String> {
    let (scheme, rest) = endpoint.split_once("://")?;
    let host_port = rest.split('/').next()?;
    let host = match host_port.rsplit_once(':') {
        Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => h,
        _ => host_port,
    };
    (!host.is_empty()).then(|| format!("{scheme}://{host}:16686"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_journals_are_named_by_their_node() {
        let s = JournalSources {
            journal: vec!["/j/operator".into()],
            node_journal: vec!["node-b=/n/b".into()],
        };
        let got = s.sources().unwrap();
        assert_eq!(got[0].label, "operator");
        assert_eq!(got[1].label, "node/node-b");
        assert_eq!(got[1].node.as_deref(), Some("node-b"));
        let bad = JournalSources {
            journal: vec![],
            node_journal: vec!["/n/b".into()],
        };
        assert!(bad.sources().unwrap_err().to_string().contains("NODE=DIR"));
    }

    #[test]
    fn jaeger_ui_is_found_beside_its_otlp_endpoint() {
        assert_eq!(
            jaeger_from_otlp("http://jaeger.tracing:4318").as_deref(),
            Some("http://jaeger.tracing:16686")
        );
        assert_eq!(
            jaeger_from_otlp("http://127.0.0.1:4318/v1/traces").as_deref(),
            Some("http://127.0.0.1:16686")
        );
        assert_eq!(jaeger_from_otlp("nonsense"), None);
    }
}
