//! The one way greenlight runs `git`: on the directory it was given, whatever the environment
//! says.
//!
//! greenlight is often started from inside another git process (a hook, an alias, an agent's
//! shell in a hook) that exports variables pointing git at *its* repository. Inherited, they
//! make `git -C <worktree>` answer about another repository: a failing gate was reported as
//! "nothing to judge". Every git call in the workspace goes through [`command`], which removes
//! exactly the variables that choose the repository, work tree, index, object store, refs or
//! the discovery that finds them ([`REDIRECTING`]), and nothing else: the user's identity,
//! config files (`GIT_CONFIG_GLOBAL`), SSH and credential settings pass through.

use std::ffi::OsStr;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};

/// One variable [`command`] removes, and why. The names are git's own (git(1), "The Git
/// Repository" and "Git Commits" sections of ENVIRONMENT VARIABLES, and the variables git sets
/// for hooks and aliases).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Redirect {
    /// The exact variable name.
    pub name: &'static str,
    /// What it would redirect.
    pub why: &'static str,
}

/// Every variable removed from a git call's environment.
pub const REDIRECTING: &[Redirect] = &[
    Redirect {
        name: "GIT_DIR",
        why: "names the repository outright; set by git for hooks, so a hook's greenlight would read the hook's repository",
    },
    Redirect {
        name: "GIT_WORK_TREE",
        why: "names the work tree; status and diff would describe another directory",
    },
    Redirect {
        name: "GIT_INDEX_FILE",
        why: "names the index; set by git during commit hooks, so status would compare against a temporary index",
    },
    Redirect {
        name: "GIT_OBJECT_DIRECTORY",
        why: "replaces the object store; commits and trees would be looked up elsewhere",
    },
    Redirect {
        name: "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        why: "adds object stores (set by git in pre-receive hooks for quarantined objects)",
    },
    Redirect {
        name: "GIT_COMMON_DIR",
        why: "names a linked worktree's shared directory; the primary-checkout check compares exactly this",
    },
    Redirect {
        name: "GIT_NAMESPACE",
        why: "puts refs under a namespace; the base ref would resolve to a different commit or none",
    },
    Redirect {
        name: "GIT_CEILING_DIRECTORIES",
        why: "stops repository discovery above the given directories; a worktree under one reads as no repository",
    },
    Redirect {
        name: "GIT_DISCOVERY_ACROSS_FILESYSTEM",
        why: "changes whether discovery crosses a mount point, so the same path could find a different repository",
    },
    Redirect {
        name: "GIT_PREFIX",
        why: "set by git for aliases and hooks: the subdirectory the outer command ran in, not ours",
    },
    Redirect {
        name: "GIT_QUARANTINE_PATH",
        why: "set by git in pre-receive hooks: the quarantine of objects not yet accepted",
    },
    Redirect {
        name: "GIT_CONFIG_PARAMETERS",
        why: "carries the outer command's `git -c` settings, which may set core.worktree or core.bare",
    },
    Redirect {
        name: "GIT_CONFIG_COUNT",
        why: "carries settings given by GIT_CONFIG_KEY_n/VALUE_n to the outer command; without the count they are ignored",
    },
];

/// Whether `name` is removed from git calls.
pub fn is_redirecting(name: &OsStr) -> bool {
    REDIRECTING.iter().any(|r| OsStr::new(r.name) == name)
}

/// A `git -C <cwd>` command with every [`REDIRECTING`] variable removed, stdin from
/// `/dev/null`, no terminal prompt, in a process group of its own (a Ctrl-C at the terminal
/// reaches greenlight, which then decides). The caller adds arguments and runs it.
pub fn command(cwd: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C")
        .arg(cwd)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .process_group(0);
    for var in REDIRECTING {
        cmd.env_remove(var.name);
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git_ok(cmd: &mut Command) -> String {
        let out = cmd.output().expect("git runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    #[test]
    fn every_entry_is_unique_and_explained() {
        let mut names: Vec<_> = REDIRECTING.iter().map(|r| r.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), REDIRECTING.len());
        assert!(REDIRECTING.iter().all(|r| r.why.len() > 20));
        assert!(is_redirecting(OsStr::new("GIT_DIR")));
        assert!(!is_redirecting(OsStr::new("GIT_AUTHOR_NAME")));
    }

    #[test]
    fn every_redirecting_variable_is_removed_and_git_runs_in_cwd() {
        let cmd = command(Path::new("/some/dir"));
        let removed: Vec<String> = cmd
            .get_envs()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        for r in REDIRECTING {
            assert!(removed.iter().any(|k| k == r.name), "{} stays", r.name);
        }
        let args: Vec<_> = cmd.get_args().collect();
        assert_eq!(args, [OsStr::new("-C"), OsStr::new("/some/dir")]);
    }

    #[test]
    fn git_answers_about_the_directory_it_is_given() {
        let repo = tempfile::tempdir().expect("tempdir");
        git_ok(command(repo.path()).args(["init", "-q"]));
        let top = git_ok(command(repo.path()).args(["rev-parse", "--show-toplevel"]));
        let want = std::fs::canonicalize(repo.path()).expect("exists");
        assert_eq!(Path::new(&top), want);
    }
}
