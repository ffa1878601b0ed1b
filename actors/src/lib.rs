//! Supervised reconcile-unit actors over the lvms journal (ractor 0.16).
//!
//! Kube-free and LVM-free: this crate knows units, passes, steps and the journal.
//! * [`UnitActor`] runs one [`Unit`]: coalesced [`Trigger`]s → one level-based pass; every
//!   side effect goes through [`Steps`] (Intent flushed → effect → Outcome).
//! * [`Supervisor`] restarts failed children one-for-one, within a restart-intensity limit.
//!
//! **One live instance per unit, always.** A unit's actor is the only writer of its journal
//! records in its process, so replay at start only ever meets intents of an instance that has
//! ended. Enforced twice:
//! 1. the [`Supervisor`] spawns a child's next instance (restart, or a `Start` after a `Stop`)
//!    only once the previous instance's termination has reached it: a start asked for while
//!    the old instance finishes its pass waits for it, and a restart that a stop overtook is
//!    dropped;
//! 2. each instance claims its unit in the journal when it starts
//!    ([`lvms_journal::Journal::claim`]); an append under a superseded claim is refused, and
//!    the superseded instance stops itself without acting.
//!
//! Units that CSI requests also write under ([`Unit::serves_requests`]) replay only what
//! earlier processes left open: the requests of this process close their own intents.
//! * [`EventPublisher`] turns pass outcomes into Events exactly once (Published records).
//! * [`UnitHealth`] is the journal projection the status fold reads.

mod error;
pub mod faults;
mod health;
mod publisher;
mod steps;
mod supervisor;
mod trace;
mod trigger;
mod unit;

pub use error::{Reason, UnitError, record_span_error};
pub use health::{UnitHealth, UnitState};
pub use lvms_journal::{Action, Done, EventNote, Replayed};
pub use publisher::{
    EventMapper, EventPublisher, EventSink, EventSpec, EventType, PUBLISHER_CHECKPOINT,
    PublisherArgs, PublisherMsg, SinkError, fnv1a,
};
pub use steps::{BatchStep, Effect, PASS_ACTION, StepSpec, Steps, effect};
pub use supervisor::{
    ChildSpec, Readiness, RestartHook, RestartPolicy, Supervisor, SupervisorArgs, SupervisorMsg,
};
pub use trace::{TraceHooks, TraceSource};
pub use trigger::{Trigger, Wake};
pub use unit::{CHECKPOINT_EVERY, Pass, PassHook, PassReport, Unit, UnitActor, UnitArgs, UnitMsg};
