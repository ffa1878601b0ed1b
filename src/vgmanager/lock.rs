//! One vg-manager per node: an exclusive, non-blocking flock held for the process lifetime
//! (LVMS uses /var/lock/vgmanager/vgmanager.lock).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("opening lock file {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "another vg-manager holds {path} on this node; stop it first (two would race on the same disks)"
    )]
    Held { path: PathBuf },
}

/// Dropping it releases the lock.
pub struct NodeLock(#[allow(dead_code)] File);

pub fn acquire(path: &Path) -> Result<NodeLock, LockError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| LockError::Open {
            path: path.to_path_buf(),
            source,
        })?;
    }
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|source| LockError::Open {
            path: path.to_path_buf(),
            source,
        })?;
    // SAFETY: flock on a file descriptor we own.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(LockError::Held {
            path: path.to_path_buf(),
        });
    }
    Ok(NodeLock(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let path = std::env::temp_dir().join(format!("lvms-lock-test-{}", std::process::id()));
        let first = acquire(&path).unwrap();
        // flock locks belong to the open file description: a second open conflicts.
        assert!(matches!(acquire(&path), Err(LockError::Held { .. })));
        drop(first);
        // A child another test forks at that moment shares the descriptor until it execs
        // (close-on-exec), so the release can take a few milliseconds to be seen.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let mut again = acquire(&path);
        while again.is_err() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
            again = acquire(&path);
        }
        assert!(again.is_ok());
        let _ = std::fs::remove_file(&path);
    }
}
