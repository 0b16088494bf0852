//! The git reads a run shares: one `git status`, whose count is work-evidence and whose
//! untracked files the workspace listing takes, so git walks the directories once per run
//! instead of twice (once for `status`, once for `ls-files -o`); and one `ls-files --stage` of
//! the index, whose paths the listing keys and whose `assume-unchanged` / `skip-worktree` flags
//! work-evidence checks.
//!
//! Both run on threads of their own from the moment the run starts; each reader waits for the
//! one it needs. `core.fsmonitor` and `core.untrackedCache` are off, as for every listing:
//! either would let git answer from what it remembers instead of what is on disk.

use std::ops::Deref;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use greenlight_proc::git::Failure;

/// One answer of git, set once by the thread that asked.
type Answer = OnceLock<Result<Vec<u8>, Failure>>;

/// A `git status --porcelain -z --untracked-files=all` and a `git ls-files -z -v --stage
/// --full-name -- :/` of a worktree, each computed once.
#[derive(Debug, Default)]
pub struct SharedStatus {
    status: Answer,
    index: Answer,
}

/// Fills an answer when its thread ends without one (a panic), so no reader waits forever.
struct Fill(Arc<SharedStatus>, fn(&SharedStatus) -> &Answer);

impl Drop for Fill {
    fn drop(&mut self) {
        let _ = (self.1)(&self.0).set(Err(Failure::Spawn {
            source: std::io::Error::other("the thread running it ended without an answer"),
        }));
    }
}

/// The run's handle on its git reads: dropping it waits for both, so no git process outlives
/// the run, whichever way the run ends.
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
        let _ = self.0.index();
    }
}

impl SharedStatus {
    /// Starts `git status` and the index listing in `cwd`, each on a thread of its own.
    pub fn start(cwd: &Path) -> StatusRun {
        let shared = Arc::new(SharedStatus::default());
        ask(
            &shared,
            cwd,
            |s| &s.status,
            &["status", "--porcelain", "-z", "--untracked-files=all"],
        );
        ask(
            &shared,
            cwd,
            |s| &s.index,
            // `:/`: the whole worktree's index, from whichever directory the run started in.
            &["ls-files", "-z", "-v", "--stage", "--full-name", "--", ":/"],
        );
        StatusRun(shared)
    }

    /// `git status`'s output, once it is there.
    pub fn wait(&self) -> Result<&[u8], &Failure> {
        self.status.wait().as_deref()
    }

    /// The index listing (`<tag> <mode> <oid> <stage>\t<path>` records, paths relative to the
    /// worktree's top), once it is there.
    pub fn index(&self) -> Result<&[u8], &Failure> {
        self.index.wait().as_deref()
    }
}

/// Runs `git ARGS` in `cwd` on a thread of its own, into the answer `slot` picks.
fn ask(
    shared: &Arc<SharedStatus>,
    cwd: &Path,
    slot: fn(&SharedStatus) -> &Answer,
    args: &'static [&'static str],
) {
    let fill = Fill(Arc::clone(shared), slot);
    let cwd = cwd.to_path_buf();
    std::thread::spawn(move || {
        let mut cmd = greenlight_proc::git::command(&cwd);
        cmd.args([
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.untrackedCache=false",
        ])
        .args(args);
        let answer = greenlight_proc::git::output(&mut cmd);
        let _ = (fill.1)(&fill.0).set(answer);
    });
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
