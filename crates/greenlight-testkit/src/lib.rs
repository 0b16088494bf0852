//! Test helpers shared by the workspace: temp git repositories and worktrees, the real
//! `greenlight` binary with output filtered for snapshots, and scripted fake agent CLIs.

pub mod fake_agent;
