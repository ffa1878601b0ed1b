//! The checks at rest after each cycle, as methods of `Soak` (check 1, convergence, is made
//! by the cycle itself in `cycle.rs`).

mod at_rest;
mod churn;
mod events;
mod host_commands;
mod vgcreate;
