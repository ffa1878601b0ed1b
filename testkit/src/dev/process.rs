//! Starting the control-plane processes so that none outlives its owner by accident.
//!
//! Test mode: every child gets PR_SET_PDEATHSIG(SIGKILL). The kernel sends it when the *thread*
//! that forked the child exits, so children are forked from one thread that lives as long as
//! the process; a panicking or SIGKILLed test process then takes its control plane with it.
//! Detached mode (`lvms dev control-plane up`): children get their own session and are stopped
//! by `down` through the pid files.

use std::collections::BTreeSet;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifetime {
    /// Killed by the kernel when this process exits.
    DieWithParent,
    /// Keeps running after this process exits (new session).
    Detached,
}

type Job = (Command, mpsc::Sender<std::io::Result<Child>>);

fn forker() -> std::io::Result<&'static Mutex<mpsc::Sender<Job>>> {
    static FORKER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    if let Some(f) = FORKER.get() {
        return Ok(f);
    }
    let (tx, rx) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("lvms-dev-forker".into())
        .spawn(move || {
            for (mut cmd, reply) in rx {
                let _ = reply.send(cmd.spawn());
            }
        })?;
    // A racing first call may have won: its forker is used, and ours ends with its sender.
    Ok(FORKER.get_or_init(|| Mutex::new(tx)))
}

/// Spawns `cmd` with stdout and stderr appended to `log`.
pub fn spawn(mut cmd: Command, log: &Path, lifetime: Lifetime) -> std::io::Result<Child> {
    let out = File::options().create(true).append(true).open(log)?;
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    match lifetime {
        Lifetime::DieWithParent => {
            // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let (tx, rx) = mpsc::channel();
            forker()?
                .lock()
                .map_err(|_| std::io::Error::other("forker lock poisoned"))?
                .send((cmd, tx))
                .map_err(|_| std::io::Error::other("forker thread is gone"))?;
            rx.recv()
                .map_err(|_| std::io::Error::other("forker thread is gone"))?
        }
        Lifetime::Detached => {
            // SAFETY: setsid is async-signal-safe.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::setsid() < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            cmd.spawn()
        }
    }
}

/// Sends SIGTERM, waits up to `grace`, then SIGKILL. Unknown pids are fine (already gone).
pub fn terminate(pid: i32, grace: std::time::Duration) {
    // SAFETY: kill(2) with a positive pid only signals that process.
    unsafe {
        if libc::kill(pid, libc::SIGTERM) != 0 {
            return;
        }
    }
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline {
        // SAFETY: signal 0 only probes for existence.
        if unsafe { libc::kill(pid, 0) } != 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: as above.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

/// Like [`terminate`] for our own child: polls `try_wait`, because an exited but unreaped
/// child still answers kill(pid, 0) and would cost the whole grace period.
pub fn terminate_child(child: &mut std::process::Child, grace: std::time::Duration) {
    // SAFETY: kill(2) with a positive pid only signals that process.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline {
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A loopback port nobody listens on right now (the OS picks it), and never one this process
/// handed out before: the port is free only until its user binds it, and the OS may pick the
/// same one again for the next caller meanwhile (seen in CI: an operator and a vg-manager of one
/// test given the same diagnostics port, the second failing with "Address already in use").
pub fn free_port() -> std::io::Result<u16> {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    for _ in 0..64 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut given = GIVEN
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if given.insert(port) {
            return Ok(port);
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        "64 ports the OS offered in a row were handed out by this process already",
    ))
}

pub fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only probes for existence.
    unsafe { libc::kill(pid, 0) == 0 }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    #[test]
    fn free_ports_are_never_handed_out_twice_even_across_threads() {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    (0..200)
                        .map(|_| super::free_port().unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let ports: Vec<u16> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        let distinct: BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "a port handed out twice");
    }
}
