//! SIGTERM (kubelet) or SIGINT (a person) ends a long-running command gracefully.

use tokio::signal::unix::{SignalKind, signal};

pub async fn terminated() {
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    match (term, int) {
        (Ok(mut t), Ok(mut i)) => {
            tokio::select! {
                _ = t.recv() => {}
                _ = i.recv() => {}
            }
        }
        // Without signal handlers there is nothing to wait for but a kill.
        _ => std::future::pending::<()>().await,
    }
}
