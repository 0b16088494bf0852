//! The environment a nested agent must not inherit.
//!
//! greenlight is often run from inside an agent session (a Claude Code or Codex shell, an MCP
//! server, a git hook). Those set variables that tell a child "you are part of my session";
//! an agent that inherits them attaches to the wrong session, IDE, sandbox or git index. The
//! rule: remove exactly the markers listed here, never credentials or user configuration
//! (`ANTHROPIC_API_KEY`, `CODEX_HOME`, `PATH`, … pass through untouched).
//!
//! This crate never reads the process environment itself: the binary reads it once and passes
//! it down ([`crate::AdapterOptions::base_env`]); [`lookup`] and [`temp_dir`] read that value.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// One scrubbed variable and why it is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scrubbed {
    /// The exact variable name.
    pub name: &'static str,
    /// Why a nested agent must not see it.
    pub why: &'static str,
}

/// Every variable removed from an agent's environment. The Claude Code and Codex names were read
/// from the variables those CLIs (claude 2.1.197, codex-cli 0.171.0) set for their own children.
pub const SCRUBBED: &[Scrubbed] = &[
    Scrubbed {
        name: "CLAUDECODE",
        why: "set to 1 in every Claude Code child; a nested claude takes itself for a sub-session of the parent",
    },
    Scrubbed {
        name: "CLAUDE_CODE_ENTRYPOINT",
        why: "names how the parent was launched (cli, sdk, …); a nested claude would report and behave as that entrypoint",
    },
    Scrubbed {
        name: "CLAUDE_CODE_SSE_PORT",
        why: "the parent's IDE connection port; a nested claude would attach to the parent's IDE",
    },
    Scrubbed {
        name: "CLAUDE_CODE_SESSION_ID",
        why: "the parent's session id; a nested claude would be attributed to the parent's session",
    },
    Scrubbed {
        name: "CLAUDE_CODE_CHILD_SESSION",
        why: "marks a process as a child of a Claude Code session",
    },
    Scrubbed {
        name: "CLAUDE_CODE_EXECPATH",
        why: "the parent's executable path, used by its children to call back into it",
    },
    Scrubbed {
        name: "CLAUDE_PROJECT_DIR",
        why: "the parent's project root; a nested agent would resolve hooks and settings against another tree",
    },
    Scrubbed {
        name: "CLAUDE_ENV_FILE",
        why: "the parent's session environment file; a nested session's hooks would write into the parent's environment",
    },
    Scrubbed {
        name: "CLAUDE_CODE_SAFE_MODE",
        why: "set by the parent's --safe-mode; greenlight decides safe mode per dispatch by flag",
    },
    Scrubbed {
        name: "CLAUDE_EFFORT",
        why: "the parent's effort level; a dispatch's effort is decided by greenlight, not inherited",
    },
    Scrubbed {
        name: "AI_AGENT",
        why: "tells tools an agent is driving them; the nested agent is driven by greenlight, not the parent",
    },
    Scrubbed {
        name: "TRACEPARENT",
        why: "the parent's trace context; a nested agent's telemetry would be filed under the parent's span",
    },
    Scrubbed {
        name: "CODEX_SANDBOX",
        why: "set inside a Codex sandbox; a nested codex believes it is already sandboxed",
    },
    Scrubbed {
        name: "CODEX_SANDBOX_NETWORK_DISABLED",
        why: "set inside a network-less Codex sandbox; a nested codex would behave as if offline",
    },
    Scrubbed {
        name: "CODEX_THREAD_ID",
        why: "the parent Codex thread; a nested codex would be attributed to it",
    },
    Scrubbed {
        name: "CODEX_CI",
        why: "set by Codex for commands it runs; a nested codex takes itself for a tool call of the parent",
    },
    Scrubbed {
        name: "CODEX_NON_INTERACTIVE",
        why: "set by Codex for commands it runs; greenlight chooses interactivity by flag",
    },
    Scrubbed {
        name: "CODEX_MCP_PROTOCOL_VERSION",
        why: "the parent's MCP handshake state; a nested codex would negotiate as the parent's MCP peer",
    },
    Scrubbed {
        name: "CODEX_INTERNAL_ORIGINATOR_OVERRIDE",
        why: "the parent's client identity; a nested codex would report as the parent",
    },
    Scrubbed {
        name: "GIT_DIR",
        why: "set by git for hooks; an agent's git commands in its worktree would act on the hook's repository",
    },
    Scrubbed {
        name: "GIT_WORK_TREE",
        why: "set by git for hooks; an agent's git commands would act on another work tree",
    },
    Scrubbed {
        name: "GIT_INDEX_FILE",
        why: "set by git for hooks; an agent's `git add` would write into the hook's index",
    },
    Scrubbed {
        name: "GIT_COMMON_DIR",
        why: "set by git for worktree hooks; points an agent's git at another repository's objects and refs",
    },
];

/// Whether `name` is removed from an agent's environment: a [`SCRUBBED`] marker, or one of the
/// variables that point git at another repository (`greenlight_proc::git::REDIRECTING`).
pub fn is_scrubbed(name: &OsStr) -> bool {
    SCRUBBED.iter().any(|s| OsStr::new(s.name) == name)
        || greenlight_proc::git::is_redirecting(name)
}

/// Every name [`is_scrubbed`] removes, for the process runner's scrub list.
pub fn scrubbed_names() -> Vec<OsString> {
    let markers = SCRUBBED.iter().map(|s| s.name);
    let git = greenlight_proc::git::REDIRECTING.iter().map(|r| r.name);
    let mut names: Vec<OsString> = markers.chain(git).map(OsString::from).collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// The environment an agent gets: `base` minus every [`SCRUBBED`] variable, order kept.
pub fn scrub_env(
    base: impl IntoIterator<Item = (OsString, OsString)>,
) -> Vec<(OsString, OsString)> {
    base.into_iter().filter(|(k, _)| !is_scrubbed(k)).collect()
}

/// The value of `name` in `env`, the environment the binary passed down; `None` when there is
/// none or it does not set `name`.
pub fn lookup<'a>(env: Option<&'a [(OsString, OsString)]>, name: &str) -> Option<&'a OsStr> {
    env?.iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_os_str())
}

/// The directory for temporary files as `env` names it: `TMPDIR` when set, else `/tmp` (the
/// rule `std::env::temp_dir` follows on Unix, applied to the environment passed down).
pub fn temp_dir(env: Option<&[(OsString, OsString)]>) -> PathBuf {
    lookup(env, "TMPDIR").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_go_and_credentials_stay() {
        let base = [
            ("CLAUDECODE", "1"),
            ("ANTHROPIC_API_KEY", "k"),
            ("CODEX_HOME", "/h"),
            ("CODEX_SANDBOX", "seatbelt"),
            ("GIT_INDEX_FILE", "x"),
            ("GIT_CEILING_DIRECTORIES", "/"),
            ("PATH", "/bin"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let kept: Vec<_> = scrub_env(base).into_iter().map(|(k, _)| k).collect();
        assert_eq!(kept, ["ANTHROPIC_API_KEY", "CODEX_HOME", "PATH"]);
    }

    #[test]
    fn the_passed_environment_names_the_temp_dir() {
        let env = [(OsString::from("TMPDIR"), OsString::from("/scratch"))];
        assert_eq!(temp_dir(Some(&env)), PathBuf::from("/scratch"));
        assert_eq!(temp_dir(Some(&[])), PathBuf::from("/tmp"));
        assert_eq!(temp_dir(None), PathBuf::from("/tmp"));
        assert_eq!(lookup(Some(&env), "TMPDIR"), Some(OsStr::new("/scratch")));
        assert_eq!(lookup(None, "TMPDIR"), None);
    }

    #[test]
    fn every_entry_is_unique_and_explained() {
        let mut names: Vec<_> = SCRUBBED.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SCRUBBED.len());
        assert!(SCRUBBED.iter().all(|s| s.why.len() > 20));
    }
}
