//! The one `git status` a run shares: work-evidence counts its entries, and the workspace
//! listing takes the worktree's untracked files from it, so git walks the directories once per
//! run instead of twice (once for `status`, once for `ls-files -o`).
//!
//! It runs on a thread of its own from the moment the run starts; each reader waits for it.
//! `core.fsmonitor` and `core.untrackedCache` are off for it, as for every listing: either
//! would let git answer from what it remembers instead of what is on disk.

use std::ops::Deref;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use greenlight_proc::git::Failure;

/// A `git status --porcelain -z --untracked-files=all` of a worktree, computed once.
#[derive(Debug, Default)]
pub struct SharedStatus {
    answer: OnceLock<Result<Vec<u8>, Failure>>,
}

/// Fills the answer when the thread ends without one (a panic), so no reader waits forever.
struct Fill(Arc<SharedStatus>);

impl Drop for Fill {
    fn drop(&mut self) {
        let _ = self.0.answer.set(Err(Failure::Spawn {
            source: std::io::Error::other("the thread running it ended without an answer"),
        }));
    }
}

/// The run's handle on its status: dropping it waits for git, so no `git status` outlives the
/// run, whichever way the run ends.
#[derive(Debug)]
pub struct StatusRun(Arc<SharedStatus>);

impl StatusRun {
    /// A handle for another thread of the run.
    pub fn shared(&self) -> Arc<SharedStatus> {
        Arc::clone(&self.0)
    }
}

impl Deref for StatusRun {
    type Target = SharedStatus;
    fn deref(&self) -> &SharedStatus {
        &self.0
    }
}

impl Drop for StatusRun {
    fn drop(&mut self) {
        let _ = self.0.wait();
    }
}

impl SharedStatus {
    /// Starts `git status` in `cwd` on a thread of its own.
    pub fn start(cwd: &Path) -> StatusRun {
        let shared = Arc::new(SharedStatus::default());
        let fill = Fill(Arc::clone(&shared));
        let cwd = cwd.to_path_buf();
        std::thread::spawn(move || {
            let answer = greenlight_proc::git::output(greenlight_proc::git::command(&cwd).args([
                "-c",
                "core.fsmonitor=false",
                "-c",
                "core.untrackedCache=false",
                "status",
                "--porcelain",
                "-z",
                "--untracked-files=all",
            ]));
            let _ = fill.0.answer.set(answer);
        });
        StatusRun(shared)
    }

    /// Git's output, once it is there.
    pub fn wait(&self) -> Result<&[u8], &Failure> {
        self.answer.wait().as_deref()
    }
}

/// The untracked paths of a `git status --porcelain -z` output (`??` entries; an embedded
/// repository ends with `/`), relative to the worktree's top.
pub fn untracked(status: &[u8]) -> Vec<&[u8]> {
    let mut found = Vec::new();
    let mut fields = status.split(|&b| b == 0);
    while let Some(entry) = fields.next() {
        match entry {
            [b'?', b'?', b' ', path @ ..] if !path.is_empty() => found.push(path),
            // A rename or copy carries its original path as the next field.
            [x, y, b' ', ..] if matches!(x, b'R' | b'C') || matches!(y, b'R' | b'C') => {
                fields.next();
            }
            _ => {}
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_untracked_entries_are_taken_and_a_renames_second_path_is_skipped() {
        let status = b"?? a b.txt\0 M src/lib.rs\0R  new.rs\0?? looks untracked\0?? sub/\0";
        assert_eq!(
            untracked(status),
            vec![b"a b.txt".as_slice(), b"sub/".as_slice()]
        );
    }
}
