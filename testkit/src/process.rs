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

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
