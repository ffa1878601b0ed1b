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
    Journal::open_copy(path).map_err(|e| anyhow::anyhow!("journal {}: {e}", path.display()))
}
