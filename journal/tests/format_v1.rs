//! A journal written by the previous release (format 1, `tests/fixtures/journal-v1`, made by
//! lvms at stop 10) opens, verifies, reads and keeps its open intents; new records are written
//! in the current format next to the old ones, and the journal then refuses older readers.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use lvms_journal::*;

fn fixture_copy() -> (tempfile::TempDir, std::path::PathBuf) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/journal-v1");
    let dir = tempfile::tempdir().expect("tempdir");
    let to = dir.path().join("journal");
    std::fs::create_dir_all(&to).expect("mkdir");
    for entry in std::fs::read_dir(&from).expect("fixture journal-v1 is missing") {
        let entry = entry.expect("fixture entry");
        if entry.file_type().expect("type").is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
        }
    }
    (dir, to)
}

#[test]
fn a_format_1_journal_reads_verifies_and_keeps_its_open_intents() {
    let (_dir, path) = fixture_copy();
    let j = Journal::open_copy(&path).expect("format 1 opens");
    let report = j.verify().expect("verify");
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.records, 10);
    let recs: Vec<Record> = j.iter().map(|r| r.expect("decodes")).collect();
    let kinds: Vec<&str> = recs.iter().map(|r| r.body.kind_name()).collect();
    assert_eq!(
        kinds,
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
            "observed"
        ]
    );
    match &recs[1].body {
        Body::Intent(i) => {
            assert_eq!(i.action, "vgcreate");
            assert_eq!(i.desired_digest, "vgcreate vg1 /dev/loop7 --addtag @lvms");
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
}

#[test]
fn replaying_a_format_1_journal_appends_format_2_records() {
    let (_dir, path) = fixture_copy();
    let j = Journal::open(&path).expect("format 1 opens for writing");
    // What replay does with the open vgextend: an outcome, now in format 2.
    let seq = j
        .append_outcome(
            9,
            OutcomeResult::Ok {
                resource_version: None,
                detail: BTreeMap::from([("replay".into(), "not-done".into())]),
            },
            Duration::ZERO,
            Trace::default(),
        )
        .expect("close the old intent");
    assert_eq!(seq, 11);
    assert!(!j.is_open(9).expect("open?"));
    assert!(j.verify().expect("verify").is_clean());
    drop(j);
    // Reopened: old and new records side by side.
    let j = reopen(&path);
    assert_eq!(j.iter().filter(|r| r.is_ok()).count(), 11);
    assert_eq!(j.open_intents_for("vg/vg1").expect("open").len(), 1);
    drop(j);
    // The meta now says format 2: a format-1 build must refuse it, which this build shows
    // by refusing a journal one version newer than itself (journal.rs tests).
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
