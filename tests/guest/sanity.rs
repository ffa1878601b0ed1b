//! csi-sanity v5.4 on a real kernel, against the operator's controller socket (on the host,
//! reached through the group's relay) and vg-manager's node socket (in the guest, where its
//! mounts are): on a thin class the full suite, nothing skipped; on a thick class the Identity
//! and Node suites, skipping what a thick class refuses (snapshots and clones, as TopoLVM's own
//! run skips them) and the Controller suite, which the host tier runs on a thick class already
//! (`tests/csi/sanity.rs`, real lvm2). Two scenarios, one node each, so that `make test` runs
//! them in its two guests at once (each suite alone takes a guest's one vCPU for most of its
//! run). The GroupController specs run on both.

use crate::group::{Ctx, RELAY_PORT_IN_GUEST};
use crate::node::{NodeRun, by_id, run_node};
use crate::thin::POOL;
use serde_json::json;

/// TopoLVM's thick skips: snapshot and clone specs (a thick class refuses them); and the
/// Controller suite, which the host tier runs on a thick class (a guest's one vCPU is the
/// scarcest thing in `make test`).
pub const THICK_SKIP: &str = r"\[Controller Server\]|[Ss]napshot|existing source volume";

/// In the guest, once the class is Ready: the suite, its report and what it left mounted.
const GUEST: &str = include_str!("scripts/sanity.sh");

/// Specs of a junit report that ran (not skipped) and whose name contains `part`.
fn ran(junit: &str, part: &str) -> Vec<String> {
    junit
        .split("<testcase")
        .skip(1)
        .filter(|case| !case.contains("<skipped"))
        .filter_map(|case| {
            let name = case.split("name=\"").nth(1)?.split('"').next()?;
            name.contains(part).then(|| name.to_string())
        })
        .collect()
}

/// Which class a run of the suite is on.
#[derive(Clone, Copy, PartialEq)]
enum Suite {
    Thick,
    Thin,
}

/// csi-sanity v5.4's Identity and Node suites pass on a thick class (its Controller suite: the
/// host tier's).
pub async fn csi_sanity_passes_on_a_thick_class(ctx: Ctx) {
    sanity(ctx, Suite::Thick).await;
}

/// csi-sanity v5.4's Identity, Controller, Node and GroupController suites pass on a thin class.
pub async fn csi_sanity_passes_on_a_thin_class(ctx: Ctx) {
    sanity(ctx, Suite::Thin).await;
}

async fn sanity(ctx: Ctx, suite: Suite) {
    let pid = std::process::id();
    let thin = suite == Suite::Thin;
    let (tag, class, disk) = if thin {
        ("thin", format!("sn{pid}"), "sann0")
    } else {
        ("thick", format!("st{pid}"), "sant0")
    };
    let mut entry =
        json!({"name": class, "default": true, "deviceSelector": {"paths": [by_id(disk)]}});
    let skip = if thin {
        entry["thinPoolConfig"] =
            json!({"name": POOL, "sizePercent": 80, "overprovisionRatio": 10});
        ""
    } else {
        THICK_SKIP
    };
    let classes = json!([entry]);
    let env = vec![
        ("SANITY_TAG", tag.to_string()),
        ("SANITY_CLASS", class.clone()),
        ("SANITY_SKIP", skip.to_string()),
        ("CONTROLLER", format!("10.0.2.100:{RELAY_PORT_IN_GUEST}")),
    ];
    let name = format!("sanity-{tag}");
    let r = run_node(
        ctx,
        NodeRun {
            pool: thin.then_some(POOL),
            after_ready: GUEST,
            env,
            ..NodeRun::new(&name, &class, classes, vec![(disk, 1024)])
        },
    )
    .await;
    let out = &r.out;
    let log = out.read(&format!("sanity-{tag}.log"));
    let tail = lvms_testkit::process::tail(&log, 40);
    assert_eq!(
        out.read(&format!("sanity-{tag}.status")).trim(),
        "0",
        "csi-sanity on the {tag} class failed:\n{tail}"
    );
    let junit = out.read(&format!("junit-{tag}.xml"));
    let node = ran(&junit, "Node Service");
    assert!(
        node.len() >= 8,
        "the Node suite ran on the {tag} class: {node:#?}\n{tail}"
    );
    // The thick class's skip leaves one Controller spec (ListVolumes pagination, which ginkgo
    // runs whatever the skip says); the thin class runs them all.
    let controller = ran(&junit, "[Controller Server]");
    assert!(
        if thin {
            controller.len() >= 20
        } else {
            controller.len() <= 2
        },
        "the Controller suite runs in the guest on the thin class only: {controller:#?}"
    );
    let group = ran(&junit, "GroupController");
    assert!(
        group.len() >= if thin { 6 } else { 1 },
        "csi-sanity's GroupController specs ran on the {tag} class: {group:#?}"
    );
    let snapshots = ran(&junit, "Snapshot");
    if thin {
        assert!(snapshots.len() >= 5, "snapshot specs ran: {snapshots:#?}");
    } else {
        assert!(
            snapshots.is_empty(),
            "thick skips snapshots: {snapshots:#?}"
        );
    }
    println!(
        "csi-sanity {tag} (after {} failed first CreateVolume calls): {}",
        out.read(&format!("sanity-{tag}-waits")).trim(),
        log.lines()
            .filter(|l| l.contains("Passed"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    assert_eq!(out.read("mounts-left").trim(), "0", "nothing left mounted");
}
