//! Test helpers shared by the workspace: temp git repositories and worktrees, the real
//! `greenlight` binary with output filtered for snapshots, and scripted fake agent CLIs.
//!
//! A tiny temp-dir + command helper, not a framework: every helper does one real thing (runs
//! git, runs the binary) and panics with the command's output when that thing fails, because a
//! broken fixture should stop a test loudly.

#![allow(clippy::unwrap_used, clippy::print_stderr)]

pub mod fake_agent;
mod repo;
mod run;

pub use repo::TempRepo;
pub use run::{Run, greenlight_bin};
