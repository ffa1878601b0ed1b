//! The harness itself: loud failures, and no process outlives a panicking test.

use std::time::Duration;

use lvms_testkit::dev::{ControlPlane, ControlPlaneError, Lifetime, Options};

const CHILD_ENV: &str = "LVMS_HARNESS_PANIC_CHILD";

#[tokio::test]
async fn missing_binaries_fail_loudly_with_the_fix() {
    let dir = std::env::temp_dir().join(format!("lvms-missing-{}", std::process::id()));
    let mut opts = Options::new(&dir, Lifetime::DieWithParent);
    opts.bin_dir = dir.join("no-such-bin-dir");
    let err = ControlPlane::start(opts)
        .await
        .err()
        .expect("start must fail without binaries");
    assert!(
        matches!(err, ControlPlaneError::MissingBinaries { .. }),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("deploy/dev/build-test-bins.sh") && msg.contains("kube-apiserver"),
        "{msg}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Run as a child by the test below: starts a control plane, records its pids, then panics.
#[tokio::test]
async fn panicking_child_starts_a_control_plane() {
    let Some(pid_file) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let dir = std::path::PathBuf::from(&pid_file).with_extension("cp");
    let mut opts = Options::new(&dir, Lifetime::DieWithParent);
    opts.controller_manager = false;
    let cp = ControlPlane::start(opts)
        .await
        .expect("child control plane");
    let pids: String = cp.pids().iter().map(|(_, p)| format!("{p}\n")).collect();
    std::fs::write(&pid_file, pids).expect("pid file");
    // Leak the handle so no Drop runs: only the kernel's parent-death signal can clean up.
    std::mem::forget(cp);
    panic!("deliberate panic with a running control plane");
}

#[test]
fn control_plane_dies_with_a_panicking_test_process() {
    let pid_file =
        std::env::temp_dir().join(format!("lvms-panic-child-{}.pids", std::process::id()));
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "harness::panicking_child_starts_a_control_plane",
            "--nocapture",
        ])
        .env(CHILD_ENV, &pid_file)
        .output()
        .expect("running the child test");
    assert!(!out.status.success(), "the child test should have panicked");
    let pids: Vec<i32> = std::fs::read_to_string(&pid_file)
        .unwrap_or_else(|e| {
            panic!(
                "child wrote no pids ({e}); stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
        .lines()
        .filter_map(|l| l.parse().ok())
        .collect();
    assert_eq!(pids.len(), 2, "etcd and kube-apiserver");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|p| lvms_testkit::dev::process::alive(*p))
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    let alive: Vec<_> = pids
        .iter()
        .filter(|p| lvms_testkit::dev::process::alive(**p))
        .collect();
    assert!(
        alive.is_empty(),
        "control-plane processes outlived the panicking test: {alive:?}"
    );
    let _ = std::fs::remove_file(&pid_file);
    let _ = std::fs::remove_dir_all(pid_file.with_extension("cp"));
}
