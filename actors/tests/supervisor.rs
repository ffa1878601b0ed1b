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
