//! Workflow plans: many agent steps, fanned out and joined, every one gated.
//!
//! This crate owns the plan (its closed-world YAML, invariants, JSON Schema and digest) and the
//! scheduler's decisions (what to run next, from what was recorded, and whether a recorded run may
//! be resumed). It does no I/O: the binary
//! reads the file and prints what comes back, and the runtime runs what the scheduler asks.

pub mod plan;
pub mod resume;
pub mod schedule;
