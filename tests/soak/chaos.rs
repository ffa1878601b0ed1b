//! The three processes and the killer.

use std::future::Future;
use std::time::{Duration, Instant};

use lvms_testkit::Scenario;
use lvms_testkit::dev::operator::OperatorProcess;
use lvms_testkit::process::tail;

use crate::plan::{CyclePlan, Follow, Phase};
use crate::who::Who;

/// After a cycle: processes up and ready, then this long for publishers and sled to settle
/// (after kills: restarted publishers rescan; without kills a shorter quiet moment does).
const SETTLE: Duration = Duration::from_secs(3);
const SETTLE_WITHOUT_KILLS: Duration = Duration::from_secs(1);

#[derive(Default)]
struct Slot {
    proc: Option<OperatorProcess>,
    /// The LVMS_CRASH_AT this process was started with (until it fires or the process dies).
    armed: Option<String>,
    restart_at: Option<Instant>,
    /// Kill again this long after the next restart (then restart after the second value).
    kill_after_restart: Option<(Duration, Duration)>,
}

struct PendingKill {
    at: Instant,
    who: Who,
    restart_after: Duration,
    again_after_restart: Option<(Duration, Duration)>,
}

/// True once `pid` has exited (a zombie waiting to be reaped, or gone).
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    }
}

fn log_tail(p: &OperatorProcess, lines: usize) -> String {
    tail(&p.log_text(), lines)
}

pub(crate) struct Chaos<'a> {
    s: &'a Scenario,
    slots: [Slot; 3],
    pending: Vec<PendingKill>,
    /// Start of the current phase (for the cycle log).
    phase_start: Instant,
    phase: &'static str,
    pub(crate) random_kills: u32,
    pub(crate) fault_kills: u32,
    /// Fault points armed (a point whose step never comes again does not fire).
    pub(crate) faults_armed: u32,
    pub(crate) cycle_random: u32,
    pub(crate) cycle_fault: u32,
    /// What happened this cycle, for its log line.
    pub(crate) notes: Vec<String>,
    /// Exits nobody asked for: reported as violations by the cycle.
    pub(crate) unexpected: Vec<String>,
}

impl<'a> Chaos<'a> {
    pub(crate) fn new(s: &'a Scenario) -> Chaos<'a> {
        let mut c = Chaos {
            s,
            slots: Default::default(),
            pending: Vec::new(),
            phase_start: Instant::now(),
            phase: "setup",
            random_kills: 0,
            fault_kills: 0,
            faults_armed: 0,
            cycle_random: 0,
            cycle_fault: 0,
            notes: Vec::new(),
            unexpected: Vec::new(),
        };
        for who in Who::ALL {
            c.start(who, None);
        }
        c
    }

    fn start(&mut self, who: Who, crash_at: Option<&str>) {
        // Checkpoints every few records (4096 in production), so kills land around them too.
        let env: Vec<(&str, &str)> = crash_at
            .map(|c| ("LVMS_CRASH_AT", c))
            .into_iter()
            .chain([("LVMS_JOURNAL_CHECKPOINT_EVERY", "16")])
            .collect();
        let p = match who.node() {
            None => self.s.operator(&env, &[]),
            Some(node) => self.s.vg_manager(node, &env),
        };
        let slot = &mut self.slots[who.idx()];
        slot.proc = Some(p);
        slot.armed = crash_at.map(str::to_string);
        slot.restart_at = None;
    }

    pub(crate) fn begin_cycle(&mut self) {
        self.cycle_random = 0;
        self.cycle_fault = 0;
        self.notes.clear();
        self.unexpected.clear();
    }

    pub(crate) fn begin_phase(&mut self, name: &'static str) {
        self.phase = name;
        self.phase_start = Instant::now();
    }

    fn at(&self) -> String {
        format!(
            "{}+{:.1}s",
            self.phase,
            self.phase_start.elapsed().as_secs_f64()
        )
    }

    /// Schedules this phase's random kills, from now.
    pub(crate) fn schedule(&mut self, plan: &CyclePlan, phase: Phase) {
        let now = Instant::now();
        for k in plan.kills.iter().filter(|k| k.phase == phase) {
            let again = match k.follow {
                Follow::DuringReplay {
                    after,
                    restart_after,
                } => Some((after, restart_after)),
                _ => None,
            };
            self.pending.push(PendingKill {
                at: now + k.after,
                who: k.who,
                restart_after: k.restart_after,
                again_after_restart: again,
            });
            if let Follow::Other {
                who,
                after,
                restart_after,
            } = k.follow
            {
                self.pending.push(PendingKill {
                    at: now + k.after + after,
                    who,
                    restart_after,
                    again_after_restart: None,
                });
            }
        }
    }

    /// Reaps processes that died on their own (fault points), runs due kills and restarts.
    fn tick(&mut self) {
        let now = Instant::now();
        for who in Who::ALL {
            let at = self.at();
            let slot = &mut self.slots[who.idx()];
            let Some(p) = slot.proc.as_mut() else {
                continue;
            };
            if !exited(p.pid()) {
                continue;
            }
            let status = p.wait_exit(Duration::from_millis(500));
            let by_sigkill = status
                .as_ref()
                .is_some_and(OperatorProcess::killed_by_sigkill);
            match (by_sigkill, slot.armed.take()) {
                (true, Some(spec)) => {
                    self.fault_kills += 1;
                    self.cycle_fault += 1;
                    self.notes
                        .push(format!("{who} hit fault point {spec} at {at}"));
                }
                (_, armed) => {
                    self.unexpected.push(format!(
                        "{who} exited on its own at {at} ({status:?}, LVMS_CRASH_AT {armed:?}); log tail:\n{}",
                        log_tail(p, 12)
                    ));
                }
            }
            slot.proc = None;
            slot.restart_at = Some(now + Duration::from_millis(200));
        }

        let due: Vec<PendingKill> = {
            let (due, later) = std::mem::take(&mut self.pending)
                .into_iter()
                .partition(|k| k.at <= now);
            self.pending = later;
            due
        };
        for k in due {
            let at = self.at();
            let slot = &mut self.slots[k.who.idx()];
            let Some(mut p) = slot.proc.take() else {
                self.notes.push(format!("{} already down at {at}", k.who));
                continue;
            };
            p.kill();
            drop(p);
            slot.armed = None;
            slot.restart_at = Some(now + k.restart_after);
            slot.kill_after_restart = k.again_after_restart;
            self.random_kills += 1;
            self.cycle_random += 1;
            self.notes.push(format!(
                "SIGKILL {} at {at} (restart in {} ms{})",
                k.who,
                k.restart_after.as_millis(),
                if k.again_after_restart.is_some() {
                    ", again during replay"
                } else {
                    ""
                }
            ));
        }

        for who in Who::ALL {
            let slot = &self.slots[who.idx()];
            if slot.proc.is_some() || slot.restart_at.is_none_or(|t| t > now) {
                continue;
            }
            self.start(who, None);
            if let Some((after, restart_after)) = self.slots[who.idx()].kill_after_restart.take() {
                self.pending.push(PendingKill {
                    at: now + after,
                    who,
                    restart_after,
                    again_after_restart: None,
                });
            }
        }
    }

    /// Polls `f` (running the killer between polls) until it returns Some or `deadline`.
    pub(crate) async fn until<T, F, Fut>(&mut self, deadline: Instant, mut f: F) -> Option<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        loop {
            self.tick();
            if let Some(v) = f().await {
                return Some(v);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(crate) fn ready(&self, who: Who) -> bool {
        self.slots[who.idx()].proc.as_ref().is_some_and(|p| {
            tokio::task::block_in_place(|| p.diagnostics_get("/readyz"))
                .is_ok_and(|(code, _)| code == 200)
        })
    }

    /// Restart `who` gracefully (SIGTERM) with `LVMS_CRASH_AT=spec` and wait until it is ready.
    pub(crate) async fn arm(&mut self, who: Who, spec: &str) {
        if let Some(mut p) = self.slots[who.idx()].proc.take() {
            tokio::task::block_in_place(|| p.terminate(Duration::from_secs(10)));
        }
        self.slots[who.idx()].kill_after_restart = None;
        self.pending.retain(|k| k.who != who);
        self.start(who, Some(spec));
        self.faults_armed += 1;
        self.notes
            .push(format!("{who} restarted with LVMS_CRASH_AT={spec}"));
        // A fault point may fire before /readyz answers: that is fine, tick restarts it.
        self.until_ready(&[who], Instant::now() + Duration::from_secs(30))
            .await;
    }

    /// Runs the killer until every one of `whos` answers /readyz (false at `deadline`).
    pub(crate) async fn until_ready(&mut self, whos: &[Who], deadline: Instant) -> bool {
        loop {
            self.tick();
            if whos.iter().all(|w| self.ready(*w)) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// No more kills; every process up and ready, then a quiet moment.
    pub(crate) async fn quiesce(&mut self) -> bool {
        self.pending.clear();
        for slot in &mut self.slots {
            slot.kill_after_restart = None;
            if slot.proc.is_none() {
                slot.restart_at = Some(Instant::now());
            }
        }
        for _ in 0..3 {
            let deadline = Instant::now() + Duration::from_secs(45);
            if !self.until_ready(&Who::ALL, deadline).await {
                return false;
            }
            let settle = if self.random_kills + self.fault_kills + self.faults_armed == 0 {
                SETTLE_WITHOUT_KILLS
            } else {
                SETTLE
            };
            let quiet_until = Instant::now() + settle;
            self.until(quiet_until, || async { None::<()> }).await;
            if Who::ALL.iter().all(|w| self.ready(*w)) {
                return true;
            }
        }
        false
    }
}
