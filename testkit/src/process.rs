//! The `lvms` binary the tests and benches run, and the tail of a process's log.

use std::path::PathBuf;

use lvms::dev::operator::lvms_bin_near;

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

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
