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
        // The 8 MiB blob and the 64 MiB file (kubelet samples each minute).
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
