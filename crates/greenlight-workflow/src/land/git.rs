//! The git a landing runs, each call through greenlight-proc's one git helper; and the two ways
//! a member meets the target (merge, rebase), which tell a conflict from any other failure.

use std::path::Path;

use greenlight_proc::git;

use super::LandError;

/// Settings for every call in the scratch worktree: the user's hooks do not run there (the
/// landing gates judge the merged tree; a hook would run on a tree nobody checked out), and a
/// rebase never moves another branch or stashes.
const SCRATCH_SETTINGS: &[&str] = &[
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "rebase.updateRefs=false",
    "-c",
    "rebase.autoStash=false",
    "-c",
    "rebase.autoSquash=false",
];

/// The committer a landing's commits name: the user's git identity, or greenlight's when the
/// repository has none (as the run's own commits do), so a landing never fails for want of one.
fn identity(dir: &Path) -> &'static [&'static str] {
    if git::line(dir, &["config", "user.email"]).is_some() {
        &[]
    } else {
        &[
            "-c",
            "user.name=greenlight",
            "-c",
            "user.email=greenlight@localhost",
        ]
    }
}

/// Runs `git -C dir ARGS` and returns its stdout, trimmed; a failure names the call.
pub(super) fn run(dir: &Path, args: &[&str]) -> Result<String, LandError> {
    raw(dir, args).map(|out| out.trim().to_owned())
}

/// [`run`], with stdout as git wrote it (for output whose columns matter).
pub(super) fn raw(dir: &Path, args: &[&str]) -> Result<String, LandError> {
    git::output(git::command(dir).args(args))
        .map(|out| String::from_utf8_lossy(&out).into_owned())
        .map_err(|failure| LandError::Git {
            args: args.join(" "),
            dir: dir.to_path_buf(),
            failure,
        })
}

/// The commit `name` resolves to in the repository at `repo`.
pub(super) fn commit_of(repo: &Path, name: &str) -> Result<String, LandError> {
    let spec = format!("{name}^{{commit}}");
    match git::output(git::command(repo).args(["rev-parse", "--verify", "--quiet", &spec])) {
        Ok(out) => Ok(String::from_utf8_lossy(&out).trim().to_owned()),
        Err(failure) if failure.is_silent_exit(1) => Err(LandError::NoSuchCommit {
            name: name.to_owned(),
            repo: repo.to_path_buf(),
        }),
        Err(failure) => Err(LandError::Git {
            args: format!("rev-parse --verify --quiet {spec}"),
            dir: repo.to_path_buf(),
            failure,
        }),
    }
}

/// What bringing the member onto the target gave.
pub(super) enum Merged {
    /// The commit to judge: the scratch worktree's `HEAD`.
    Commit(String),
    /// The files in conflict.
    Conflict(Vec<String>),
}

/// A merge commit of `member` onto the scratch worktree's `HEAD` (always a merge commit, so
/// the target's history says which landing brought what).
pub(super) fn merge(scratch: &Path, member: &str, message: &str) -> Result<Merged, LandError> {
    let mut args = SCRATCH_SETTINGS.to_vec();
    args.extend(identity(scratch));
    args.extend(["merge", "--no-ff", "--no-edit", "-m", message, member]);
    bring(scratch, &args)
}

/// The member's commits since it left `onto`, replayed on `onto` (the scratch worktree's
/// `HEAD`), detached: the target then fast-forwards to the result.
pub(super) fn rebase(scratch: &Path, onto: &str, member: &str) -> Result<Merged, LandError> {
    let mut args = SCRATCH_SETTINGS.to_vec();
    args.extend(identity(scratch));
    args.extend(["rebase", "--quiet", onto, member]);
    bring(scratch, &args)
}

fn bring(scratch: &Path, args: &[&str]) -> Result<Merged, LandError> {
    match run(scratch, args) {
        Ok(_) => Ok(Merged::Commit(run(scratch, &["rev-parse", "HEAD"])?)),
        Err(failed) => {
            // A conflict leaves unmerged paths in the index; anything else is not a conflict.
            let unmerged = run(scratch, &["diff", "--name-only", "--diff-filter=U"])?;
            let files: Vec<String> = unmerged.lines().map(str::to_owned).collect();
            if files.is_empty() {
                Err(failed)
            } else {
                Ok(Merged::Conflict(files))
            }
        }
    }
}
