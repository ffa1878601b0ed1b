//! The tier's one guest per test group: every scenario submits its guest job first (its
//! namespace, node and disks are named up front), the guest boots once and starts them all,
//! and the host sides then take their turns (scenarios share the control plane's cluster-scoped
//! singletons, such as CSIDriver topolvm.io, so they run one at a time, as every scenario of
//! this repo does) while the guest jobs wait for their LVMVolumeGroups. Every scenario runs
//! even when another fails, and each is reported on its own.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::time::Instant;

use futures::FutureExt as _;
use lvms_testkit::env;
use lvms_testkit::guest::{Group, GroupSpec, Image, Member, WithInputs, guest_kubeconfig, image};
use lvms_testkit::process::lvms_bin;

/// Where the guest dials the test's kube-apiserver.
const API_PORT_IN_GUEST: u16 = 6443;

/// A scenario's share of the group.
pub struct Ctx {
    pub member: Member,
    pub image: Image,
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
    let mut spec = GroupSpec::new(&image.tag())
        .forward(API_PORT_IN_GUEST, cp.api_port)
        .binary("lvms", lvms_bin())
        .file("kubeconfig", &kc_path);
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
            });
            async move { (*name, AssertUnwindSafe(run).catch_unwind().await) }
        })
        .collect();
    let results: Vec<_> = futures::future::join_all(runs)
        .await
        .into_iter()
        .map(|(name, r)| {
            let r = r.map_err(|payload| {
                payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
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
