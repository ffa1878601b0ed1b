//! Supervisor: one-for-one restarts, and giving up past the restart intensity.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use lvms_actors::{Readiness, RestartPolicy, Supervisor, SupervisorArgs, Trigger};
use ractor::{Actor, ActorStatus};

fn policy() -> RestartPolicy {
    RestartPolicy {
        max_restarts: 3,
        within: Duration::from_secs(10),
        delay: Duration::from_millis(10),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_child_is_restarted_and_runs_again() {
    let env = Env::new("sup-restart");
    let unit = FakeUnit::new("flaky");
    unit.panic_once.store(true, Ordering::SeqCst);
    let trigger = Trigger::new();
    let readiness = Readiness::default();
    let spawned = Spawned::default();
    let restarted = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let (sup, handle) = Actor::spawn(
        None,
        Supervisor,
        SupervisorArgs {
            children: vec![child_spec_recording(
                "flaky",
                unit_args(&unit, &env.journal, &trigger),
                &spawned,
            )],
            policy: policy(),
            readiness: readiness.clone(),
            on_restart: Some({
                let restarted = restarted.clone();
                std::sync::Arc::new(move |child: &str| {
                    restarted.lock().unwrap().push(child.to_string())
                })
            }),
        },
    )
    .await
    .expect("spawn supervisor");

    // Pass 1 panics; the restarted actor runs pass 2 and journals it.
    let j = env.journal.clone();
    wait_until("the restarted child's pass", || {
        unit.passes() >= 2 && pass_outcomes(&j).len() == 1
    })
    .await;
    assert_eq!(unit.log()[..2], ["reconcile:1", "reconcile:2"]);
    let cells = spawned.lock().unwrap().clone();
    assert_eq!(cells.len(), 2, "first start + one restart");
    assert_ne!(cells[0].get_id(), cells[1].get_id());
    assert_eq!(
        cells[0].get_status(),
        ActorStatus::Stopped,
        "the panicked actor"
    );
    assert_eq!(
        cells[1].get_status(),
        ActorStatus::Running,
        "its replacement"
    );

    // The trigger now reaches the new actor.
    trigger.bump("after restart");
    wait_until("a pass of the new actor", || unit.passes() == 3).await;

    settle().await;
    assert_eq!(unit.passes(), 3);
    assert_eq!(spawned.lock().unwrap().len(), 2, "no further restarts");
    assert_eq!(
        *restarted.lock().unwrap(),
        ["flaky"],
        "the restart hook ran once"
    );
    assert_eq!(sup.get_status(), ActorStatus::Running);
    assert_eq!(sup.get_children().len(), 1, "one live child");
    assert_eq!(readiness.check(), Ok(()));

    sup.stop_and_wait(None, Some(Duration::from_secs(3)))
        .await
        .unwrap();
    handle.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_looping_child_exceeds_the_restart_intensity() {
    let env = Env::new("sup-intensity");
    let doomed = FakeUnit::new("doomed");
    doomed.panic_always.store(true, Ordering::SeqCst);
    let steady = FakeUnit::new("steady");
    let readiness = Readiness::default();
    let (doomed_cells, steady_cells) = (Spawned::default(), Spawned::default());
    let (sup, handle) = Actor::spawn(
        None,
        Supervisor,
        SupervisorArgs {
            children: vec![
                child_spec_recording(
                    "steady",
                    unit_args(&steady, &env.journal, &Trigger::new()),
                    &steady_cells,
                ),
                child_spec_recording(
                    "doomed",
                    unit_args(&doomed, &env.journal, &Trigger::new()),
                    &doomed_cells,
                ),
            ],
            policy: policy(),
            readiness: readiness.clone(),
            on_restart: None,
        },
    )
    .await
    .expect("spawn supervisor");

    tokio::time::timeout(Duration::from_secs(4), handle)
        .await
        .expect("the supervisor gives up and stops")
        .unwrap();
    assert_eq!(sup.get_status(), ActorStatus::Stopped);
    let err = readiness.check().expect_err("not ready after giving up");
    assert!(err.contains("restart intensity exceeded"), "{err}");
    assert!(err.contains("doomed"), "names the child: {err}");

    // First start + 3 restarts, then no more.
    settle().await;
    assert_eq!(doomed.passes(), 4, "{:?}", doomed.log());
    assert_eq!(doomed_cells.lock().unwrap().len(), 4);
    // The healthy sibling was never restarted, and went down with its supervisor.
    let steady_cells = steady_cells.lock().unwrap().clone();
    assert_eq!(steady_cells.len(), 1);
    wait_until("the sibling to stop", || {
        steady_cells[0].get_status() == ActorStatus::Stopped
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_added_at_run_time_are_supervised_and_a_stopped_one_is_not_restarted() {
    let env = Env::new("sup-dynamic");
    let unit = FakeUnit::new("vg1");
    let trigger = Trigger::new();
    let spawned = Spawned::default();
    let (sup, handle) = Actor::spawn(
        None,
        Supervisor,
        SupervisorArgs {
            children: vec![],
            policy: policy(),
            readiness: Readiness::default(),
            on_restart: None,
        },
    )
    .await
    .expect("spawn supervisor");
    let spec = child_spec_recording("vg1", unit_args(&unit, &env.journal, &trigger), &spawned);
    sup.send_message(lvms_actors::SupervisorMsg::Start(spec.clone()))
        .unwrap();
    // A duplicate Start for a running child is ignored.
    sup.send_message(lvms_actors::SupervisorMsg::Start(spec.clone()))
        .unwrap();
    wait_until("the added child runs a pass", || unit.passes() >= 1).await;
    assert_eq!(spawned.lock().unwrap().len(), 1);

    sup.send_message(lvms_actors::SupervisorMsg::Stop("vg1".into()))
        .unwrap();
    wait_until("the child stopped", || sup.get_children().is_empty()).await;
    settle().await;
    assert_eq!(
        spawned.lock().unwrap().len(),
        1,
        "a stopped child was restarted"
    );
    assert_eq!(sup.get_status(), ActorStatus::Running);

    // Back again (the object reappeared): started once more.
    sup.send_message(lvms_actors::SupervisorMsg::Start(spec))
        .unwrap();
    wait_until("restarted on request", || {
        spawned.lock().unwrap().len() == 2
    })
    .await;

    sup.stop_and_wait(None, Some(Duration::from_secs(3)))
        .await
        .unwrap();
    handle.await.unwrap();
}

async fn empty_supervisor(
    policy: RestartPolicy,
) -> (
    ractor::ActorRef<lvms_actors::SupervisorMsg>,
    tokio::task::JoinHandle<()>,
) {
    Actor::spawn(
        None,
        Supervisor,
        SupervisorArgs {
            children: vec![],
            policy,
            readiness: Readiness::default(),
            on_restart: None,
        },
    )
    .await
    .expect("spawn supervisor")
}

/// Issue 41: a Stop and a Start of the same unit while its pass is held inside a step (intent
/// durable, effect running) must not run a second instance beside it. Exactly one instance
/// acts at a time; the new one starts after the old one ended and replays nothing, because
/// nothing the old one began is left open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_of_a_unit_waits_for_its_stopping_instance_to_end() {
    let env = Env::new("sup-one-instance");
    let unit = FakeUnit::new("vg/a");
    unit.steps_per_pass.store(1, Ordering::SeqCst);
    unit.hold_in_step.store(true, Ordering::SeqCst);
    let spawned = Spawned::default();
    let (sup, handle) = empty_supervisor(policy()).await;
    let spec =
        |t: &Trigger| child_spec_recording("vg/a", unit_args(&unit, &env.journal, t), &spawned);
    sup.send_message(lvms_actors::SupervisorMsg::Start(spec(&Trigger::new())))
        .unwrap();
    wait_until("the first instance is inside its step", || {
        unit.in_step.load(Ordering::SeqCst) == 1
    })
    .await;
    let in_flight = env.journal.open_intents_for("vg/a").unwrap();
    assert_eq!(
        in_flight.len(),
        2,
        "the pass and its step are open: {in_flight:?}"
    );

    // The object went away and came back (the registry's Stop then Start).
    sup.send_message(lvms_actors::SupervisorMsg::Stop("vg/a".into()))
        .unwrap();
    sup.send_message(lvms_actors::SupervisorMsg::Start(spec(&Trigger::new())))
        .unwrap();
    settle().await;
    assert_eq!(
        spawned.lock().unwrap().len(),
        1,
        "a second instance was started while the first was still in its step"
    );
    assert!(
        unit.replayed().is_empty(),
        "replayed an intent in flight: {:?}",
        unit.replayed()
    );

    // The held step finishes; the old instance ends; only then the new one starts.
    unit.hold_in_step.store(false, Ordering::SeqCst);
    wait_until("the new instance", || spawned.lock().unwrap().len() == 2).await;
    let cells = spawned.lock().unwrap().clone();
    wait_until("the new instance's pass", || unit.passes() >= 2).await;
    settle().await;
    assert_eq!(cells[0].get_status(), ActorStatus::Stopped);
    assert_eq!(cells[1].get_status(), ActorStatus::Running);
    assert_eq!(
        unit.max_in_step.load(Ordering::SeqCst),
        1,
        "two instances acted at once"
    );
    assert!(
        unit.replayed().is_empty(),
        "the new instance replayed {:?}",
        unit.replayed()
    );
    assert!(
        env.journal.open_intents().unwrap().is_empty(),
        "every intent closed by the instance that opened it"
    );
    assert_eq!(
        records(&env.journal)
            .iter()
            .filter(|r| matches!(&r.body, lvms_journal::Body::Outcome(o)
                if matches!(&o.result, lvms_journal::OutcomeResult::Err { .. })))
            .count(),
        0,
        "no failed outcome on a healthy stop and start"
    );
    assert_eq!(sup.get_children().len(), 1, "one live instance");
    sup.stop_and_wait(None, Some(Duration::from_secs(3)))
        .await
        .unwrap();
    handle.await.unwrap();
}

/// Issue 41: a stop during a crashed child's restart delay, then a start, must not leave the
/// delayed restart to spawn a second instance beside the started one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_due_after_a_stop_and_start_does_not_spawn_a_second_instance() {
    let env = Env::new("sup-stale-restart");
    let unit = FakeUnit::new("vg/b");
    unit.panic_once.store(true, Ordering::SeqCst);
    let spawned = Spawned::default();
    let slow = RestartPolicy {
        delay: Duration::from_millis(400),
        ..policy()
    };
    let (sup, handle) = empty_supervisor(slow).await;
    let spec =
        |t: &Trigger| child_spec_recording("vg/b", unit_args(&unit, &env.journal, t), &spawned);
    sup.send_message(lvms_actors::SupervisorMsg::Start(spec(&Trigger::new())))
        .unwrap();
    wait_until("the first pass panicked", || {
        unit.passes() == 1 && sup.get_children().is_empty()
    })
    .await;
    // Within the restart delay: the object goes and comes back.
    sup.send_message(lvms_actors::SupervisorMsg::Stop("vg/b".into()))
        .unwrap();
    sup.send_message(lvms_actors::SupervisorMsg::Start(spec(&Trigger::new())))
        .unwrap();
    wait_until("the started instance", || {
        spawned.lock().unwrap().len() == 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await; // past the restart delay
    assert_eq!(
        spawned.lock().unwrap().len(),
        2,
        "the stale restart spawned another instance"
    );
    assert_eq!(sup.get_children().len(), 1, "one live instance");
    sup.stop_and_wait(None, Some(Duration::from_secs(3)))
        .await
        .unwrap();
    handle.await.unwrap();
}

/// Issue 41, the second line: two instances of one unit started side by side outside any
/// supervisor. The older one's claim is superseded, so its next append is refused and it ends
/// itself without acting; the newer one does the work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_superseded_instance_cannot_act_and_ends_itself() {
    let env = Env::new("sup-superseded");
    let unit = FakeUnit::new("vg/c");
    unit.steps_per_pass.store(1, Ordering::SeqCst);
    unit.hold.store(true, Ordering::SeqCst); // each pass waits before its step
    let (old, old_handle) = spawn_unit(unit_args(&unit, &env.journal, &Trigger::new())).await;
    wait_until("the old instance's pass", || unit.passes() == 1).await;
    let (new, new_handle) = spawn_unit(unit_args(&unit, &env.journal, &Trigger::new())).await;
    wait_until("the new instance's pass", || unit.passes() == 2).await;
    unit.hold.store(false, Ordering::SeqCst);
    tokio::time::timeout(Duration::from_secs(3), old_handle)
        .await
        .expect("the superseded instance ends itself")
        .unwrap();
    wait_until("the new instance's step", || unit.effects().len() == 1).await;
    settle().await;
    assert_eq!(unit.effects().len(), 1, "only the current instance acted");
    assert_eq!(old.get_status(), ActorStatus::Stopped);
    assert_eq!(new.get_status(), ActorStatus::Running);
    assert!(env.journal.open_intents().unwrap().is_empty());
    stop(&new).await;
    new_handle.await.unwrap();
}
