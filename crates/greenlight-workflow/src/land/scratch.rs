//! The scratch worktree a member is merged and judged in: a linked worktree, detached, inside
//! the repository's git directory (`greenlight/land/<pid>-<n>-<item>`), so it is never in the
//! user's way and never committed.
//!
//! The rule: it is removed on every path out (a [`Drop`] guard: success, failure, error, panic,
//! a signal that ends the run); one whose process was killed is removed by the next landing in
//! the repository ([`sweep_stale`]), and a live process's is never touched.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::LandError;
use super::git;

/// Scratch worktrees made by this process, to keep their names apart.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// The directory every scratch worktree of the repository at `repo` lives in.
pub(super) fn parent_of(repo: &Path) -> Result<PathBuf, LandError> {
    let common = git::run(
        repo,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )?;
    Ok(PathBuf::from(common).join("greenlight").join("land"))
}

/// A scratch worktree, removed when dropped.
pub(super) struct Scratch {
    repo: PathBuf,
    path: PathBuf,
}

impl Scratch {
    /// A new worktree detached at `commit`.
    pub(super) fn create(repo: &Path, item: &str, commit: &str) -> Result<Scratch, LandError> {
        let parent = parent_of(repo)?;
        std::fs::create_dir_all(&parent).map_err(|e| LandError::Scratch {
            path: parent.clone(),
            why: e.to_string(),
        })?;
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = parent.join(format!("{}-{n}-{item}", std::process::id()));
        let Some(text) = path.to_str() else {
            return Err(LandError::Scratch {
                path,
                why: "the repository's path is not UTF-8".to_owned(),
            });
        };
        // The guard exists before the worktree does, so a failure halfway is cleaned too.
        let scratch = Scratch {
            repo: repo.to_path_buf(),
            path: path.clone(),
        };
        git::run(
            repo,
            &[
                "-c",
                "core.hooksPath=/dev/null",
                "worktree",
                "add",
                "--quiet",
                "--detach",
                text,
                commit,
            ],
        )?;
        Ok(scratch)
    }

    /// Its top directory.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        remove(&self.repo, &self.path);
    }
}

/// Removes a scratch worktree and git's record of it, whatever state it is in (mid-merge,
/// mid-rebase, locked, half made).
fn remove(repo: &Path, path: &Path) {
    if let Some(text) = path.to_str() {
        // Twice forced: a locked worktree is removed too. A failure is not final: the
        // directory is removed below and the record pruned.
        let _ = git::run(repo, &["worktree", "remove", "--force", "--force", text]);
    }
    if path.exists() {
        let _ = std::fs::remove_dir_all(path);
        let _ = git::run(repo, &["worktree", "prune"]);
    }
}

/// Removes every scratch worktree of the repository whose process is gone (killed before its
/// guard ran).
pub(super) fn sweep_stale(repo: &Path) -> Result<(), LandError> {
    let parent = parent_of(repo)?;
    let Ok(entries) = std::fs::read_dir(&parent) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<i32>().ok());
        // A name that is not ours is left alone; a live pid may be a landing in progress.
        if pid.is_some_and(greenlight_proc::procs::is_dead) {
            remove(repo, &entry.path());
        }
    }
    Ok(())
}
