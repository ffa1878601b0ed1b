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
/// A fixed mmap threshold keeps large buffers (a watch event or status of a 1000-node cluster,
/// a list page) in their own mappings, returned when freed: left dynamic, glibc raises the
/// threshold after the first such free and keeps every later one in the heap for good.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only tunes the allocator; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}
