//! One node in the guest: the operator on the host, `lvms vg-manager` in the guest (activation
//! on), one LVMCluster created, waited Ready, deleted and waited gone; the guest records what
//! lvm2 and device-mapper show at Ready and after the teardown.

use std::time::Duration;

use kube::api::DeleteParams;
use lvms::api::{LVMStateType, VGStatus};
use lvms_journal::{Body, Journal};
use serde_json::Value;

use lvms_testkit::fixtures::lvm_cluster;
use lvms_testkit::guest::{Outcome, Run, guest_kubeconfig, image, run};
use lvms_testkit::kubelet::{create_node, register_csi_node};
use lvms_testkit::process::lvms_bin;
use lvms_testkit::{Scenario, env, eventually};

/// Software emulation is slow: each lvm2 command takes ~0.5–1 s in the guest.
pub const T: Duration = Duration::from_secs(240);
const API_PORT_IN_GUEST: u16 = 6443;

/// What one guest node scenario does.
pub struct NodeRun<'a> {
    pub name: &'a str,
    /// The VG (device class) name.
    pub vg: String,
    /// The class's thin pool, when it is a thin class: the guest waits for it instead of the VG.
    pub pool: Option<&'a str>,
    /// The device classes of the LVMCluster (a JSON array).
    pub classes: Value,
    /// Shell run in the guest before vg-manager starts (e.g. a device-mapper child to wipe).
    pub prepare: &'a str,
    /// `LVMS_CRASH_AT` for a first vg-manager life that must end in SIGKILL; a second life
    /// without it then converges.
    pub crash_at: Option<String>,
    /// Scratch disks (serial, MiB).
    pub disks: Vec<(&'a str, u64)>,
    /// Day 2, once Ready: the device classes the host edits the LVMCluster to, and how many
    /// devices the class then reports Ready with.
    pub edit: Option<(Value, usize)>,
    /// Shell the guest runs once the class is Ready and recorded (e.g. wait for the edit's
    /// effect and record it), before it waits for the teardown.
    pub after_ready: &'a str,
}

impl<'a> NodeRun<'a> {
    /// A scenario that creates `classes` on `disks`, waits Ready and tears down; the fields
    /// left at their defaults (no pool, preparation, crash, edit or day-2 shell) are set with
    /// struct update syntax.
    pub fn new(name: &'a str, vg: &str, classes: Value, disks: Vec<(&'a str, u64)>) -> Self {
        Self {
            name,
            vg: vg.to_string(),
            pool: None,
            classes,
            prepare: "",
            crash_at: None,
            disks,
            edit: None,
            after_ready: "",
        }
    }
}

/// The finished scenario: the guest's outcome (status already checked) and the Ready entry.
pub struct NodeResult {
    pub out: Outcome,
    pub ready: VGStatus,
}

/// The scenario's own node (Nodes and CSINodes are cluster-scoped; scenarios run in parallel).
fn node_name(r: &NodeRun<'_>) -> String {
    format!("guest-{}", r.name)
}

fn script(r: &NodeRun<'_>, ns: &str) -> String {
    let node = node_name(r);
    let vg = &r.vg;
    let ready_check = match r.pool {
        Some(pool) => format!("lvs {vg}/{pool}"),
        None => format!("vgs {vg}"),
    };
    let first_life = match &r.crash_at {
        Some(point) => format!(
            r#"LVMS_CRASH_AT='{point}' start
wait $vgm
echo $? >"$GUEST_OUT/first-life-status"
"#
        ),
        None => String::new(),
    };
    format!(
        r#"
set -u
modprobe dm-thin-pool
mkdir -p /run/vgm
{prepare}
start() {{
  KUBECONFIG=/work/kubeconfig RUST_LOG=info ./lvms vg-manager --node-name {node} \
    --namespace {ns} --host-command-prefix "" --lvmd-config /run/vgm/lvmd.yaml \
    --journal-dir /run/vgm/journal --lock-file /run/vgm/lock \
    --diagnostics-addr 127.0.0.1:9100 --debounce-ms 20 >>"$GUEST_OUT/vg-manager.log" 2>&1 &
  vgm=$!
}}
fail() {{ echo "guest: $1"; tail -30 "$GUEST_OUT/vg-manager.log"; kill $vgm; exit "$2"; }}
{first_life}start
i=0
until {ready_check} >/dev/null 2>&1; do
  i=$((i+1)); [ $i -gt 480 ] && fail "no {vg} ({ready_check}) after 240 s" 10; sleep 0.5
done
# lvmd.yaml names the class once vg-manager reports it Ready.
i=0
until grep -q "volume-group: {vg}" /run/vgm/lvmd.yaml 2>/dev/null; do
  i=$((i+1)); [ $i -gt 480 ] && fail "no lvmd.yaml entry for {vg} after 240 s" 12; sleep 0.5
done
lvs -a --reportformat json --units b --nosuffix \
  -o lv_name,lv_attr,lv_size,lv_metadata_size,chunk_size {vg} >"$GUEST_OUT/lvs.json"
vgs --reportformat json --units b --nosuffix -o vg_name,vg_size {vg} >"$GUEST_OUT/vgs.json"
dmsetup ls >"$GUEST_OUT/dmsetup-ready.txt" 2>&1
cp /run/vgm/lvmd.yaml "$GUEST_OUT/lvmd.yaml"
# The class's gauges are set when the pass that made it Ready ends.
i=0
until wget -qO "$GUEST_OUT/metrics-ready.txt" http://127.0.0.1:9100/metrics \
  && grep -q 'topolvm_volumegroup_size_bytes{{.*{vg}' "$GUEST_OUT/metrics-ready.txt"; do
  i=$((i+1)); [ $i -gt 120 ] && fail "no gauges for {vg} 60 s after Ready" 14; sleep 0.5
done
{after_ready}
# The host deletes the LVMCluster once the class is Ready; vg-manager removes pool and VG.
i=0
while vgs {vg} >/dev/null 2>&1; do
  i=$((i+1)); [ $i -gt 480 ] && fail "VG {vg} still there 240 s later" 11; sleep 0.5
done
dmsetup ls >"$GUEST_OUT/dmsetup-after.txt" 2>&1
# The class's lvmd.yaml entry goes after the VG (the file with its last class).
i=0
while [ -e /run/vgm/lvmd.yaml ] && [ $i -lt 120 ]; do i=$((i+1)); sleep 0.5; done
[ -e /run/vgm/lvmd.yaml ] && echo kept >"$GUEST_OUT/lvmd-kept"
kill $vgm; wait $vgm
cp -a /run/vgm/journal "$GUEST_OUT/journal"
exit 0
"#,
        prepare = r.prepare,
        after_ready = r.after_ready,
    )
}

/// Runs the scenario and fails the test, with the guest's console, when the guest script did
/// not get through Ready and teardown.
pub async fn run_node(r: NodeRun<'_>) -> NodeResult {
    let image = tokio::task::spawn_blocking(|| image().clone())
        .await
        .expect("guest image");
    let s = Scenario::new(&format!("guest-{}", r.name)).await;
    let node = node_name(&r);
    create_node(&s.client, &node, false).await;
    register_csi_node(&s.client, &node, true).await;
    let _op = s.operator(&[], &[]);

    let (kubeconfig, certs) = guest_kubeconfig(&env().cp.kubeconfig, API_PORT_IN_GUEST);
    let kc_path = s.dir.join("guest.kubeconfig");
    std::fs::write(&kc_path, kubeconfig).expect("guest kubeconfig");
    let mut spec = Run::new(r.name, &script(&r, &s.ns.name))
        .forward(API_PORT_IN_GUEST, env().cp.api_port)
        .binary("lvms", lvms_bin())
        .file("kubeconfig", &kc_path);
    for (serial, mib) in &r.disks {
        spec = spec.disk(serial, *mib);
    }
    for (name, path) in certs {
        spec = spec.file(&name, path);
    }
    spec.timeout = Duration::from_secs(420);
    let mut guest = tokio::task::spawn_blocking(move || run(&image, &spec));

    s.create_cluster(lvm_cluster("my-lvmcluster", r.classes.clone()))
        .await;
    // A guest that ends (or panics) before Ready fails the test now, not after the timeout.
    let ready = tokio::select! {
        ready = s.ready_vg_entry(&node, &r.vg, T, |_| true) => ready,
        ended = &mut guest => match ended {
            Ok(out) => panic!(
                "the guest ended (status {}) before {node}/{} was Ready; console:\n{}",
                out.status,
                r.vg,
                out.tail(40)
            ),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        },
    };
    s.wait_state("my-lvmcluster", LVMStateType::Ready, T).await;
    if let Some((classes, devices)) = &r.edit {
        let patch = serde_json::json!({"spec": {"storage": {"deviceClasses": classes}}});
        s.patch_cluster("my-lvmcluster", &patch).await;
        s.ready_vg_entry(&node, &r.vg, T, |e| e.devices.len() == *devices)
            .await;
    }

    s.clusters()
        .delete("my-lvmcluster", &DeleteParams::default())
        .await
        .expect("delete");
    register_csi_node(&s.client, &node, false).await;
    eventually(T, || async {
        s.cluster("my-lvmcluster").await.is_none().then_some(())
    })
    .await
    .expect("LVMCluster deleted after vg-manager cleaned up in the guest");

    let out = guest.await.expect("guest thread");
    assert_eq!(
        out.status,
        0,
        "guest scenario failed; console:\n{}",
        out.tail(40)
    );
    let dm = out.read("dmsetup-after.txt");
    assert!(
        !dm.contains(&r.vg),
        "device-mapper devices of {} left after deletion:\n{dm}",
        r.vg
    );
    assert!(
        !out.out.join("lvmd-kept").exists(),
        "lvmd.yaml kept after its last class was removed"
    );
    println!(
        "guest scenario {} took {:.1} s (kernel {})",
        r.name,
        out.elapsed.as_secs_f64(),
        lvms_testkit::guest::image().release()
    );
    NodeResult { out, ready }
}

/// The row of `lvs --reportformat json` for `lv`.
pub fn lv(report: &Value, lv: &str) -> Value {
    report["report"][0]["lv"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["lv_name"] == lv))
        .cloned()
        .unwrap_or_else(|| panic!("no {lv} in {report}"))
}

pub fn bytes(row: &Value, field: &str) -> u64 {
    row[field]
        .as_str()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} is not a byte count in {row}"))
}

/// After a crash scenario: the first vg-manager life ended in SIGKILL, the guest's journal
/// holds exactly one intent of `action`, nothing is left open, and this is how replay closed
/// that intent (its recorded replay verdict, if any).
pub fn one_step_after_the_crash(out: &Outcome, action: &str) -> Option<String> {
    assert_eq!(
        out.read("first-life-status").trim(),
        "137",
        "the first vg-manager life ends in SIGKILL at the crash point"
    );
    let j = Journal::open_copy(out.out.join("journal/vg-manager")).expect("the guest's journal");
    let recs: Vec<_> = j.iter().filter_map(Result::ok).collect();
    let steps: Vec<_> = recs
        .iter()
        .filter(|r| matches!(&r.body, Body::Intent(i) if i.action == action))
        .collect();
    assert_eq!(steps.len(), 1, "{action} journaled once: {steps:#?}");
    assert!(j.open_intents().expect("open intents").is_empty());
    recs.iter().find_map(|o| match &o.body {
        Body::Outcome(done) if done.intent_seq == steps[0].seq => done
            .result
            .done()
            .and_then(|d| d.replay)
            .map(|v| v.as_str().to_string()),
        _ => None,
    })
}
