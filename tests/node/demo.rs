//! `make demo`: what a user sees on the real node after `helm install` (the `install` scenario
//! before it, `teardown` after): a claim becomes a mounted volume in a Pod that writes to it, a
//! second Pod reads it back, and the cluster is shown as `kubectl` and `lvs` show it. The
//! tier's other scenarios assert the same things more closely; this one is for reading, so
//! `make test` skips it.

use crate::ctx::{APPS, Ctx, LVMS_NS};
use crate::workloads::{pod, pvc};

/// `kubectl` as the admin, its output (or why it failed) under a heading.
fn show(c: &Ctx, heading: &str, args: &[&str]) {
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&c.cp.kubeconfig)
        .args(args)
        .output();
    let text = match out {
        Ok(o) => format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => format!("(kubectl: {e}; apt-get install -y kubernetes-client to see this)\n"),
    };
    println!("\n--- {heading}: kubectl {}\n{text}", args.join(" "));
}

pub async fn a_claim_becomes_a_mounted_volume_shown_as_a_user_sees_it(c: &mut Ctx) {
    c.apply_json(pvc("demo-data", "lvms-vg1", 256, false)).await;
    show(
        c,
        "a claim on lvms-vg1 waits for its first consumer",
        &["get", "pvc", "-n", APPS],
    );
    let wrote = c
        .run_pod(pod(
            "demo-writer",
            "demo-data",
            false,
            "echo 'hello from a Pod on an lvms volume' >/data/hello; df -hP /data | tail -1; awk '$2 == \"/data\" {print $1, $3}' /proc/mounts",
        ))
        .await;
    println!("\n--- the writer Pod said:\n{wrote}");
    let read = c
        .run_pod(pod("demo-reader", "demo-data", false, "cat /data/hello"))
        .await;
    println!("\n--- a second Pod read back: {}", read.trim());
    assert_eq!(read.trim(), "hello from a Pod on an lvms volume");
    show(
        c,
        "lvms runs as Pods",
        &["get", "pods", "-n", LVMS_NS, "-o", "wide"],
    );
    show(c, "the LVMCluster", &["get", "lvmcluster", "-n", LVMS_NS]);
    show(
        c,
        "its volume groups, per node",
        &[
            "get",
            "lvmvolumegroupnodestatus",
            "-n",
            LVMS_NS,
            "-o",
            "custom-columns=NODE:.metadata.name,VG:.spec.nodeStatus[*].name,STATUS:.spec.nodeStatus[*].status,DEVICES:.spec.nodeStatus[*].devices",
        ],
    );
    show(c, "the claim, Bound", &["get", "pvc", "-n", APPS]);
    show(
        c,
        "its PV and TopoLVM's LogicalVolume",
        &["get", "pv,logicalvolumes"],
    );
    show(
        c,
        "the CSI driver kubelet registered",
        &["get", "csinode", "-o", "wide"],
    );
    let lvs = c
        .on_node(
            "demo-lvs",
            "lvm lvs -o lv_name,vg_name,lv_attr,lv_size,pool_lv,data_percent",
        )
        .await;
    println!("\n--- lvm2 on the node (lvs):\n{lvs}");
    assert!(lvs.contains("thin-pool-1"), "{lvs}");
    let _ = kube::Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(
        c.client.clone(),
        APPS,
    )
    .delete("demo-data", &Default::default())
    .await;
    println!(
        "\nThe journals, traces and `lvms explain` of this run: docs/observability.md; the node's \
         logs and disks stay in {} after the run.",
        c.dir.display()
    );
}
