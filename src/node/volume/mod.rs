//! A logical volume's decisions on a node: its view of the world, the next step to take
//! (plan), the argv of each step, capacity and space, the replay of an interrupted step, and
//! the dm gates and group holds that make group snapshots consistent.

pub mod actions;
pub mod anticipate;
pub mod capacity;
pub mod commands;
pub mod gate;
pub mod group_plan;
pub mod plan;
pub mod replay;
pub mod space;
pub mod thin_repair;
pub mod view;
