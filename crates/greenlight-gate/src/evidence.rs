//! The git facts a run needs before any gate: the base ref, work-evidence counts, and whether
//! the checkout is the primary one.
//!
//! Paths are read from `-z` output entry by entry: `.commandmate/tasks/` is the orchestrator's
//! evidence, not the agent's, and greenlight's own files ([`crate::own_files`]) are not work
//! either, so neither counts on either side.
//!
//! `git status` trusts the index's `assume-unchanged` and `skip-worktree` bits and never looks
//! at those files; an agent can set them. So each flagged file is hashed as `git add` would
//! hash it and counts as uncommitted work when that differs from its index entry (or, for
//! `assume-unchanged`, when it is gone; a `skip-worktree` file that is absent is a sparse
//! checkout's normal state).

use std::path::{Path, PathBuf};

use greenlight_proc::git::Failure;

use crate::error::Error;
use crate::own_files;
use crate::status::SharedStatus;

/// The directory of CommandMate's execution contracts, excluded from work-evidence.
pub const CONTRACT_DIR: &str = ".commandmate/tasks/";

/// What work-evidence found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct WorkEvidence {
    /// Commits since the merge-base that touch something other than contracts.
    pub commits: u64,
    /// `git status` entries with at least one non-contract path.
    pub uncommitted: u64,
    /// Commits since the merge-base, contracts included (for the explanation only).
    pub commits_all: u64,
    /// Whether `git status` listed anything at all (for the explanation only).
    pub any_status: bool,
}

fn git(cwd: &Path, args: &[&str]) -> Result<Vec<u8>, Failure> {
    greenlight_proc::git::output(greenlight_proc::git::command(cwd).args(args))
}

fn git_line(cwd: &Path, args: &[&str]) -> Result<String, Failure> {
    git(cwd, args).map(|o| String::from_utf8_lossy(&o).trim().to_owned())
}

/// What one `git rev-parse` says about the checkout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkout {
    /// The git dir and the common dir are the same real path: not a linked worktree.
    pub primary: bool,
}

/// Checks that `cwd` is inside a git work tree and whether it is the primary checkout, in one
/// git call (each one costs milliseconds, and a run pays for every one of them).
pub fn probe_checkout(cwd: &Path) -> Result<Checkout, Error> {
    // Only git's own "not a git repository" means that; git that could not run, or failed
    // otherwise, is said as it is.
    let out =
        git_line(cwd, &["rev-parse", "--git-dir", "--git-common-dir"]).map_err(|failure| {
            if failure.is_not_a_repository() {
                Error::NotAGitRepo {
                    cwd: cwd.to_path_buf(),
                }
            } else {
                Error::Git {
                    what: format!("checking that {} is a git worktree", cwd.display()),
                    detail: failure.to_string(),
                }
            }
        })?;
    let mut lines = out.lines();
    let resolve = |p: Option<&str>| -> Option<PathBuf> { cwd.join(p?).canonicalize().ok() };
    let git_dir = resolve(lines.next());
    let common = resolve(lines.next());
    Ok(Checkout {
        primary: git_dir.is_some() && git_dir == common,
    })
}

/// The base ref: the flag, then `options.baseRef`, then what `refs/remotes/origin/HEAD` points
/// at. Whether it names a commit is checked by [`work_evidence`], which needs it anyway.
pub fn resolve_base_ref(
    cwd: &Path,
    flag: Option<&str>,
    option: Option<&str>,
) -> Result<String, Error> {
    match flag.or(option) {
        Some(b) => Ok(b.to_owned()),
        None => git_line(
            cwd,
            &[
                "symbolic-ref",
                "--quiet",
                "--short",
                "refs/remotes/origin/HEAD",
            ],
        )
        .ok()
        .filter(|s| !s.is_empty())
        .ok_or(Error::NoBaseRef),
    }
}

/// Checks that `base_ref` names a commit, without counting anything.
pub fn verify_base_ref(cwd: &Path, base_ref: &str) -> Result<(), Error> {
    git(
        cwd,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{base_ref}^{{commit}}"),
        ],
    )
    .map(drop)
    .map_err(|failure| {
        // `--verify --quiet` says "no such commit" by exit 1 alone.
        if failure.is_silent_exit(1) {
            Error::BaseRefUnresolved {
                base_ref: base_ref.to_owned(),
            }
        } else {
            Error::Git {
                what: format!("resolving the base ref `{base_ref}`"),
                detail: failure.to_string(),
            }
        }
    })
}

/// Counts the work since `base_ref`, contracts excluded, with the run's `status` of `cwd`'s
/// worktree. The counting calls are independent and run at once, and while status runs.
pub fn work_evidence(
    cwd: &Path,
    base_ref: &str,
    status: &SharedStatus,
) -> Result<WorkEvidence, Error> {
    let merge_base = match git_line(cwd, &["merge-base", base_ref, "HEAD"]) {
        Ok(m) => m,
        Err(failure) => {
            verify_base_ref(cwd, base_ref)?;
            if failure.is_silent_exit(1) {
                // `git merge-base` says nothing, with exit 1, when the two share no commit.
                return Err(Error::NoMergeBase {
                    base_ref: base_ref.to_owned(),
                });
            }
            return Err(Error::Git {
                what: format!("computing merge-base({base_ref}, HEAD)"),
                detail: failure.to_string(),
            });
        }
    };
    let range = format!("{merge_base}..HEAD");
    let exclude = format!(":(exclude,top){CONTRACT_DIR}");
    let [own_dir, own_backups] = own_files::exclude_pathspecs();
    let count = |extra: &[&str]| -> Result<u64, Error> {
        let mut args = vec!["rev-list", "--count", range.as_str()];
        args.extend_from_slice(extra);
        let text = git_line(cwd, &args).map_err(|failure| Error::Git {
            what: format!("counting commits since {base_ref}"),
            detail: failure.to_string(),
        })?;
        text.parse().map_err(|_| Error::Git {
            what: "rev-list --count".into(),
            detail: text,
        })
    };
    let (commits_all, commits, status, flagged) = std::thread::scope(|s| {
        let all = s.spawn(|| count(&[]));
        let work = s.spawn(|| count(&["--", ":(top)", &exclude, &own_dir, &own_backups]));
        let flagged = s.spawn(|| {
            let listed = status.index().map_err(|failure| failure.to_string())?;
            flagged_changes(cwd, listed)
        });
        let status = status.wait().map_err(|failure| Error::Git {
            what: "running git status".into(),
            detail: failure.to_string(),
        });
        let join = |h: std::thread::ScopedJoinHandle<'_, Result<u64, Error>>| {
            h.join().unwrap_or_else(|_| {
                Err(Error::Git {
                    what: "counting commits".into(),
                    detail: "thread panicked".into(),
                })
            })
        };
        let flagged = flagged
            .join()
            .unwrap_or_else(|_| Err("thread panicked".into()))
            .map_err(|detail| Error::Git {
                what: "checking files marked assume-unchanged or skip-worktree".into(),
                detail,
            });
        (join(all), join(work), status, flagged)
    });
    let status = status?;
    let flagged = flagged?;
    // Asked only when a hook settings file changed: most runs have none.
    let top = std::cell::OnceCell::new();
    let not_work = |path: &[u8]| {
        is_not_work(path)
            || (own_files::is_hook_settings(path)
                && top
                    .get_or_init(|| {
                        git_line(cwd, &["rev-parse", "--show-toplevel"]).map(PathBuf::from)
                    })
                    .as_ref()
                    .is_ok_and(|top| {
                        own_files::only_greenlight_hooks(top, &String::from_utf8_lossy(path))
                    }))
    };
    Ok(WorkEvidence {
        commits: commits?,
        uncommitted: count_work_entries(status, &not_work) + flagged,
        commits_all: commits_all?,
        any_status: !status.is_empty(),
    })
}

/// Counts the files marked `assume-unchanged` or `skip-worktree` (which `git status` does not
/// look at) whose content differs from their index entry, contracts excluded; `listed` is the
/// run's `ls-files -z -v --stage --full-name`.
fn flagged_changes(cwd: &Path, listed: &[u8]) -> Result<u64, String> {
    // Asked only when a file is flagged: most worktrees have none, and each git process
    // costs a verify run several milliseconds.
    let mut top = None;
    let mut changed = 0;
    let mut present: Vec<(&[u8], &[u8])> = Vec::new();
    for record in listed.split(|&b| b == 0) {
        let [tag, b' ', rest @ ..] = record else {
            continue;
        };
        let assumed = tag.is_ascii_lowercase();
        let skipped = matches!(tag, b'S' | b's');
        if !assumed && !skipped {
            continue;
        }
        let Some(tab) = rest.iter().position(|&b| b == b'\t') else {
            continue;
        };
        let (meta, path) = (&rest[..tab], &rest[tab + 1..]);
        let mut parts = meta.split(|&b| b == b' ');
        let (Some(mode), Some(oid)) = (parts.next(), parts.next()) else {
            continue;
        };
        if is_not_work(path) || mode == b"160000" {
            continue;
        }
        use std::os::unix::ffi::OsStrExt as _;
        let top = match &top {
            Some(top) => top,
            None => top.insert(PathBuf::from(
                git_line(cwd, &["rev-parse", "--show-toplevel"]).map_err(|e| e.to_string())?,
            )),
        };
        let full = top.join(std::ffi::OsStr::from_bytes(path));
        match std::fs::symlink_metadata(&full) {
            Ok(meta) if meta.is_file() && !path.contains(&b'\n') => present.push((path, oid)),
            Ok(_) => changed += 1, // a link or a directory now: not what the index holds
            Err(_) => changed += u64::from(assumed && !skipped),
        }
    }
    let (Some(top), false) = (top, present.is_empty()) else {
        return Ok(changed);
    };
    let mut input = Vec::new();
    for (path, _) in &present {
        input.extend_from_slice(path);
        input.push(b'\n');
    }
    let hashed = git_with_input(&top, &["hash-object", "--stdin-paths"], &input)?;
    let ids: Vec<&[u8]> = hashed
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    if ids.len() != present.len() {
        return Err(format!(
            "`git hash-object --stdin-paths` gave {} ids for {} files",
            ids.len(),
            present.len()
        ));
    }
    Ok(changed
        + present
            .iter()
            .zip(ids)
            .filter(|((_, oid), id)| oid != id)
            .count() as u64)
}

fn git_with_input(cwd: &Path, args: &[&str], input: &[u8]) -> Result<Vec<u8>, String> {
    use std::process::Stdio;
    let mut cmd = greenlight_proc::git::command(cwd);
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = greenlight_proc::git::run(&mut cmd, Some(input))
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

/// Whether a path is, by its name alone, not work: a contract or one of greenlight's own files.
fn is_not_work(path: &[u8]) -> bool {
    path.starts_with(CONTRACT_DIR.as_bytes()) || own_files::is_own_path(path)
}

/// Counts `git status --porcelain -z` entries about work: a path `not_work` refuses does not
/// count. A rename or copy carries its original path as the next NUL field; either path counts.
pub fn count_work_entries(status: &[u8], not_work: &dyn Fn(&[u8]) -> bool) -> u64 {
    let mut fields = status.split(|&b| b == 0);
    let mut count = 0;
    while let Some(entry) = fields.next() {
        if entry.len() < 4 {
            continue;
        }
        let (x, y) = (entry[0], entry[1]);
        let mut work = !not_work(&entry[3..]);
        let renamed = matches!(x, b'R' | b'C') || matches!(y, b'R' | b'C');
        // Only a rename or copy has a second field; reading one otherwise would eat an entry.
        if let Some(original) = renamed
            .then(|| fields.next())
            .flatten()
            .filter(|o| !o.is_empty())
        {
            work |= !not_work(original);
        }
        count += u64::from(work);
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greenlight_s_own_files_do_not_count() {
        let status = b"?? .greenlight/verify.yaml\0?? .claude/settings.json.greenlight.bak\0 M .commandmate/verify.yaml\0";
        assert_eq!(count_work_entries(status, &is_not_work), 1);
    }

    #[test]
    fn contract_only_entries_do_not_count() {
        let status =
            b"?? .commandmate/tasks/a.yaml\0 M src/lib.rs\0?? .commandmate/tasks/b c.yaml\0";
        assert_eq!(count_work_entries(status, &is_not_work), 1);
    }

    #[test]
    fn a_rename_counts_when_either_path_is_work() {
        assert_eq!(
            count_work_entries(b"R  src/a.rs\0.commandmate/tasks/t.yaml\0", &is_not_work),
            1
        );
        assert_eq!(
            count_work_entries(b"R  .commandmate/tasks/t.yaml\0src/a.rs\0", &is_not_work),
            1
        );
        assert_eq!(
            count_work_entries(
                b"R  .commandmate/tasks/u.yaml\0.commandmate/tasks/t.yaml\0",
                &is_not_work
            ),
            0
        );
    }
}
