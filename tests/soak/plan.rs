//! The plan of one cycle: its random kills and its fault point.

use std::time::Duration;

use crate::rng::Rng;
use crate::who::Who;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Phase {
    Create,
    Edit,
    Delete,
}

#[derive(Clone, Debug)]
pub(crate) enum Follow {
    None,
    /// Another process is killed `after` the first one.
    Other {
        who: Who,
        after: Duration,
        restart_after: Duration,
    },
    /// The same process is killed again `after` its restart (during its replay).
    DuringReplay {
        after: Duration,
        restart_after: Duration,
    },
}

#[derive(Clone, Debug)]
pub(crate) struct RandomKill {
    pub(crate) phase: Phase,
    pub(crate) after: Duration,
    pub(crate) who: Who,
    pub(crate) restart_after: Duration,
    pub(crate) follow: Follow,
}

#[derive(Clone, Debug)]
pub(crate) struct FaultKill {
    pub(crate) phase: Phase,
    pub(crate) who: Who,
    pub(crate) spec: String,
}

#[derive(Clone, Debug)]
pub(crate) struct CyclePlan {
    pub(crate) kills: Vec<RandomKill>,
    pub(crate) fault: Option<FaultKill>,
    pub(crate) edit_value: String,
}

impl CyclePlan {
    /// A cycle with no kill and no fault point: pure churn.
    pub(crate) fn churn(rng: &mut Rng) -> CyclePlan {
        CyclePlan {
            kills: Vec::new(),
            fault: None,
            edit_value: format!("e{:08x}", rng.next_u64() as u32),
        }
    }

    pub(crate) fn draw(rng: &mut Rng, vga: &str, vgb: &str) -> CyclePlan {
        let n = match rng.below(10) {
            0..=1 => 0,
            2..=6 => 1,
            _ => 2,
        };
        let mut kills = Vec::new();
        for _ in 0..n {
            let phase = rng.pick(&[Phase::Create, Phase::Edit, Phase::Delete]);
            // Unperturbed, a cycle here takes ~1 s to Ready, ~0.1 s to edit and ~1 s to
            // delete: the windows cover those phases (a kill still due when its phase ends
            // lands in the next one).
            let after = match phase {
                Phase::Create => rng.ms(0, 1500),
                Phase::Edit => rng.ms(0, 400),
                Phase::Delete => rng.ms(0, 1200),
            };
            let who = rng.pick(&Who::ALL);
            let restart_after = rng.ms(0, 1000);
            let follow = match rng.below(100) {
                0..=19 => {
                    let others: Vec<Who> = Who::ALL.into_iter().filter(|w| *w != who).collect();
                    Follow::Other {
                        who: rng.pick(&others),
                        after: rng.ms(0, 300),
                        restart_after: rng.ms(0, 1000),
                    }
                }
                20..=39 => Follow::DuringReplay {
                    after: rng.ms(50, 1500),
                    restart_after: rng.ms(0, 1000),
                },
                _ => Follow::None,
            };
            kills.push(RandomKill {
                phase,
                after,
                who,
                restart_after,
                follow,
            });
        }
        let fault = rng.chance(60).then(|| {
            let who = rng.pick(&Who::ALL);
            let (phase, spec) = match who.node() {
                Some(node) => {
                    let vg = if node == "node-a" { vga } else { vgb };
                    let u = format!("vg/{vg}");
                    rng.pick(&[
                        (Phase::Create, format!("intent-durable:{u}#vgcreate")),
                        (Phase::Create, format!("applied:{u}#vgcreate")),
                        (Phase::Create, format!("step-outcome:{u}#vgcreate")),
                        (Phase::Create, format!("applied:{u}#write-lvmd-config")),
                        (Phase::Create, format!("applied:{u}#add-finalizer")),
                        (Phase::Create, format!("outcome:{u}")),
                        (Phase::Create, "event-written".to_string()),
                        (Phase::Delete, format!("intent-durable:{u}#vgremove")),
                        (Phase::Delete, format!("applied:{u}#vgremove")),
                        (
                            Phase::Delete,
                            format!("intent-durable:{u}#pvremove-teardown"),
                        ),
                        (Phase::Delete, format!("applied:{u}#pvremove-teardown")),
                        (Phase::Delete, format!("step-outcome:{u}#pvremove-teardown")),
                        (Phase::Delete, format!("applied:{u}#write-lvmd-config")),
                        (
                            Phase::Delete,
                            format!("intent-durable:{u}#remove-finalizer"),
                        ),
                        (Phase::Delete, format!("applied:{u}#remove-finalizer")),
                        (Phase::Delete, "event-written".to_string()),
                    ])
                }
                None => rng.pick(&[
                    (
                        Phase::Create,
                        "intent-durable:topolvm-storageclass".to_string(),
                    ),
                    (Phase::Create, "applied:lvmvg-manager".to_string()),
                    (Phase::Create, "applied:lvmvgnodestatus".to_string()),
                    (Phase::Create, "step-outcome:vg-manager".to_string()),
                    (Phase::Create, "outcome:topolvm-csi-driver".to_string()),
                    (Phase::Create, "event-written".to_string()),
                    (
                        Phase::Edit,
                        "intent-durable:topolvm-storageclass".to_string(),
                    ),
                    (Phase::Edit, "applied:topolvm-storageclass".to_string()),
                    (Phase::Edit, "outcome:topolvm-storageclass".to_string()),
                    (Phase::Edit, "event-written".to_string()),
                    (Phase::Delete, "intent-durable:lvmvg-manager".to_string()),
                    (Phase::Delete, "applied:lvmvgnodestatus".to_string()),
                    (Phase::Delete, "applied:lvmcluster".to_string()),
                    (Phase::Delete, "outcome:lvmcluster".to_string()),
                    (Phase::Delete, "applied:topolvm-storageclass".to_string()),
                ]),
            };
            FaultKill { phase, who, spec }
        });
        CyclePlan {
            kills,
            fault,
            edit_value: format!("e{:08x}", rng.next_u64() as u32),
        }
    }

    pub(crate) fn fault_in(&self, phase: Phase) -> Option<&FaultKill> {
        self.fault.as_ref().filter(|f| f.phase == phase)
    }
}
