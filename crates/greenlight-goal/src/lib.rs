//! The goal loop: keep an agent working until the gates are green, or stop with a clear reason
//! before it burns a budget.
//!
//! [`engine::Engine`] runs the loop against a [`greenlight_store::Store`]; [`prompt`] writes
//! what the agent reads; [`gate_phase`] runs one gate and keys its result by the content of the
//! worktree, so a turn that changed nothing is told so instead of re-running a red suite.

pub mod engine;
pub mod error;
pub mod gate_phase;
pub mod prompt;

pub use engine::{Engine, Finish, Progress, Settings};
pub use error::Error;
