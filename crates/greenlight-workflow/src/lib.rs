//! Workflow plans: many agent steps, fanned out and joined, every one gated.
//!
//! This crate owns the plan (its closed-world YAML, invariants, JSON Schema and digest), the
//! scheduler's decisions (what to run next, from what was recorded, and whether a recorded run may
//! be resumed), the runtime that drives them ([`run`]), and [`land`], the merge queue a land
//! step runs. [`plan`], [`schedule`] and [`resume`] do no I/O and read no clock; [`run`] and
//! [`land`] do it (worktrees, dispatches, gates, git, the journal) and decide nothing the
//! scheduler decides.

pub mod land;
pub mod plan;
pub mod resume;
pub mod run;
pub mod schedule;
