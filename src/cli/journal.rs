//! `lvms journal inspect|verify|stats PATH`: post-mortems on a journal directory. Every command
//! opens a private copy (`Journal::open_copy`), so a journal in use elsewhere is readable and
//! is never modified.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};
use lvms_journal::render::{render_json, render_jsonl, render_table};
use lvms_journal::{Filter, Journal, ObjectFilter, TraceId};

use super::since::parse_since;

#[derive(Debug, Subcommand)]
pub enum JournalCommand {
    /// Show records: table (default), JSON array or JSON lines (schema: lvms_journal::render).
    Inspect {
        path: PathBuf,
        /// Only records of this reconcile unit (e.g. storage-classes).
        #[arg(long)]
        unit: Option<String>,
        /// Only records about KIND/NAMESPACE/NAME (or KIND/NAME for cluster-scoped objects).
        #[arg(long)]
        object: Option<ObjectFilter>,
        /// Only records since a duration ago (15m, 2h, 7d) or an RFC 3339 time.
        #[arg(long)]
        since: Option<String>,
        /// Only unfinished intents (no outcome yet).
        #[arg(long)]
        open: bool,
        /// Only records of this trace (32 hex digits, as in Jaeger).
        #[arg(long)]
        trace: Option<TraceId>,
        /// At most this many records (the newest).
        #[arg(long)]
        limit: Option<usize>,
        #[arg(long, short, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Check every record's checksum and decoding, sequence gaps and indexes; exit 1 if any fail.
    Verify { path: PathBuf },
    /// Records by kind and unit, open intents, oldest/newest, size on disk (JSON).
    Stats { path: PathBuf },
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Output {
    Table,
    Json,
    Jsonl,
}

pub fn run(cmd: JournalCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        JournalCommand::Inspect {
            path,
            unit,
            object,
            since,
            open,
            trace,
            limit,
            output,
        } => {
            // A clock before 1970 only shifts `--since` durations; nothing is decided on it.
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or_default();
            let since_ms = since
                .map(|s| parse_since(&s, now_ms))
                .transpose()
                .map_err(anyhow::Error::msg)?;
            let filter = Filter {
                unit,
                object,
                since_ms,
                open_only: open,
                trace_id: trace,
                limit,
            };
            let journal = open_copy(&path)?;
            let entries = journal.query(&filter)?;
            let text = match output {
                Output::Table => render_table(&entries),
                Output::Json => render_json(&entries),
                Output::Jsonl => render_jsonl(&entries),
            };
            print!("{text}");
            if !text.ends_with('\n') && !text.is_empty() {
                println!();
            }
            Ok(ExitCode::SUCCESS)
        }
        JournalCommand::Verify { path } => {
            let report = open_copy(&path)?.verify()?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(if report.is_clean() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        JournalCommand::Stats { path } => {
            let stats = open_copy(&path)?.stats()?;
            println!("{}", serde_json::to_string_pretty(&stats)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn open_copy(path: &std::path::Path) -> anyhow::Result<Journal> {
    anyhow::ensure!(
        path.is_dir(),
        "journal {}: no such directory",
        path.display()
    );
    private_copy(path).map_err(|e| anyhow::anyhow!("journal {}: {e}", path.display()))
}

/// [`Journal::open_copy`], with the copy on the tmpfs when [`copy_to_shm`] says so: what
/// every post-mortem command (inspect, verify, stats, explain, must-gather) opens.
pub(crate) fn private_copy(path: &std::path::Path) -> lvms_journal::Result<Journal> {
    let shm = std::path::Path::new(SHM);
    let parent = if copy_to_shm(
        std::env::var_os("TMPDIR").is_some(),
        crate::csi::node::stats::statfs(shm)
            .ok()
            .map(|s| s.bavail.saturating_mul(s.frsize)),
        lvms_journal::dir_bytes(path),
    ) {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    Journal::open_copy_in(path, &parent, lvms_journal::COPY_PATIENCE)
}

const SHM: &str = "/dev/shm";

/// Whether the private copy goes to the tmpfs at [`SHM`] rather than the temp dir:
/// when the user did not choose a temp dir and the journal takes at most a quarter of the
/// tmpfs's free space. On disk the copy costs what the query does not need: opening it makes
/// sled sync the whole file, and removing it frees every extent (0.6 s of 1 s for a 200k-record
/// journal on the slowest machine measured). A pod's /dev/shm is 64 MiB by default, so a big
/// journal inspected inside one still goes to the temp dir.
fn copy_to_shm(tmpdir_set: bool, shm_free_bytes: Option<u64>, journal_bytes: u64) -> bool {
    !tmpdir_set && shm_free_bytes.is_some_and(|free| journal_bytes.saturating_mul(4) <= free)
}

#[cfg(test)]
mod tests {
    use super::copy_to_shm;

    #[test]
    fn the_copy_goes_to_shm_only_when_unchosen_and_roomy() {
        const G: u64 = 1 << 30;
        // Room for four copies, no TMPDIR: tmpfs.
        assert!(copy_to_shm(false, Some(4 * G), G));
        // A quarter of the room plus a byte: the temp dir.
        assert!(!copy_to_shm(false, Some(4 * G - 1), G));
        // The user chose a temp dir: always that.
        assert!(!copy_to_shm(true, Some(100 * G), 1));
        // No /dev/shm (or statfs failed): the temp dir.
        assert!(!copy_to_shm(false, None, 1));
        // A pod's 64 MiB /dev/shm and a 200 MB journal: the temp dir.
        assert!(!copy_to_shm(false, Some(64 << 20), 200 << 20));
    }
}
