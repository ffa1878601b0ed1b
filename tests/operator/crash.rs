//! SIGKILL at each fault point, restart, converge: nothing lost, nothing done twice.

use std::time::Duration;

use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::Api;
use lvms::api::LVMStateType;
use lvms_journal::{Body, Journal, Replayed};
use lvms_testkit::dev::operator::OperatorProcess;

use lvms_testkit::events::assert_no_duplicate_events;
use lvms_testkit::fixtures::thin;
use lvms_testkit::journal::open_intents;
use lvms_testkit::{Scenario, eventually};

const T: Duration = Duration::from_secs(30);
const UNIT: &str = "topolvm-storageclass";
const ALL_EVENTS: &[&str] = &["--normal-events", "all"];

/// The replay verdicts in the journal (how open intents were resolved).
fn replays(journal_dir: &std::path::Path) -> Vec<Replayed> {
    let j = Journal::open_copy(journal_dir.join("operator")).expect("journal");
    j.iter()
        .filter_map(Result::ok)
        .filter_map(|r| match r.body {
            Body::Outcome(o) => o.result.done().and_then(|d| d.replay),
            _ => None,
        })
        .collect()
}

async fn crash_and_converge(point: &str, expect_replay: Option<Replayed>) {
    let s = Scenario::new(&format!("op-crash-{point}")).await;
    // Every unit's success Event: the crash points sit around those Events' publication.
    let mut op = s.operator(&[("LVMS_CRASH_AT", point)], ALL_EVENTS);
    s.create_cluster(thin("my-lvmcluster")).await;
    let status = op
        .wait_exit(T)
        .unwrap_or_else(|| panic!("{point}: the operator did not crash:\n{}", op.log_text()));
    assert!(
        OperatorProcess::killed_by_sigkill(&status),
        "{point}: exited with {status:?}"
    );
    drop(op);

    let _op = s.operator(&[], ALL_EVENTS);
    let scs: Api<StorageClass> = Api::all(s.client.clone());
    eventually(T, || async { scs.get_opt("lvms-vg1").await.unwrap() })
        .await
        .unwrap_or_else(|| panic!("{point}: no StorageClass after restart"));
    let cluster = s
        .wait_state("my-lvmcluster", LVMStateType::Progressing, T)
        .await;
    let ra = cluster
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "ResourcesAvailable")
        .unwrap();
    // All units converge (the status may trail by one pass).
    let ok = eventually(T, || async {
        let c = s.cluster("my-lvmcluster").await?;
        c.status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "ResourcesAvailable" && c.status == "True")
    })
    .await;
    assert!(
        ok.is_some(),
        "{point}: ResourcesAvailable never True (last {ra:?})"
    );
    // Give the publisher a moment, then: exactly one Event per occurrence, none repeated.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let events = s.events().await;
    assert_no_duplicate_events(&events);
    let sc_event = events
        .iter()
        .find(|e| e.note.as_deref().is_some_and(|n| n.starts_with(UNIT)))
        .unwrap_or_else(|| panic!("{point}: no Event for {UNIT}: {events:#?}"));
    assert!(
        sc_event.series.is_none(),
        "{point}: the {UNIT} Event was counted twice: {:?}",
        sc_event.series
    );
    assert_eq!(
        open_intents(&s.journal_dir),
        0,
        "{point}: open intents remain"
    );
    let replays = replays(&s.journal_dir);
    if let Some(want) = expect_replay {
        assert!(
            replays.contains(&want),
            "{point}: want a `{want}` replay, got {replays:?}"
        );
    }
    // Inspect agrees (the CLI users run in a post-mortem).
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lvms"))
        .args(["journal", "inspect", "--open", "-o", "json"])
        .arg(s.operator_journal())
        .output()
        .expect("lvms journal inspect");
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("inspect json");
    assert_eq!(
        v.as_array().map(Vec::len),
        Some(0),
        "{point}: inspect --open: {v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_after_the_intent_is_durable_before_apply() {
    crash_and_converge(&format!("intent-durable:{UNIT}"), Some(Replayed::Redone)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_after_apply_before_the_outcome() {
    crash_and_converge(&format!("applied:{UNIT}"), Some(Replayed::AlreadyDone)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_between_the_outcome_and_its_event() {
    crash_and_converge(&format!("outcome:{UNIT}"), None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_after_the_event_is_written_before_published() {
    crash_and_converge("event-written", None).await;
}
