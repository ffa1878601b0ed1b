//! kubelet's own view of a mounted claim: `kubelet_volume_stats_*` from its metrics.

use std::time::Duration;

use crate::ctx::{APPS, Ctx};
use crate::workloads::pod;

/// The value of `metric` for claim `apps/claim` in kubelet's metrics text.
fn sample(metrics: &str, metric: &str, claim: &str) -> Option<f64> {
    let labels = [
        format!("namespace=\"{APPS}\""),
        format!("persistentvolumeclaim=\"{claim}\""),
    ];
    metrics.lines().find_map(|l| {
        let (name, rest) = l.split_once('{')?;
        if name != metric || !labels.iter().all(|x| rest.contains(x.as_str())) {
            return None;
        }
        rest.rsplit_once(' ')?.1.trim().parse().ok()
    })
}

pub async fn kubelet_volume_stats_match_what_the_pod_wrote(c: &mut Ctx) {
    // A Pod keeps `data-ext4` mounted (kubelet reports stats of mounted volumes only), after
    // writing 64 MiB more.
    let hold = "dd if=/dev/zero of=/data/more bs=1M count=64 2>/dev/null; sync; sleep 100000";
    let mut p = pod("holder", "data-ext4", false, hold);
    p["spec"]["restartPolicy"] = "Always".into();
    let name = c.start_pod(p).await;
    c.pod_running(&name).await;
    let started = std::time::Instant::now();
    let metrics = loop {
        // The 8 MiB blob and the 64 MiB file (kubelet samples every 20 s: build-node.sh).
        let m = c.node.kubelet_metrics();
        if let Ok(m) = m {
            if sample(&m, "kubelet_volume_stats_used_bytes", "data-ext4")
                .is_some_and(|used| used >= (72u64 << 20) as f64)
            {
                break m;
            }
            assert!(
                started.elapsed() < Duration::from_secs(300),
                "kubelet_volume_stats_used_bytes of data-ext4 never reached 72 MiB: {:?}",
                m.lines()
                    .filter(|l| l.contains("data-ext4"))
                    .collect::<Vec<_>>()
            );
        } else {
            assert!(
                started.elapsed() < Duration::from_secs(300),
                "kubelet metrics: {m:?}"
            );
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    };
    let capacity = sample(&metrics, "kubelet_volume_stats_capacity_bytes", "data-ext4")
        .expect("capacity_bytes");
    let available = sample(
        &metrics,
        "kubelet_volume_stats_available_bytes",
        "data-ext4",
    )
    .expect("available_bytes");
    let inodes =
        sample(&metrics, "kubelet_volume_stats_inodes_used", "data-ext4").expect("inodes_used");
    // ext4 on 1 GiB: its own metadata takes some of it.
    assert!(
        capacity > (900u64 << 20) as f64 && capacity <= (1u64 << 30) as f64,
        "capacity {capacity}"
    );
    assert!(
        available < capacity - (72u64 << 20) as f64,
        "available {available}"
    );
    assert!(inodes >= 3.0, "inodes used {inodes}");
    // The holder stays: the container-kill and reboot scenarios check its volume again.
}

/// The holder's volume made abnormal by hand while mounted (its LV renamed: the Pod's I/O goes
/// on through the gate, but lvm2 no longer has the volume's LV): NodeGetVolumeStats reports the
/// condition, and kubelet (CSIVolumeHealth) shows it where it shows volume health, a Warning
/// `VolumeConditionAbnormal` on the Pod and `kubelet_volume_stats_health_status_abnormal`.
/// Renamed back, the volume is healthy again (the reboot scenario reads its data after).
pub async fn an_abnormal_volume_shows_where_kubelet_shows_it(c: &mut Ctx) {
    let pv = c.bound_pv("data-ext4").await;
    let handle = pv
        .spec
        .and_then(|s| s.csi)
        .map(|csi| csi.volume_handle)
        .expect("a CSI volume");
    let rename = |from: &str, to: &str| {
        format!(
            "vg=$(lvm lvs --noheadings -o vg_name -S lv_name={from} | tr -d ' '); \
             [ -n \"$vg\" ] && lvm lvrename \"$vg\" {from} {to} >/dev/null && echo renamed"
        )
    };
    let away = format!("{handle}-away");
    let out = c.on_node("lv-away", &rename(&handle, &away)).await;
    assert_eq!(out.trim(), "renamed", "the LV renamed away: {out}");
    abnormal_becomes(c, 1.0, "kubelet never reported data-ext4 abnormal").await;
    let events = kube::Api::<k8s_openapi::api::core::v1::Event>::namespaced(c.client.clone(), APPS)
        .list(&kube::api::ListParams::default().fields("involvedObject.name=holder"))
        .await
        .expect("the holder's Events");
    let warning = events
        .items
        .iter()
        .find(|e| e.reason.as_deref() == Some("VolumeConditionAbnormal"))
        .unwrap_or_else(|| {
            panic!(
                "no VolumeConditionAbnormal on the holder: {:?}",
                events
                    .items
                    .iter()
                    .map(|e| (&e.reason, &e.message))
                    .collect::<Vec<_>>()
            )
        });
    let message = warning.message.clone().unwrap_or_default();
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert!(
        message.contains(&handle) && message.contains("not found"),
        "the Event names the volume and what is wrong: {message}"
    );
    let out = c.on_node("lv-back", &rename(&away, &handle)).await;
    assert_eq!(out.trim(), "renamed", "the LV renamed back: {out}");
    abnormal_becomes(c, 0.0, "data-ext4 never healthy again").await;
}

/// Waits (4 min at most: kubelet samples every 20 s) until kubelet's
/// `kubelet_volume_stats_health_status_abnormal` for `apps/data-ext4` is `want`.
async fn abnormal_becomes(c: &Ctx, want: f64, failure: &str) {
    let abnormal = || {
        c.node.kubelet_metrics().ok().and_then(|m| {
            sample(
                &m,
                "kubelet_volume_stats_health_status_abnormal",
                "data-ext4",
            )
        })
    };
    let started = std::time::Instant::now();
    while abnormal() != Some(want) {
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "{failure}: {:?}",
            abnormal()
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}
