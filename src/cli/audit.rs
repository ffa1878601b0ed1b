//! `lvms audit`: the orphan audit, cluster-wide. Each node's half is its vg-manager's last
//! audit (the `lvms.topolvm.io/audit` annotation of its LVMVolumeGroupNodeStatus; `--now`
//! asks every node for a fresh one and waits for the answers); the cluster's half (stale
//! PersistentVolumes, LogicalVolumes of gone nodes) is read here. Reads only, except the
//! request annotation `--now` sets.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};
use k8s_openapi::api::core::v1::{Node, PersistentVolume};
use kube::api::Api;
use serde::Serialize;

use crate::api::topolvm::{DRIVER_NAME, TOPOLOGY_NODE_KEY};
use crate::api::{LVMVolumeGroupNodeStatus, LogicalVolume};
use crate::kube::list::list_pages as list;
use crate::node::audit::{ClusterVolume, Finding, FindingKind, NodeAudit, PvRef, stale_volumes};
use crate::operator::volumes::dead_node::{WRITTEN_OFF_ANNOTATION, record, written_off_findings};
use crate::vgmanager::audit_unit::{
    AUDIT_ANNOTATION, PublishedAudit, audit_request_token, request_audit,
};

/// Exit status when `--fail-on-findings` and something was found.
const FOUND: u8 = 3;

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// The namespace lvms runs in (where the node statuses are).
    #[arg(
        long,
        short = 'n',
        env = "NAMESPACE",
        default_value = "openshift-lvm-storage"
    )]
    pub namespace: String,
    /// Ask every node for a fresh audit and wait for each answer.
    #[arg(long)]
    pub now: bool,
    /// How long `--now` waits for the nodes.
    #[arg(long, default_value = "120s", value_parser = super::since::parse_duration)]
    pub timeout: Duration,
    #[arg(long, short, value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// Exit with status 3 when anything is found (for scripts and CI).
    #[arg(long)]
    pub fail_on_findings: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// What `-o json` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAudit {
    /// Every kind, zeros included: the nodes' counts (complete even where a node listed only
    /// its first findings) plus the cluster's.
    pub counts: BTreeMap<FindingKind, u64>,
    /// Each node's last audit.
    pub nodes: Vec<NodeAudit>,
    /// Found from the API alone.
    pub cluster: Vec<Finding>,
    /// Node statuses without an audit yet (a vg-manager that is not running, or just started).
    pub unaudited: Vec<String>,
}

pub fn run(args: AuditArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let audit = rt.block_on(gather(&args))?;
    let found = audit.counts.values().any(|n| *n > 0);
    match args.output {
        Format::Text => print!("{}", render(&audit)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&audit)?),
    }
    Ok(if found && args.fail_on_findings {
        ExitCode::from(FOUND)
    } else {
        ExitCode::SUCCESS
    })
}

async fn gather(args: &AuditArgs) -> anyhow::Result<ClusterAudit> {
    let client = kube::Client::try_default().await?;
    let statuses: Api<LVMVolumeGroupNodeStatus> = Api::namespaced(client.clone(), &args.namespace);
    let mut listed = list(&statuses)
        .await
        .context("listing LVMVolumeGroupNodeStatuses")?;
    if args.now {
        listed = request_fresh(&statuses, listed, args.timeout).await?;
    }
    let mut nodes = Vec::new();
    let mut unaudited = Vec::new();
    for s in &listed {
        let name = s.metadata.name.clone().unwrap_or_default();
        match s
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(AUDIT_ANNOTATION))
        {
            None => unaudited.push(name),
            Some(text) => {
                let p: PublishedAudit = serde_json::from_str(text).with_context(|| {
                    format!(
                        "LVMVolumeGroupNodeStatus {}/{name}: annotation {AUDIT_ANNOTATION} is not an audit (written by another release?); `lvms audit --now` has it written again",
                        args.namespace
                    )
                })?;
                nodes.push(p.audit);
            }
        }
    }
    let cluster = cluster_half(&client).await?;
    let mut counts = crate::node::audit::counts(&cluster);
    for n in &nodes {
        for (k, c) in &n.counts {
            *counts.entry(*k).or_default() += c;
        }
    }
    Ok(ClusterAudit {
        counts,
        nodes,
        cluster,
        unaudited,
    })
}

/// Sets a new request on every node status, then waits until each answers it (its audit's
/// `request`), re-listing once a second. A node that does not answer in time is an error
/// naming it: its last audit would be an old answer to a new question.
async fn request_fresh(
    api: &Api<LVMVolumeGroupNodeStatus>,
    listed: Vec<LVMVolumeGroupNodeStatus>,
    timeout: Duration,
) -> anyhow::Result<Vec<LVMVolumeGroupNodeStatus>> {
    let token = audit_request_token();
    for s in &listed {
        let name = s.metadata.name.clone().unwrap_or_default();
        request_audit(api, &name, &token)
            .await
            .with_context(|| format!("asking node {name} for an audit"))?;
    }
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let now = list(api)
            .await
            .context("listing LVMVolumeGroupNodeStatuses")?;
        let waiting: Vec<String> = now
            .iter()
            .filter(|s| answered(s).as_deref() != Some(token.as_str()))
            .filter_map(|s| s.metadata.name.clone())
            .collect();
        if waiting.is_empty() {
            return Ok(now);
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!(
                "no fresh audit within {} s from node(s) {}: is their vg-manager running? (`lvms explain lvmvolumegroupnodestatus/<ns>/<node>`)",
                timeout.as_secs(),
                waiting.join(", ")
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The request the node's published audit answered (a document that does not parse
/// answers nothing).
fn answered(s: &LVMVolumeGroupNodeStatus) -> Option<String> {
    let text = s.metadata.annotations.as_ref()?.get(AUDIT_ANNOTATION)?;
    serde_json::from_str::<PublishedAudit>(text).ok()?.request
}

/// PersistentVolumes of the driver, every LogicalVolume, every Node: the cluster's half.
async fn cluster_half(client: &kube::Client) -> anyhow::Result<Vec<Finding>> {
    let pvs: Vec<PvRef> = list(&Api::<PersistentVolume>::all(client.clone()))
        .await
        .context("listing PersistentVolumes")?
        .into_iter()
        .filter_map(pv_ref)
        .collect();
    let volumes: Vec<ClusterVolume> = list(&Api::<LogicalVolume>::all(client.clone()))
        .await
        .context("listing LogicalVolumes")?
        .into_iter()
        .map(|v| ClusterVolume {
            name: v.metadata.name.clone().unwrap_or_default(),
            node: v.spec.node_name.clone(),
            uid: v.metadata.uid.clone().unwrap_or_default(),
            volume_id: v.status.and_then(|s| s.volume_id).filter(|i| !i.is_empty()),
        })
        .collect();
    let all_nodes = list(&Api::<Node>::all(client.clone()))
        .await
        .context("listing Nodes")?;
    let nodes: BTreeSet<String> = all_nodes
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    let mut out = stale_volumes(&pvs, &volumes, &nodes);
    let node_of: std::collections::BTreeMap<&str, &str> = volumes
        .iter()
        .map(|v| (v.name.as_str(), v.node.as_str()))
        .collect();
    for n in &all_nodes {
        let name = n.metadata.name.as_deref().unwrap_or_default();
        match record(n) {
            None => {}
            Some(Ok(r)) => out.extend(written_off_findings(name, &r, |lv| {
                node_of.get(lv).map(|n| (*n).to_string())
            })),
            Some(Err(e)) => out.push(Finding::new(
                FindingKind::WrittenOff,
                name,
                format!("Node {name}'s annotation {WRITTEN_OFF_ANNOTATION} is not a record ({e}): what was written off there is in the operator's journal (`lvms journal inspect`, release-logical-volume steps)"),
            )),
        }
    }
    out.sort_by_key(Finding::key);
    Ok(out)
}

fn pv_ref(pv: PersistentVolume) -> Option<PvRef> {
    let spec = pv.spec?;
    let csi = spec.csi.filter(|c| c.driver == DRIVER_NAME)?;
    let node = spec
        .node_affinity
        .and_then(|a| a.required)
        .into_iter()
        .flat_map(|r| r.node_selector_terms)
        .flat_map(|t| t.match_expressions.unwrap_or_default())
        .find(|e| e.key == TOPOLOGY_NODE_KEY)
        .and_then(|e| e.values.and_then(|v| v.into_iter().next()));
    let claim = spec.claim_ref.map(|c| {
        format!(
            "{}/{}",
            c.namespace.unwrap_or_default(),
            c.name.unwrap_or_default()
        )
    });
    Some(PvRef {
        name: pv.metadata.name.unwrap_or_default(),
        volume_handle: csi.volume_handle,
        node,
        claim,
    })
}

/// The text report: counts, then one block per finding.
pub fn render(a: &ClusterAudit) -> String {
    let mut out = String::new();
    let found: Vec<String> = a
        .counts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{}={n}", k.as_str()))
        .collect();
    if found.is_empty() {
        out.push_str(&format!("no orphan ({} node(s) audited)\n", a.nodes.len()));
    } else {
        out.push_str(&format!(
            "{} node(s) audited: {}\n",
            a.nodes.len(),
            found.join(" ")
        ));
    }
    for n in &a.nodes {
        out.push_str(&format!("\nnode {} (audited {})\n", n.node, n.at));
        for r in &n.repaired {
            out.push_str(&format!("  repaired: removed {r}\n"));
        }
        for f in &n.findings {
            finding(&mut out, f);
        }
        if n.omitted > 0 {
            out.push_str(&format!(
                "  … and {} more (the node's annotation lists the first {})\n",
                n.omitted,
                n.findings.len()
            ));
        }
    }
    if !a.cluster.is_empty() {
        out.push_str("\ncluster\n");
        for f in &a.cluster {
            finding(&mut out, f);
        }
    }
    if !a.unaudited.is_empty() {
        out.push_str(&format!(
            "\nnot audited yet: {} (`lvms audit --now` asks them)\n",
            a.unaudited.join(", ")
        ));
    }
    out
}

fn finding(out: &mut String, f: &Finding) {
    let what =
        f.lv.as_deref()
            .or(f.logical_volume.as_deref())
            .or(f.persistent_volume.as_deref())
            .unwrap_or("-");
    out.push_str(&format!("  {:<13} {what}\n", f.kind.as_str()));
    out.push_str(&format!("    {}\n", f.detail));
    for line in &f.journal {
        out.push_str(&format!("    journal {line}\n"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_report_counts_and_explains_each_finding() {
        let f = Finding {
            kind: FindingKind::LeakedLv,
            node: "n1".into(),
            device_class: Some("vg1".into()),
            volume_group: Some("vg1".into()),
            lv: Some("u-1".into()),
            logical_volume: Some("pvc-1".into()),
            persistent_volume: None,
            size_bytes: Some(1),
            detail: "LV vg1/u-1 was made by lvms".into(),
            journal: vec!["#7 lvcreate ok at 2026-11-29T00:00:00Z".into()],
            repairable: true,
        };
        let node = NodeAudit::new("n1", "2026-11-29T00:00:00Z".into(), vec![f], vec![]);
        let mut counts = node.counts.clone();
        *counts.entry(FindingKind::StalePv).or_default() += 0;
        let a = ClusterAudit {
            counts,
            nodes: vec![node],
            cluster: vec![],
            unaudited: vec!["n2".into()],
        };
        let text = render(&a);
        assert!(
            text.starts_with("1 node(s) audited: leaked-lv=1\n"),
            "{text}"
        );
        assert!(text.contains("  leaked-lv     u-1\n"), "{text}");
        assert!(text.contains("    journal #7 lvcreate ok"), "{text}");
        assert!(text.contains("not audited yet: n2"), "{text}");
    }
}
