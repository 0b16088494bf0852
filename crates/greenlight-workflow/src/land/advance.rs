//! Moving the target: a compare-and-swap of `refs/heads/<target>`, and the worktrees that have
//! it checked out brought along.
//!
//! The rule: a checked-out target never desyncs from its worktree. A worktree with changes to
//! tracked files is refused before the ref moves; a clean one is fast-forwarded right after
//! (`read-tree -m -u OLD NEW`, which itself refuses to overwrite a change or an untracked file
//! made meanwhile), and if that fails the ref is put back by a second compare-and-swap.
//! Untracked files do not make a worktree dirty: a fast-forward keeps them, or refuses.

use std::path::{Path, PathBuf};

use super::{Busy, LandError, git};

/// What an attempt to advance found.
pub(super) enum Advanced {
    /// The target is at the new commit, and so is every worktree that has it checked out.
    Done {
        /// Those worktrees.
        synced: Vec<PathBuf>,
    },
    /// The target was checked out in a worktree with changes; nothing moved.
    Dirty(Busy),
    /// The target was no longer at the expected tip; nothing moved.
    Moved {
        /// Where it is.
        found: String,
    },
}

/// The worktrees that have `refs/heads/<target>` checked out (`git worktree list`).
pub(super) fn checked_out(repo: &Path, target: &str) -> Result<Vec<PathBuf>, LandError> {
    let list = git::run(repo, &["worktree", "list", "--porcelain"])?;
    let wanted = format!("branch refs/heads/{target}");
    let mut found = Vec::new();
    let mut current: Option<&str> = None;
    for line in list.lines() {
        if let Some(path) = line.strip_prefix("worktree ") {
            current = Some(path);
        } else if line == wanted
            && let Some(path) = current
        {
            found.push(PathBuf::from(path));
        }
    }
    Ok(found)
}

/// The first worktree with the target checked out and changes to tracked files, if any.
pub(super) fn dirty_target(repo: &Path, target: &str) -> Result<Option<Busy>, LandError> {
    for worktree in checked_out(repo, target)? {
        let changed = changed_files(&worktree)?;
        if !changed.is_empty() {
            return Ok(Some(Busy::Dirty {
                worktree,
                detail: changed,
            }));
        }
    }
    Ok(None)
}

/// The tracked files with changes, staged or not (`git status`, untracked files left out).
fn changed_files(worktree: &Path) -> Result<Vec<String>, LandError> {
    let status = git::raw(
        worktree,
        &["status", "--porcelain=v1", "-z", "--untracked-files=no"],
    )?;
    // `XY path\0`, and a rename or copy adds its source as one more `path\0`.
    let mut files = Vec::new();
    let mut entries = status.split('\0').filter(|e| !e.is_empty());
    while let Some(entry) = entries.next() {
        let Some(path) = entry.get(3..) else { continue };
        files.push(path.to_owned());
        if entry.starts_with(['R', 'C']) {
            entries.next();
        }
    }
    Ok(files)
}

/// Moves `refs/heads/<target>` from `old` to `new` only if it is still at `old`, and
/// fast-forwards each worktree that has it checked out.
pub(super) fn advance(
    repo: &Path,
    target: &str,
    old: &str,
    new: &str,
    message: &str,
) -> Result<Advanced, LandError> {
    let worktrees = checked_out(repo, target)?;
    for worktree in &worktrees {
        // Refreshed first, so a file touched but unchanged does not read as a change.
        let _ = git::run(worktree, &["update-index", "-q", "--refresh"]);
        let changed = changed_files(worktree)?;
        if !changed.is_empty() {
            return Ok(Advanced::Dirty(Busy::Dirty {
                worktree: worktree.clone(),
                detail: changed,
            }));
        }
    }
    let reference = format!("refs/heads/{target}");
    let reflog = message.lines().next().unwrap_or(message);
    if let Err(failed) = git::run(repo, &["update-ref", "-m", reflog, &reference, new, old]) {
        let found = git::commit_of(repo, &reference)?;
        // Still at `old`: not a race, so git's own failure is the answer.
        return if found == old {
            Err(failed)
        } else {
            Ok(Advanced::Moved { found })
        };
    }
    let mut synced: Vec<PathBuf> = Vec::new();
    for worktree in worktrees {
        if let Err(failed) = git::run(&worktree, &["read-tree", "-m", "-u", old, new]) {
            let why = match &failed {
                LandError::Git { failure, .. } => failure.to_string(),
                other => other.to_string(),
            };
            // Put the target back, by the same compare-and-swap, so the worktree and its
            // branch agree again; files already fast-forwarded elsewhere stay consistent
            // because read-tree moves a worktree all at once or not at all.
            if git::run(repo, &["update-ref", &reference, old, new]).is_err() {
                return Err(LandError::Desynced {
                    worktree,
                    old: old.to_owned(),
                    new: new.to_owned(),
                    why,
                });
            }
            for done in &synced {
                let _ = git::run(done, &["read-tree", "-m", "-u", new, old]);
            }
            return Ok(Advanced::Dirty(Busy::Dirty {
                worktree,
                detail: vec![why],
            }));
        }
        synced.push(worktree);
    }
    Ok(Advanced::Done { synced })
}
