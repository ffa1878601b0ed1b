//! One-for-one supervision with a restart-intensity limit (OTP style): a failed child is
//! re-spawned; more than `max_restarts` within `within` stops the supervisor and marks the
//! process not ready, with a log line saying which child and why.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use ractor::{Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, SpawnErr, SupervisionEvent};
use tracing::{error, info, warn};

/// Spawns one child linked to the given supervisor cell.
pub type SpawnFn =
    Arc<dyn Fn(ActorCell) -> BoxFuture<'static, Result<ActorCell, SpawnErr>> + Send + Sync>;

#[derive(Clone)]
pub struct ChildSpec {
    pub name: String,
    pub spawn: SpawnFn,
}

#[derive(Debug, Clone, Copy)]
pub struct RestartPolicy {
    pub max_restarts: usize,
    pub within: Duration,
    /// Pause before a restart, so a crash loop does not spin.
    pub delay: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            max_restarts: 5,
            within: Duration::from_secs(30),
            delay: Duration::from_millis(200),
        }
    }
}

/// Shared readiness: false once supervision gave up (served on `/readyz`).
#[derive(Clone)]
pub struct Readiness(Arc<(AtomicBool, Mutex<String>)>);

impl Default for Readiness {
    fn default() -> Self {
        Readiness(Arc::new((AtomicBool::new(true), Mutex::new(String::new()))))
    }
}

impl Readiness {
    pub fn fail(&self, why: &str) {
        self.0.0.store(false, Ordering::Release);
        if let Ok(mut m) = self.0.1.lock() {
            why.clone_into(&mut m);
        }
    }

    /// `Ok` when ready, else why not.
    pub fn check(&self) -> Result<(), String> {
        if self.0.0.load(Ordering::Acquire) {
            Ok(())
        } else {
            // Not ready either way; a poisoned lock only loses the explanation.
            Err(self.0.1.lock().map(|m| m.clone()).unwrap_or_default())
        }
    }
}

/// Told the child's name each time a crashed child is scheduled for a restart (metrics).
pub type RestartHook = Arc<dyn Fn(&str) + Send + Sync>;

pub struct SupervisorArgs {
    pub children: Vec<ChildSpec>,
    pub policy: RestartPolicy,
    pub readiness: Readiness,
    pub on_restart: Option<RestartHook>,
}

pub struct Supervisor;

pub struct SupervisorState {
    args: SupervisorArgs,
    running: HashMap<ActorId, usize>,
    restarts: VecDeque<Instant>,
    restart_count: u64,
    /// Children stopped on purpose (indexes stay stable; specs are not reused).
    stopped: std::collections::HashSet<usize>,
}

impl SupervisorState {
    pub fn restart_count(&self) -> u64 {
        self.restart_count
    }
}

pub enum SupervisorMsg {
    /// Re-spawn child `index` (after the restart delay).
    Restart(usize),
    /// Add and start a child (e.g. one actor per LVMVolumeGroup that appears).
    Start(ChildSpec),
    /// Stop a child for good (its object is gone): no restart.
    Stop(String),
}

impl std::fmt::Debug for SupervisorMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SupervisorMsg::Restart(i) => write!(f, "Restart({i})"),
            SupervisorMsg::Start(c) => write!(f, "Start({})", c.name),
            SupervisorMsg::Stop(n) => write!(f, "Stop({n})"),
        }
    }
}

impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<SupervisorMsg>,
        args: SupervisorArgs,
    ) -> Result<SupervisorState, ActorProcessingErr> {
        let mut running = HashMap::new();
        for (i, child) in args.children.iter().enumerate() {
            let cell = (child.spawn)(myself.get_cell()).await?;
            running.insert(cell.get_id(), i);
        }
        Ok(SupervisorState {
            args,
            running,
            restarts: VecDeque::new(),
            restart_count: 0,
            stopped: Default::default(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<SupervisorMsg>,
        msg: SupervisorMsg,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        let i = match msg {
            SupervisorMsg::Restart(i) => i,
            SupervisorMsg::Start(spec) => {
                match state.args.children.iter().position(|c| c.name == spec.name) {
                    // Stopped earlier and back again: reuse its slot.
                    Some(i) if state.stopped.remove(&i) => {
                        state.args.children[i] = spec;
                        i
                    }
                    Some(_) => return Ok(()), // already supervised
                    None => {
                        state.args.children.push(spec);
                        state.args.children.len() - 1
                    }
                }
            }
            SupervisorMsg::Stop(name) => {
                if let Some(i) = state.args.children.iter().position(|c| c.name == name) {
                    // Forget it first so its termination is not taken for a crash.
                    let cells: Vec<ActorId> = state
                        .running
                        .iter()
                        .filter(|(_, idx)| **idx == i)
                        .map(|(id, _)| *id)
                        .collect();
                    for id in cells {
                        state.running.remove(&id);
                        if let Some(cell) =
                            myself.get_children().into_iter().find(|c| c.get_id() == id)
                        {
                            cell.stop(Some("stopped by supervisor".into()));
                        }
                    }
                    state.stopped.insert(i);
                }
                return Ok(());
            }
        };
        if state.stopped.contains(&i) {
            return Ok(());
        }
        let child = state.args.children[i].clone();
        match (child.spawn)(myself.get_cell()).await {
            Ok(cell) => {
                info!(child = %child.name, "child restarted");
                state.running.insert(cell.get_id(), i);
            }
            Err(e) => {
                // A failed spawn counts as a crash: the intensity limit still applies.
                self.on_exit(&myself, state, i, &format!("spawn failed: {e}"));
            }
        }
        Ok(())
    }

    /// Graceful stop: each child finishes the pass it is in (so no step is cut between its
    /// intent and its outcome) before the supervisor is gone.
    async fn post_stop(
        &self,
        myself: ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        state.running.clear(); // their exits are not crashes now
        for child in myself.get_children() {
            // Best effort within the bound: a child that does not stop in time is dropped
            // with the process, and its open intent is replayed on the next start.
            let _ = child
                .stop_and_wait(
                    Some("supervisor stopping".into()),
                    Some(Duration::from_secs(10)),
                )
                .await;
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<SupervisorMsg>,
        evt: SupervisionEvent,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, why) = match evt {
            SupervisionEvent::ActorFailed(cell, err) => (cell, format!("failed: {err}")),
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                (cell, format!("stopped: {}", reason.unwrap_or_default()))
            }
            _ => return Ok(()),
        };
        if let Some(i) = state.running.remove(&cell.get_id()) {
            self.on_exit(&myself, state, i, &why);
        }
        Ok(())
    }
}

impl Supervisor {
    fn on_exit(
        &self,
        myself: &ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
        i: usize,
        why: &str,
    ) {
        let name = state.args.children[i].name.clone();
        let now = Instant::now();
        let policy = state.args.policy;
        state.restarts.push_back(now);
        while state
            .restarts
            .front()
            .is_some_and(|t| now.duration_since(*t) > policy.within)
        {
            state.restarts.pop_front();
        }
        if state.restarts.len() > policy.max_restarts {
            let msg = format!(
                "restart intensity exceeded: child {name} {why}; more than {} restarts within {:?}; giving up",
                policy.max_restarts, policy.within
            );
            error!(child = %name, "{msg}");
            state.args.readiness.fail(&msg);
            myself.stop(Some(msg));
            return;
        }
        state.restart_count += 1;
        if let Some(hook) = &state.args.on_restart {
            hook(&name);
        }
        warn!(child = %name, reason = why, restarts = state.restarts.len(), "child exited; restarting");
        myself.send_after(policy.delay, move || SupervisorMsg::Restart(i));
    }
}
