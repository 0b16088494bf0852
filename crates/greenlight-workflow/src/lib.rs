//! Workflow plans: many agent steps, fanned out and joined, every one gated.
//!
//! This crate owns the plan (its closed-world YAML, invariants, JSON Schema and digest), the
//! scheduler's decisions (what to run next, from what was recorded, and whether a recorded run may
//! be resumed), and `land`, the merge queue a land step runs. Only [`land`] does I/O (git and the
//! gate runner, on a repository it is given): the plan and the scheduler are pure, the binary
//! reads the file and prints what comes back, and the runtime runs what the scheduler asks.

pub mod land;
pub mod plan;
pub mod resume;
pub mod schedule;
