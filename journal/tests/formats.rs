//! Journals written by earlier releases open, verify, read and keep their open intents; new
//! records are written in the current format next to the old ones.
//!
//! Fixtures (made once by the release named, never rewritten):
//! * `tests/fixtures/journal-v1`: format 1, lvms at stop 10, through the journal API.
//! * `tests/fixtures/journal-v2/{operator,vg-manager}`: format 2, lvms at stop 11, in the
//!   shapes its actors wrote (host argv in the digest, event and replay keys in a detail map).
// Test code: a panic is a failed test, and its output is the report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::Path;
use std::time::Duration;

use lvms_journal::*;

fn fixture_copy(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let dir = tempfile::tempdir().expect("tempdir");
    let to = dir.path().join("journal");
    std::fs::create_dir_all(&to).expect("mkdir");
    for entry in
        std::fs::read_dir(&from).unwrap_or_else(|e| panic!("fixture {name} is missing: {e}"))
    {
        let entry = entry.expect("fixture entry");
        if entry.file_type().expect("type").is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
        }
    }
    (dir, to)
}

fn records(j: &Journal) -> Vec<Record> {
    j.iter().filter_map(|r| r.ok()).collect()
}

fn kinds(recs: &[Record]) -> Vec<&'static str> {
    recs.iter().map(|r| r.body.kind_name()).collect()
}

#[test]
fn a_format_1_journal_reads_verifies_and_keeps_its_open_intents() {
    let (_dir, path) = fixture_copy("journal-v1");
    let j = Journal::open_copy(&path).expect("format 1 opens");
    let report = j.verify().expect("verify");
    // Its last record is of the `observed` kind, which no release wrote through its actors
    // and format 3 dropped: reported by seq, with what it was, never skipped.
    assert_eq!(report.records, 10);
    assert_eq!(report.corrupt.len(), 1, "{report:?}");
    assert_eq!(report.corrupt[0].seq, 10);
    assert!(
        report.corrupt[0].reason.contains("`observed` record"),
        "{}",
        report.corrupt[0].reason
    );
    assert!(report.gaps.is_empty() && report.index_problems.is_empty());
    let recs = records(&j);
    assert_eq!(
        kinds(&recs),
        [
            "intent",
            "intent",
            "outcome",
            "outcome",
            "published",
            "intent",
            "outcome",
            "intent",
            "intent",
        ]
    );
    match &recs[1].body {
        Body::Intent(i) => {
            assert_eq!(i.action, "vgcreate");
            assert_eq!(i.desired_digest, "vgcreate vg1 /dev/loop7 --addtag @lvms");
            assert!(i.args.is_empty(), "format 1 has no args");
            assert!(i.regarding.is_empty(), "format 1 regards nothing else");
        }
        other => panic!("{other:?}"),
    }
    match &recs[6].body {
        Body::Outcome(o) => {
            assert!(
                matches!(&o.result, OutcomeResult::Err { reason, .. } if reason == "VGCreateOrExtendFailed")
            );
            assert!(o.regarding.is_empty());
        }
        other => panic!("{other:?}"),
    }
    let open: Vec<u64> = j
        .open_intents_for("vg/vg1")
        .expect("open intents")
        .iter()
        .map(|r| r.seq)
        .collect();
    assert_eq!(open, vec![8, 9], "the interrupted pass and its vgextend");
    let key = "event/uid-vg1/Normal/VolumeGroupReady/0000000000000001";
    match j.last_published(key).expect("index") {
        Some(Record {
            body: Body::Published(p),
            ..
        }) => assert_eq!((p.source_seq, p.count), (4, 1)),
        other => panic!("{other:?}"),
    }
    let json = render::render_jsonl(&j.query(&Filter::default()).expect("query"));
    assert_eq!(json.lines().count(), 10);
    assert!(json.contains("\"regarding\":[]"), "{json}");
    assert!(json.contains("\"kind\":\"corrupt\""), "{json}");
}

#[test]
fn a_format_2_vg_manager_journal_reads_as_typed_records() {
    let (_dir, path) = fixture_copy("journal-v2/vg-manager");
    let j = Journal::open_copy(&path).expect("format 2 opens");
    let report = j.verify().expect("verify");
    assert!(report.is_clean(), "{report:?}");
    let recs = records(&j);
    assert_eq!(recs.len() as u64, report.records);
    let intents: Vec<&Intent> = recs
        .iter()
        .filter_map(|r| match &r.body {
            Body::Intent(i) => Some(i),
            _ => None,
        })
        .collect();
    // Host steps kept their argv in the digest; args came with format 3.
    let vgcreate = intents
        .iter()
        .find(|i| i.action == "vgcreate")
        .expect("vgcreate");
    assert_eq!(
        vgcreate.desired_digest,
        "/usr/sbin/vgcreate vg1 --addtag @lvms /dev/loop7 /dev/loop8"
    );
    assert!(vgcreate.args.is_empty());
    assert_eq!(
        vgcreate
            .regarding
            .iter()
            .map(|o| o.kind.as_str())
            .collect::<Vec<_>>(),
        ["LVMVolumeGroupNodeStatus", "LVMCluster"]
    );
    // The detail map's keys became the typed report; the rest stay facts.
    let dones: Vec<&Done> = recs
        .iter()
        .filter_map(|r| match &r.body {
            Body::Outcome(o) => o.result.done(),
            _ => None,
        })
        .collect();
    let removed = dones
        .iter()
        .find(|d| {
            d.event
                .as_ref()
                .is_some_and(|e| e.reason == "DeviceRemoved")
        })
        .expect("the DeviceRemoved step");
    assert_eq!(
        removed.event.as_ref().map(|e| (e.warning, e.note.as_str())),
        Some((
            false,
            "successfully removed [/dev/loop8] device(s) from volume group"
        ))
    );
    assert_eq!(
        removed.facts.get("argv").map(String::as_str),
        Some("/usr/sbin/pvremove /dev/loop8")
    );
    assert!(!removed.facts.contains_key("event.reason"));
    assert!(
        dones
            .iter()
            .any(|d| d.summary.as_deref() == Some("volume group vg1 ready") && d.applied == Some(3))
    );
    // The interrupted pass and its vgextend are still open, for replay.
    let open: Vec<String> = j
        .open_intents_for("vg/vg1")
        .expect("open")
        .iter()
        .filter_map(|r| match &r.body {
            Body::Intent(i) => Some(i.action.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(open, ["pass", "vgextend"]);
}

#[test]
fn a_format_2_operator_journal_reads_and_keeps_its_open_apply() {
    let (_dir, path) = fixture_copy("journal-v2/operator");
    let j = Journal::open_copy(&path).expect("format 2 opens");
    assert!(j.verify().expect("verify").is_clean());
    let open = j.open_intents_for("topolvm-storageclass").expect("open");
    assert_eq!(open.len(), 2, "the interrupted pass and its apply");
    match &open[1].body {
        Body::Intent(i) => {
            assert_eq!(
                (i.action.as_str(), i.object.name.as_str()),
                ("apply", "lvms-vg1")
            );
            assert_eq!(i.desired_digest, "9a0b7c6d5e4f3a21");
        }
        other => panic!("{other:?}"),
    }
    let rv: Vec<Option<String>> = records(&j)
        .iter()
        .filter_map(|r| match &r.body {
            Body::Outcome(o) => o.result.done().map(|d| d.resource_version.clone()),
            _ => None,
        })
        .collect();
    assert!(rv.contains(&Some("812".into())), "{rv:?}");
}

#[test]
fn replaying_an_older_journal_appends_current_format_records() {
    for (fixture, unit) in [
        ("journal-v1", "vg/vg1"),
        ("journal-v2/vg-manager", "vg/vg1"),
    ] {
        let (_dir, path) = fixture_copy(fixture);
        let j = Journal::open(&path).expect("opens for writing");
        let open = j.open_intents_for(unit).expect("open");
        let step = open.last().expect("an open step").seq;
        let before = j.next_seq().expect("next");
        // What replay does with the open vgextend: an outcome, now in the current format.
        let seq = j
            .append_outcome(
                step,
                OutcomeResult::Ok(Done::replayed(Replayed::NotDone)),
                Duration::ZERO,
                Trace::default(),
            )
            .expect("close the old intent");
        assert_eq!(seq, before, "{fixture}");
        assert!(!j.is_open(step).expect("open?"));
        let after = j.verify().expect("verify");
        assert!(
            after.gaps.is_empty() && after.index_problems.is_empty(),
            "{after:?}"
        );
        drop(j);
        // Reopened: old and new records side by side, the new one typed.
        let j = reopen(&path);
        match j.get(seq).expect("get") {
            Some(Record {
                body: Body::Outcome(o),
                ..
            }) => assert_eq!(
                o.result.done().and_then(|d| d.replay),
                Some(Replayed::NotDone)
            ),
            other => panic!("{fixture}: {other:?}"),
        }
        assert_eq!(
            j.open_intents_for(unit).expect("open").len(),
            1,
            "{fixture}"
        );
        // The meta now says the current format: an older build refuses it, which this build
        // shows by refusing a journal one version newer than itself (journal.rs tests).

        // `inspect --object`: the old records (no object index then) by scanning, the new
        // one through the index, together exactly what a full scan finds.
        assert_eq!(j.object_index_from(), before, "{fixture}");
        let object = match j.get(step).expect("get") {
            Some(Record {
                body: Body::Intent(i),
                ..
            }) => i.object,
            other => panic!("{fixture}: {other:?}"),
        };
        let filter = ObjectFilter {
            kind: object.kind.to_uppercase(),
            namespace: object.namespace.clone(),
            name: object.name.clone(),
        };
        let found: Vec<u64> = j
            .query(&Filter {
                object: Some(filter.clone()),
                ..Filter::default()
            })
            .expect("query")
            .iter()
            .map(Entry::seq)
            .collect();
        // Corrupt records always pass a filter (their object is unknown), like v1's `observed`.
        let scanned: Vec<u64> = j
            .iter()
            .filter_map(|r| match r {
                Ok(r) => r
                    .object()
                    .is_some_and(|o| filter.matches(o))
                    .then_some(r.seq),
                Err(JournalError::Corrupt(c)) => Some(c.seq),
                Err(e) => panic!("{fixture}: {e}"),
            })
            .collect();
        assert_eq!(found, scanned, "{fixture}");
        assert!(
            found.contains(&step) && found.contains(&seq),
            "{fixture}: {found:?}"
        );
    }
}

fn reopen(path: &Path) -> Journal {
    // sled's flusher thread can hold the file lock a moment after the drop.
    for _ in 0..100 {
        match Journal::open(path) {
            Ok(j) => return j,
            Err(e) if e.to_string().contains("could not acquire lock") => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("reopen: {e}"),
        }
    }
    panic!("journal lock never released")
}
