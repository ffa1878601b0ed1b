//! UnitActor against a real journal: coalescing, write-ahead steps, quiet steady state,
//! replay of intents left open by a crash.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use lvms_actors::{PASS_ACTION, Trigger, UnitError, UnitHealth};
use lvms_journal::{Body, Done, OutcomeResult, Replayed, Trace};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursts_of_bumps_coalesce_into_at_most_one_more_pass() {
    let env = Env::new("coalesce");
    let unit = FakeUnit::new("u");
    unit.hold.store(true, Ordering::SeqCst);
    let trigger = Trigger::new();
    let mut args = unit_args(&unit, &env.journal, &trigger);
    args.debounce = Duration::from_millis(150); // wide enough for a 100-bump burst on a busy box
    let (actor, _) = spawn_unit(args).await;

    // The start pass is running (held inside reconcile).
    wait_until("the start pass to run", || unit.passes() == 1).await;
    for _ in 0..100 {
        trigger.bump("burst while running");
    }
    assert_eq!(trigger.bumps(), 100);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(unit.passes(), 1, "no second pass may start while one runs");
    unit.hold.store(false, Ordering::SeqCst);
    wait_until("the coalesced follow-up pass", || unit.passes() == 2).await;
    settle().await;
    assert_eq!(
        unit.passes(),
        2,
        "100 bumps during a pass must lead to exactly one more pass"
    );

    // A bump after the pass completed runs another pass.
    trigger.bump("after the pass");
    wait_until("a pass after a later bump", || unit.passes() == 3).await;
    settle().await;
    assert_eq!(unit.passes(), 3);

    // A burst right after a pass (inside its cooldown) is absorbed into one pass.
    trigger.bump("after the pass, again");
    wait_until("the pass after a second bump", || unit.passes() == 4).await;
    for _ in 0..100 {
        trigger.bump("burst while queued");
    }
    wait_until("the pass for the queued burst", || unit.passes() == 5).await;
    settle().await;
    assert_eq!(
        unit.passes(),
        5,
        "a burst while a pass is queued must be one pass"
    );
    assert_eq!(trigger.bumps(), 202);
    stop(&actor).await;
}

/// No fixed delay before a pass: the first change after a quiet spell starts one at once; the
/// debounce only spaces a follow-up pass from the one before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_bump_after_a_quiet_spell_starts_a_pass_at_once() {
    let env = Env::new("at-once");
    let unit = FakeUnit::new("u");
    let trigger = Trigger::new();
    let mut args = unit_args(&unit, &env.journal, &trigger);
    args.debounce = Duration::from_millis(400);
    let (actor, _) = spawn_unit(args).await;
    wait_until("the start pass", || unit.passes() == 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await; // quiet longer than the debounce

    let bumped = std::time::Instant::now();
    trigger.bump("an edit");
    wait_until("the pass for the edit", || unit.passes() == 2).await;
    let first = bumped.elapsed();
    assert!(
        first < Duration::from_millis(200),
        "the first change waited {first:?} (debounce 400 ms)"
    );

    // Right after it: the follow-up waits out the cooldown.
    let bumped = std::time::Instant::now();
    trigger.bump("a second edit");
    wait_until_within(Duration::from_secs(3), "the follow-up pass", || {
        unit.passes() == 3
    })
    .await;
    let second = bumped.elapsed();
    assert!(
        second >= Duration::from_millis(300),
        "the follow-up came after {second:?}, inside the 400 ms cooldown"
    );
    stop(&actor).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_intent_is_durable_and_open_during_its_effect_and_closed_after() {
    let env = Env::new("write-ahead");
    let unit = FakeUnit::new("u");
    unit.steps_per_pass.store(2, Ordering::SeqCst);
    unit.check_durable.store(true, Ordering::SeqCst);
    unit.set_journal_path(env.journal_path());
    let trigger = Trigger::new();
    let (actor, _) = spawn_unit(unit_args(&unit, &env.journal, &trigger)).await;
    let j = env.journal.clone();
    wait_until("the pass outcome", || pass_outcomes(&j).len() == 1).await;
    stop(&actor).await;

    // pass intent, (step intent, step outcome) x2, pass outcome.
    assert_eq!(
        kinds(&j),
        [
            "intent", "intent", "outcome", "intent", "outcome", "outcome"
        ]
    );
    let recs = records(&j);
    let Body::Intent(pass) = &recs[0].body else {
        unreachable!()
    };
    assert_eq!(pass.action, PASS_ACTION);
    assert_eq!(pass.object, subject());
    let pass_seq = recs[0].seq;

    let effects = unit.effects();
    assert_eq!(effects.len(), 2);
    let mut step_seqs = Vec::new();
    for view in &effects {
        // Inside the effect: the pass intent and exactly this step's intent are open.
        let open: Vec<_> = view
            .open
            .iter()
            .map(|r| match &r.body {
                Body::Intent(i) => (r.seq, i.action.clone(), i.object.clone()),
                other => panic!("open intent index returned {other:?}"),
            })
            .collect();
        assert_eq!(
            open.len(),
            2,
            "open intents during step {}: {open:?}",
            view.step
        );
        assert_eq!(open[0], (pass_seq, PASS_ACTION.to_string(), subject()));
        assert_eq!(open[1].1, "apply");
        assert_eq!(open[1].2, view.object);
        step_seqs.push(open[1].0);
    }
    // The first step's intent was on disk before its effect ran.
    let durable = effects[0]
        .durable_open
        .as_ref()
        .expect("durability checked");
    assert!(
        durable.iter().any(|r| r.seq == step_seqs[0]),
        "step intent {} missing from the on-disk copy: {durable:?}",
        step_seqs[0]
    );

    // After each step: closed, and its Outcome follows before the next step's intent.
    for (k, &s) in step_seqs.iter().enumerate() {
        assert!(!j.is_open(s).unwrap(), "step intent {s} still open");
        let outcomes: Vec<_> = recs
            .iter()
            .filter(|r| matches!(&r.body, Body::Outcome(o) if o.intent_seq == s))
            .collect();
        assert_eq!(outcomes.len(), 1, "exactly one outcome for step intent {s}");
        assert_eq!(outcomes[0].seq, s + 1, "the outcome follows its step");
        let Body::Outcome(o) = &outcomes[0].body else {
            unreachable!()
        };
        assert_eq!(o.unit, "u");
        assert_eq!(o.object, effects[k].object);
        assert!(matches!(
            &o.result,
            OutcomeResult::Ok(Done {
                resource_version: Some(_),
                ..
            })
        ));
    }

    // The pass outcome closes the pass intent, last, with what was applied.
    let (seq, outcome) = pass_outcomes(&j).remove(0);
    assert_eq!(seq, recs.last().unwrap().seq);
    assert_eq!(outcome.intent_seq, pass_seq);
    assert_eq!(done(&outcome).applied, Some(2));
    assert_eq!(done(&outcome).summary.as_deref(), Some(SUMMARY));
    assert!(j.open_intents().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_intent_is_made_durable_with_its_first_step_in_one_flush() {
    let env = Env::new("one-flush");
    let durable_appends = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = durable_appends.clone();
    assert!(
        env.journal
            .set_append_observer(std::sync::Arc::new(move |_, durable| {
                if durable {
                    counter.fetch_add(1, Ordering::SeqCst);
                }
            }))
    );
    let unit = FakeUnit::new("u");
    unit.steps_per_pass.store(2, Ordering::SeqCst);
    let trigger = Trigger::new();
    let (actor, _) = spawn_unit(unit_args(&unit, &env.journal, &trigger)).await;
    let j = env.journal.clone();
    wait_until("the pass outcome", || pass_outcomes(&j).len() == 1).await;
    stop(&actor).await;

    // Pass intent + first step intent in one append, the second step's intent in another; the
    // outcomes are not flushed on their own. Before: one more, the pass intent alone.
    assert_eq!(durable_appends.load(Ordering::SeqCst), 2);
    let recs = records(&j);
    let Body::Intent(pass) = &recs[0].body else {
        panic!("first record {:?}", recs[0].body)
    };
    assert_eq!(pass.action, PASS_ACTION);
    let Body::Intent(step) = &recs[1].body else {
        panic!("second record {:?}", recs[1].body)
    };
    assert_eq!(step.action, "apply");
    assert_eq!(recs[1].seq, recs[0].seq + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_without_steps_and_unchanged_health_write_nothing() {
    let env = Env::new("quiet");
    let unit = FakeUnit::new("u");
    let trigger = Trigger::new();
    let j = env.journal.clone();
    let (actor, _) = spawn_unit(unit_args(&unit, &j, &trigger)).await;

    // The first pass establishes health (unknown → ok): journaled once, applied=0.
    wait_until("the first pass outcome", || pass_outcomes(&j).len() == 1).await;
    assert_eq!(kinds(&j), ["intent", "outcome"]);
    assert_eq!(done(&pass_outcomes(&j)[0].1).applied, Some(0));
    let before = j.next_seq().unwrap();

    for n in 2..=5 {
        trigger.bump("nothing changed");
        wait_until("another pass", || unit.passes() == n).await;
    }
    stop(&actor).await; // the last pass has finished journaling (or not)
    assert_eq!(unit.passes(), 5);
    assert_eq!(
        j.next_seq().unwrap(),
        before,
        "steady-state passes must leave the journal alone: {:?}",
        kinds(&j)
    );

    // A restarted actor knows the health from the journal: still nothing to write.
    let (actor, _) = spawn_unit(unit_args(&unit, &j, &trigger)).await;
    wait_until("the restarted actor's pass", || unit.passes() == 6).await;
    stop(&actor).await;
    assert_eq!(j.next_seq().unwrap(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_change_without_steps_is_journaled_once() {
    let env = Env::new("health-change");
    let unit = FakeUnit::new("u");
    let trigger = Trigger::new();
    let j = env.journal.clone();
    let (actor, _) = spawn_unit(unit_args(&unit, &j, &trigger)).await;
    wait_until("the first pass outcome", || pass_outcomes(&j).len() == 1).await;

    // ok → err: one pass intent + outcome, then identical failing passes write nothing.
    unit.set_fail(Some(UnitError::permanent(
        "InvalidSpec",
        "deviceClasses must not be empty",
    )));
    for n in 2..=4 {
        trigger.bump("spec changed");
        wait_until("a failing pass", || unit.passes() == n).await;
    }
    // err → ok: journaled once more.
    unit.set_fail(None);
    for n in 5..=6 {
        trigger.bump("spec fixed");
        wait_until("a passing pass", || unit.passes() == n).await;
    }
    stop(&actor).await;

    assert_eq!(
        kinds(&j),
        [
            "intent", "outcome", "intent", "outcome", "intent", "outcome"
        ]
    );
    let outcomes = pass_outcomes(&j);
    let results: Vec<_> = outcomes
        .iter()
        .map(|(_, o)| match &o.result {
            OutcomeResult::Ok { .. } => "ok".to_string(),
            OutcomeResult::Err { reason, .. } => reason.clone(),
        })
        .collect();
    assert_eq!(results, ["ok", "InvalidSpec", "ok"]);
    assert!(j.open_intents().unwrap().is_empty());

    let health = j.rebuild::<UnitHealth>().unwrap().state;
    assert!(health.units["u"].ok);
    assert_eq!(health.units["u"].seq, outcomes[2].0);
}

/// Leaves the journal as a crash inside a step's effect would: pass intent + step intent open.
fn crash_leftovers(j: &lvms_journal::Journal, unit: &str) -> (u64, u64) {
    let pass = j
        .append_intent(
            intent(unit, subject(), PASS_ACTION, &format!("{unit}/pass/x")),
            Trace::default(),
        )
        .unwrap();
    let step = j
        .append_intent(
            intent(
                unit,
                object("ConfigMap", "cm-0"),
                "apply",
                &format!("{unit}/apply/cm-0/digest-0"),
            ),
            Trace::default(),
        )
        .unwrap();
    (pass, step)
}

/// A replay that cannot read the world reaches no verdict: the intent stays open, no pass runs,
/// and replay is retried (with backoff) until it can.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_that_cannot_read_the_world_leaves_the_intent_open_and_retries() {
    let env = Env::new("replay-retry");
    let (_pass_seq, step_seq) = crash_leftovers(&env.journal, "u");
    let env = env.reopen();
    let j = env.journal.clone();
    let unit = FakeUnit::new("u");
    unit.replay_failures.store(1, Ordering::SeqCst);
    let trigger = Trigger::new();
    let (actor, _) = spawn_unit(unit_args(&unit, &j, &trigger)).await;
    wait_until("the first replay attempt", || unit.replayed().len() == 1).await;
    assert!(j.is_open(step_seq).unwrap(), "no verdict, so still open");
    assert_eq!(
        unit.passes(),
        0,
        "no pass before every open intent is resolved"
    );
    // The retry (after the 500 ms backoff) succeeds and closes it with its verdict.
    wait_until_within(Duration::from_secs(5), "the replay retry", || {
        !j.is_open(step_seq).unwrap()
    })
    .await;
    wait_until("the resumed pass", || unit.passes() == 1).await;
    stop(&actor).await;
    assert_eq!(unit.replayed().len(), 2);
    let out = records(&j)
        .into_iter()
        .find_map(|r| match r.body {
            Body::Outcome(o) if o.intent_seq == step_seq => Some(o),
            _ => None,
        })
        .expect("the step's outcome");
    assert_eq!(done(&out).replay, Some(Replayed::AlreadyDone));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_intents_are_replayed_before_the_first_pass_which_closes_the_open_pass() {
    let env = Env::new("replay");
    let (pass_seq, step_seq) = crash_leftovers(&env.journal, "u");
    let env = env.reopen(); // a new process
    let j = env.journal.clone();
    assert_eq!(j.open_intent_seqs().unwrap(), [pass_seq, step_seq]);
    let first_new = j.next_seq().unwrap();

    let unit = FakeUnit::new("u");
    unit.steps_per_pass.store(1, Ordering::SeqCst); // the resumed pass also runs a step
    let trigger = Trigger::new();
    let (actor, _) = spawn_unit(unit_args(&unit, &j, &trigger)).await;
    wait_until("the resumed pass outcome", || pass_outcomes(&j).len() == 1).await;
    // A later pass (no steps, same health: writes nothing) must not replay again.
    unit.steps_per_pass.store(0, Ordering::SeqCst);
    trigger.bump("later");
    wait_until("a second pass", || unit.passes() == 2).await;
    stop(&actor).await;

    assert_eq!(
        unit.log(),
        ["replay:u/apply/cm-0/digest-0", "reconcile:1", "reconcile:2"],
        "replay exactly once, before the first reconcile"
    );
    assert_eq!(unit.replayed().len(), 1);
    assert_eq!(unit.replayed()[0].action, "apply");

    let recs = records(&j);
    // The replayed step's outcome comes first and says so.
    let replay_out = recs
        .iter()
        .find(|r| matches!(&r.body, Body::Outcome(o) if o.intent_seq == step_seq))
        .expect("outcome for the replayed step");
    assert_eq!(replay_out.seq, first_new);
    let Body::Outcome(o) = &replay_out.body else {
        unreachable!()
    };
    assert_eq!(done(o).replay, Some(Replayed::AlreadyDone));

    // No new pass intent: the interrupted one was resumed and closed by the first pass.
    let pass_intents: Vec<_> = recs
        .iter()
        .filter(|r| matches!(&r.body, Body::Intent(i) if i.action == PASS_ACTION))
        .map(|r| r.seq)
        .collect();
    assert_eq!(pass_intents, [pass_seq]);
    let outcomes = pass_outcomes(&j);
    assert_eq!(
        outcomes.len(),
        1,
        "the 2nd pass changed nothing new: {outcomes:?}"
    );
    assert_eq!(outcomes[0].1.intent_seq, pass_seq);
    assert_eq!(done(&outcomes[0].1).applied, Some(1));
    assert!(j.open_intents().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_leaves_other_units_intents_alone() {
    let env = Env::new("replay-other");
    let (_, _) = crash_leftovers(&env.journal, "u");
    let (v_pass, v_step) = crash_leftovers(&env.journal, "v");
    let j = env.journal.clone();

    let unit = FakeUnit::new("u");
    let trigger = Trigger::new();
    let (actor, _) = spawn_unit(unit_args(&unit, &j, &trigger)).await;
    wait_until("u's resumed pass", || pass_outcomes(&j).len() == 1).await;
    stop(&actor).await;

    assert_eq!(unit.replayed().len(), 1);
    assert_eq!(unit.replayed()[0].unit, "u");
    assert!(j.open_intents_for("u").unwrap().is_empty());
    assert_eq!(j.open_intent_seqs().unwrap(), [v_pass, v_step]);
}

/// Issue 41: a unit that also serves requests (the CSI services journal their RPCs' steps
/// under its name) resolves only what an earlier process left open. An intent a request of
/// this process has in flight is the request's to close; replaying it beside the request
/// would act twice (a gate resumed mid-reload, an Event told twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_serving_requests_replays_only_what_earlier_processes_left() {
    let env = Env::new("replay-requests");
    let (_, earlier) = crash_leftovers(&env.journal, "csi");
    let env = env.reopen(); // a new process
    let j = env.journal.clone();
    // A request of this process, in flight (its intent durable, its effect running).
    let in_flight = j
        .append_intent(
            intent(
                "csi",
                object("ConfigMap", "cm-r"),
                "apply",
                "csi/apply/cm-r",
            ),
            Trace::default(),
        )
        .unwrap();
    let unit = FakeUnit::new("csi");
    unit.serves_requests.store(true, Ordering::SeqCst);
    let (actor, _) = spawn_unit(unit_args(&unit, &j, &Trigger::new())).await;
    wait_until("the first pass", || unit.passes() == 1).await;
    // Restarted within the process (a crash of the unit's actor): the same holds.
    stop(&actor).await;
    let (actor, _) = spawn_unit(unit_args(&unit, &j, &Trigger::new())).await;
    wait_until("the restarted instance's pass", || unit.passes() == 2).await;
    stop(&actor).await;
    let replayed: Vec<String> = unit
        .replayed()
        .iter()
        .map(|i| i.idempotency_key.clone())
        .collect();
    assert_eq!(
        replayed,
        ["csi/apply/cm-0/digest-0"],
        "only the earlier process's intent"
    );
    assert!(!j.is_open(earlier).unwrap());
    assert!(
        j.is_open(in_flight).unwrap(),
        "the request's own intent is left to it"
    );
}

/// A batch of independent steps: every intent is durable (in one append) before any effect
/// runs, each effect gets its own outcome, and the first error comes back after all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_journals_every_intent_first_then_closes_each_effect() {
    let env = Env::new("batch");
    let j = env.journal.clone();
    let steps = lvms_actors::Steps::detached(j.clone(), "u");
    steps.begin(subject());
    let ran = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut batch: Vec<lvms_actors::BatchStep<'_>> = Vec::new();
    for i in 0..5 {
        let spec =
            lvms_actors::StepSpec::new(object("ConfigMap", &format!("cm-{i}")), FakeAction::Apply)
                .digest(format!("d{i}"));
        let (ran, j) = (ran.clone(), j.clone());
        batch.push((
            spec,
            lvms_actors::effect(move || async move {
                // Every intent of the batch is durable before any effect runs.
                let intents = records(&j)
                    .iter()
                    .filter(|r| matches!(&r.body, Body::Intent(i) if i.action == "apply"))
                    .count();
                assert_eq!(intents, 5);
                ran.fetch_add(1, Ordering::SeqCst);
                if i == 2 {
                    Err(UnitError::retryable("Conflict", "cm-2 changed"))
                } else {
                    Ok(Done::resource_version(Some(format!("{i}"))))
                }
            }),
        ));
    }
    let err = steps.run_all(batch, 2).await.expect_err("cm-2 fails");
    assert_eq!(err.reason, "Conflict");
    assert_eq!(ran.load(Ordering::SeqCst), 5, "the others still ran");
    let recs = records(&j);
    // The pass intent, then the five step intents with consecutive seqs, then five outcomes.
    let kinds: Vec<&str> = recs.iter().map(|r| r.body.kind_name()).collect();
    assert_eq!(&kinds[..6], ["intent"; 6]);
    assert_eq!(&kinds[6..], ["outcome"; 5]);
    let failed = recs
        .iter()
        .filter(|r| matches!(&r.body, Body::Outcome(o) if matches!(o.result, OutcomeResult::Err { .. })))
        .count();
    assert_eq!(failed, 1);
    assert_eq!(
        j.open_intents_for("u").unwrap().len(),
        1,
        "only the pass is open"
    );
}

/// A batch larger than one journal append: each effect starts only once its own intent is
/// durable, never more than `concurrency` run at once, the next chunk does not wait for the
/// previous one's slowest effect, and every intent is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_batch_is_made_durable_chunk_by_chunk_ahead_of_its_effects() {
    let env = Env::new("batch-large");
    let j = env.journal.clone();
    let steps = lvms_actors::Steps::detached(j.clone(), "u");
    steps.begin(subject());
    let running = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let ahead = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let slow_done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    const N: usize = 150;
    let mut batch: Vec<lvms_actors::BatchStep<'_>> = Vec::new();
    for i in 0..N {
        let name = format!("cm-{i}");
        let spec = lvms_actors::StepSpec::new(object("ConfigMap", &name), FakeAction::Apply);
        let (j, running, peak, ahead) = (j.clone(), running.clone(), peak.clone(), ahead.clone());
        let slow_done = slow_done.clone();
        batch.push((
            spec,
            lvms_actors::effect(move || async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                let intents: Vec<String> = records(&j)
                    .iter()
                    .filter_map(|r| match &r.body {
                        Body::Intent(x) if x.action == "apply" => Some(x.object.name.clone()),
                        _ => None,
                    })
                    .collect();
                assert!(
                    intents.contains(&name),
                    "{name} ran before its intent was durable"
                );
                // The last effect of the first chunk: is the second chunk durable already?
                // The second chunk does not wait for the first chunk's slowest effect.
                if i == 64 && slow_done.load(Ordering::SeqCst) == 0 {
                    ahead.fetch_add(1, Ordering::SeqCst);
                }
                let ms = if i == 63 { 300 } else { 2 };
                tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                if i == 63 {
                    slow_done.fetch_add(1, Ordering::SeqCst);
                }
                running.fetch_sub(1, Ordering::SeqCst);
                Ok(Done::default())
            }),
        ));
    }
    steps.run_all(batch, 4).await.expect("every step succeeds");
    assert!(peak.load(Ordering::SeqCst) <= 4, "{peak:?} in flight");
    assert_eq!(
        ahead.load(Ordering::SeqCst),
        1,
        "no stall at the chunk boundary"
    );
    let recs = records(&j);
    let outcomes = recs
        .iter()
        .filter(|r| matches!(&r.body, Body::Outcome(_)))
        .count();
    assert_eq!(outcomes, N);
    assert_eq!(
        j.open_intents_for("u").unwrap().len(),
        1,
        "only the pass is open"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_snapshot_unit_health_so_a_start_folds_only_the_tail() {
    let env = Env::new("health-snapshots");
    let unit = FakeUnit::new("u");
    let trigger = Trigger::new();
    let j = env.journal.clone();
    let mut args = unit_args(&unit, &j, &trigger);
    args.health_snapshot_every = 8;
    let (actor, _) = spawn_unit(args).await;
    wait_until("the first pass outcome", || pass_outcomes(&j).len() == 1).await;
    // Each health change journals a pass (intent + outcome): 12 changes, ~26 records.
    for n in 0..12u64 {
        unit.set_fail((n % 2 == 0).then(|| UnitError::permanent("InvalidSpec", "bad")));
        trigger.bump("flip");
        wait_until("the flipped pass", || unit.passes() == n + 2).await;
    }
    stop(&actor).await;

    let snapshots: Vec<_> = records(&j)
        .into_iter()
        .filter(|r| r.body.kind_name() == "snapshot")
        .map(|r| r.seq)
        .collect();
    assert!(
        snapshots.len() >= 2,
        "a snapshot per 8 records or so, got {snapshots:?} in {:?}",
        kinds(&j)
    );
    let last = j.next_seq().unwrap() - 1;
    let rebuilt = j.rebuild::<UnitHealth>().unwrap();
    let from = rebuilt
        .from_snapshot
        .expect("the rebuild starts at a snapshot");
    assert_eq!(Some(&from), snapshots.last());
    assert!(last - from < 8, "tail {} records", last - from);
    // The snapshot + tail equals folding every record from the start.
    let mut full = UnitHealth::default();
    full.catch_up(&j, 0).unwrap();
    assert_eq!(rebuilt.state, full);
    assert!(rebuilt.state.units["u"].ok, "the last of 12 flips passes");
}
