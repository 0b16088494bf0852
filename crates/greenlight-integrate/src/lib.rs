//! Plugs greenlight into the tools people already run.
//!
//! - [`draft`]: scan a repository and draft a verify.yaml (v1) from what it already runs
//!   (CI workflow steps, package.json scripts, Makefile targets, justfile recipes, tox/nox,
//!   language manifests), saying where each gate came from.
//! - [`install`]: merge greenlight's Stop, SubagentStop and SessionStart hook entries into
//!   Claude Code's or Codex's hook settings, and take them out again, without disturbing a
//!   byte of anything else.
//! - [`foreground`]: run one child command in the foreground (its own process group, signals
//!   forwarded, always reaped), used to run a freshly drafted config once.
//! - [`stop`]: the Stop hook itself: an agent's Stop / SubagentStop payload in, the gates run,
//!   one decision out (allow, or block with the evidence), with a per-session block cap; and
//!   the SessionStart hook that records where the session's work began.
//!
//! Nothing here prints or exits: every function returns a value the command line renders.

pub mod draft;
mod error;
pub mod foreground;
mod git;
pub mod install;
mod jsontext;
pub mod record;
pub mod stop;

pub use error::Error;
