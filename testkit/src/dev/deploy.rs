//! The deploy/ tree as a user installs it: rendered by the real kustomize (built from its Go
//! module by `deploy/dev/build-test-bins.sh`) and applied with server-side apply, as
//! `kubectl apply --server-side -k` would.

use std::path::{Path, PathBuf};

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::{Discovery, Scope};
use kube::{Client, ResourceExt};
use serde_json::Value;

pub const KUSTOMIZE_VERSION: &str = "v5.8.0";
/// Field manager of the objects applied from deploy/ (a person's `kubectl apply`).
pub const FIELD_MANAGER: &str = "lvms-install";

#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    #[error(
        "no {0}: run deploy/dev/build-test-bins.sh (builds kustomize and helm from the Go module proxy) or set LVMS_KUSTOMIZE_BIN / LVMS_HELM_BIN"
    )]
    Missing(PathBuf),
    #[error("rendering {dir}: {message}")]
    Build { dir: PathBuf, message: String },
    #[error("rendered YAML: {0}")]
    Yaml(String),
    #[error("{what}: {source}")]
    Kube {
        what: String,
        source: Box<kube::Error>,
    },
    #[error("{0}")]
    Other(String),
}

pub fn kustomize_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("LVMS_KUSTOMIZE_BIN") {
        return PathBuf::from(p);
    }
    super::control_plane::test_bins_cache()
        .join(format!("kustomize-{KUSTOMIZE_VERSION}"))
        .join("bin/kustomize")
}

/// An overlay in `dir` that puts `base` (a kustomization directory) into `namespace`.
/// kustomize refuses absolute resource paths, so the base is named relative to `dir`.
pub fn write_namespace_overlay(dir: &Path, base: &Path, namespace: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let dir = std::fs::canonicalize(dir)?;
    let base = std::fs::canonicalize(base)?;
    let up = "../".repeat(dir.components().count().saturating_sub(1));
    let rel = format!("{up}{}", base.to_string_lossy().trim_start_matches('/'));
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {namespace}\nresources:\n  - {rel}\n"
        ),
    )
}

/// `kustomize build dir`, as JSON objects.
pub fn render(dir: &Path) -> Result<Vec<Value>, DeployError> {
    let mut cmd = std::process::Command::new(kustomize_bin());
    cmd.arg("build").arg(dir);
    objects_from(cmd, dir)
}

/// Runs a renderer (kustomize, helm) that must exist and succeed; its stdout as objects.
fn objects_from(mut cmd: std::process::Command, input: &Path) -> Result<Vec<Value>, DeployError> {
    let bin = PathBuf::from(cmd.get_program());
    if !bin.is_file() {
        return Err(DeployError::Missing(bin));
    }
    let failed = |message: String| DeployError::Build {
        dir: input.to_path_buf(),
        message,
    };
    let out = cmd.output().map_err(|e| failed(e.to_string()))?;
    if !out.status.success() {
        return Err(failed(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ));
    }
    parse_stream(&String::from_utf8_lossy(&out.stdout))
}

/// A multi-document YAML stream as JSON objects (comment-only documents skipped).
pub fn parse_stream(text: &str) -> Result<Vec<Value>, DeployError> {
    let mut objects = Vec::new();
    let mut doc = String::new();
    let mut flush = |doc: &mut String| -> Result<(), DeployError> {
        if !doc.trim().is_empty() {
            let v: Value =
                serde_saphyr::from_str(doc).map_err(|e| DeployError::Yaml(e.to_string()))?;
            if !v.is_null() {
                objects.push(v);
            }
        }
        doc.clear();
        Ok(())
    };
    for line in text.lines() {
        if line.trim_end() == "---" {
            flush(&mut doc)?;
        } else {
            doc.push_str(line);
            doc.push('\n');
        }
    }
    flush(&mut doc)?;
    Ok(objects)
}

pub const HELM_VERSION: &str = "v3.19.0";

pub fn helm_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("LVMS_HELM_BIN") {
        return PathBuf::from(p);
    }
    super::control_plane::test_bins_cache()
        .join(format!("helm-{HELM_VERSION}"))
        .join("bin/helm")
}

/// `helm template lvms <chart> --include-crds --set k=v ...`, as JSON objects.
pub fn helm_template(chart: &Path, set: &[(&str, &str)]) -> Result<Vec<Value>, DeployError> {
    helm_template_args(chart, set, &[])
}

/// [`helm_template`] with more of helm's arguments (e.g. `--api-versions`, the cluster's APIs
/// as `helm install` would discover them).
pub fn helm_template_args(
    chart: &Path,
    set: &[(&str, &str)],
    args: &[&str],
) -> Result<Vec<Value>, DeployError> {
    let mut cmd = std::process::Command::new(helm_bin());
    cmd.args(["template", "lvms"])
        .arg(chart)
        .arg("--include-crds")
        .args(args);
    for (k, v) in set {
        cmd.arg("--set").arg(format!("{k}={v}"));
    }
    objects_from(cmd, chart)
}

/// Discovery, tried again for a few seconds: just after the API server starts, or while a
/// CRD is being established or removed, a group it lists can still answer 404.
async fn discover(client: &Client) -> Result<Discovery, kube::Error> {
    let mut tries = 0;
    loop {
        match Discovery::new(client.clone()).run().await {
            Ok(d) => return Ok(d),
            Err(e) if tries < 20 => {
                tries += 1;
                tracing::debug!(error = %e, tries, "discovery failed; trying again");
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Server-side apply of every object (forced: the installer owns these fields), in order.
/// Returns "Kind/namespace/name" of each.
pub async fn apply_all(client: &Client, objects: &[Value]) -> Result<Vec<String>, DeployError> {
    let kube_err = |what: String| {
        move |e: kube::Error| DeployError::Kube {
            what,
            source: Box::new(e),
        }
    };
    let mut applied = Vec::new();
    // Discovery again after CRDs: a kind may only exist once its CRD is established.
    let mut discovery = discover(client)
        .await
        .map_err(kube_err("discovery".into()))?;
    for obj in objects {
        let o: DynamicObject = serde_json::from_value(obj.clone())
            .map_err(|e| DeployError::Other(format!("not an object: {e}")))?;
        let types = o.types.clone().ok_or_else(|| {
            DeployError::Other(format!("{} has no apiVersion/kind", o.name_any()))
        })?;
        let gvk = kube::core::GroupVersionKind::try_from(&types)
            .map_err(|e| DeployError::Other(e.to_string()))?;
        let found = match discovery.resolve_gvk(&gvk) {
            Some(f) => f,
            None => {
                discovery = discover(client)
                    .await
                    .map_err(kube_err("discovery".into()))?;
                discovery.resolve_gvk(&gvk).ok_or_else(|| {
                    DeployError::Other(format!("the API server does not serve {gvk:?}"))
                })?
            }
        };
        let (ar, caps) = found;
        let name = o.name_any();
        let ns = o.namespace();
        let api: Api<DynamicObject> = match (&caps.scope, &ns) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &ar),
            (Scope::Namespaced, None) => Api::default_namespaced_with(client.clone(), &ar),
            (Scope::Cluster, _) => Api::all_with(client.clone(), &ar),
        };
        let id = format!("{}/{}/{}", types.kind, ns.unwrap_or_default(), name);
        api.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(obj),
        )
        .await
        .map_err(kube_err(format!("applying {id}")))?;
        applied.push(id);
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_split_on_document_markers_and_skip_comment_only_documents() {
        let objs = parse_stream("---\n# Source: a\n---\na: 1\n---\nb: [x]\n").unwrap();
        assert_eq!(
            objs,
            vec![serde_json::json!({"a": 1}), serde_json::json!({"b": ["x"]})]
        );
    }

    #[test]
    fn the_overlay_names_its_base_relatively() {
        let tmp = std::env::temp_dir().join(format!("lvms-overlay-{}", std::process::id()));
        let base = tmp.join("repo/deploy/default");
        std::fs::create_dir_all(&base).unwrap();
        let dir = tmp.join("elsewhere/overlay");
        write_namespace_overlay(&dir, &base, "ns1").unwrap();
        let text = std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap();
        assert!(text.contains("namespace: ns1"));
        let rel = text.lines().last().unwrap().trim_start_matches("  - ");
        assert!(!rel.starts_with('/'), "{rel}");
        assert_eq!(
            std::fs::canonicalize(dir.join(rel)).unwrap(),
            std::fs::canonicalize(&base).unwrap()
        );
        let _ = std::fs::remove_dir_all(&tmp);
    }
}
