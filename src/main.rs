use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    limit_malloc_arenas();
    let cli = lvms::cli::Cli::parse();
    match lvms::cli::run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("lvms: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// glibc gives every thread that allocates its own arena (up to 8 per core); for a small
/// long-running controller that is mostly fragmentation. Two arenas keep RSS flat.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only tunes the allocator; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}
