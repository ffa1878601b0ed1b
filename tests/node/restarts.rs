//! What restarts under a running workload: the vg-manager container killed by containerd while
//! it provisions, and the whole node power-cycled with its disks.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};

use crate::ctx::{APPS, Ctx, LVMS_NS};
use crate::workloads::{pod, pvc};

/// Kills every running vg-manager container through containerd (the node's `ctr`), as the OOM
/// killer or a crash would: kubelet sees the container die and restarts it. (A container listed
/// may be gone by the time it is looked at: kubelet removes exited ones.)
const KILL_VG_MANAGER: &str = r#"n=0
for c in $(ctr -n k8s.io containers ls -q); do
  ctr -n k8s.io containers info "$c" 2>/dev/null | grep -q '"io.kubernetes.container.name": "vg-manager"' || continue
  ctr -n k8s.io tasks kill -s SIGKILL "$c" 2>/dev/null && n=$((n+1))
done
echo "$n""#;

/// The thin volumes of the node's volume groups (not the pools), one name per line.
const THIN_LVS: &str = "lvm lvs --noheadings -o lv_name --select 'segtype=thin' | tr -d ' '";

async fn vg_manager_restarts(client: kube::Client) -> Option<i32> {
    let pods = Api::<Pod>::namespaced(client, LVMS_NS)
        .list(&ListParams::default().labels("app.kubernetes.io/name=vg-manager"))
        .await
        .ok()?;
    let p = pods.items.into_iter().next()?;
    let statuses = p.status?.container_statuses?;
    statuses
        .iter()
        .find(|s| s.name == "vg-manager")
        .map(|s| s.restart_count)
}

/// TopoLVM's LogicalVolumes (cluster-scoped).
pub fn logical_volumes(client: kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("topolvm.io", "v1", "LogicalVolume"));
    Api::all_with(client, &ar)
}

/// The `status.volumeID`s of every LogicalVolume (TopoLVM's API: one per provisioned volume).
async fn volume_ids(client: kube::Client) -> BTreeSet<String> {
    logical_volumes(client)
        .list(&ListParams::default())
        .await
        .expect("LogicalVolumes")
        .items
        .iter()
        .filter_map(|lv| lv.data["status"]["volumeID"].as_str().map(str::to_string))
        .collect()
}

pub async fn the_vg_manager_container_killed_mid_provisioning_loses_nothing(c: &mut Ctx) {
    let before = c
        .until(
            "the vg-manager Pod",
            Duration::from_secs(60),
            vg_manager_restarts,
        )
        .await;
    let existing = volume_ids(c.client.clone()).await.len();
    for i in 0..3 {
        let claim = format!("kill-{i}");
        c.apply_json(pvc(&claim, "lvms-vg1", 256, false)).await;
        c.start_pod(pod(
            &claim,
            &claim,
            false,
            "echo ok >/data/ok; cat /data/ok",
        ))
        .await;
    }
    // Once the controller has asked for a volume, the node is at work: kill it then.
    c.until(
        "a LogicalVolume for the new claims",
        Duration::from_secs(300),
        |cl| async move {
            let n = logical_volumes(cl)
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .len();
            (n > existing).then_some(())
        },
    )
    .await;
    let killed = c.on_node("kill-vg-manager", KILL_VG_MANAGER).await;
    assert_eq!(killed.trim(), "1", "containers killed: {killed}");
    let after = c
        .until(
            "kubelet to restart vg-manager",
            Duration::from_secs(300),
            |cl| async move { vg_manager_restarts(cl).await.filter(|n| *n > before) },
        )
        .await;
    assert_eq!(after, before + 1, "one kill, one restart");
    for i in 0..3 {
        let name = format!("kill-{i}");
        let (phase, out) = c.pod_end(&name).await;
        assert_eq!(
            (phase.as_str(), out.trim()),
            ("Succeeded", "ok"),
            "pod {name}"
        );
        c.delete_pod(&name).await;
    }
    // Nothing lost, nothing made twice: the node's thin volumes are exactly the LogicalVolumes.
    let lvs: BTreeSet<String> = c
        .on_node("thin-lvs", THIN_LVS)
        .await
        .lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect();
    let ids = volume_ids(c.client.clone()).await;
    assert_eq!(lvs, ids, "the node's thin LVs and the LogicalVolumes");
}

pub async fn a_rebooted_node_mounts_the_pods_volume_again_with_its_data(c: &mut Ctx) {
    let restarts = |cl: kube::Client| async move {
        let p = Api::<Pod>::namespaced(cl, APPS).get("holder").await.ok()?;
        let s = p.status?;
        let ready = s
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let n = s.container_statuses?.first()?.restart_count;
        ready.then_some(n)
    };
    let before = c
        .until("the holder Pod Ready", Duration::from_secs(300), restarts)
        .await;
    let ready = c
        .node
        .reboot_and_wait(&c.client, Duration::from_secs(900))
        .await;
    c.figures
        .push(("reboot → Node Ready (new boot)".into(), ready.as_secs_f64()));
    let after = c
        .until(
            "the holder Pod Ready again, restarted",
            super::ctx::SLOW,
            |cl| async move { restarts(cl).await.filter(|n| *n > before) },
        )
        .await;
    assert!(after > before);
    let active = c
        .on_node(
            "lvs-active",
            "lvm lvs --noheadings -o lv_name,lv_active --select 'segtype=thin' | awk '{print $2}' | sort | uniq -c",
        )
        .await;
    assert!(
        !active.contains("inactive") && active.contains("active"),
        "every thin LV active after the reboot: {active}"
    );
    let out = c
        .run_pod(pod(
            "read-after-reboot",
            "data-ext4",
            false,
            "cat /data/hello; stat -c %s /data/more; awk '$2 == \"/data\" {print $3}' /proc/mounts",
        ))
        .await;
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines
            .first()
            .is_some_and(|l| l.starts_with("hello from write-")),
        "{out}"
    );
    assert_eq!(
        lines.get(1).copied(),
        Some((64u64 << 20).to_string().as_str()),
        "{out}"
    );
    assert_eq!(lines.get(2).copied(), Some("ext4"), "{out}");
}
