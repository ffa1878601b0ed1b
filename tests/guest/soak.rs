use lvms_journal::Journal;
use lvms_testkit::journal::effects;
use serde_json::Value;

use crate::group::Ctx;
use crate::node::{Kills, NodeRun, run_node};
use crate::thin::{POOL, thin_class};

/// A seeded random-kill soak on a real kernel (`LVMS_SOAK_SEED`, default 1): vg-manager is
/// SIGKILLed at random moments while a thin class is built (VG, pool) and again while it is
/// torn down, each life restarted. The class converges to Ready with one pool, tears down to
/// nothing, the journal verifies clean with no open intent, and each VG-level step took effect
/// exactly once (vgcreate, vgremove) or, for the pool's lvcreate, which replay closes as
/// not-done because only `lvs` shows a pool, at most once.
pub async fn seeded_random_kills_converge_with_each_step_taking_effect_once(ctx: Ctx) {
    let seed = std::env::var("LVMS_SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let vg = format!("s{}", std::process::id());
    let r = run_node(
        ctx,
        NodeRun {
            pool: Some(POOL),
            kills: Some(Kills {
                seed,
                creating: 6,
                deleting: 4,
            }),
            ..NodeRun::new(
                "soak",
                &vg,
                thin_class(&vg, &["soak0"]),
                vec![("soak0", 256)],
            )
        },
    )
    .await;
    let kills = r.out.read("kills");
    println!("guest soak, seed {seed}:\n{kills}");
    assert_eq!(
        kills.lines().count(),
        10,
        "every planned kill happened:\n{kills}"
    );

    let lvs: Value = serde_json::from_str(&r.out.read("lvs.json")).expect("lvs json");
    let pools = lvs["report"][0]["lv"]
        .as_array()
        .map(|rows| rows.iter().filter(|r| r["lv_name"] == POOL).count());
    assert_eq!(pools, Some(1), "one pool at Ready: {lvs}");

    let j = Journal::open_copy(r.out.out.join("journal/vg-manager")).expect("the guest's journal");
    let report = j.verify().expect("verify");
    assert!(report.is_clean(), "the journal verifies clean: {report:?}");
    let open = j.open_intents().expect("open intents");
    assert!(
        open.is_empty(),
        "no open intent after convergence: {open:#?}"
    );
    let recs: Vec<_> = j
        .iter()
        .collect::<Result<_, _>>()
        .expect("every record decodes");
    let fx = effects(&recs, &format!("vg/{vg}"));
    // Which kills cut a step short shows in its verdicts (replay=..., already-done).
    for (action, e) in &fx {
        println!(
            "guest soak: {action}: {} effect(s) [{}]",
            e.took,
            e.verdicts.join(", ")
        );
    }
    let took = |a: &str| fx.get(a).map_or(0, |e| e.took);
    let why = |a: &str| format!("{a}: {:?} (kills: {kills})", fx.get(a));
    assert_eq!(took("vgcreate"), 1, "{}", why("vgcreate"));
    assert_eq!(took("vgremove"), 1, "{}", why("vgremove"));
    assert!(
        took("lvcreate-thin-pool") <= 1,
        "{}",
        why("lvcreate-thin-pool")
    );
}
