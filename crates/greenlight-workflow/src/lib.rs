//! Workflow plans: many agent steps, fanned out and joined, every one gated.
//!
//! This crate owns the plan (its closed-world YAML, invariants, JSON Schema and digest). It does
//! no I/O: the binary reads the file and prints what comes back.

pub mod plan;
