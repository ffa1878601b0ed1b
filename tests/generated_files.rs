//! Checked-in generated files match what the code generates, and the samples parse.

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
