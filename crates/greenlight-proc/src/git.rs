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

/// Why a git call gave no answer: git could not be started, or it ended without success. Its
/// text says which, so a missing git or a process out of file descriptors is never reported as
/// something about the repository.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// git could not be started (not on `PATH`, no file descriptors or processes left).
    #[error("cannot start git{}: {source}", if source.kind() == std::io::ErrorKind::NotFound { " (is it installed and on PATH?)" } else { "" })]
    Spawn {
        /// The system's reason.
        source: std::io::Error,
    },
    /// git ran and did not succeed.
    #[error("git {status}: {}", if first_line.is_empty() { "it wrote nothing to stderr" } else { first_line.as_str() })]
    Exited {
        /// How it ended: `exited with code N` or `was killed by signal N`.
        status: String,
        /// The exit code, when it exited.
        code: Option<i32>,
        /// The first non-empty line of its stderr, trimmed (empty when it wrote none).
        first_line: String,
    },
}

impl Failure {
    /// Whether git ran and said the directory is not in a repository (git's own words, as
    /// `rev-parse` prints them; a git translated into another language falls to the generic
    /// message, which still quotes it).
    pub fn is_not_a_repository(&self) -> bool {
        matches!(self, Failure::Exited { first_line, .. } if first_line.contains("not a git repository"))
    }

    /// Whether git exited with `code` and wrote nothing on stderr (how `merge-base` says "no
    /// common commit" and `rev-parse --verify --quiet` says "no such commit").
    pub fn is_silent_exit(&self, code: i32) -> bool {
        matches!(self, Failure::Exited { code: Some(c), first_line, .. } if *c == code && first_line.is_empty())
    }
}

/// Runs a git command built by [`command`] to its end and returns its stdout, or why it gave
/// none. stderr is read (for [`Failure::Exited`]) and not shown.
pub fn output(cmd: &mut Command) -> Result<Vec<u8>, Failure> {
    let out = run(cmd.stdout(Stdio::piped()).stderr(Stdio::piped()), None)
        .map_err(|source| Failure::Spawn { source })?;
    if out.status.success() {
        return Ok(out.stdout);
    }
    use std::os::unix::process::ExitStatusExt as _;
    let status = match (out.status.code(), out.status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => "ended without an exit code".to_owned(),
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    let first_line = stderr
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default()
        .to_owned();
    Err(Failure::Exited {
        status,
        code: out.status.code(),
        first_line,
    })
}

/// Runs a prepared git command to the end, writing `input` to its stdin (when piped) from a
/// thread of its own, and returns what it printed. The child is a helper of this process while
/// it runs, so a sweep of adopted processes on another thread never takes it for an escapee.
pub fn run(cmd: &mut Command, input: Option<&[u8]>) -> std::io::Result<std::process::Output> {
    use std::io::Write as _;
    let (mut child, _helper) = crate::procs::spawn_helper(cmd)?;
    let stdin = child.stdin.take();
    std::thread::scope(|s| {
        if let (Some(bytes), Some(mut stdin)) = (input, stdin) {
            // A write error (git exited early) shows up as git's own failure.
            s.spawn(move || {
                let _ = stdin.write_all(bytes);
            });
        }
        child.wait_with_output()
    })
}

/// git's stdout, trimmed, or `None` when git fails or prints nothing: a one-line question about
/// the repository at `dir` (stdin closed, stderr dropped).
pub fn line(dir: &Path, args: &[&str]) -> Option<String> {
    let mut cmd = command(dir);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let out = run(&mut cmd, None).ok()?;
    let line = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !line.is_empty()).then_some(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_says_whether_git_ran_and_what_it_said() {
        let dir = tempfile::tempdir().expect("tempdir");
        let outside = output(command(dir.path()).args(["rev-parse", "--git-dir"]))
            .expect_err("not a repository");
        assert!(outside.is_not_a_repository(), "{outside}");
        assert!(
            outside
                .to_string()
                .starts_with("git exited with code 128: fatal: not a git repository"),
            "{outside}"
        );
        let mut missing = command(dir.path());
        missing.env("PATH", dir.path());
        let missing = output(missing.arg("status")).expect_err("no git on PATH");
        assert!(!missing.is_not_a_repository());
        assert!(
            missing
                .to_string()
                .starts_with("cannot start git (is it installed and on PATH?): "),
            "{missing}"
        );
    }

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
