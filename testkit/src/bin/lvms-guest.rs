//! `lvms-guest`: one real-kernel guest boot from the command line, for `make demo` on a host
//! without device-mapper (and for poking at the tier by hand). The same harness as the tests:
//!
//! ```text
//! lvms-guest [--kubeconfig PATH] [--binary NAME=PATH]... [--file NAME=PATH]...
//!            [--disk SERIAL=MIB]... [--forward GUEST_PORT=HOST_PORT]... [--out DIR]
//!            [--timeout SECS] SCRIPT
//! ```
//!
//! `--kubeconfig` rewrites a host kubeconfig for the guest (`/work/kubeconfig`, reaching the
//! API server through one loopback forward); `--forward` adds others (the guest dials
//! 10.0.2.100:GUEST_PORT to reach the host's 127.0.0.1:HOST_PORT). The console streams to stdout; `--out` receives
//! the script's `$GUEST_OUT`; the exit status is the script's.
// A command-line tool over the test harness: its panics are its error reports.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use lvms_testkit::guest::{Run, WithInputs, guest_kubeconfig, host_api_port, image, run};

const API_PORT_IN_GUEST: u16 = 6443;

fn pair(flag: &str, v: &str) -> (String, String) {
    match v.split_once('=') {
        Some((a, b)) if !a.is_empty() && !b.is_empty() => (a.to_string(), b.to_string()),
        _ => fail(&format!("{flag} takes NAME=VALUE, got {v:?}")),
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("lvms-guest: {msg}");
    std::process::exit(2)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut spec = Run::new("guest", "");
    let mut out: Option<PathBuf> = None;
    let mut script: Option<PathBuf> = None;
    let mut _kc_dir = None;
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| fail(&format!("{a} needs a value")))
        };
        match a.as_str() {
            "--binary" => {
                let (n, p) = pair(&a, &value());
                spec = spec.binary(&n, p);
            }
            "--file" => {
                let (n, p) = pair(&a, &value());
                spec = spec.file(&n, p);
            }
            "--disk" => {
                let (s, m) = pair(&a, &value());
                let mib = m
                    .parse()
                    .unwrap_or_else(|_| fail(&format!("--disk {s}={m}: MiB is a number")));
                spec = spec.disk(&s, mib);
            }
            "--forward" => {
                let (g, h) = pair(&a, &value());
                let port = |p: &str| {
                    p.parse::<u16>()
                        .unwrap_or_else(|_| fail(&format!("--forward {g}={h}: ports are numbers")))
                };
                spec = spec.forward(port(&g), port(&h));
            }
            "--kubeconfig" => {
                let host = PathBuf::from(value());
                let text = std::fs::read_to_string(&host)
                    .unwrap_or_else(|e| fail(&format!("--kubeconfig {}: {e}", host.display())));
                let port = host_api_port(&text).unwrap_or_else(|| {
                    fail("--kubeconfig: no https://127.0.0.1:PORT server in it")
                });
                let (kc, certs) = guest_kubeconfig(&host, API_PORT_IN_GUEST);
                let dir = tempfile::tempdir().expect("temp dir");
                let path = dir.path().join("kubeconfig");
                std::fs::write(&path, kc).expect("write guest kubeconfig");
                spec = spec
                    .file("kubeconfig", path)
                    .forward(API_PORT_IN_GUEST, port);
                for (n, p) in certs {
                    spec = spec.file(&n, p);
                }
                _kc_dir = Some(dir);
            }
            "--out" => out = Some(PathBuf::from(value())),
            "--timeout" => {
                let v = value();
                let secs = v
                    .parse()
                    .unwrap_or_else(|_| fail(&format!("--timeout {v}: seconds")));
                spec.timeout = Duration::from_secs(secs);
            }
            s if s.starts_with("--") => fail(&format!("unknown flag {s}")),
            s => script = Some(PathBuf::from(s)),
        }
    }
    let script = script.unwrap_or_else(|| fail("no SCRIPT given"));
    spec.script = std::fs::read_to_string(&script)
        .unwrap_or_else(|e| fail(&format!("{}: {e}", script.display())));
    let outcome = run(image(), &spec);
    if let Some(dir) = out {
        std::fs::create_dir_all(&dir).expect("--out dir");
        let copied = std::process::Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", outcome.out.display()))
            .arg(&dir)
            .status()
            .expect("cp");
        assert!(copied.success(), "copying $GUEST_OUT to {}", dir.display());
    }
    ExitCode::from(u8::try_from(outcome.status).unwrap_or(1))
}
