//! Why a run could not reach a verdict: each variant names the input at fault and the way out.

use std::path::PathBuf;

use crate::config::ConfigErrors;

/// A run that stopped before any RESULT (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The verify.yaml is missing or invalid; every problem is listed.
    #[error("{0}")]
    Config(ConfigErrors),
    /// `--cwd` does not exist.
    #[error("--cwd is not a directory: {}; pass the worktree to verify", cwd.display())]
    CwdNotADirectory {
        /// The path given.
        cwd: PathBuf,
    },
    /// `--cwd` is not inside a git work tree.
    #[error("{}: not a git repository; run verify inside a git worktree", cwd.display())]
    NotAGitRepo {
        /// The path given.
        cwd: PathBuf,
    },
    /// `--gates` named an id the config does not declare.
    #[error("--gates: unknown gate id: {id}; the config declares: {known}")]
    UnknownGate {
        /// The unknown id.
        id: String,
        /// The declared ids, comma-separated.
        known: String,
    },
    /// `--gates` selected nothing.
    #[error("--gates selects no gate; pass a comma-separated list of gate ids")]
    EmptyGateSelection,
    /// No base ref could be determined.
    #[error(
        "cannot determine baseRef: refs/remotes/origin/HEAD is unset; set options.baseRef in verify.yaml or pass --base-ref"
    )]
    NoBaseRef,
    /// The base ref does not name a commit.
    #[error(
        "baseRef does not resolve to a commit: `{base_ref}`; fetch it or pass another --base-ref"
    )]
    BaseRefUnresolved {
        /// The ref given.
        base_ref: String,
    },
    /// The base ref and HEAD share no commit, so there is no point to count work from.
    #[error(
        "base ref `{base_ref}` and HEAD share no commit (no merge-base), so the work since it \
         cannot be counted; pass a --base-ref that this branch grew from, or --skip-work-evidence \
         (which still needs a base ref that names a commit)"
    )]
    NoMergeBase {
        /// The ref given.
        base_ref: String,
    },
    /// A git command failed.
    #[error("git failed while {what}: {detail}")]
    Git {
        /// What greenlight was doing.
        what: String,
        /// git's own message.
        detail: String,
    },
    /// The lock root could not be used. Not an error of the run: the gate's FAIL, with this
    /// as its reason.
    #[error("lock root {}: {source}; set CM_VERIFY_LOCK_ROOT to a writable directory", root.display())]
    LockRoot {
        /// The lock root.
        root: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A gate could not be spawned at all (not the gate's own failure: `/bin/sh` itself). Not an
    /// error of the run: the gate's FAIL, with this as its reason.
    #[error("cannot start gate `{id}`: {source}")]
    Spawn {
        /// The gate id.
        id: String,
        /// The I/O error.
        source: std::io::Error,
    },
}
