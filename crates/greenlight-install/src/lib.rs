//! Installs greenlight into the agents people already run, by editing their settings files
//! byte-faithfully.
//!
//! - [`install`]: merge greenlight's Stop, SubagentStop and SessionStart hook entries into
//!   Claude Code's or Codex's hook settings, and take them out again, without disturbing a
//!   byte of anything else.
//! - [`mcp_install`]: register greenlight's MCP server (`greenlight mcp`) with Claude Code
//!   (`.mcp.json`, `~/.claude.json`) and Codex (`config.toml`), and take it out again, with
//!   the same care for every other byte.
//! - [`settings_file`]: where agent settings live and how a change to one is made: a plan
//!   (text before and after, shown as a diff), a backup, an atomic replace.
//! - `jsontext` and `tomltext`: the text editors under both, which change a file only where
//!   greenlight's entry goes.
//!
//! Nothing here prints or exits: every function returns a value the command line renders.

mod error;
pub mod install;
mod jsontext;
pub mod mcp_install;
pub mod settings_file;
mod tomltext;

pub use error::Error;
