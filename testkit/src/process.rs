//! The `lvms` binary the tests and benches run, and the tail of a process's log.

use std::path::PathBuf;

use crate::dev::operator::lvms_bin_near;

/// The `lvms` binary cargo built for the running test or bench: `$CARGO_BIN_EXE_lvms` (cargo
/// sets it when it runs an integration test or bench of the lvms package), else the one in the
/// target directory of the running executable (`<target>/<profile>/lvms`, the same file).
pub fn lvms_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("CARGO_BIN_EXE_lvms")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
    {
        return p;
    }
    let exe = std::env::current_exe().expect("current_exe");
    lvms_bin_near(&exe).unwrap_or_else(|| {
        panic!(
            "no `lvms` binary near {}: run `cargo build --bin lvms` (tests and benches of the lvms package build it)",
            exe.display()
        )
    })
}

/// The `lvms-dev` binary (this crate's developer tooling: `lvms-dev kubelet` in the guests),
/// built once per test process into the target directory the running executable is in:
/// cargo builds only the tested package's binaries for a test, and this one is the kit's.
pub fn dev_bin() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("current_exe");
            let lvms = lvms_bin_near(&exe).unwrap_or_else(lvms_bin);
            let dir = lvms.parent().expect("the target directory").to_path_buf();
            let release = dir.file_name().is_some_and(|d| d == "release");
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let mut build = std::process::Command::new(&cargo);
            build.args(["build", "-q", "-p", "lvms-testkit", "--bin", "lvms-dev"]);
            // Not with the variables cargo set for this test (CARGO_PKG_NAME, OUT_DIR, ...):
            // ring's build script reruns when they change, so a build that kept them built ring
            // and everything above it again, and the next plain `cargo test` did so once more
            // (~1.5 min at the node tier's start in make test).
            for (name, _) in std::env::vars_os() {
                if name.to_str().is_some_and(set_by_cargo_for_a_test) {
                    build.env_remove(name);
                }
            }
            if release {
                build.arg("--release");
            }
            let status = build
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .unwrap_or_else(|e| panic!("running {cargo:?} build -p lvms-testkit --bin lvms-dev: {e}"));
            assert!(
                status.success(),
                "cargo build -p lvms-testkit --bin lvms-dev failed ({status}); run it by hand to see why"
            );
            let bin = dir.join("lvms-dev");
            assert!(bin.is_file(), "{} was not built", bin.display());
            bin
        })
        .clone()
}

/// Whether cargo sets `name` for a test or bench it runs (as opposed to a user's setting, such
/// as CARGO_HOME, CARGO_TARGET_DIR or CARGO_INCREMENTAL, which a nested build must keep).
fn set_by_cargo_for_a_test(name: &str) -> bool {
    matches!(
        name,
        "OUT_DIR" | "CARGO_CRATE_NAME" | "CARGO_PRIMARY_PACKAGE" | "CARGO_TARGET_TMPDIR"
    ) || ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_BIN_"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_nested_build_drops_what_cargo_set_for_the_test_and_keeps_the_users_settings() {
        for set in [
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_MANIFEST_DIR",
            "CARGO_MANIFEST_LINKS",
            "CARGO_BIN_EXE_lvms",
            "CARGO_CRATE_NAME",
            "CARGO_PRIMARY_PACKAGE",
            "CARGO_TARGET_TMPDIR",
            "OUT_DIR",
        ] {
            assert!(super::set_by_cargo_for_a_test(set), "{set}");
        }
        for kept in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_INCREMENTAL",
            "CARGO_TERM_COLOR",
            "CARGO_BUILD_JOBS",
            "PATH",
        ] {
            assert!(!super::set_by_cargo_for_a_test(kept), "{kept}");
        }
    }
}
