//! Test helpers shared by the workspace: temp git repositories and worktrees, the real
//! `greenlight` binary with output filtered for snapshots, and scripted fake agent CLIs.
//!
//! - [`TempRepo`]: a real repository or linked worktree, and the binary run inside it.
//! - [`Cli`]: the binary (or any command) run anywhere, with stdin, environment and a time limit.
//! - [`Run`]: what a run produced, rendered for snapshots.
//! - [`files`]: temp dirs, fixture files, executables and named pipes.
//! - [`procs`]: processes by pid: alive, signalled, waited for, ended.
//! - [`fake_agent`]: scripted fake agent CLIs; [`real_agent_cli`]: where the real ones are.
//! - [`sse`]: an HTTP/1.1 + Server-Sent Events client; [`load`]: the SSE load harness.
//! - [`openai_server`]: a scripted OpenAI-compatible chat-completions server on loopback.
//!
//! A tiny temp-dir + command helper, not a framework: every helper does one real thing (runs
//! git, runs the binary) and panics with the command's output when that thing fails, because a
//! broken fixture should stop a test loudly.

#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod agent_cli;
mod cli;
pub mod fake_agent;
pub mod files;
pub mod load;
pub mod openai_server;
pub mod procs;
mod repo;
mod run;
pub mod sse;

pub use agent_cli::real_agent_cli;
pub use cli::{Cli, signal_and_wait};
pub use repo::TempRepo;
pub use run::{Run, greenlight_bin, without_durations};
