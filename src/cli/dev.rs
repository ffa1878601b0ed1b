//! `lvms dev control-plane up|down|env`: the test control plane, for people.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use crate::dev::{ControlPlane, Lifetime, Options, control_plane};

#[derive(Debug, Subcommand)]
pub enum DevCommand {
    /// Manage a local etcd + kube-apiserver + kube-controller-manager on 127.0.0.1.
    #[command(subcommand, name = "control-plane")]
    ControlPlane(ControlPlaneCommand),
}

#[derive(Debug, Subcommand)]
pub enum ControlPlaneCommand {
    /// Start it in the background, install the lvms CRDs, print `export KUBECONFIG=...`.
    Up {
        #[arg(long, default_value = "/tmp/lvms-dev")]
        dir: PathBuf,
        /// Do not install the CRDs.
        #[arg(long)]
        no_crds: bool,
    },
    /// Stop it and remove its directory.
    Down {
        #[arg(long, default_value = "/tmp/lvms-dev")]
        dir: PathBuf,
    },
    /// Print the environment to use it (`eval "$(lvms dev control-plane env)"`).
    Env {
        #[arg(long, default_value = "/tmp/lvms-dev")]
        dir: PathBuf,
    },
}

pub fn run(cmd: DevCommand) -> anyhow::Result<ExitCode> {
    let DevCommand::ControlPlane(cmd) = cmd;
    match cmd {
        ControlPlaneCommand::Up { dir, no_crds } => {
            if dir.join("pids").exists() {
                anyhow::bail!(
                    "a control plane is already recorded in {}; run `lvms dev control-plane down --dir {}` first",
                    dir.display(),
                    dir.display()
                );
            }
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                let cp = ControlPlane::start(Options::new(&dir, Lifetime::Detached)).await?;
                if !no_crds {
                    crate::dev::crds::install_crds(
                        &cp.client().await?,
                        std::time::Duration::from_secs(60),
                    )
                    .await?;
                }
                eprintln!(
                    "control plane ready in {:.1}s at {} (logs in {})",
                    cp.started_in.as_secs_f64(),
                    cp.server_url(),
                    dir.display()
                );
                println!("export KUBECONFIG={}", cp.kubeconfig.display());
                cp.detach();
                anyhow::Ok(())
            })?;
            Ok(ExitCode::SUCCESS)
        }
        ControlPlaneCommand::Down { dir } => {
            control_plane::down(&dir)?;
            Ok(ExitCode::SUCCESS)
        }
        ControlPlaneCommand::Env { dir } => {
            let kc = dir.join("admin.kubeconfig");
            anyhow::ensure!(
                kc.exists(),
                "no control plane in {}; start one with `lvms dev control-plane up`",
                dir.display()
            );
            println!("export KUBECONFIG={}", kc.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}
