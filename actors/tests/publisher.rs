//! EventPublisher: pass outcomes → Events, aggregated per key, exactly once across restarts.
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use lvms_actors::{EventPublisher, PublisherArgs, PublisherMsg, Trigger, UnitError};
use lvms_journal::{Journal, PublishKind};
use ractor::{Actor, ActorRef};

async fn spawn_publisher(journal: &Arc<Journal>, sink: &Arc<FakeSink>) -> ActorRef<PublisherMsg> {
    spawn_publisher_with(journal, sink, Arc::new(pass_event)).await
}

async fn spawn_publisher_with(
    journal: &Arc<Journal>,
    sink: &Arc<FakeSink>,
    event_for: lvms_actors::EventMapper,
) -> ActorRef<PublisherMsg> {
    spawn_publisher_checkpointing(journal, sink, event_for, lvms_actors::CHECKPOINT_EVERY).await
}

async fn spawn_publisher_checkpointing(
    journal: &Arc<Journal>,
    sink: &Arc<FakeSink>,
    event_for: lvms_actors::EventMapper,
    checkpoint_every: u64,
) -> ActorRef<PublisherMsg> {
    let (p, _) = Actor::spawn(
        None,
        EventPublisher::<FakeSink>::default(),
        PublisherArgs {
            sink: sink.clone(),
            journal: journal.clone(),
            event_for,
            checkpoint_every,
        },
    )
    .await
    .expect("spawn publisher");
    p
}

/// Let the publisher finish everything queued (catch-up included), then stop it.
async fn drain(p: &ActorRef<PublisherMsg>) {
    p.drain_and_wait(Some(Duration::from_secs(3)))
        .await
        .expect("publisher drains");
}

/// Run `passes` passes of `unit` with a publisher attached; returns once all are done.
async fn run_passes(
    unit: &Arc<FakeUnit>,
    journal: &Arc<Journal>,
    publisher: &ActorRef<PublisherMsg>,
    passes: u64,
) {
    let trigger = Trigger::new();
    let mut args = unit_args(unit, journal, &trigger);
    args.publisher = Some(publisher.clone());
    let start = unit.passes();
    let (actor, _) = spawn_unit(args).await;
    wait_until("the start pass", || unit.passes() == start + 1).await;
    for n in 2..=passes {
        trigger.bump("next");
        wait_until("another pass", || unit.passes() == start + n).await;
    }
    stop(&actor).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_pass_outcome_is_published_once_with_its_seq() {
    let env = Env::new("pub-each");
    let j = env.journal.clone();
    let sink = FakeSink::new();
    let publisher = spawn_publisher(&j, &sink).await;

    let unit = FakeUnit::new("u");
    unit.steps_per_pass.store(1, Ordering::SeqCst); // step outcomes must not become Events
    unit.numbered_summary.store(true, Ordering::SeqCst); // a distinct Event per pass
    run_passes(&unit, &j, &publisher, 3).await;
    drain(&publisher).await;

    let outcomes = pass_outcomes(&j);
    assert_eq!(outcomes.len(), 3);
    let writes = sink.writes();
    assert_eq!(writes.len(), 3, "one write per pass outcome: {writes:?}");
    assert!(writes.iter().all(|(_, count)| *count == 1));
    assert_eq!(
        writes.iter().map(|(k, _)| k).collect::<BTreeSet<_>>().len(),
        3
    );

    let published = published(&j);
    assert_eq!(published.len(), 3);
    let outcome_seqs: Vec<_> = outcomes.iter().map(|(s, _)| *s).collect();
    let source_seqs: Vec<_> = published.iter().map(|(_, p)| p.source_seq).collect();
    assert_eq!(source_seqs, outcome_seqs);
    for ((_, p), (key, count)) in published.iter().zip(&writes) {
        assert_eq!(&p.dedupe_key, key);
        assert_eq!(p.count, *count);
        assert_eq!(p.kind, PublishKind::Event);
        assert_eq!(p.unit, "u");
        assert_eq!(p.object.as_ref(), Some(&subject()));
        assert_eq!(
            j.last_published(key).unwrap().map(|r| r.seq),
            Some(
                published
                    .iter()
                    .find(|(_, q)| &q.dedupe_key == key)
                    .unwrap()
                    .0
            )
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_events_aggregate_and_a_restarted_publisher_writes_nothing() {
    let env = Env::new("pub-aggregate");
    let j = env.journal.clone();
    let sink = FakeSink::new();
    let publisher = spawn_publisher(&j, &sink).await;

    // Three identical failing passes (each with a step, so each is journaled).
    let unit = FakeUnit::new("u");
    unit.steps_per_pass.store(1, Ordering::SeqCst);
    unit.set_fail(Some(UnitError::permanent(
        "VolumeGroupMissing",
        "vg1 not found on node-a",
    )));
    run_passes(&unit, &j, &publisher, 3).await;
    drain(&publisher).await;

    let outcomes = pass_outcomes(&j);
    assert_eq!(outcomes.len(), 3);
    let writes = sink.writes();
    assert_eq!(writes.len(), 3, "{writes:?}");
    let key = writes[0].0.clone();
    assert_eq!(
        writes,
        [(key.clone(), 1), (key.clone(), 2), (key.clone(), 3)],
        "one Event object whose count grows"
    );
    let published = published(&j);
    let got: Vec<_> = published
        .iter()
        .map(|(_, p)| (p.dedupe_key.clone(), p.source_seq, p.count))
        .collect();
    let want: Vec<_> = outcomes
        .iter()
        .zip(1..)
        .map(|((seq, _), n)| (key.clone(), *seq, n))
        .collect();
    assert_eq!(got, want);
    assert!(published[0].1.summary.contains("VolumeGroupMissing"));

    // Exactly once across restarts: a new publisher on the same journal writes nothing.
    let next = j.next_seq().unwrap();
    for _ in 0..2 {
        let publisher = spawn_publisher(&j, &sink).await;
        drain(&publisher).await;
        assert_eq!(sink.writes().len(), 3, "{:?}", sink.writes());
        assert_eq!(j.next_seq().unwrap(), next, "no new Published records");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outcome_never_published_is_published_once_after_restart() {
    let env = Env::new("pub-catch-up");
    let j = env.journal.clone();
    let sink = FakeSink::new();
    let failure = || err_result("DeviceBusy", "/dev/sdb is in use");

    // Two occurrences published while the publisher ran.
    let publisher = spawn_publisher(&j, &sink).await;
    for _ in 0..2 {
        let (_, o) = append_pass(&j, "u", failure());
        publisher.send_message(PublisherMsg::Outcome(o)).unwrap();
    }
    drain(&publisher).await;
    assert_eq!(
        sink.writes().iter().map(|w| w.1).collect::<Vec<_>>(),
        [1, 2]
    );

    // The process dies after the third outcome, before the publisher saw it.
    let (_, third) = append_pass(&j, "u", failure());
    // Something else, which must not produce an Event, happens too.
    append_pass(&j, "u", ok_result("recovered"));
    let last_ok = pass_outcomes(&j).last().unwrap().0;

    let publisher = spawn_publisher(&j, &sink).await;
    drain(&publisher).await;
    let writes = sink.writes();
    assert_eq!(writes.len(), 4, "{writes:?}");
    assert_eq!(
        writes[2].0, writes[0].0,
        "same key as the earlier occurrences"
    );
    assert_eq!(writes[2].1, 3, "the right count");
    assert_eq!(writes[3].1, 1, "the ok pass is its own Event");
    let sources: Vec<_> = published(&j)
        .iter()
        .map(|(_, p)| (p.source_seq, p.count))
        .collect();
    assert_eq!(sources[2..], [(third, 3), (last_ok, 1)]);

    // Another restart: nothing left to do.
    let next = j.next_seq().unwrap();
    let publisher = spawn_publisher(&j, &sink).await;
    drain(&publisher).await;
    assert_eq!(sink.writes().len(), 4);
    assert_eq!(j.next_seq().unwrap(), next);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_the_write_and_published_rewrites_the_same_count_once() {
    let env = Env::new("pub-crash");
    let j = env.journal.clone();
    let sink = FakeSink::new();
    let failure = || err_result("DeviceBusy", "/dev/sdb is in use");

    let publisher = spawn_publisher(&j, &sink).await;
    let (_, first) = append_pass(&j, "u", failure());
    publisher
        .send_message(PublisherMsg::Outcome(first))
        .unwrap();
    wait_until("the first Event", || published(&j).len() == 1).await;
    // The second write reaches the API, but no Published record follows (the response is
    // lost; then the process dies before its retry).
    sink.fail_after_write.store(1, Ordering::SeqCst);
    let (_, second) = append_pass(&j, "u", failure());
    publisher
        .send_message(PublisherMsg::Outcome(second))
        .unwrap();
    drain(&publisher).await;
    let key = sink.writes()[0].0.clone();
    assert_eq!(sink.writes(), [(key.clone(), 1), (key.clone(), 2)]);
    assert_eq!(published(&j).len(), 1);

    // Restart: the same count is written again (idempotent), then recorded.
    let publisher = spawn_publisher(&j, &sink).await;
    drain(&publisher).await;
    assert_eq!(
        sink.writes(),
        [(key.clone(), 1), (key.clone(), 2), (key.clone(), 2)]
    );
    let p = published(&j);
    assert_eq!(p.len(), 2);
    assert_eq!((p[1].1.source_seq, p[1].1.count), (second, 2));

    // And once more: nothing.
    let publisher = spawn_publisher(&j, &sink).await;
    drain(&publisher).await;
    assert_eq!(sink.writes().len(), 3);
    assert_eq!(published(&j).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_write_is_retried_by_the_running_publisher() {
    let env = Env::new("pub-retry");
    let j = env.journal.clone();
    let sink = FakeSink::new();
    sink.fail_after_write.store(1, Ordering::SeqCst);
    let (_, o) = append_pass(&j, "u", err_result("DeviceBusy", "/dev/sdb is in use"));
    // The start-up scan finds the outcome and its write fails; no other message arrives, so
    // only the publisher's own retry timer (2 s) can get it out.
    let publisher = spawn_publisher(&j, &sink).await;
    wait_until("the failed first write", || sink.writes().len() == 1).await;
    assert!(published(&j).is_empty());
    wait_until_within(
        Duration::from_secs(4),
        "the retried write to be recorded",
        || published(&j).len() == 1,
    )
    .await;
    let writes = sink.writes();
    assert_eq!(writes.len(), 2);
    assert_eq!(writes[0], writes[1], "the retry writes the same count");
    assert_eq!(published(&j)[0].1.source_seq, o);
    drain(&publisher).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_outcome_regarding_two_objects_is_published_once_per_object() {
    let env = Env::new("pub-fanout");
    let j = env.journal.clone();
    let sink = FakeSink::new();
    let (_, o) = append_pass(&j, "u", err_result("DeviceBusy", "/dev/sdb is in use"));
    let publisher = spawn_publisher_with(&j, &sink, Arc::new(pass_event_and_owner)).await;
    wait_until("both objects published", || published(&j).len() == 2).await;
    drain(&publisher).await;
    let keys: BTreeSet<String> = sink.writes().into_iter().map(|(k, _)| k).collect();
    assert_eq!(sink.writes().len(), 2);
    assert_eq!(keys.len(), 2, "one Event object per regarded object");
    assert!(published(&j).iter().all(|(_, p)| p.source_seq == o));

    // A crash after the first object's Published record: the restarted publisher writes
    // only the second one.
    let env2 = Env::new("pub-fanout-2");
    let j2 = env2.journal.clone();
    let sink2 = FakeSink::new();
    append_pass(&j2, "u", err_result("DeviceBusy", "/dev/sdb is in use"));
    let first = FakeSink::new();
    // Publish with a mapper that knows only the first object, as a process that died
    // before handling the second would have left it.
    let p1 = spawn_publisher_with(&j2, &first, Arc::new(pass_event)).await;
    wait_until("the first object published", || published(&j2).len() == 1).await;
    drain(&p1).await;
    let p2 = spawn_publisher_with(&j2, &sink2, Arc::new(pass_event_and_owner)).await;
    wait_until("the second object published", || published(&j2).len() == 2).await;
    drain(&p2).await;
    let rewritten: Vec<String> = sink2.writes().into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        rewritten.len(),
        1,
        "only the unpublished object is written: {rewritten:?}"
    );
    assert!(rewritten[0].contains("-owner"));
}

/// The publisher checkpoints its cursor: a restart looks only at records after the checkpoint
/// (not the whole journal), and still publishes, exactly once, every outcome it had not seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_resumes_at_the_checkpoint_and_misses_nothing_after_it() {
    let env = Env::new("pub-checkpoint");
    let j = env.journal.clone();
    let sink = FakeSink::new();
    // Which records the mapper was asked about, per publisher run.
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let counting = |asked: &Arc<std::sync::Mutex<Vec<u64>>>| -> lvms_actors::EventMapper {
        let asked = asked.clone();
        Arc::new(move |j: &Journal, r: &lvms_journal::Record| {
            asked.lock().unwrap().push(r.seq);
            pass_event(j, r)
        })
    };
    let distinct = |n: usize| ok_result(&format!("pass {n}"));

    let publisher = spawn_publisher_checkpointing(&j, &sink, counting(&asked), 8).await;
    for n in 0..10 {
        let (_, o) = append_pass(&j, "u", distinct(n));
        publisher.send_message(PublisherMsg::Outcome(o)).unwrap();
    }
    drain(&publisher).await;
    assert_eq!(sink.writes().len(), 10);
    let at = j
        .checkpointed(lvms_actors::PUBLISHER_CHECKPOINT)
        .unwrap()
        .expect("a checkpoint after 8 records");
    // Everything up to the checkpoint has its Event out.
    let out: BTreeSet<_> = published(&j).iter().map(|(_, p)| p.source_seq).collect();
    let before: Vec<_> = pass_outcomes(&j)
        .iter()
        .map(|(s, _)| *s)
        .filter(|s| *s <= at)
        .collect();
    assert!(!before.is_empty());
    assert!(before.iter().all(|s| out.contains(s)), "{before:?}");

    // The process dies; three more passes are journaled that no publisher saw.
    let unseen: Vec<_> = (10..13)
        .map(|n| append_pass(&j, "u", distinct(n)).1)
        .collect();
    asked.lock().unwrap().clear();
    let publisher = spawn_publisher_checkpointing(&j, &sink, counting(&asked), 8).await;
    drain(&publisher).await;
    let looked_at = asked.lock().unwrap().clone();
    assert!(
        looked_at.iter().all(|s| *s > at),
        "a restart looks only past its checkpoint {at}: {looked_at:?}"
    );
    for s in &unseen {
        assert!(looked_at.contains(s), "{s} not looked at: {looked_at:?}");
    }
    let writes = sink.writes();
    assert_eq!(
        writes.len(),
        13,
        "the three unseen once, nothing again: {writes:?}"
    );
    let sources: Vec<_> = published(&j).iter().map(|(_, p)| p.source_seq).collect();
    assert_eq!(sources[10..], unseen[..]);
}
