//! Seeded orphans: each cycle provokes one way storage is orphaned in the field (a
//! LogicalVolume force-deleted, a claim deleted mid-provisioning while vg-manager is SIGKILLed
//! at a random fault point, an LV removed behind lvms's back, an LV made by hand, a
//! PersistentVolume left without its LogicalVolume, a node that vanished, a provisioning kill
//! whose replay a held lvm2 lock keeps failing (half-finished, its volume group unreadable
//! until the lock goes), or nothing at all: a volume made and deleted through a kill) and keeps
//! its own model of what the audit must find. Every few cycles, and at the end, `lvms audit --now` must report exactly the model;
//! then the `leaked` repair removes exactly what the journal proves lvms made and nothing
//! names, and following each remaining finding's advice leaves an audit with nothing.
//! `cargo test --test csi orphan_soak` runs 10 cycles with seed 7;
//! `LVMS_ORPHAN_SOAK_SEED=<n>` and `LVMS_ORPHAN_SOAK_CYCLES=<n>` for others.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use lvms::api::LogicalVolume;
use lvms_journal::Journal;
use lvms_testkit::dev::operator::OperatorProcess;
use lvms_testkit::disks::lvm;
use lvms_testkit::rng::Rng;
use serde_json::json;

use crate::common::{MIB, NODE, ThickNode, create_request, create_until_ok, delete_until_ok};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

#[derive(Clone, Copy, Debug)]
enum Provoke {
    ForceDeleted,
    DeletedMidProvisioning,
    RemovedBehindOurBack,
    MadeByHand,
    PvWithoutVolume,
    VanishedNode,
    HeldLock,
    NothingThroughAKill,
}

/// (kind, LV or object) the audit names.
type Expect = BTreeSet<(String, String)>;

fn lvm_ok(cmd: &str, args: &[&str]) {
    let (ok, out) = lvm(cmd, args);
    assert!(ok, "{cmd} {args:?}: {out}");
}

/// Strip a LogicalVolume's finalizers and delete it: what `kubectl patch … finalizers: null`
/// and a delete do.
async fn force_delete(lvs: &Api<LogicalVolume>, name: &str) {
    let _ = lvs
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await;
    let _ = lvs.delete(name, &DeleteParams::default()).await;
}

async fn uid_of(lvs: &Api<LogicalVolume>, name: &str) -> Option<String> {
    lvs.get_opt(name).await.ok().flatten()?.metadata.uid
}

fn pv(name: &str, handle: &str) -> PersistentVolume {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "16Mi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "csi": {"driver": "topolvm.io", "volumeHandle": handle},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.topolvm.io/node", "operator": "In", "values": [NODE]}]}]}},
        },
    }))
    .unwrap()
}

/// lvm2's file lock on a volume group (`/run/lock/lvm/V_<vg>`, lvm2's default locking_dir),
/// held exclusively by a `flock` process until dropped: every lvm2 command on the VG waits.
struct HeldVgLock(std::process::Child);

impl HeldVgLock {
    fn take(vg: &str) -> Self {
        let dir = std::path::Path::new("/run/lock/lvm");
        std::fs::create_dir_all(dir).expect("lvm2's locking_dir");
        let file = dir.join(format!("V_{vg}"));
        // -o: only flock itself holds the lock (not the sleep it runs), so killing it frees it.
        let mut child = std::process::Command::new("flock")
            .args(["-x", "-o", "-w", "30"])
            .arg(&file)
            .args(["-c", "echo held; exec sleep 600"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("flock (util-linux)");
        // Held once it says so (an lvm2 command of the killed life may still be finishing).
        let mut line = String::new();
        let out = child.stdout.take().expect("flock's stdout");
        std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line)
            .expect("flock's word");
        assert_eq!(
            line.trim(),
            "held",
            "flock on {}: {:?}",
            file.display(),
            child.try_wait()
        );
        HeldVgLock(child)
    }
}

impl Drop for HeldVgLock {
    fn drop(&mut self) {
        let _ = std::process::Command::new("pkill")
            .args(["-P", &self.0.id().to_string()])
            .status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether vg-manager's journal has no open intent within `within`.
async fn no_open_intents(n: &ThickNode, within: Duration) -> bool {
    lvms_testkit::eventually(within, || async {
        let j = Journal::open_copy(n.s.vg_manager_journal(NODE)).ok()?;
        j.open_intents().ok()?.is_empty().then_some(())
    })
    .await
    .is_some()
}

/// `lvms audit --now` again until it names exactly `want` (this scenario's findings); the last
/// report if it never does within `within`.
async fn audit_until(
    n: &ThickNode,
    ours: &BTreeSet<String>,
    want: &Expect,
    within: Duration,
) -> Result<(), serde_json::Value> {
    let seen = lvms_testkit::eventually(within, || async {
        let (found, _) = n.audit(true, |x| ours.contains(x));
        (found.into_iter().collect::<Expect>() == *want).then_some(())
    })
    .await;
    match seen {
        Some(()) => Ok(()),
        None => Err(n.audit(true, |x| ours.contains(x)).1),
    }
}

fn died(n: &mut ThickNode, point: &str) {
    let vgm = n.vgm.as_mut().expect("vg-manager");
    let status = vgm
        .wait_exit(Duration::from_secs(60))
        .unwrap_or_else(|| panic!("vg-manager did not reach {point}:\n{}", vgm.log_text()));
    assert!(
        OperatorProcess::killed_by_sigkill(&status),
        "{point}: {status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_soak_seeded_orphans_are_audited_exactly_and_repaired_by_policy() {
    let seed = env_u64("LVMS_ORPHAN_SOAK_SEED").unwrap_or(7);
    let cycles = env_u64("LVMS_ORPHAN_SOAK_CYCLES").unwrap_or(10);
    println!(
        "orphan soak: seed {seed}, {cycles} cycles (LVMS_ORPHAN_SOAK_SEED / LVMS_ORPHAN_SOAK_CYCLES)"
    );
    let mut n = ThickNode::start_with("csi-orphans", &[], 600, json!({})).await;
    let class = n.class.clone();
    let lvs = n.logical_volumes();
    let pvs: Api<PersistentVolume> = Api::all(n.s.client.clone());
    let tag = n.s.ns.name.clone();
    let mut rng = Rng(seed);
    let mut want = Expect::new();
    // What the cluster half may name that is ours (other scenarios leave theirs).
    let mut ours = BTreeSet::new();
    // Leaked LVs the journal proves lvms made and nothing names: the repair's to remove.
    let mut repairable = BTreeSet::new();
    // PVs made here, LogicalVolumes of vanished nodes, LVs made by hand: the advice's to clean.
    let (mut stale_pvs, mut gone_lvs, mut by_hand, mut missing) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let kinds = [
        Provoke::ForceDeleted,
        Provoke::DeletedMidProvisioning,
        Provoke::RemovedBehindOurBack,
        Provoke::MadeByHand,
        Provoke::PvWithoutVolume,
        Provoke::VanishedNode,
        Provoke::HeldLock,
        Provoke::NothingThroughAKill,
    ];
    for cycle in 0..cycles {
        // Every kind once in the first cycles, then as the seed says.
        let kind = if (cycle as usize) < kinds.len() {
            kinds[(cycle as usize + seed as usize) % kinds.len()]
        } else {
            rng.pick(&kinds)
        };
        let name = format!("pvc-orphan-{cycle}");
        let ctl = n.controller().await;
        match kind {
            Provoke::ForceDeleted => {
                let id = create_until_ok(ctl, create_request(&name, 16 * MIB, &class)).await;
                n.stop_vg_manager();
                force_delete(&lvs, &name).await;
                n.restart_vg_manager(&[]);
                want.insert(("leaked-lv".into(), id.clone()));
                repairable.insert(id);
                println!("cycle {cycle}: {kind:?}");
            }
            Provoke::DeletedMidProvisioning => {
                let point = rng.pick(&[
                    "intent-durable:volumes#lvcreate",
                    "applied:volumes#lvcreate",
                    "step-outcome:volumes#lvcreate",
                    "applied:volumes#write-status",
                ]);
                n.restart_vg_manager(&[("LVMS_CRASH_AT", point)]);
                let req = create_request(&name, 16 * MIB, &class);
                let rpc = tokio::spawn(create_until_ok(ctl, req));
                died(&mut n, point);
                rpc.abort();
                let uid = uid_of(&lvs, &name).await.expect("its LogicalVolume");
                force_delete(&lvs, &name).await;
                n.restart_vg_manager(&[]);
                // The LV is there if the kill came after lvcreate ran (the LV is named by the
                // LogicalVolume's uid); then the journal holds the lvcreate and the audit
                // must name it. Before: replay finds no LogicalVolume and makes nothing.
                assert!(
                    no_open_intents(&n, Duration::from_secs(30)).await,
                    "seed {seed} cycle {cycle}: intents stay open"
                );
                let on_disk = n.lvs().contains_key(&uid);
                println!("cycle {cycle}: {kind:?} killed at {point}, LV left: {on_disk}");
                if on_disk {
                    want.insert(("leaked-lv".into(), uid.clone()));
                    repairable.insert(uid);
                }
            }
            Provoke::RemovedBehindOurBack => {
                let id = create_until_ok(ctl, create_request(&name, 16 * MIB, &class)).await;
                lvm_ok("lvremove", &["-f", &format!("{class}/{id}")]);
                want.insert(("missing-lv".into(), id.clone()));
                missing.push(id);
                println!("cycle {cycle}: {kind:?}");
            }
            Provoke::MadeByHand => {
                let lv = format!("by-hand-{cycle}");
                lvm_ok("lvcreate", &["-n", &lv, "-L", "8m", "-Zn", &class]);
                want.insert(("foreign-lv".into(), lv.clone()));
                by_hand.push(lv);
                println!("cycle {cycle}: {kind:?}");
            }
            Provoke::PvWithoutVolume => {
                // The provisioner made the PV; then the LogicalVolume was force-deleted: its
                // LV leaks, but a PV names it, so no repair may take it.
                let id = create_until_ok(ctl, create_request(&name, 16 * MIB, &class)).await;
                let pv_name = format!("{tag}-{cycle}");
                pvs.create(&PostParams::default(), &pv(&pv_name, &id))
                    .await
                    .expect("PV");
                n.stop_vg_manager();
                force_delete(&lvs, &name).await;
                n.restart_vg_manager(&[]);
                want.insert(("stale-pv".into(), id.clone()));
                want.insert(("leaked-lv".into(), id.clone()));
                ours.insert(id.clone());
                stale_pvs.push((pv_name, id));
                println!("cycle {cycle}: {kind:?}");
            }
            Provoke::VanishedNode => {
                let lv_name = format!("{tag}-gone-{cycle}");
                let gone: LogicalVolume = serde_json::from_value(json!({
                    "apiVersion": "topolvm.io/v1", "kind": "LogicalVolume",
                    "metadata": {"name": lv_name},
                    "spec": {"name": name, "nodeName": format!("vanished-{tag}"), "size": "16Mi", "deviceClass": class},
                }))
                .unwrap();
                lvs.create(&PostParams::default(), &gone)
                    .await
                    .expect("LogicalVolume of a vanished node");
                want.insert(("gone-node".into(), lv_name.clone()));
                ours.insert(lv_name.clone());
                gone_lvs.push(lv_name);
                println!("cycle {cycle}: {kind:?}");
            }
            Provoke::HeldLock => {
                // A provisioning killed once its lvcreate intent is durable; then lvm2's lock
                // on the volume group held by another process (as a stuck lvm2 command would),
                // so replay's look at the VG times out, again and again.
                let point = "intent-durable:volumes#lvcreate";
                n.restart_vg_manager(&[("LVMS_CRASH_AT", point)]);
                let rpc = tokio::spawn(create_until_ok(
                    ctl,
                    create_request(&name, 16 * MIB, &class),
                ));
                died(&mut n, point);
                rpc.abort();
                let lock = HeldVgLock::take(&class);
                n.restart_vg_manager(&[
                    // Over the 3 s a step blocked on the lock takes to fail (and close).
                    ("LVMS_AUDIT_OPEN_AFTER", "10s"),
                    ("LVMS_HOST_COMMAND_TIMEOUT", "3s"),
                ]);
                // While it is held: the step is half-finished and the class unreadable; the
                // node's other findings are about that class's LVs, so none is claimed now (an
                // unseen class is never reported empty); the cluster's half stays.
                let mut held: Expect = want
                    .iter()
                    .filter(|(k, _)| k == "stale-pv" || k == "gone-node")
                    .cloned()
                    .collect();
                held.insert(("half-finished".into(), name.clone()));
                held.insert(("unreadable-vg".into(), class.clone()));
                if let Err(found) = audit_until(&n, &ours, &held, Duration::from_secs(90)).await {
                    panic!(
                        "seed {seed} cycle {cycle}: while the lock is held, expected {held:?}, found {found:#}"
                    );
                }
                // Released: replay closes the step and the claim is made after all (the
                // provisioner's retry, the same request).
                drop(lock);
                let id = create_until_ok(
                    n.controller().await,
                    create_request(&name, 16 * MIB, &class),
                )
                .await;
                assert!(
                    no_open_intents(&n, Duration::from_secs(60)).await,
                    "seed {seed} cycle {cycle}: intents stay open"
                );
                assert!(
                    n.lvs().contains_key(&id),
                    "seed {seed}: {id} was never made"
                );
                n.restart_vg_manager(&[]);
                println!("cycle {cycle}: {kind:?}");
            }
            Provoke::NothingThroughAKill => {
                let id =
                    create_until_ok(ctl.clone(), create_request(&name, 16 * MIB, &class)).await;
                let point = rng.pick(&[
                    "intent-durable:volumes#lvremove",
                    "applied:volumes#lvremove",
                    "intent-durable:volumes#remove-finalizer",
                ]);
                n.restart_vg_manager(&[("LVMS_CRASH_AT", point)]);
                let rpc = tokio::spawn(delete_until_ok(ctl, id.clone()));
                died(&mut n, point);
                n.restart_vg_manager(&[]);
                rpc.await.expect("DeleteVolume");
                assert!(!n.lvs().contains_key(&id), "seed {seed}: {id} stayed");
                println!("cycle {cycle}: {kind:?} killed at {point}");
            }
        }
        if cycle % 3 == 2 || cycle + 1 == cycles {
            let (found, raw) = n.audit(true, |x| ours.contains(x));
            let found: Expect = found.into_iter().collect();
            assert_eq!(found, want, "seed {seed} after cycle {cycle}: {raw:#}");
        }
    }

    // The repair policy: exactly the LVs the journal proves lvms made that nothing names, made
    // through SIGKILLs at seeded random moments (before, during or after a removal).
    let before = n.lvs();
    for _ in 0..3 {
        n.restart_vg_manager(&[("LVMS_AUDIT_REPAIR", "leaked")]);
        let ms = rng.below(3000);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        n.stop_vg_manager();
        println!("repair: vg-manager SIGKILLed {ms} ms into its life");
    }
    n.restart_vg_manager(&[("LVMS_AUDIT_REPAIR", "leaked")]);
    let after_repair: Expect = want
        .iter()
        .filter(|(k, x)| !(k == "leaked-lv" && repairable.contains(x)))
        .cloned()
        .collect();
    if let Err(found) = audit_until(&n, &ours, &after_repair, Duration::from_secs(60)).await {
        panic!("seed {seed}: after the repair {found:#}, expected {after_repair:?}");
    }
    let on_disk = n.lvs();
    for lv in before.keys() {
        assert_eq!(
            on_disk.contains_key(lv),
            !repairable.contains(lv),
            "seed {seed}: {lv} (repairable: {})",
            repairable.contains(lv)
        );
    }

    // Each remaining finding's advice, followed: the stale PVs deleted (their LVs are then the
    // repair's), the hand-made LVs removed, the vanished node's LogicalVolumes deleted, the
    // volumes whose LV is gone deleted through the driver.
    for (pv_name, _) in &stale_pvs {
        pvs.delete(pv_name, &DeleteParams::default())
            .await
            .expect("delete the stale PV");
    }
    for lv in &by_hand {
        lvm_ok("lvremove", &["-f", &format!("{class}/{lv}")]);
    }
    for lv in &gone_lvs {
        force_delete(&lvs, lv).await;
    }
    for id in &missing {
        delete_until_ok(n.controller().await, id.clone()).await;
    }
    if let Err(found) = audit_until(&n, &ours, &Expect::new(), Duration::from_secs(60)).await {
        panic!("seed {seed}: left after the advice: {found:#}");
    }
    for (_, id) in &stale_pvs {
        assert!(!n.lvs().contains_key(id), "seed {seed}: {id} stayed");
    }
    let j = Journal::open_copy(n.s.vg_manager_journal(NODE)).expect("journal");
    assert_eq!(j.open_intents().expect("open intents"), vec![]);
    // One removal that took effect per LV the repair took, none made twice (a removal a kill
    // interrupted before it ran is replayed as not done and made again, once).
    let recs: Vec<lvms_journal::Record> = j.iter().filter_map(Result::ok).collect();
    let effects = lvms_testkit::journal::effects(&recs, "audit");
    let removals = effects.get("remove-leaked-lv").cloned().unwrap_or_default();
    assert_eq!(
        removals.took,
        repairable.len() + stale_pvs.len(),
        "seed {seed}: removals {:?}",
        removals.verdicts
    );
}
