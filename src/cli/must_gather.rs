//! `lvms must-gather DIR`: what LVMS's must-gather collects (the lvms objects, the driver's
//! classes, volumes, claims and snapshots, CSIDriver/CSINodes, Nodes, Events, the lvms
//! namespaces' workloads and pod logs), each journal given (a still copy, its JSON lines, its
//! `verify` and `stats`), and on a node its block devices and LVM reports; then DIR.tar.gz.
//! Secrets are never read; `crate::explain::bundle` decides what is kept and redacted.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams};
use lvms_journal::render::render_jsonl;
use lvms_journal::{Filter, Journal};
use serde_json::{Value, json};

use super::explain::api;
use super::sources::{JournalSources, Source};
use crate::explain::bundle::{self, GATHERED, Scope, Seen};
use crate::explain::kinds::KindInfo;

#[derive(Debug, Args)]
pub struct MustGatherArgs {
    /// Directory to write (created; must not exist); the tarball is DIR.tar.gz beside it.
    pub dir: PathBuf,
    /// The operator's namespace (gathered even before an LVMCluster exists).
    #[arg(long, env = "NAMESPACE", default_value = "openshift-lvm-storage")]
    pub namespace: String,
    #[command(flatten)]
    pub journals: JournalSources,
    /// Also record this machine's block devices and LVM (lsblk, pvs, vgs, lvs as JSON).
    #[arg(long)]
    pub node: bool,
    /// Run the node commands through this prefix (vg-manager's `nsenter ...` in a pod).
    #[arg(long, value_delimiter = ' ')]
    pub host_command_prefix: Vec<String>,
    /// Skip the API server (a node-only bundle when the control plane is unreachable).
    #[arg(long)]
    pub no_api: bool,
}

/// What was gathered, for `manifest.json`: each item's file and count, or why it is missing.
#[derive(Default)]
struct Manifest {
    items: Vec<Value>,
}

impl Manifest {
    fn ok(&mut self, what: &str, file: &str, count: Option<usize>) {
        self.items
            .push(json!({"what": what, "file": file, "count": count}));
    }
    fn missing(&mut self, what: &str, why: impl std::fmt::Display) {
        self.items
            .push(json!({"what": what, "missing": why.to_string()}));
    }
}

fn write_json(path: &Path, v: &Value) -> anyhow::Result<()> {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p)?;
    }
    std::fs::write(path, serde_json::to_vec_pretty(v)?)
        .with_context(|| format!("writing {}", path.display()))
}

/// Every object of a kind in `ns` (all namespaces when `None`), in pages.
async fn list_all(
    client: &kube::Client,
    k: &KindInfo,
    ns: Option<&str>,
) -> Result<Vec<Value>, kube::Error> {
    let items = crate::kube::list::list_pages(&api(client, k, ns)).await?;
    Ok(items
        .into_iter()
        .map(|item| {
            let mut v = serde_json::to_value(item).unwrap_or(Value::Null);
            // Items of a list come without their kind; the bundle's files keep it.
            if let Some(m) = v.as_object_mut() {
                m.insert("apiVersion".into(), Value::String(k.api_version()));
                m.insert("kind".into(), Value::String(k.kind.into()));
            }
            v
        })
        .collect())
}

async fn gather_api(args: &MustGatherArgs, dir: &Path, m: &mut Manifest) -> anyhow::Result<()> {
    let client = match kube::Client::try_default().await {
        Ok(c) => c,
        Err(e) => {
            m.missing("API objects", format!("no API client: {e}"));
            return Ok(());
        }
    };
    let mut seen = Seen::default();
    seen.namespaces.insert(args.namespace.clone());
    for (k, scope) in GATHERED {
        let namespaces: Vec<Option<String>> = match scope {
            Scope::All => vec![None],
            Scope::LvmsNamespaces => seen.namespaces.iter().cloned().map(Some).collect(),
            Scope::ClaimNamespaces => seen
                .namespaces
                .union(&seen.claim_namespaces)
                .cloned()
                .map(Some)
                .collect(),
        };
        let mut items = Vec::new();
        let mut failed = None;
        for ns in &namespaces {
            match list_all(&client, k, ns.as_deref()).await {
                Ok(list) => items.extend(list),
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    failed = Some(format!("{} is not served here", k.api_version()));
                }
                Err(e) => failed = Some(format!("listing {}: {e}", k.plural)),
            }
        }
        let kept: Vec<Value> = items
            .into_iter()
            .filter(|o| bundle::keep(k, o, &mut seen))
            .map(bundle::sanitize)
            .collect();
        let file = format!("resources/{}.json", k.plural);
        if let Some(why) = failed.filter(|_| kept.is_empty()) {
            m.missing(k.plural, why);
            continue;
        }
        write_json(
            &dir.join(&file),
            &json!({"apiVersion": "v1", "kind": "List", "items": kept}),
        )?;
        m.ok(k.plural, &file, Some(kept.len()));
        if k.kind == "Pod" {
            gather_logs(&client, &kept, dir, m).await?;
        }
    }
    Ok(())
}

/// The logs of every container of the lvms namespaces' pods (the last 5000 lines each).
async fn gather_logs(
    client: &kube::Client,
    pods: &[Value],
    dir: &Path,
    m: &mut Manifest,
) -> anyhow::Result<()> {
    for p in pods {
        let s = |ptr: &str| {
            p.pointer(ptr)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let (ns, name) = (s("/metadata/namespace"), s("/metadata/name"));
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
        for c in p
            .pointer("/spec/containers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let container = c.get("name").and_then(Value::as_str).unwrap_or_default();
            let what = format!("log {ns}/{name}/{container}");
            let lp = LogParams {
                container: Some(container.to_string()),
                tail_lines: Some(5000),
                ..LogParams::default()
            };
            match api.logs(&name, &lp).await {
                Ok(text) => {
                    let file = format!("logs/{ns}/{name}/{container}.log");
                    let path = dir.join(&file);
                    if let Some(parent) = path.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    std::fs::write(&path, text)?;
                    m.ok(&what, &file, None);
                }
                Err(e) => m.missing(&what, format!("not reachable: {e}")),
            }
        }
    }
    Ok(())
}

/// A still copy of the journal (openable with `lvms journal`), its records as JSON lines, and
/// its `verify` and `stats` reports.
fn gather_journal(src: &Source, dir: &Path, m: &mut Manifest) -> anyhow::Result<()> {
    let label = bundle::file_label(&src.label);
    let what = format!("journal {} ({})", src.label, src.path.display());
    let copy = dir.join("journals").join(&label);
    if let Err(e) = Journal::copy_still(&src.path, &copy, lvms_journal::COPY_PATIENCE) {
        m.missing(&what, e);
        return Ok(());
    }
    let j = match super::journal::private_copy(&copy) {
        Ok(j) => j,
        Err(e) => {
            m.missing(&what, e);
            return Ok(());
        }
    };
    let entries = j.query(&Filter::default())?;
    let jsonl = format!("journals/{label}.jsonl");
    std::fs::write(dir.join(&jsonl), render_jsonl(&entries))?;
    m.ok(&what, &format!("journals/{label}"), Some(entries.len()));
    let verify = j.verify()?;
    write_json(
        &dir.join(format!("journals/{label}.verify.json")),
        &serde_json::to_value(&verify)?,
    )?;
    write_json(
        &dir.join(format!("journals/{label}.stats.json")),
        &serde_json::to_value(j.stats()?)?,
    )?;
    m.ok(
        &format!("{} verify (clean: {})", src.label, verify.is_clean()),
        &format!("journals/{label}.verify.json"),
        None,
    );
    Ok(())
}

/// lsblk and lvm2's reports of this machine, as JSON.
fn gather_node(args: &MustGatherArgs, dir: &Path, m: &mut Manifest) -> anyhow::Result<()> {
    let lsblk =
        "NAME,KNAME,TYPE,SIZE,RO,ROTA,FSTYPE,MOUNTPOINT,STATE,SERIAL,MODEL,VENDOR,PARTLABEL";
    let commands: [(&str, Vec<&str>); 4] = [
        (
            "lsblk",
            vec!["lsblk", "--json", "--paths", "--bytes", "-o", lsblk],
        ),
        (
            "pvs",
            vec![
                "pvs",
                "--reportformat",
                "json",
                "--units",
                "b",
                "-o",
                "pv_all,vg_name",
            ],
        ),
        (
            "vgs",
            vec![
                "vgs",
                "--reportformat",
                "json",
                "--units",
                "b",
                "-o",
                "vg_all",
            ],
        ),
        (
            "lvs",
            vec![
                "lvs",
                "-a",
                "--reportformat",
                "json",
                "--units",
                "b",
                "-o",
                "lv_all,vg_name",
            ],
        ),
    ];
    for (name, argv) in commands {
        let full: Vec<&str> = args
            .host_command_prefix
            .iter()
            .map(String::as_str)
            .filter(|a| !a.is_empty())
            .chain(argv)
            .collect();
        let what = format!("node {name}");
        let out = std::process::Command::new(full[0])
            .args(&full[1..])
            .output();
        match out {
            Ok(o) if o.status.success() => {
                let file = format!("node/{name}.json");
                let path = dir.join(&file);
                std::fs::create_dir_all(dir.join("node"))?;
                std::fs::write(&path, &o.stdout)?;
                m.ok(&what, &file, None);
            }
            Ok(o) => m.missing(
                &what,
                format!(
                    "{}: {}",
                    full.join(" "),
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
            ),
            Err(e) => m.missing(&what, format!("{}: {e}", full[0])),
        }
    }
    Ok(())
}

pub fn run(args: MustGatherArgs) -> anyhow::Result<ExitCode> {
    let dir = args.dir.clone();
    anyhow::ensure!(
        !dir.exists(),
        "{} already exists: must-gather writes a new directory (pick another DIR or remove it)",
        dir.display()
    );
    let name = dir
        .file_name()
        .ok_or_else(|| anyhow::anyhow!("{}: DIR needs a final path component", dir.display()))?
        .to_owned();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let sources = args.journals.sources()?;
    let mut m = Manifest::default();
    if !args.no_api {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(gather_api(&args, &dir, &mut m))?;
    }
    for src in &sources {
        gather_journal(src, &dir, &mut m)?;
    }
    if args.node {
        gather_node(&args, &dir, &mut m)?;
    }
    write_json(
        &dir.join("manifest.json"),
        &json!({
            "lvms": env!("CARGO_PKG_VERSION"),
            "gatheredAt": lvms_journal::rfc3339_utc(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as u64)
                    .unwrap_or_default()
            ),
            "secrets": "never read",
            "items": m.items,
        }),
    )?;
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tarball = dir.clone().into_os_string();
    tarball.push(".tar.gz");
    let status = std::process::Command::new("tar")
        .arg("-czf")
        .arg(&tarball)
        .arg("-C")
        .arg(parent)
        .arg(&name)
        .status()
        .context("running tar (install tar and gzip)")?;
    anyhow::ensure!(
        status.success(),
        "tar -czf {} failed: {status}",
        PathBuf::from(&tarball).display()
    );
    println!("{}", PathBuf::from(&tarball).display());
    Ok(ExitCode::SUCCESS)
}
