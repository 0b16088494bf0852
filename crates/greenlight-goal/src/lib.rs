//! The goal loop: keep an agent working until the gates are green, or stop with a clear reason
//! before it burns a budget.
//!
//! [`drive`] runs a stored goal (agent, marker, one runner per goal, leftovers swept);
//! [`engine::Engine`] runs the loop against a [`greenlight_store::Store`] as steps: a check of
//! the agent ([`preflight`]), the turn ([`turn`]), the gate phase ([`gates`]) and the judge
//! ([`judge`]), each returning the step that comes next. [`prompt`] writes what the agent reads;
//! [`gate_phase`] runs one gate and keys its result by the content of the worktree, so a turn
//! that changed nothing is told so instead of re-running a red suite.

mod cache_pass;
pub mod drive;
pub mod engine;
pub mod error;
pub mod frames;
pub mod gate_phase;
mod gates;
mod judge;
mod ledger;
pub mod preflight;
pub mod progress;
pub mod prompt;
mod tool_ledger;
mod turn;

pub use drive::{DriveOptions, Driven, Started, drive};
pub use engine::{Engine, Finish, Settings};
pub use error::Error;
pub use progress::Progress;

#[cfg(test)]
mod tests;
