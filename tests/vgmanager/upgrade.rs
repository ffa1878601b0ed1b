//! Upgrading over a crash: the journals the previous release (format 2) left with open intents
//! are replayed by this release's operator and vg-manager, and closed with typed verdicts.
//! The fixtures are in journal/tests/fixtures/journal-v2 (written by lvms at stop 11).

use std::path::Path;
use std::time::Duration;

use lvms_journal::{Body, Journal, Replayed};

use lvms_testkit::disks::require_prerequisites;
use lvms_testkit::kubelet::create_node;
use lvms_testkit::{Scenario, eventually};

const T: Duration = Duration::from_secs(60);

fn copy_fixture(name: &str, to: &Path) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("journal/tests/fixtures")
        .join(name);
    std::fs::create_dir_all(to).expect("journal dir");
    for entry in std::fs::read_dir(&from).expect("fixture") {
        let entry = entry.expect("entry");
        if entry.file_type().expect("type").is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
        }
    }
}

/// (action, verdict) of every replayed intent of `unit`, once none of its intents is open.
fn replayed(journal: &Path, unit: &str) -> Option<Vec<(String, Replayed)>> {
    let j = Journal::open_copy(journal).ok()?;
    if !j.open_intents_for(unit).ok()?.is_empty() {
        return None;
    }
    let recs: Vec<_> = j.iter().filter_map(Result::ok).collect();
    Some(
        recs.iter()
            .filter_map(|r| match &r.body {
                Body::Outcome(o) if o.unit == unit => {
                    let verdict = o.result.done()?.replay?;
                    let action = recs.iter().find_map(|i| match &i.body {
                        Body::Intent(intent) if i.seq == o.intent_seq => {
                            Some(intent.action.clone())
                        }
                        _ => None,
                    })?;
                    Some((action, verdict))
                }
                _ => None,
            })
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn format_2_journals_with_open_intents_are_replayed_by_both_processes() {
    require_prerequisites();
    let s = Scenario::new("upgrade-v2").await;
    create_node(&s.client, "node-a", false).await;
    copy_fixture("journal-v2/operator", &s.operator_journal());
    copy_fixture("journal-v2/vg-manager", &s.vg_manager_journal("node-a"));

    let _op = s.operator(&[], &[]);
    let _vgm = s.vg_manager("node-a", &[]);

    // The operator's interrupted apply of StorageClass lvms-vg1: no LVMCluster wants it now.
    let op = eventually(T, || async {
        replayed(&s.operator_journal(), "topolvm-storageclass")
    })
    .await
    .expect("the operator never closed the format-2 open intents");
    assert_eq!(op, [("apply".to_string(), Replayed::Superseded)]);

    // vg-manager's interrupted vgextend of vg1 with /dev/loop9 (argv in the format-2 digest):
    // the host shows no such VG, so it did not happen; nothing is run again.
    let vgm = eventually(T, || async {
        replayed(&s.vg_manager_journal("node-a"), "vg/vg1")
    })
    .await
    .expect("vg-manager never closed the format-2 open intents");
    assert_eq!(vgm, [("vgextend".to_string(), Replayed::NotDone)]);

    for journal in [s.operator_journal(), s.vg_manager_journal("node-a")] {
        let j = lvms_testkit::journal::settled(&journal, Duration::from_secs(60));
        let report = j.verify().expect("verify");
        assert!(report.is_clean(), "{}: {report:?}", journal.display());
    }
}
