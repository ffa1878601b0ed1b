//! `lvms explain` and `lvms must-gather` on a cluster with a broken node: two nodes on real
//! lvm2, one loses its only disk (its loop device shrinks to 0 bytes, as a drive that lost its
//! medium), on a real kube-apiserver. The tests assert the facts a user needs, not the layout.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use lvms::api::{LVMStateType, VGStatusType};
use serde_json::{Value, json};

use lvms_testkit::disks::{Disk, require_prerequisites};
use lvms_testkit::fixtures::{host_selector, lvm_cluster};
use lvms_testkit::kubelet::{create_node, register_csi_node};
use lvms_testkit::{Scenario, eventually};

const T: Duration = Duration::from_secs(60);
const SECRET_VALUE: &str = "do-not-gather-7f3a9c";

/// What vg-manager says of a class whose only disk vanished, by what the node shows: the path
/// is there but unusable or gone (DevicePathCheckFailed), the VG is gone and nothing can
/// recreate it (NoAvailableDevicesForVG), or the device is still listed and lvm2 refuses to
/// build the VG on it again (VGCreateOrExtendFailed: what a disk shrunk to 0 bytes gets).
const LOST: [&str; 3] = [
    "DevicePathCheckFailed",
    "NoAvailableDevicesForVG",
    "VGCreateOrExtendFailed",
];

/// A message about the lost disk names the device, or the volume group that went with it.
fn lost(message: &str, device: &str, vg: &str) -> bool {
    message.contains(device) || message.contains(&format!("volume group {vg} does not exist"))
}

/// `lvms ARGS` against the test control plane: (success, stdout, stderr).
fn lvms(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lvms"))
        .args(args)
        .env("KUBECONFIG", &lvms_testkit::env::env().cp.kubeconfig)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env("LVMS_JAEGER_URL", "http://jaeger.example:16686")
        .output()
        .expect("running lvms");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn explain_json(args: &[&str]) -> Value {
    let mut all = vec!["explain"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    let (ok, out, err) = lvms(&all);
    assert!(ok, "lvms {all:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("explain JSON: {e}\n{out}"))
}

/// The holdback of `node` in `class`, from `lvms explain -o json`.
fn holdback<'a>(e: &'a Value, node: &str, class: &str) -> &'a Value {
    e["held_back"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|h| h["node"] == node && h["class"] == class)
        .unwrap_or_else(|| panic!("no holdback for {node}/{class}: {e:#}"))
}

fn files_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_names_the_broken_node_and_must_gather_bundles_it() {
    require_prerequisites();
    let s = Scenario::new("postmortem").await;
    let ns = s.ns.name.clone();
    let pid = std::process::id();
    let (vga, vgb) = (format!("pa{pid}"), format!("pb{pid}"));
    let disks = s.dir.join("disks");
    let a1 = Disk::new(&disks, "pa1", 100);
    let b1 = Disk::new(&disks, "pb1", 100);
    for n in ["node-a", "node-b"] {
        create_node(&s.client, n, false).await;
        register_csi_node(&s.client, n, true).await;
    }
    let secrets: Api<Secret> = Api::namespaced(s.client.clone(), &ns);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "not-for-bundles"},
        "stringData": {"password": SECRET_VALUE}
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let _op = s.operator(&[], &[]);
    let _va = s.vg_manager("node-a", &[]);
    let _vb = s.vg_manager("node-b", &[]);
    s.create_cluster(lvm_cluster(
        "my-lvmcluster",
        json!([
            {"name": vga, "default": true, "nodeSelector": host_selector("node-a"),
             "deviceSelector": {"paths": [a1.link]}},
            {"name": vgb, "nodeSelector": host_selector("node-b"),
             "deviceSelector": {"paths": [b1.link]}}
        ]),
    ))
    .await;
    s.wait_state("my-lvmcluster", LVMStateType::Ready, T).await;

    // A healthy cluster: nothing held back.
    let subject = format!("lvmcluster/{ns}/my-lvmcluster");
    let op_journal = s.operator_journal().display().to_string();
    let b_journal = format!("node-b={}", s.vg_manager_journal("node-b").display());
    let healthy = explain_json(&[&subject, "--journal", &op_journal]);
    assert_eq!(healthy["held_back"], json!([]), "{healthy:#}");

    // node-b's only disk vanishes.
    b1.vanish();
    let failed = eventually(T, || async {
        s.vg_entry("node-b", &vgb)
            .await
            .filter(|e| e.status == Some(VGStatusType::Failed))
    })
    .await;
    assert!(failed.is_some(), "node-b never reported its class Failed");
    eventually(T, || async {
        let c = s.cluster("my-lvmcluster").await?;
        let conds = c.status?.conditions;
        conds
            .iter()
            .any(|c| c.type_ == "VolumeGroupsReady" && c.status == "False")
            .then_some(())
    })
    .await
    .expect("VolumeGroupsReady never went False");
    // `ready` follows the state down (a merge patch used to leave `ready: true` behind).
    let c = s.cluster("my-lvmcluster").await.unwrap();
    let st = c.status.unwrap();
    assert!(!st.ready, "ready with state {:?}", st.state);

    // With the node's journal: the failing step is the node's own record.
    let started = Instant::now();
    let e = explain_json(&[
        &subject,
        "--journal",
        &op_journal,
        "--node-journal",
        &b_journal,
    ]);
    let took = started.elapsed();
    let h = holdback(&e, "node-b", &vgb);
    assert_eq!(h["status"], "Failed", "{h:#}");
    assert!(
        lost(h["reason"].as_str().unwrap(), &b1.loop_dev, &vgb),
        "{h:#}"
    );
    let step = &h["step"];
    assert_eq!(step["source"], "node/node-b", "{h:#}");
    assert_eq!(
        step["step"],
        format!("vg/{vgb} pass on LVMVolumeGroup/{ns}/{vgb}"),
        "{h:#}"
    );
    let error = step["error"].as_str().unwrap();
    assert!(
        LOST.iter().any(|r| error.starts_with(&format!("{r}: ")))
            && lost(error, &b1.loop_dev, &vgb),
        "{error}"
    );
    assert!(
        step["trace_id"].as_str().is_some_and(|t| t.len() == 32),
        "{h:#}"
    );
    // node-a is not held back, and the condition is reported as it is.
    assert!(
        e["held_back"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["node"] != "node-a"),
        "{e:#}"
    );
    assert!(
        e["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "VolumeGroupsReady" && c["status"] == "False"),
        "{e:#}"
    );
    let trace = step["trace_id"].as_str().unwrap();
    assert!(
        e["traces"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["trace_id"] == trace
                && t["url"] == format!("http://jaeger.example:16686/trace/{trace}")),
        "the failing step's trace is linked: {e:#}"
    );
    assert!(took < Duration::from_secs(5), "explain took {took:?}");

    // Without it: the operator journal and the Events still name node, class and step.
    let e = explain_json(&[&subject, "--journal", &op_journal]);
    let h = holdback(&e, "node-b", &vgb);
    assert_eq!(h["step"]["source"], "event", "{h:#}");
    assert!(LOST.iter().any(|r| h["step"]["step"] == *r), "{h:#}");
    assert!(
        lost(h["step"]["error"].as_str().unwrap(), &b1.loop_dev, &vgb),
        "{h:#}"
    );

    // The text answer has the same facts within one screen (40 lines).
    let (ok, text, err) = lvms(&[
        "explain",
        &subject,
        "--journal",
        &op_journal,
        "--node-journal",
        &b_journal,
    ]);
    assert!(ok, "{err}");
    println!("{text}");
    let screen: String = text.lines().take(40).collect::<Vec<_>>().join("\n");
    for fact in ["node node-b", &vgb, "VolumeGroupsReady=False"] {
        assert!(
            screen.contains(fact),
            "{fact:?} not in the first screen:\n{screen}"
        );
    }
    assert!(
        LOST.iter().any(|r| screen.contains(r)),
        "no reason in the first screen:\n{screen}"
    );
    // The node status and the volume group tell the same story from their side.
    let e = explain_json(&[
        &format!("lvmvolumegroupnodestatus/{ns}/node-b"),
        "--node-journal",
        &b_journal,
    ]);
    assert_eq!(
        holdback(&e, "node-b", &vgb)["step"]["source"],
        "node/node-b",
        "{e:#}"
    );
    let e = explain_json(&[
        &format!("lvmvolumegroup/{ns}/{vgb}"),
        "--node-journal",
        &b_journal,
    ]);
    assert_eq!(holdback(&e, "node-b", &vgb)["status"], "Failed", "{e:#}");

    // must-gather: the bundle has the objects, the journals (verifiable), and no Secret.
    let out_dir = s.dir.join("gather");
    let (ok, out, err) = lvms(&[
        "must-gather",
        out_dir.to_str().unwrap(),
        "--namespace",
        &ns,
        "--journal",
        &op_journal,
        "--node-journal",
        &b_journal,
        "--node",
    ]);
    assert!(ok, "must-gather: {err}");
    let tarball = format!("{}.tar.gz", out_dir.display());
    assert_eq!(out.trim(), tarball);
    let unpacked = s.dir.join("unpacked");
    std::fs::create_dir_all(&unpacked).unwrap();
    let tar = Command::new("tar")
        .args(["-xzf", &tarball, "-C"])
        .arg(&unpacked)
        .status()
        .unwrap();
    assert!(tar.success());
    let root = unpacked.join("gather");
    let read = |f: &str| -> Value {
        serde_json::from_slice(&std::fs::read(root.join(f)).unwrap_or_else(|e| panic!("{f}: {e}")))
            .unwrap_or_else(|e| panic!("{f}: {e}"))
    };
    let names = |f: &str| -> Vec<String> {
        read(f)["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect()
    };
    assert!(names("resources/lvmclusters.json").contains(&"my-lvmcluster".to_string()));
    let statuses = names("resources/lvmvolumegroupnodestatuses.json");
    assert!(statuses.contains(&"node-b".to_string()), "{statuses:?}");
    assert!(names("resources/csidrivers.json") == vec!["topolvm.io".to_string()]);
    assert!(names("resources/storageclasses.json").contains(&format!("lvms-{vga}")));
    let events = read("resources/events.json");
    assert!(
        LOST.iter().any(|r| events.to_string().contains(r)),
        "the Warning is in the bundle"
    );
    for label in ["operator", "node-node-b"] {
        let dir = root.join("journals").join(label);
        let (ok, report, err) = lvms(&["journal", "verify", dir.to_str().unwrap()]);
        assert!(ok, "journal verify {label}: {report} {err}");
        assert_eq!(
            read(&format!("journals/{label}.verify.json")),
            serde_json::from_str::<Value>(&report).unwrap()
        );
        let jsonl = std::fs::read_to_string(root.join(format!("journals/{label}.jsonl"))).unwrap();
        assert!(jsonl.lines().count() > 5, "{label}: {jsonl}");
    }
    let node_jsonl = std::fs::read_to_string(root.join("journals/node-node-b.jsonl")).unwrap();
    assert!(LOST.iter().any(|r| node_jsonl.contains(r)));
    assert!(read("node/pvs.json")["report"].is_array());
    let manifest = read("manifest.json");
    assert_eq!(manifest["secrets"], "never read");
    let mut files = Vec::new();
    files_under(&root, &mut files);
    assert!(files.len() > 15, "{files:?}");
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        assert!(
            !bytes
                .windows(SECRET_VALUE.len())
                .any(|w| w == SECRET_VALUE.as_bytes()),
            "{} holds the Secret's value",
            f.display()
        );
        assert!(!f.to_string_lossy().contains("secrets"), "{}", f.display());
    }
}
