//! Workflow plans: many agent steps, fanned out and joined, every one gated.
//!
//! This crate owns the plan (its closed-world YAML, invariants, JSON Schema and digest), the
//! scheduler's decisions (what to run next, from what was recorded, and whether a recorded run may
//! be resumed), and the runtime that drives them ([`run`]). [`plan`], [`schedule`] and [`resume`]
//! do no I/O and read no clock; [`run`] does all of it (worktrees, dispatches, gates, the
//! journal) and decides nothing the scheduler decides.

pub mod plan;
pub mod resume;
pub mod run;
pub mod schedule;
