//! Checked-in generated files match what the code generates, and the samples parse.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use lvms::api::{LVMCluster, crd};

fn repo(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

#[test]
fn deploy_crds_are_not_stale() {
    // The kustomize tree and the Helm chart carry the same generated CRDs.
    for dir in ["deploy/crds", "deploy/helm/lvms/crds"] {
        for c in crd::all().expect("CRDs generate") {
            let file = repo(dir).join(crd::file_name(&c));
            let want = crd::render_yaml(std::slice::from_ref(&c)).unwrap();
            let have = std::fs::read_to_string(&file).unwrap_or_default();
            assert!(
                have == want,
                "{} is stale or missing: regenerate with `make crds`",
                file.display()
            );
        }
    }
}

#[test]
fn samples_parse_as_lvmclusters() {
    for name in [
        "lvmcluster-thin.yaml",
        "lvmcluster-thick.yaml",
        "lvmcluster-two-classes.yaml",
    ] {
        let text = std::fs::read_to_string(repo("deploy/samples").join(name)).unwrap();
        let c: LVMCluster = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!c.spec.storage.device_classes.is_empty(), "{name}");
    }
}

/// Issue 12.6: the operator's journal lives on a volume of its own (an emptyDir: it survives
/// container restarts, which replay from it; a rescheduled pod starts a new journal) — with a
/// read-only root filesystem, anywhere else it could not even be written.
#[test]
fn the_operator_journal_is_on_a_volume() {
    use k8s_openapi::api::apps::v1::Deployment;
    let text =
        std::fs::read_to_string(repo("deploy/manager/operator.yaml")).expect("operator.yaml");
    let dep: Deployment = text
        .split("\n---")
        .filter(|doc| doc.contains("kind: Deployment"))
        .map(|doc| serde_saphyr::from_str(doc).expect("Deployment parses"))
        .next()
        .expect("a Deployment in operator.yaml");
    let pod = dep.spec.and_then(|s| s.template.spec).expect("pod spec");
    let c = &pod.containers[0];
    let dir = c
        .args
        .iter()
        .flatten()
        .find_map(|a| a.strip_prefix("--journal-dir="))
        .expect("--journal-dir is set");
    let mount = c
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| std::path::Path::new(dir).starts_with(&m.mount_path))
        .unwrap_or_else(|| panic!("--journal-dir={dir} is on no volume"));
    assert_ne!(mount.read_only, Some(true));
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .expect("the mount's volume");
    assert!(volume.empty_dir.is_some() || volume.persistent_volume_claim.is_some());
}
