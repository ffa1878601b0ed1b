//! `lvms` subcommands.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[allow(clippy::print_stdout)]
mod audit;
mod crds;
// These commands print their results on stdout: that is their output, not logging.
#[allow(clippy::print_stdout)]
mod explain;
#[allow(clippy::print_stdout)]
mod journal;
mod metrics;
#[allow(clippy::print_stdout)]
mod must_gather;
mod operator;
pub mod signals;
mod since;
mod sources;
mod vg_manager;

#[derive(Debug, Parser)]
#[command(
    name = "lvms",
    version,
    about = "LVM storage operator for Kubernetes, drop-in compatible with LVMS"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Orphans across the cluster: leaked and missing LVs, stale PVs, half-finished steps.
    Audit(audit::AuditArgs),
    /// Print the CustomResourceDefinitions lvms installs, as YAML.
    Crds {
        /// Write one file per CRD (and a kustomization.yaml) into this directory instead.
        #[arg(long)]
        out_dir: Option<std::path::PathBuf>,
    },
    /// The story of one object: its status, what holds it back (node, class, failing step and
    /// error), open intents, Events and journal records newest first, and their traces.
    Explain(explain::ExplainArgs),
    /// Gather a post-mortem bundle (objects, Events, logs, journals, node LVM reports) into
    /// DIR and DIR.tar.gz. Secrets are never read.
    MustGather(must_gather::MustGatherArgs),
    /// Post-mortems on a journal directory: inspect, verify, stats (read a private copy).
    #[command(subcommand)]
    Journal(journal::JournalCommand),
    /// Run the operator (reconciles the LVMCluster in --namespace).
    Operator(operator::OperatorArgs),
    /// Run vg-manager on this node (turns LVMVolumeGroups into volume groups).
    VgManager(vg_manager::VgManagerArgs),
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Audit(args) => audit::run(args),
        Command::Crds { out_dir } => crds::run(out_dir),
        Command::Explain(args) => explain::run(args),
        Command::Journal(cmd) => journal::run(cmd),
        Command::MustGather(args) => must_gather::run(args),
        Command::Operator(args) => operator::run_cmd(args),
        Command::VgManager(args) => vg_manager::run_cmd(args),
    }
}
