//! The linked git worktrees a run works in: one for the run's own steps, one per fan-out
//! member, each on a branch named from the run, the step and the item.
//!
//! The rule: a worktree is only ever made from a commit greenlight chose (the run's base, or
//! the run branch's tip when a fan-out starts), never from whatever an agent left uncommitted,
//! and the work of a step is committed on its branch the moment it is accepted, so a land, a
//! gate and a resume all see the same tree. Every git call goes through greenlight-proc's one
//! `git` helper.
//!
//! A fan-out's worktrees are made (and a finished run's removed) partly at once. Registering or
//! unregistering a worktree is serial: `git worktree add` and `remove` read every other
//! worktree's administrative files, and one that a parallel `add` is still writing reads as
//! empty, which git dies on (`failed to read .git/worktrees/<name>/commondir`). What costs the
//! time is each worktree's own: its checkout (`git reset --hard` in it: its own index, its own
//! branch's ref lock) and its files' deletion, and those run one thread each. The members'
//! branches are deleted in one `git branch -D`.

use std::path::{Path, PathBuf};

use greenlight_proc::git;

/// Why a worktree could not be made, read or removed.
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    /// A git call failed.
    #[error("git {args} in {dir}: {failure}")]
    Git {
        /// The arguments.
        args: String,
        /// Where.
        dir: PathBuf,
        /// What git said.
        failure: git::Failure,
    },
    /// The directory the run started in is not in a git repository.
    #[error(
        "{0} is not inside a git repository; a workflow runs in linked worktrees of one, so start it in the repository"
    )]
    NotARepository(PathBuf),
    /// A step or item cannot name a branch.
    #[error("`{0}` cannot be part of a branch name (git check-ref-format refuses it); rename it")]
    BadBranch(String),
}

/// One linked worktree of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    /// The step it serves (the run's own worktree: `None`).
    pub step: Option<String>,
    /// The member.
    pub item: Option<String>,
    /// `CM_WORKTREE_INDEX`: 0 for the run's own worktree, then one per member in plan order.
    pub index: u64,
    /// `CM_WORKTREE_ID`: unique on the machine for the run's life.
    pub id: String,
    /// Its branch.
    pub branch: String,
    /// Where it is.
    pub path: PathBuf,
}

impl Tree {
    /// The variables its agents and gates get, so mutex gates and ports stay apart.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("CM_WORKTREE_INDEX".into(), self.index.to_string()),
            ("CM_WORKTREE_ID".into(), self.id.clone()),
        ]
    }
}

/// The worktrees of one run.
#[derive(Debug, Clone)]
pub struct Worktrees {
    /// The repository's top (of the worktree the run started in).
    top: PathBuf,
    /// Where this run's worktrees live: `<git common dir>/greenlight/workflows/wf-<run>`.
    root: PathBuf,
    run: String,
}

fn git_out(dir: &Path, args: &[&str]) -> Result<String, WorktreeError> {
    let mut cmd = git::command(dir);
    cmd.args(args);
    git::output(&mut cmd)
        .map(|out| String::from_utf8_lossy(&out).trim().to_owned())
        .map_err(|failure| WorktreeError::Git {
            args: args.join(" "),
            dir: dir.to_path_buf(),
            failure,
        })
}

/// The top of the repository holding `dir`.
pub fn toplevel(dir: &Path) -> Result<PathBuf, WorktreeError> {
    match git_out(dir, &["rev-parse", "--show-toplevel"]) {
        Ok(top) => Ok(PathBuf::from(top)),
        Err(_) => Err(WorktreeError::NotARepository(dir.to_path_buf())),
    }
}

/// The commit `rev` names in the repository at `dir`.
pub fn resolve(dir: &Path, rev: &str) -> Result<String, WorktreeError> {
    git_out(
        dir,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ],
    )
}

impl Worktrees {
    /// The worktrees of run `run` of the repository holding `start`.
    pub fn new(start: &Path, run: &str) -> Result<Self, WorktreeError> {
        let top = toplevel(start)?;
        let common = git_out(&top, &["rev-parse", "--git-common-dir"])?;
        let common = top.join(common);
        Ok(Self {
            root: common
                .join("greenlight")
                .join("workflows")
                .join(format!("wf-{run}")),
            top,
            run: run.to_owned(),
        })
    }

    /// The repository's top.
    pub fn top(&self) -> &Path {
        &self.top
    }

    /// The worktree of `step`/`item` (`None`, `None`: the run's own), at `index`: its name,
    /// branch and path, made or not.
    pub fn tree(&self, step: Option<&str>, item: Option<&str>, index: u64) -> Tree {
        let name = match (step, item) {
            (Some(s), Some(i)) => format!("{s}/{i}"),
            (Some(s), None) => s.to_owned(),
            // `_run` cannot be a step id (ids start with a letter or digit).
            _ => "_run".to_owned(),
        };
        let dir = name.replace('/', "--");
        Tree {
            step: step.map(str::to_owned),
            item: item.map(str::to_owned),
            index,
            id: format!("wf-{}-{dir}", self.run),
            branch: format!("greenlight/wf-{}/{name}", self.run),
            path: self.root.join(dir),
        }
    }

    /// Checks that `tree`'s branch is a name git takes.
    pub fn check_branch(&self, tree: &Tree) -> Result<(), WorktreeError> {
        git_out(&self.top, &["check-ref-format", "--branch", &tree.branch])
            .map(|_| ())
            .map_err(|_| WorktreeError::BadBranch(tree.branch.clone()))
    }

    /// [`Worktrees::check_branch`] for each of `trees` at once (one thread each): the first
    /// refused, in their order.
    pub fn check_branches(&self, trees: &[Tree]) -> Result<(), WorktreeError> {
        std::thread::scope(|scope| {
            let handles: Vec<_> = trees
                .iter()
                .map(|tree| scope.spawn(move || self.check_branch(tree)))
                .collect();
            handles
                .into_iter()
                .zip(trees)
                .map(|(handle, tree)| {
                    handle
                        .join()
                        .unwrap_or_else(|_| Err(WorktreeError::BadBranch(tree.branch.clone())))
                })
                .collect::<Result<Vec<()>, _>>()
                .map(|_| ())
        })
    }

    /// Registers `tree` as a worktree on its own branch at commit `from`, its files not yet
    /// checked out, unless a resume finds it made. Returns whether it was made now.
    fn register(&self, tree: &Tree, from: &str) -> Result<bool, WorktreeError> {
        if tree.path.join(".git").exists() {
            return Ok(false);
        }
        if let Some(parent) = tree.path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| WorktreeError::Git {
                args: "worktree add (its parent directory)".into(),
                dir: parent.to_path_buf(),
                failure: git::Failure::Spawn { source: e },
            })?;
        }
        let path = tree.path.to_string_lossy().into_owned();
        // A branch left by a run killed between `branch` and `worktree add` is reused: -B.
        git_out(
            &self.top,
            &[
                "worktree",
                "add",
                "--quiet",
                "--no-checkout",
                "-B",
                &tree.branch,
                &path,
                from,
            ],
        )?;
        Ok(true)
    }

    /// Checks out the tree of a worktree registered with `--no-checkout` (what `git worktree
    /// add` does last by itself). A run killed before it leaves a worktree that the next
    /// dispatch's reset fills in.
    fn check_out(&self, tree: &Tree) -> Result<(), WorktreeError> {
        git_out(&tree.path, &["reset", "--quiet", "--hard"]).map(|_| ())
    }

    /// Makes `tree` from commit `from` on its own branch, or, when a resume finds it made,
    /// keeps it. Returns whether it was made now.
    pub fn ensure(&self, tree: &Tree, from: &str) -> Result<bool, WorktreeError> {
        let made = self.register(tree, from)?;
        if made {
            self.check_out(tree)?;
        }
        Ok(made)
    }

    /// [`Worktrees::ensure`] for each of `trees`, every one from `from`: registered one after
    /// another, checked out at once (one thread each). The answers in the same order.
    pub fn ensure_all(&self, trees: &[Tree], from: &str) -> Vec<Result<bool, WorktreeError>> {
        let registered: Vec<Result<bool, WorktreeError>> =
            trees.iter().map(|tree| self.register(tree, from)).collect();
        std::thread::scope(|scope| {
            let handles: Vec<_> = trees
                .iter()
                .zip(registered)
                .map(|(tree, registered)| {
                    scope.spawn(move || match registered {
                        Ok(true) => self.check_out(tree).map(|()| true),
                        other => other,
                    })
                })
                .collect();
            handles
                .into_iter()
                .zip(trees)
                .map(|(handle, tree)| {
                    handle.join().unwrap_or_else(|_| {
                        Err(WorktreeError::Git {
                            args: "reset --hard".into(),
                            dir: tree.path.clone(),
                            failure: git::Failure::Spawn {
                                source: std::io::Error::other(
                                    "the thread checking it out panicked",
                                ),
                            },
                        })
                    })
                })
                .collect()
        })
    }

    /// Puts `tree` back to its branch's tip: what an attempt that never settled, or failed,
    /// left uncommitted is not the next attempt's starting point.
    pub fn reset(&self, tree: &Tree) -> Result<(), WorktreeError> {
        git_out(&tree.path, &["reset", "--quiet", "--hard", "HEAD"])?;
        git_out(&tree.path, &["clean", "--quiet", "-fd"])?;
        Ok(())
    }

    /// Commits everything in `tree` on its branch (nothing when nothing changed). The author is
    /// the user's git identity, or greenlight's when the repository has none.
    pub fn commit(&self, tree: &Tree, message: &str) -> Result<(), WorktreeError> {
        git_out(&tree.path, &["add", "--all"])?;
        if git_out(&tree.path, &["status", "--porcelain"])?.is_empty() {
            return Ok(());
        }
        let mut args: Vec<&str> = Vec::new();
        if git::line(&tree.path, &["config", "user.email"]).is_none() {
            args.extend([
                "-c",
                "user.name=greenlight",
                "-c",
                "user.email=greenlight@localhost",
            ]);
        }
        args.extend(["commit", "--quiet", "--no-verify", "-m", message]);
        git_out(&tree.path, &args)?;
        Ok(())
    }

    /// The commit `tree`'s branch is at.
    pub fn head(&self, tree: &Tree) -> Result<String, WorktreeError> {
        resolve(&self.top, &tree.branch)
    }

    /// Removes each of `trees` and its branch (a finished run's members were landed or are not
    /// wanted): the worktrees at once (one thread each), then the branches that exist in one
    /// `git branch -D`. The first error, once every removal was tried.
    pub fn remove_all(&self, trees: &[Tree]) -> Result<(), WorktreeError> {
        let present: Vec<&Tree> = trees.iter().filter(|tree| tree.path.exists()).collect();
        // The files first, at once; a directory that will not go is git's to report below.
        std::thread::scope(|scope| {
            for tree in &present {
                scope.spawn(move || std::fs::remove_dir_all(&tree.path));
            }
        });
        // Then each worktree unregistered, one after another (`--force`: its directory is gone,
        // or held files nobody wants).
        let mut first_error = None;
        for tree in present {
            let path = tree.path.to_string_lossy().into_owned();
            if let Err(e) = git_out(&self.top, &["worktree", "remove", "--force", &path]) {
                first_error.get_or_insert(e);
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        let prefix = format!("refs/heads/greenlight/wf-{}/", self.run);
        let existing = git_out(&self.top, &["for-each-ref", "--format=%(refname)", &prefix])?;
        let existing: Vec<&str> = existing.lines().collect();
        let doomed: Vec<&str> = trees
            .iter()
            .map(|tree| tree.branch.as_str())
            .filter(|branch| existing.contains(&format!("refs/heads/{branch}").as_str()))
            .collect();
        if !doomed.is_empty() {
            let mut args = vec!["branch", "--quiet", "-D"];
            args.extend(doomed);
            git_out(&self.top, &args)?;
        }
        Ok(())
    }

    /// Removes the run's directory once it is empty.
    pub fn tidy(&self) {
        let _ = std::fs::remove_dir(&self.root);
    }
}

/// The common git directory of the repository holding `dir` (what a run records as its
/// repository: the same for every worktree of it).
pub fn common_dir(dir: &Path) -> Result<PathBuf, WorktreeError> {
    let top = toplevel(dir)?;
    let common = git_out(&top, &["rev-parse", "--git-common-dir"])?;
    let common = top.join(common);
    Ok(common.canonicalize().unwrap_or(common))
}
