//! `lvms-dev`: developer tooling, never shipped in the `lvms` image. `lvms-dev control-plane
//! up|down|env`: the test control plane, for people; `lvms-dev kubelet`: kubelet's volume calls
//! on a node without kubelet (the demo's guest node, the guest tests); `lvms-dev scrape`: a
//! process's /metrics as Prometheus reads it.
// Test and demo tooling: a panic is a failed run, and these commands print their results.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use lvms_testkit::dev::{ControlPlane, Lifetime, Options, control_plane};

#[derive(Debug, Parser)]
#[command(
    name = "lvms-dev",
    about = "lvms developer tooling: a local control plane, kubelet's volume calls"
)]
struct Cli {
    #[command(subcommand)]
    command: DevCommand,
}

fn main() -> ExitCode {
    lvms::cli::signals::init_logging("text");
    match run(Cli::parse().command) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("lvms-dev: {err:#}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum DevCommand {
    /// Manage a local etcd + kube-apiserver + kube-controller-manager on 127.0.0.1.
    #[command(subcommand, name = "control-plane")]
    ControlPlane(ControlPlaneCommand),
    /// Do what kubelet does with a claim's volume on this node (publish, unpublish, expand,
    /// stats) through the node service's socket; prints one JSON line.
    Kubelet(KubeletArgs),
    /// GET https://127.0.0.1:PORT/metrics with a bearer token, as a Prometheus scrapes (the
    /// certificate not verified); prints the body, fails on any status but 200. busybox's
    /// wget cannot: its own TLS sends no signature_algorithms, which rustls requires.
    Scrape {
        #[arg(long)]
        port: u16,
        /// The bearer token (e.g. `$METRICS_TOKEN`).
        #[arg(long, env = "METRICS_TOKEN", hide_env_values = true)]
        token: String,
    },
}

#[derive(Debug, clap::Args)]
pub struct KubeletArgs {
    #[command(subcommand)]
    pub call: KubeletCall,
    /// The claim, NAMESPACE/NAME.
    #[arg(long, global = true)]
    pub claim: Option<String>,
    /// The target path (publish, unpublish) or volume path (expand, stats).
    #[arg(long, global = true)]
    pub target: Option<PathBuf>,
    /// The node service's socket.
    #[arg(long, global = true, default_value = lvms::csi::node::service::DEFAULT_NODE_SOCKET)]
    pub socket: PathBuf,
    /// How long to wait for the claim and retry the driver, as kubelet keeps retrying.
    #[arg(long, global = true, default_value = "300")]
    pub timeout_secs: u64,
}

#[derive(Debug, Subcommand)]
pub enum KubeletCall {
    /// NodePublishVolume once the claim is Bound.
    Publish {
        #[arg(long)]
        readonly: bool,
    },
    /// NodeUnpublishVolume.
    Unpublish,
    /// NodeExpandVolume once csi-resizer grew the PV to the claim's request, then the claim's
    /// status capacity.
    Expand,
    /// NodeGetVolumeStats.
    Stats,
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
    /// Print the environment to use it (`eval "$(lvms-dev control-plane env)"`).
    Env {
        #[arg(long, default_value = "/tmp/lvms-dev")]
        dir: PathBuf,
    },
}

pub fn run(cmd: DevCommand) -> anyhow::Result<ExitCode> {
    let cmd = match cmd {
        DevCommand::ControlPlane(c) => c,
        DevCommand::Kubelet(args) => return kubelet(args),
        DevCommand::Scrape { port, token } => {
            let (code, body) = lvms_testkit::metrics::scrape(port, Some(&token), None)?;
            print!("{body}");
            if code != 200 {
                anyhow::bail!("https://127.0.0.1:{port}/metrics answered {code}");
            }
            return Ok(ExitCode::SUCCESS);
        }
    };
    match cmd {
        ControlPlaneCommand::Up { dir, no_crds } => {
            if dir.join("pids").exists() {
                anyhow::bail!(
                    "a control plane is already recorded in {}; run `lvms-dev control-plane down --dir {}` first",
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
                    lvms_testkit::dev::crds::install_crds(
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
                "no control plane in {}; start one with `lvms-dev control-plane up`",
                dir.display()
            );
            println!("export KUBECONFIG={}", kc.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn kubelet(args: KubeletArgs) -> anyhow::Result<ExitCode> {
    use lvms_testkit::kubelet::volumes::Kubelet;
    let given = args.claim.clone().unwrap_or_default();
    let (namespace, claim) = given
        .split_once('/')
        .filter(|(n, c)| !n.is_empty() && !c.is_empty())
        .ok_or_else(|| anyhow::anyhow!("--claim takes NAMESPACE/NAME, got {given:?}"))?;
    let target = args
        .target
        .as_ref()
        .filter(|t| !t.as_os_str().is_empty())
        .ok_or_else(|| anyhow::anyhow!("--target is required: the path kubelet would use"))?
        .to_string_lossy()
        .into_owned();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let out = rt.block_on(async {
        let k = Kubelet {
            client: kube::Client::try_default().await?,
            socket: args.socket.clone(),
            deadline: std::time::Instant::now() + std::time::Duration::from_secs(args.timeout_secs),
        };
        anyhow::Ok(match args.call {
            KubeletCall::Publish { readonly } => {
                let id = k.publish(namespace, claim, &target, readonly).await?;
                serde_json::json!({"published": id, "target": target})
            }
            KubeletCall::Unpublish => {
                k.unpublish(namespace, claim, &target).await?;
                serde_json::json!({"unpublished": target})
            }
            KubeletCall::Expand => {
                serde_json::json!({"expandedTo": k.expand(namespace, claim, &target).await?})
            }
            KubeletCall::Stats => k.stats(namespace, claim, &target).await?,
        })
    })?;
    println!("{out}");
    Ok(ExitCode::SUCCESS)
}
