//! Plugs greenlight into the tools people already run.
//!
//! - [`draft`]: scan a repository and draft a verify.yaml (v1) from what it already runs
//!   (CI workflow steps, package.json scripts, Makefile targets, justfile recipes, tox/nox,
//!   language manifests), saying where each gate came from.
//! - [`install`]: merge greenlight's Stop, SubagentStop and SessionStart hook entries into
//!   Claude Code's or Codex's hook settings, and take them out again, without disturbing a
//!   byte of anything else.
//! - [`mcp_install`]: register greenlight's MCP server (`greenlight mcp`) with Claude Code
//!   (`.mcp.json`, `~/.claude.json`) and Codex (`config.toml`), and take it out again, with
//!   the same care for every other byte.
//! - [`settings_file`]: where agent settings live and how a change to one is made: a plan
//!   (text before and after, shown as a diff), a backup, an atomic replace.
//! - [`foreground`]: run one child command in the foreground (its own process group, signals
//!   forwarded, always reaped), used to run a freshly drafted config once.
//! - [`stop`]: where a Stop hook finds its worktree's verify.yaml (the hook itself, the run
//!   recorder, the cache placement and `--suggest-timeouts` live in `greenlight-run`).
//!
//! Nothing here prints or exits: every function returns a value the command line renders.

pub mod draft;
mod error;
pub mod foreground;
pub mod install;
mod jsontext;
pub mod mcp_install;
pub mod settings_file;
pub mod stop;
mod tomltext;

pub use error::Error;
