//! Check 7 (issue 41): the volume-group units' host commands in one cycle. In a cycle without
//! kills no host step fails (a healthy create or delete never meets "already exists"), and in
//! any cycle a command (same unit, action and argv) has a second intent only when replay proved
//! the earlier one not done: two live instances of one unit show up as exactly that.

use std::collections::BTreeMap;
use std::ops::Range;

use lvms::node::vg::actions::VolumeGroupAction;
use lvms_actors::Action;
use lvms_journal::{Body, OutcomeResult, Record, Replayed, Seq};

use crate::cycle::Soak;

/// One finding: (kind, key, detail).
type Finding = (&'static str, String, String);

/// The check as a pure function of a journal's records: intents written within `window`
/// (unix ms) are the cycle's (outcomes are looked up in all of `recs`).
pub(crate) fn host_command_findings(
    recs: &[Record],
    window: Range<u64>,
    killed: bool,
) -> Vec<Finding> {
    let outcomes: BTreeMap<Seq, &OutcomeResult> = recs
        .iter()
        .filter_map(|r| match &r.body {
            Body::Outcome(o) => Some((o.intent_seq, &o.result)),
            _ => None,
        })
        .collect();
    let verdict = |seq: Seq| match outcomes.get(&seq) {
        None => "open".to_string(),
        Some(OutcomeResult::Err {
            reason, message, ..
        }) => format!("failed ({reason}: {message})"),
        Some(OutcomeResult::Ok(d)) => match d.replay {
            None => "ran".to_string(),
            Some(v) => format!("replay={v}"),
        },
    };
    let mut out = Vec::new();
    let mut by_command: BTreeMap<(String, String, String), Vec<Seq>> = BTreeMap::new();
    for r in recs.iter().filter(|r| window.contains(&r.at_ms)) {
        let Body::Intent(i) = &r.body else { continue };
        if !i.unit.starts_with("vg/")
            || !VolumeGroupAction::parse(&i.action).is_some_and(VolumeGroupAction::runs_a_command)
        {
            continue;
        }
        if !killed && matches!(outcomes.get(&r.seq), Some(OutcomeResult::Err { .. })) {
            out.push((
                "failed-host-outcome",
                format!("{}/{}", i.unit, r.seq),
                format!(
                    "{} {} (seq {}) {} in a cycle without kills",
                    i.unit,
                    i.action,
                    r.seq,
                    verdict(r.seq)
                ),
            ));
        }
        by_command
            .entry((i.unit.clone(), i.action.clone(), i.args.join(" ")))
            .or_default()
            .push(r.seq);
    }
    for ((unit, action, argv), seqs) in by_command {
        let Some((_, earlier)) = seqs.split_last() else {
            continue;
        };
        let proved_not_done = |seq: &Seq| matches!(outcomes.get(seq), Some(OutcomeResult::Ok(d)) if d.replay == Some(Replayed::NotDone));
        if !earlier.iter().all(proved_not_done) {
            let all: Vec<String> = seqs
                .iter()
                .map(|s| format!("seq {s}: {}", verdict(*s)))
                .collect();
            out.push((
                "duplicate-host-command",
                format!("{unit}/{action}/{}", seqs[0]),
                format!(
                    "{unit} {action} `{argv}` has {} intents, and replay did not prove the earlier ones not done: [{}]",
                    seqs.len(),
                    all.join(", ")
                ),
            ));
        }
    }
    out
}

impl Soak<'_> {
    pub(crate) fn check_host_commands(
        &mut self,
        k: usize,
        node: &str,
        recs: &[Record],
        window: Range<u64>,
        killed: bool,
    ) {
        for (kind, key, detail) in host_command_findings(recs, window, killed) {
            self.report.add(
                k,
                kind,
                &format!("{k}/{node}/{key}"),
                format!("{node}: {detail}"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lvms_journal::{Done, Intent, ObjectRef, Outcome};

    fn intent(seq: Seq, at_ms: u64, action: &str) -> Record {
        Record {
            seq,
            at_ms,
            trace: Default::default(),
            body: Body::Intent(Intent {
                unit: "vg/a".into(),
                object: ObjectRef::default(),
                action: action.into(),
                args: vec!["vgcreate".into(), "a".into(), "/dev/loop1".into()],
                desired_digest: String::new(),
                idempotency_key: String::new(),
                lease_epoch: 0,
                regarding: vec![],
            }),
        }
    }

    fn outcome(seq: Seq, of: Seq, result: OutcomeResult) -> Record {
        Record {
            seq,
            at_ms: 0,
            trace: Default::default(),
            body: Body::Outcome(Outcome {
                intent_seq: of,
                unit: "vg/a".into(),
                object: ObjectRef::default(),
                result,
                duration_ms: 0,
                regarding: vec![],
            }),
        }
    }

    fn ran() -> OutcomeResult {
        OutcomeResult::Ok(Done::default())
    }

    fn failed() -> OutcomeResult {
        OutcomeResult::Err {
            reason: "VGCreateOrExtendFailed".into(),
            message: "A volume group called a already exists".into(),
            retryable: true,
        }
    }

    /// The journal issue 41 showed: two vgcreate intents, one from each live instance, the
    /// second failing.
    #[test]
    fn two_instances_creating_one_vg_are_both_findings() {
        let recs = vec![
            intent(83, 10, "vgcreate"),
            intent(85, 11, "vgcreate"),
            outcome(86, 83, ran()),
            outcome(87, 85, failed()),
        ];
        let kinds: Vec<&str> = host_command_findings(&recs, 0..u64::MAX, false)
            .into_iter()
            .map(|f| f.0)
            .collect();
        assert_eq!(kinds, ["failed-host-outcome", "duplicate-host-command"]);
        // With kills, the failure alone is allowed; the duplicate is not.
        let kinds: Vec<&str> = host_command_findings(&recs, 0..u64::MAX, true)
            .into_iter()
            .map(|f| f.0)
            .collect();
        assert_eq!(kinds, ["duplicate-host-command"]);
    }

    #[test]
    fn a_rerun_after_replay_proved_not_done_and_earlier_cycles_are_fine() {
        let recs = vec![
            intent(1, 5, "vgcreate"), // an earlier cycle's, same name
            outcome(2, 1, ran()),
            intent(10, 20, "vgcreate"),
            outcome(11, 10, OutcomeResult::Ok(Done::replayed(Replayed::NotDone))),
            intent(12, 21, "vgcreate"),
            outcome(13, 12, ran()),
            intent(14, 22, "add-finalizer"), // not a host command
            intent(15, 23, "add-finalizer"),
        ];
        assert!(host_command_findings(&recs, 20..u64::MAX, true).is_empty());
        assert!(host_command_findings(&recs, 20..u64::MAX, false).is_empty());
        // Read across both cycles, the earlier cycle's vgcreate is a duplicate.
        assert_eq!(host_command_findings(&recs, 0..u64::MAX, false).len(), 1);
    }
}
