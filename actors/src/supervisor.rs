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

/// Where one child stands. A child's next instance is spawned only from `Stopped` or
/// `RestartDue`, and only once the previous instance's termination has been seen: **one live
/// instance per child, always**. A unit's replay at start can then only meet intents of an
/// instance that has ended (the journal's claims refuse a superseded instance's appends as a
/// second line, see `lvms_journal::Claim`).
#[derive(Debug)]
enum Slot {
    Running(ActorId),
    /// Told to stop; it finishes the message it is in. `then`: a start asked for meanwhile,
    /// spawned once this instance has terminated.
    Stopping {
        id: ActorId,
        then: Option<ChildSpec>,
    },
    /// Stopped on purpose (its object is gone), or a stop raced its own start.
    Stopped,
    /// Crashed; a `Restart` with this ticket spawns it after the restart delay (a stop or a
    /// new start meanwhile changes the slot, and the stale ticket is ignored).
    RestartDue(u64),
}

struct Child {
    spec: ChildSpec,
    slot: Slot,
}

impl std::fmt::Debug for ChildSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildSpec")
            .field("name", &self.name)
            .finish()
    }
}

pub struct SupervisorState {
    policy: RestartPolicy,
    readiness: Readiness,
    on_restart: Option<RestartHook>,
    /// Indexes are stable: a child stopped for good keeps its entry (and its name) for a
    /// later start.
    children: Vec<Child>,
    /// Live instance → its child's index.
    live: HashMap<ActorId, usize>,
    restarts: VecDeque<Instant>,
    restart_count: u64,
    next_ticket: u64,
}

impl SupervisorState {
    pub fn restart_count(&self) -> u64 {
        self.restart_count
    }
}

pub enum SupervisorMsg {
    /// Re-spawn child `index` if its restart `ticket` is still the one due.
    Restart(usize, u64),
    /// Add and start a child (e.g. one actor per LVMVolumeGroup that appears). While an
    /// instance of that name is still stopping, the start waits for it to end.
    Start(ChildSpec),
    /// Stop a child for good (its object is gone): no restart.
    Stop(String),
}

impl std::fmt::Debug for SupervisorMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SupervisorMsg::Restart(i, t) => write!(f, "Restart({i}, {t})"),
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
        let mut state = SupervisorState {
            policy: args.policy,
            readiness: args.readiness,
            on_restart: args.on_restart,
            children: Vec::with_capacity(args.children.len()),
            live: HashMap::new(),
            restarts: VecDeque::new(),
            restart_count: 0,
            next_ticket: 0,
        };
        for spec in args.children {
            let cell = (spec.spawn)(myself.get_cell()).await?;
            state.live.insert(cell.get_id(), state.children.len());
            state.children.push(Child {
                spec,
                slot: Slot::Running(cell.get_id()),
            });
        }
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<SupervisorMsg>,
        msg: SupervisorMsg,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SupervisorMsg::Restart(i, ticket) => {
                if matches!(state.children.get(i), Some(c) if matches!(c.slot, Slot::RestartDue(t) if t == ticket))
                {
                    self.spawn(&myself, state, i, "child restarted").await;
                }
            }
            SupervisorMsg::Start(spec) => {
                let Some(i) = state.children.iter().position(|c| c.spec.name == spec.name) else {
                    state.children.push(Child {
                        spec,
                        slot: Slot::Stopped,
                    });
                    let i = state.children.len() - 1;
                    self.spawn(&myself, state, i, "child started").await;
                    return Ok(());
                };
                let child = &mut state.children[i];
                match &mut child.slot {
                    Slot::Stopped => {
                        child.spec = spec;
                        self.spawn(&myself, state, i, "child started again").await;
                    }
                    Slot::Stopping { then, .. } => {
                        info!(child = %spec.name, "start waits for the stopping instance to end");
                        *then = Some(spec);
                    }
                    // Already supervised (a restart due counts: it runs when due).
                    Slot::Running(_) | Slot::RestartDue(_) => {}
                }
            }
            SupervisorMsg::Stop(name) => {
                let Some(child) = state.children.iter_mut().find(|c| c.spec.name == name) else {
                    return Ok(());
                };
                match &mut child.slot {
                    Slot::Running(id) => {
                        let id = *id;
                        // Its termination is awaited (not taken for a crash): see `Stopping`.
                        if let Some(cell) =
                            myself.get_children().into_iter().find(|c| c.get_id() == id)
                        {
                            cell.stop(Some("stopped by supervisor".into()));
                        }
                        child.slot = Slot::Stopping { id, then: None };
                    }
                    // The start queued behind that stop is withdrawn.
                    Slot::Stopping { then, .. } => *then = None,
                    Slot::RestartDue(_) => child.slot = Slot::Stopped,
                    Slot::Stopped => {}
                }
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
        state.live.clear(); // their exits are not crashes now
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
        let id = cell.get_id();
        let Some(i) = state.live.remove(&id) else {
            return Ok(());
        };
        match std::mem::replace(&mut state.children[i].slot, Slot::Stopped) {
            Slot::Running(running) if running == id => self.on_exit(&myself, state, i, &why),
            Slot::Stopping { id: stopping, then } if stopping == id => {
                info!(child = %state.children[i].spec.name, "child stopped");
                if let Some(spec) = then {
                    state.children[i].spec = spec;
                    self.spawn(
                        &myself,
                        state,
                        i,
                        "child started after its predecessor ended",
                    )
                    .await;
                }
            }
            // Not this instance's slot (cannot happen: one live instance per slot); keep it.
            other => state.children[i].slot = other,
        }
        Ok(())
    }
}

impl Supervisor {
    /// Spawn child `i`'s next instance (its slot is `Stopped` or `RestartDue`: no instance of
    /// it is alive).
    async fn spawn(
        &self,
        myself: &ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
        i: usize,
        what: &str,
    ) {
        let spec = state.children[i].spec.clone();
        match (spec.spawn)(myself.get_cell()).await {
            Ok(cell) => {
                info!(child = %spec.name, "{what}");
                state.live.insert(cell.get_id(), i);
                state.children[i].slot = Slot::Running(cell.get_id());
            }
            Err(e) => {
                // A failed spawn counts as a crash: the intensity limit still applies.
                state.children[i].slot = Slot::Stopped;
                self.on_exit(myself, state, i, &format!("spawn failed: {e}"));
            }
        }
    }

    fn on_exit(
        &self,
        myself: &ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
        i: usize,
        why: &str,
    ) {
        let name = state.children[i].spec.name.clone();
        let now = Instant::now();
        let policy = state.policy;
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
            state.readiness.fail(&msg);
            myself.stop(Some(msg));
            return;
        }
        state.restart_count += 1;
        if let Some(hook) = &state.on_restart {
            hook(&name);
        }
        state.next_ticket += 1;
        let ticket = state.next_ticket;
        state.children[i].slot = Slot::RestartDue(ticket);
        warn!(child = %name, reason = why, restarts = state.restarts.len(), "child exited; restarting");
        myself.send_after(policy.delay, move || SupervisorMsg::Restart(i, ticket));
    }
}
