//! Seeded random kills over the volume paths: each cycle a CreateVolume, ControllerExpandVolume
//! or DeleteVolume is retried as the sidecars retry it while the operator, vg-manager or both
//! are SIGKILLed at a random moment and restarted. At the end lvm2 holds exactly one LV per
//! live volume at its last size, one LogicalVolume each, no orphan, and no intent is open.
//! `cargo test --test csi soak` runs 12 cycles with seed 1; `LVMS_CSI_SOAK_SEED=<n>` and
//! `LVMS_CSI_SOAK_CYCLES=<n>` for others.

use std::collections::BTreeMap;
use std::time::Duration;

use lvms_testkit::rng::Rng;
use serde_json::json;

use crate::common::{
    MIB, NODE, ThickNode, create_request, create_until_ok, delete_until_ok, expand_until_ok,
};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Create,
    Expand,
    Delete,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Victim {
    Operator,
    VgManager,
    Both,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_seeded_random_kills_during_volume_rpcs_converge() {
    let seed = env_u64("LVMS_CSI_SOAK_SEED").unwrap_or(1);
    let cycles = env_u64("LVMS_CSI_SOAK_CYCLES").unwrap_or(12);
    println!("csi soak: seed {seed}, {cycles} cycles (LVMS_CSI_SOAK_SEED / LVMS_CSI_SOAK_CYCLES)");
    let mut n = ThickNode::start_with("csi-soak", &[], 600, json!({})).await;
    let class = n.class.clone();
    let socket = std::env::temp_dir().join(format!("lvms-csi-soak-{}.sock", std::process::id()));
    let socket = socket.display().to_string();
    n.op.kill();
    n.op = n.s.operator(&[], &["--csi-socket", &socket]);
    let mut rng = Rng(seed);
    // name → (volume id, bytes) of every volume that exists.
    let mut live: BTreeMap<String, (String, u64)> = BTreeMap::new();
    let mut created = 0usize;
    for cycle in 0..cycles {
        let op = match (live.len(), rng.below(3)) {
            (0, _) => Op::Create,
            (l, _) if l >= 4 => rng.pick(&[Op::Expand, Op::Delete]),
            (_, 0) => Op::Create,
            (_, 1) => Op::Expand,
            _ => Op::Delete,
        };
        let victim = rng.pick(&[Victim::Operator, Victim::VgManager, Victim::Both]);
        let delay = rng.ms(0, 1500);
        let names: Vec<String> = live.keys().cloned().collect();
        let target = (!names.is_empty()).then(|| rng.pick(&names));
        println!("cycle {cycle}: {op:?} {target:?}, kill {victim:?} after {delay:?}");
        let ctl = n.controller().await;
        let task = {
            let class = class.clone();
            let name = format!("pvc-soak-{cycle}");
            let current = target.as_ref().and_then(|t| live.get(t)).cloned();
            tokio::spawn(async move {
                match op {
                    Op::Create => {
                        let req = create_request(&name, 32 * MIB, &class);
                        Some((name, create_until_ok(ctl, req).await, 32 * MIB))
                    }
                    Op::Expand => {
                        let (id, bytes) = current.expect("a live volume");
                        expand_until_ok(ctl, id, bytes + 16 * MIB).await;
                        None
                    }
                    Op::Delete => {
                        let (id, _) = current.expect("a live volume");
                        delete_until_ok(ctl, id).await;
                        None
                    }
                }
            })
        };
        tokio::time::sleep(delay).await;
        if victim != Victim::VgManager {
            n.op.kill();
            n.op = n.s.operator(&[], &["--csi-socket", &socket]);
        }
        if victim != Victim::Operator {
            n.restart_vg_manager(&[]);
        }
        let made = task.await.expect("the RPC task");
        match (op, made) {
            (Op::Create, Some((name, id, bytes))) => {
                created += 1;
                live.insert(name, (id, bytes));
            }
            (Op::Expand, _) => {
                let t = target.clone().expect("target");
                if let Some(v) = live.get_mut(&t) {
                    v.1 += 16 * MIB;
                }
            }
            (Op::Delete, _) => {
                live.remove(&target.clone().expect("target"));
            }
            other => panic!("cycle {cycle} seed {seed}: unexpected {other:?}"),
        }
    }

    // Converged: the LVs on disk are exactly the live volumes, at their last sizes.
    let want: BTreeMap<String, u64> = live.values().cloned().collect();
    let settled = lvms_testkit::eventually(Duration::from_secs(60), || async {
        (n.lvs() == want).then_some(())
    })
    .await;
    assert!(
        settled.is_some(),
        "seed {seed}: lvs {:?}, expected {want:?}",
        n.lvs()
    );
    let lvs = n
        .logical_volumes()
        .list(&Default::default())
        .await
        .expect("list");
    let mut names: Vec<String> = lvs
        .items
        .iter()
        .filter_map(|l| l.metadata.name.clone())
        .collect();
    names.sort();
    assert_eq!(
        names,
        live.keys().cloned().collect::<Vec<_>>(),
        "seed {seed}: one LogicalVolume per live volume, no other"
    );
    // Nothing open, and each volume's LV was created once.
    lvms_testkit::journal::settled(&n.s.operator_journal(), Duration::from_secs(60));
    let nj = lvms_testkit::journal::settled(&n.s.vg_manager_journal(NODE), Duration::from_secs(60));
    let recs: Vec<_> = nj.iter().map(|r| r.expect("a readable record")).collect();
    let effects = lvms_testkit::journal::effects(&recs, "volumes");
    let lvcreates = effects.get("lvcreate").map(|e| e.took).unwrap_or(0);
    assert!(
        lvcreates <= created,
        "seed {seed}: {lvcreates} lvcreate took effect for {created} volumes: {:?}",
        effects.get("lvcreate")
    );
}
