//! The tier's one guest per test group: every scenario submits its guest job first (its
//! namespace, node and disks are named up front), the guest boots once and starts them all,
//! and the host sides then take their turns (scenarios share the control plane's cluster-scoped
//! singletons, such as CSIDriver topolvm.io, so they run one at a time, as every scenario of
//! this repo does) while the guest jobs wait for their LVMVolumeGroups. Every scenario runs
//! even when another fails, and each is reported on its own.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use futures::FutureExt as _;
use lvms_testkit::env;
use lvms_testkit::guest::{
    Group, GroupSpec, Image, Member, UnixRelay, WithInputs, guest_kubeconfig, image,
};
use lvms_testkit::process::lvms_bin;

/// Where the guest dials the test's kube-apiserver.
const API_PORT_IN_GUEST: u16 = 6443;
/// Where the guest dials the relay to a host Unix socket (an operator's CSI controller).
pub const RELAY_PORT_IN_GUEST: u16 = 6444;

/// A scenario's share of the group.
pub struct Ctx {
    pub member: Member,
    pub image: Image,
    /// `10.0.2.100:RELAY_PORT_IN_GUEST` in the guest reaches the socket this points at.
    pub relay: Arc<UnixRelay>,
}

pub type ScenarioFn = fn(Ctx) -> Pin<Box<dyn Future<Output = ()> + Send>>;

/// Runs `scenarios` in one guest booting `LVMS_GUEST_KERNEL`'s kernel; each one's result (the
/// panic message of a failed one).
pub async fn run_group(
    scenarios: &[(&'static str, ScenarioFn)],
) -> Vec<(&'static str, Result<(), String>)> {
    let image = tokio::task::spawn_blocking(|| image().clone())
        .await
        .expect("guest image");
    let cp = &tokio::task::spawn_blocking(env)
        .await
        .expect("control plane")
        .cp;
    let (kubeconfig, certs) = guest_kubeconfig(&cp.kubeconfig, API_PORT_IN_GUEST);
    let kc_path = cp.dir.join(format!("guest-{}.kubeconfig", image.tag()));
    std::fs::write(&kc_path, kubeconfig).expect("guest kubeconfig");
    let relay = Arc::new(UnixRelay::start().await);
    let mut spec = GroupSpec::new(&image.tag())
        .forward(API_PORT_IN_GUEST, cp.api_port)
        .forward(RELAY_PORT_IN_GUEST, relay.port())
        .binary("lvms", lvms_bin())
        .binary("lvms-dev", lvms_testkit::process::dev_bin())
        .file("kubeconfig", &kc_path);
    // csi-sanity runs in the guest, where the node service's mounts are.
    let suites = scenarios
        .iter()
        .filter(|(name, _)| name.starts_with("sanity"))
        .count();
    if suites > 0 {
        let bin =
            lvms_testkit::dev::csi_peers::peer_bin("csi-sanity").unwrap_or_else(|e| panic!("{e}"));
        spec = spec.binary("csi-sanity", bin);
        // A suite took ~5 min under emulation on the machines measured first and ~20 min on the
        // slowest one since, on top of the other scenarios.
        spec.timeout += std::time::Duration::from_secs(1500) * suites as u32;
    }
    if scenarios.iter().any(|(name, _)| *name == "group-snapshot") {
        spec.timeout += crate::group_snapshot::budget();
    }
    for (name, path) in certs {
        spec = spec.file(&name, path);
    }

    let group = Group::new(image.clone(), spec, scenarios.len());
    let started = Instant::now();
    let runs: Vec<_> = scenarios
        .iter()
        .map(|(name, f)| {
            let run = f(Ctx {
                member: group.member(),
                image: image.clone(),
                relay: relay.clone(),
            });
            async move { (*name, AssertUnwindSafe(run).catch_unwind().await) }
        })
        .collect();
    let results: Vec<_> = futures::future::join_all(runs)
        .await
        .into_iter()
        .map(|(name, r)| {
            let r = r.map_err(|payload| {
                lvms::runtime::process::panic_message(payload.as_ref()).unwrap_or_default()
            });
            (name, r)
        })
        .collect();
    println!(
        "guest group on {}: {} scenario(s) in {:.1} s",
        image.release(),
        scenarios.len(),
        started.elapsed().as_secs_f64(),
    );
    results
}
