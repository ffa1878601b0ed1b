//! A node that dies without a graceful delete (topolvm#868, docs/dead-nodes.md), on the real
//! node: one claim mounted by a running Pod, one written and idle. The node loses power; the
//! admin taints it `node.kubernetes.io/out-of-service` as Kubernetes's non-graceful shutdown
//! asks; kube-controller-manager's taint eviction and Pod GC take its Pods. The operator and
//! csi-provisioner go on where a surviving node would run them: here on the host, as
//! processes, standing by on the chart's leases (this tier has one node, and it is the dead
//! one). They write the node off: the record and one Warning on the Node, the claims, PVs and
//! LogicalVolumes gone, `lvms audit` listing each volume as written off, the vg-manager
//! DaemonSet untouched by the standby. Then the node boots again from its disks and the taint
//! is removed: the record goes with one Warning, the node's own vg-manager (its journal on the
//! node's disk) audits both LVs as leaked, and with `helm upgrade --set audit.repair=leaked`
//! it removes them from the real device-mapper. A claim of the same name binds again, empty.

use std::collections::BTreeSet;
use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod, Taint};
use kube::Api;
use kube::api::{ListParams, PostParams};
use lvms_testkit::dev::csi_peers::Sidecar;
use lvms_testkit::dev::operator::{OperatorOptions, OperatorProcess};
use serde_json::Value;

use crate::ctx::{APPS, Ctx, LVMS_NS, NODE, SLOW};
use crate::install::{helm, ready_pods, vg_manager_daemonset};
use crate::restarts::logical_volumes;
use crate::workloads::{pod, pvc};

const OUT_OF_SERVICE: &str = "node.kubernetes.io/out-of-service";
const RECORD: &str = "lvms.topolvm.io/written-off";
const CLAIMS: [&str; 2] = ["dead-data", "dead-idle"];

/// The operator and csi-provisioner on the host: where a surviving node would run them.
struct Standby {
    op: OperatorProcess,
    provisioner: Sidecar,
}

impl Standby {
    fn start(c: &Ctx) -> Standby {
        let dir = c.dir.join("standby");
        std::fs::create_dir_all(&dir).expect("standby dir");
        let op = OperatorProcess::start(&OperatorOptions {
            bin: lvms_testkit::process::lvms_bin(),
            kubeconfig: c.cp.kubeconfig.clone(),
            namespace: LVMS_NS.into(),
            journal_dir: dir.join("journal"),
            log: dir.join("operator.log"),
            env: vec![],
            // The chart's operator flags (leader election on; the image the chart set).
            args: vec!["--leader-elect".into()],
        })
        .expect("starting the standby operator");
        let provisioner = Sidecar::start(
            "csi-provisioner",
            &[
                format!("--csi-address={}", op.csi_socket.display()),
                "--feature-gates=Topology=true".into(),
                "--extra-create-metadata".into(),
                "--leader-election".into(),
                format!("--leader-election-namespace={LVMS_NS}"),
                "--timeout=2m".into(),
            ],
            &[],
            &c.cp.kubeconfig,
            &dir.join("csi-provisioner.log"),
        )
        .unwrap_or_else(|e| panic!("starting the standby csi-provisioner: {e}"));
        Standby { op, provisioner }
    }

    fn story(&self) -> String {
        format!(
            "--- standby operator\n{}\n--- standby csi-provisioner\n{}",
            lvms_testkit::process::tail(&self.op.log_text(), 30),
            lvms_testkit::process::tail(&self.provisioner.log_text(), 15)
        )
    }
}

/// Polls `check` every 2 s while the node may be off (`Ctx::until` fails when it is).
async fn wait<T, F, Fut>(what: &str, within: Duration, story: impl Fn() -> String, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    lvms_testkit::eventually(within, check)
        .await
        .unwrap_or_else(|| {
            panic!(
                "{what}: not after {:.0}s\n{}",
                started.elapsed().as_secs_f64(),
                story()
            )
        })
}

/// The LogicalVolumes placed on the node, by name.
async fn volumes_on_node(client: &kube::Client) -> Option<BTreeSet<String>> {
    let l = logical_volumes(client.clone())
        .list(&ListParams::default())
        .await
        .ok()?;
    Some(
        l.items
            .into_iter()
            .filter(|v| v.data["spec"]["nodeName"].as_str() == Some(NODE))
            .filter_map(|v| v.metadata.name)
            .collect(),
    )
}

/// Edits the Node's taints as an admin does (`kubectl taint`): read, change, write back,
/// again on a conflict with the node lifecycle controller's own taint edits.
async fn edit_taints(client: &kube::Client, edit: impl Fn(&mut Vec<Taint>)) {
    let api: Api<Node> = Api::all(client.clone());
    for _ in 0..30 {
        let mut node = api.get(NODE).await.expect("the Node");
        let spec = node.spec.get_or_insert_with(Default::default);
        let mut taints = spec.taints.take().unwrap_or_default();
        edit(&mut taints);
        spec.taints = (!taints.is_empty()).then_some(taints);
        match api.replace(NODE, &PostParams::default(), &node).await {
            Ok(_) => return,
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => panic!("editing the Node's taints: {e}"),
        }
    }
    panic!("editing the Node's taints: 30 conflicts in a row");
}

fn ready(node: &Node) -> Option<String> {
    let conds = node.status.as_ref()?.conditions.as_ref()?;
    conds
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

/// `lvms audit [--now] -o json` of the chart's namespace, as a user runs it.
fn audit(c: &Ctx, now: bool) -> Value {
    let mut cmd = std::process::Command::new(lvms_testkit::process::lvms_bin());
    cmd.args(["audit", "-o", "json", "--timeout", "300s", "-n", LVMS_NS]);
    if now {
        cmd.arg("--now");
    }
    let out = cmd
        .env("KUBECONFIG", &c.cp.kubeconfig)
        .output()
        .expect("lvms audit");
    assert!(
        out.status.success(),
        "lvms audit: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("audit JSON")
}

/// (kind, LV) of the audit's findings about `lvs`: the node's and the cluster's.
fn findings(a: &Value, lvs: &BTreeSet<String>) -> Vec<(String, String)> {
    let nodes = a["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|n| n["findings"].as_array().cloned().unwrap_or_default());
    let cluster = a["cluster"].as_array().cloned().unwrap_or_default();
    let mut found: Vec<(String, String)> = nodes
        .chain(cluster)
        .filter_map(|f| {
            let lv = f["lv"].as_str().or(f["logicalVolume"].as_str())?;
            lvs.contains(lv).then(|| {
                (
                    f["kind"].as_str().unwrap_or_default().to_string(),
                    lv.into(),
                )
            })
        })
        .collect();
    found.sort();
    found
}

fn each(kind: &str, lvs: &BTreeSet<String>) -> Vec<(String, String)> {
    lvs.iter()
        .map(|lv| (kind.to_string(), lv.clone()))
        .collect()
}

async fn daemonset_generation(client: &kube::Client) -> Option<i64> {
    vg_manager_daemonset(client.clone())
        .await?
        .metadata
        .generation
}

pub async fn a_dead_node_is_written_off_and_what_it_left_is_repaired_when_it_returns(c: &mut Ctx) {
    let client = c.client.clone();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), APPS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), APPS);

    // One claim mounted by a Pod that keeps running, one written by a Pod that ended.
    c.apply_json(pvc("dead-data", "lvms-vg1", 256, false)).await;
    c.start_pod(pod(
        "dead-app",
        "dead-data",
        false,
        "echo before >/data/before; sync; while :; do sleep 3600; done",
    ))
    .await;
    c.apply_json(pvc("dead-idle", "lvms-vg1", 256, false)).await;
    c.run_pod(pod(
        "dead-idle-writer",
        "dead-idle",
        false,
        "echo idle >/data/idle; sync",
    ))
    .await;
    c.pod_running("dead-app").await;
    let mut lvs = BTreeSet::new();
    let mut pv_names = BTreeSet::new();
    for claim in CLAIMS {
        let pv = c.bound_pv(claim).await;
        let handle = pv
            .spec
            .as_ref()
            .and_then(|s| s.csi.as_ref())
            .map(|csi| csi.volume_handle.clone())
            .expect("a CSI volume");
        lvs.insert(handle);
        pv_names.insert(pv.metadata.name.clone().expect("a PV name"));
    }
    let node_uid = Api::<Node>::all(client.clone())
        .get(NODE)
        .await
        .expect("the Node")
        .metadata
        .uid
        .expect("a uid");
    let generation = daemonset_generation(&client).await;

    let standby = Standby::start(c);
    let story = || standby.story();

    // The node loses power.
    c.node.power_off();
    let died = Instant::now();
    wait(
        "the node lifecycle controller to mark the Node not Ready",
        Duration::from_secs(300),
        story,
        || async {
            let n = Api::<Node>::all(client.clone()).get(NODE).await.ok()?;
            ready(&n).filter(|s| s != "True")
        },
    )
    .await;
    c.figures.push((
        "power off → Node not Ready".into(),
        died.elapsed().as_secs_f64(),
    ));
    edit_taints(&client, |t| {
        t.push(Taint {
            key: OUT_OF_SERVICE.into(),
            value: Some("nodeshutdown".into()),
            effect: "NoExecute".into(),
            time_added: None,
        })
    })
    .await;
    let tainted = Instant::now();

    // Written off: the Pod evicted and force-deleted by kube-controller-manager, the claims
    // deleted by the operator, their PVs by csi-provisioner, the LogicalVolumes released.
    wait(
        "the dead node's claims, PVs, LogicalVolumes and Pod gone",
        SLOW,
        story,
        || async {
            let claims_left = claims.list(&ListParams::default()).await.ok()?.items;
            let pod_left = pods.get_opt("dead-app").await.ok()?;
            let pvs = Api::<PersistentVolume>::all(client.clone())
                .list(&ListParams::default())
                .await
                .ok()?
                .items;
            let on_node = volumes_on_node(&client).await?;
            (!claims_left
                .iter()
                .any(|p| CLAIMS.contains(&p.metadata.name.as_deref().unwrap_or_default()))
                && pod_left.is_none()
                && !pvs
                    .iter()
                    .any(|p| pv_names.contains(p.metadata.name.as_deref().unwrap_or_default()))
                && on_node.is_empty())
            .then_some(())
        },
    )
    .await;
    c.figures.push((
        "out-of-service taint → claims, PVs, LogicalVolumes gone".into(),
        tainted.elapsed().as_secs_f64(),
    ));
    let node = Api::<Node>::all(client.clone())
        .get(NODE)
        .await
        .expect("the Node");
    let record: Value = serde_json::from_str(
        node.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(RECORD))
            .unwrap_or_else(|| panic!("no {RECORD} record on the Node\n{}", story())),
    )
    .expect("the record is JSON");
    assert_eq!(record["count"], 2, "{record}");
    assert_eq!(record["trigger"], "out-of-service", "{record}");
    let warned = wait("one VolumesWrittenOff Warning", SLOW, story, || async {
        let e = lvms_testkit::events::about_node(&client, &node_uid, "VolumesWrittenOff").await;
        (!e.is_empty()).then_some(e)
    })
    .await;
    assert_eq!(warned.len(), 1, "{warned:?}");
    let note = warned[0].note.clone().unwrap_or_default();
    for lv in &lvs {
        assert!(note.contains(lv.as_str()), "{lv} not in: {note}");
    }
    let a = audit(c, false);
    assert_eq!(findings(&a, &lvs), each("written-off", &lvs), "{a:#}");
    // The standby wanted the same vg-manager DaemonSet as the chart's operator.
    assert_eq!(daemonset_generation(&client).await, generation);

    // The node boots again from its disks; the admin removes the taint.
    let back = c
        .node
        .reboot_and_wait(&client, Duration::from_secs(900))
        .await;
    c.figures.push((
        "dead node powered on → Node Ready".into(),
        back.as_secs_f64(),
    ));
    edit_taints(&client, |t| t.retain(|t| t.key != OUT_OF_SERVICE)).await;
    wait("the written-off record gone", SLOW, story, || async {
        let n = Api::<Node>::all(client.clone()).get(NODE).await.ok()?;
        let a = n.metadata.annotations.unwrap_or_default();
        (!a.contains_key(RECORD)).then_some(())
    })
    .await;
    let back_warned = wait(
        "one WrittenOffVolumesOnDisk Warning",
        SLOW,
        story,
        || async {
            let e = lvms_testkit::events::about_node(&client, &node_uid, "WrittenOffVolumesOnDisk")
                .await;
            (!e.is_empty()).then_some(e)
        },
    )
    .await;
    assert_eq!(back_warned.len(), 1, "{back_warned:?}");
    wait(
        "the node's vg-manager Pod Ready again",
        SLOW,
        story,
        || async {
            ready_pods(client.clone(), LVMS_NS, "app.kubernetes.io/name=vg-manager")
                .await
                .into_iter()
                .next()
        },
    )
    .await;
    // The node's own audit (its journal holds both lvcreates; nothing names the LVs now).
    let a = audit(c, true);
    assert_eq!(findings(&a, &lvs), each("leaked-lv", &lvs), "{a:#}");
    let on_disk = lvs_in_vg1(c, "dead-lvs").await;
    for lv in &lvs {
        assert!(
            on_disk.lines().any(|l| l == lv),
            "{lv} left the disk: {on_disk}"
        );
    }

    // The operator Pod takes over again; the repair policy removes what the journal proves.
    drop(standby);
    let before = daemonset_generation(&client).await;
    helm(c, "upgrade", &[("audit.repair", "leaked")]);
    rolled_out(c, true, before).await;
    let deadline = Instant::now() + SLOW;
    loop {
        let a = audit(c, true);
        if findings(&a, &lvs).is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "leaked LVs stayed: {a:#}");
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    let on_disk = lvs_in_vg1(c, "dead-lvs-repaired").await;
    for lv in &lvs {
        assert!(
            !on_disk.lines().any(|l| l == lv),
            "{lv} still on disk: {on_disk}"
        );
    }

    // The workload comes back: a claim of the same name binds again, to a new, empty volume.
    c.apply_json(pvc("dead-data", "lvms-vg1", 256, false)).await;
    let out = c
        .run_pod(pod(
            "dead-app-again",
            "dead-data",
            false,
            "test ! -e /data/before && echo empty",
        ))
        .await;
    assert_eq!(out.trim(), "empty");
    let pv = c.bound_pv("dead-data").await;
    let handle = pv.spec.and_then(|s| s.csi).map(|c| c.volume_handle);
    assert!(
        handle.as_ref().is_some_and(|h| !lvs.contains(h)),
        "{handle:?} is a written-off volume"
    );

    // The next scenarios run on the chart's defaults again.
    let _ = claims
        .delete("dead-data", &kube::api::DeleteParams::default())
        .await;
    let before = daemonset_generation(&client).await;
    helm(c, "upgrade", &[("audit.repair", "none")]);
    rolled_out(c, false, before).await;
}

/// The LV names in the node's `vg1`, as lvm2 reports them (a probe Pod named `tag`).
async fn lvs_in_vg1(c: &mut Ctx, tag: &str) -> String {
    c.on_node(tag, "lvm lvs --noheadings -o lv_name vg1 | tr -d ' '")
        .await
}

/// Waits until the operator has changed the vg-manager DaemonSet (past generation `before`)
/// and its new Pod is Ready, repairing leaked LVs or not.
async fn rolled_out(c: &mut Ctx, repairs: bool, before: Option<i64>) {
    c.until(
        &format!("vg-manager rolled out, repairing leaked LVs: {repairs}"),
        SLOW,
        |cl| async move {
            let ds = vg_manager_daemonset(cl).await?;
            let repairing = ds
                .spec
                .as_ref()?
                .template
                .spec
                .as_ref()?
                .containers
                .iter()
                .flat_map(|c| c.command.iter().flatten().chain(c.args.iter().flatten()))
                .any(|a| a.contains("--audit-repair=leaked"));
            let s = ds.status?;
            let rolled = ds.metadata.generation > before
                && s.observed_generation == ds.metadata.generation
                && s.updated_number_scheduled == Some(1)
                && s.number_ready == 1;
            (repairing == repairs && rolled).then_some(())
        },
    )
    .await;
}
