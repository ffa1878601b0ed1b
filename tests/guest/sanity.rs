//! csi-sanity's full suite (Identity, Controller, Node) on a real kernel, against the operator's
//! controller socket (on the host, reached through the group's relay) and vg-manager's node
//! socket (in the guest, where its mounts are): once on a thick class, skipping what a thick
//! class refuses (snapshots and clones, as TopoLVM's own run skips them), once on a thin class
//! with nothing skipped; the two at once. The GroupController specs run on both.

use crate::group::{Ctx, RELAY_PORT_IN_GUEST};
use crate::node::{NodeRun, by_id, run_node};
use crate::thin::POOL;
use serde_json::json;

/// TopoLVM's thick skips: snapshot and clone specs (a thick class refuses them).
pub const THICK_SKIP: &str = "[Ss]napshot|existing source volume";

fn guest(thick: &str, thin: &str) -> String {
    format!(
        r#"
san() {{ # class, tag, skip...
  class=$1 tag=$2; shift 2
  printf 'topolvm.io/device-class: %s\n' "$class" >/tmp/sanity-$tag.yaml
  mkdir -p /tmp/sanity-$tag
  /work/csi-sanity --csi.endpoint=$VGM/csi.sock \
    --csi.controllerendpoint=10.0.2.100:{RELAY_PORT_IN_GUEST} \
    --csi.testvolumeparameters=/tmp/sanity-$tag.yaml \
    --csi.testvolumesize=$((64 << 20)) --csi.testvolumeexpandsize=$((128 << 20)) \
    --csi.mountdir=/tmp/sanity-$tag/mount --csi.stagingdir=/tmp/sanity-$tag/stage \
    --ginkgo.junit-report="$GUEST_OUT/junit-$tag.xml" --ginkgo.v "$@" \
    >"$GUEST_OUT/sanity-$tag.log" 2>&1
  echo $? >"$GUEST_OUT/sanity-$tag.status"
}}
# With each suite's last lines.
watch 'for t in thick thin; do tail -n 2 "$GUEST_OUT/sanity-$t.log" | cut -c1-200; done'
# The two suites side by side: each waits on RPCs most of its time.
san {thick} thick '--ginkgo.skip={THICK_SKIP}' &
a=$!
san {thin} thin &
b=$!
wait $a $b
unwatch
grep -c " /tmp/sanity-" /proc/self/mountinfo >"$GUEST_OUT/mounts-left" || true
"#
    )
}

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

/// csi-sanity v5.4's Identity, Controller and Node suites pass on a thick and a thin class.
pub async fn csi_sanity_passes_on_a_thick_and_a_thin_class(ctx: Ctx) {
    let pid = std::process::id();
    let (thick, thin) = (format!("st{pid}"), format!("sn{pid}"));
    let classes = json!([
        {"name": thick, "deviceSelector": {"paths": [by_id("sant0")]}},
        {"name": thin, "default": true, "deviceSelector": {"paths": [by_id("sann0")]},
         "thinPoolConfig": {"name": POOL, "sizePercent": 80, "overprovisionRatio": 10}},
    ]);
    let after = guest(&thick, &thin);
    let r = run_node(
        ctx,
        NodeRun {
            pool: Some(POOL),
            after_ready: &after,
            ..NodeRun::new(
                "sanity",
                &thin,
                classes,
                vec![("sant0", 1024), ("sann0", 1024)],
            )
        },
    )
    .await;
    let out = &r.out;
    for tag in ["thick", "thin"] {
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
        assert!(!ran(&junit, "Controller Service").is_empty());
        // A thick class refuses group snapshots as it refuses snapshots: THICK_SKIP leaves it
        // the capabilities spec; the thin class runs all six.
        let group = ran(&junit, "GroupController");
        assert!(
            group.len() >= if tag == "thin" { 6 } else { 1 },
            "csi-sanity's GroupController specs ran on the {tag} class: {group:#?}"
        );
        let snapshots = ran(&junit, "Snapshot");
        if tag == "thin" {
            assert!(snapshots.len() >= 5, "snapshot specs ran: {snapshots:#?}");
        } else {
            assert!(
                snapshots.is_empty(),
                "thick skips snapshots: {snapshots:#?}"
            );
        }
        println!(
            "csi-sanity {tag}: {}",
            log.lines()
                .filter(|l| l.contains("Passed"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    assert_eq!(out.read("mounts-left").trim(), "0", "nothing left mounted");
}
