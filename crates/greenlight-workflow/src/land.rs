//! `land`: the local merge queue. One member's branch is brought onto a target branch in a
//! scratch worktree, judged there by the target's own gates, and the target advances only when
//! they pass.
//!
//! The rule: the target moves in exactly one way, a compare-and-swap from the tip this landing
//! started from to the commit its gates judged green (`git update-ref refs/heads/T NEW OLD`).
//! Nothing the member's branch says chooses the gates that judge it: their definitions are read
//! from the target's tip (or a snapshot the run took), never from the merged tree.
//!
//! - A target that moved while the member was judged is not overwritten: the member is merged
//!   onto the new tip and judged again, once; if the target moves again, the landing stops
//!   ([`Busy::Moved`]) and the member is kept.
//! - A target checked out in a worktree (a primary checkout on `main`) is fast-forwarded there
//!   when that worktree has no change to a tracked file; one with such changes is never touched
//!   and the target does not advance ([`Busy::Dirty`], naming the worktree and its files).
//! - The scratch worktree lives in the repository's git directory and is removed whatever
//!   happens: on success, failure, error, panic or signal; one left by a killed process is
//!   removed by the next landing in that repository.

mod advance;
mod git;
mod judge;
mod scratch;

use std::path::{Path, PathBuf};

use greenlight_gate::config::Snapshot;
use greenlight_gate::{GateReport, GateVerdict, Interrupt, InterruptWatch, RunOptions};
use greenlight_types::Reason;

use crate::plan::Strategy;

pub use greenlight_proc::git::Failure as GitFailure;

/// One member to land: what it is, where it goes, and what judges it.
#[derive(Debug, Clone)]
pub struct Landing<'a> {
    /// Any worktree of the repository (the run's root); the target and the member are its
    /// branches.
    pub repo: &'a Path,
    /// The workflow run, named in the merge commit's message.
    pub run_id: &'a str,
    /// The land step, named in the merge commit's message.
    pub step: &'a str,
    /// The member's item key, named in the merge commit's message and the scratch worktree.
    pub item: &'a str,
    /// The member's branch (any commit-ish git can resolve; its tip is read once, at the start).
    pub member: &'a str,
    /// The branch that advances (`refs/heads/<target>`).
    pub target: &'a str,
    /// A merge commit, or the member's commits replayed on the target and fast-forwarded.
    pub strategy: Strategy,
    /// verify.yaml gate ids run on the merged tree; none: the target advances without a gate
    /// (the plan's choice, as it is for `greenlight verify` with no gates selected).
    pub gates: &'a [String],
    /// Where the gate definitions come from.
    pub judged_by: GateSource,
}

/// Where the definitions of a landing's gates are read from. Never the member's branch.
#[derive(Debug, Clone)]
pub enum GateSource {
    /// The verify.yaml committed at the target's tip (`.greenlight/verify.yaml`, else
    /// `.commandmate/verify.yaml`), read from git's object store at the tip being landed on.
    TargetTip,
    /// A verify.yaml the run fixed when it started (its base's), read from the snapshot only.
    Snapshot(Snapshot),
}

/// How a landing ended. Every variant but [`LandOutcome::Landed`] leaves the target as it was
/// and the member's branch untouched, for a person.
#[derive(Debug)]
pub enum LandOutcome {
    /// The target advanced from `old` to `new`.
    Landed {
        /// The target's tip before.
        old: String,
        /// Its tip now: the merge commit, or the rebased member's tip (`old` itself when the
        /// member brought nothing the target did not have).
        new: String,
        /// The worktrees that had the target checked out and were fast-forwarded with it.
        synced: Vec<PathBuf>,
        /// Whether the target moved during the first attempt, so the member was landed on the
        /// new tip.
        retried: bool,
        /// The gates that judged `new`, in config order.
        gates: Vec<GateReport>,
    },
    /// The member does not merge (or rebase) cleanly onto the target.
    Conflict {
        /// The files in conflict, as git names them (relative to the repository's top).
        files: Vec<String>,
    },
    /// The merged tree failed a landing gate (each branch may be green alone).
    Red {
        /// The gates that did not pass.
        failed: Vec<RedGate>,
        /// Every gate that ran, in config order.
        gates: Vec<GateReport>,
    },
    /// The merged tree was green, but the target could not be advanced safely.
    Busy(Busy),
}

/// A landing gate that did not pass, with the evidence a person needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedGate {
    /// The gate id.
    pub id: String,
    /// Its verdict (FAIL, TIMEOUT, SKIP: anything but a pass).
    pub verdict: GateVerdict,
    /// The last attempt's exit code.
    pub exit_code: Option<i32>,
    /// The digest's compact form of its output, or a header and the output's tail.
    pub evidence: String,
}

/// Why a green member was not advanced onto the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Busy {
    /// The target is checked out in `worktree`, which has changes to tracked files
    /// (or the fast-forward there failed: `detail` is git's word). The target did not move.
    Dirty {
        /// The worktree.
        worktree: PathBuf,
        /// Its changed tracked files (`git status` paths), or git's message.
        detail: Vec<String>,
    },
    /// The target moved again while the member was landed on its new tip.
    Moved {
        /// The tip the second attempt started from.
        expected: String,
        /// The tip found when advancing.
        found: String,
    },
}

impl LandOutcome {
    /// The failure the scheduler records (`Event::Landed { failure }`): `None` when landed.
    pub fn failure(&self) -> Option<Reason> {
        match self {
            LandOutcome::Landed { .. } => None,
            LandOutcome::Conflict { .. } => Some(Reason::LandConflict),
            LandOutcome::Red { .. } => Some(Reason::LandRed),
            LandOutcome::Busy(_) => Some(Reason::LandTargetBusy),
        }
    }

    /// One line for people and frames: what happened, with the files, gates or worktree.
    pub fn summary(&self) -> String {
        match self {
            LandOutcome::Landed { old, new, .. } if old == new => {
                format!("landed: nothing new; the target stays at {}", short(new))
            }
            LandOutcome::Landed { old, new, .. } => {
                format!("landed: the target moved {} → {}", short(old), short(new))
            }
            LandOutcome::Conflict { files } => {
                format!("land-conflict: {}", files.join(", "))
            }
            LandOutcome::Red { failed, .. } => {
                let gates: Vec<String> = failed
                    .iter()
                    .map(|g| match g.exit_code {
                        Some(code) => format!("{} {} exit={code}", g.id, g.verdict.word()),
                        None => format!("{} {}", g.id, g.verdict.word()),
                    })
                    .collect();
                format!("land-red: {}", gates.join(", "))
            }
            LandOutcome::Busy(Busy::Dirty { worktree, detail }) => format!(
                "land-target-busy: the target is checked out in {} with uncommitted changes \
                 ({}); commit or stash them, then land again",
                worktree.display(),
                detail.join(", ")
            ),
            LandOutcome::Busy(Busy::Moved { expected, found }) => format!(
                "land-target-busy: the target moved twice while this member was judged \
                 (expected {}, found {}); land again",
                short(expected),
                short(found)
            ),
        }
    }
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// Why a landing could not be decided. The target is untouched; the scratch worktree is gone.
#[derive(Debug, thiserror::Error)]
pub enum LandError {
    /// A git command failed for a reason that is not a conflict.
    #[error("land: `git {args}` in {}: {failure}", dir.display())]
    Git {
        /// The arguments.
        args: String,
        /// Where it ran.
        dir: PathBuf,
        /// What git said.
        failure: GitFailure,
    },
    /// The target or the member names no commit.
    #[error("land: `{name}` names no commit in {}; check the plan's `target` and the member's branch", repo.display())]
    NoSuchCommit {
        /// The branch or commit-ish.
        name: String,
        /// The repository.
        repo: PathBuf,
    },
    /// Gates were asked for and the target's tip has no verify.yaml.
    #[error(
        "land: the target's tip {tip} has no .greenlight/verify.yaml or .commandmate/verify.yaml, so gates {gates} have no definition; commit one on the target"
    )]
    NoVerifyYaml {
        /// The tip.
        tip: String,
        /// The gate ids, comma-separated.
        gates: String,
    },
    /// The target's verify.yaml is not valid.
    #[error("land: the target's verify.yaml: {0}")]
    Config(#[from] greenlight_gate::config::ConfigErrors),
    /// The gate runner refused (an unknown gate id, for one).
    #[error("land: {0}")]
    Gates(#[from] greenlight_gate::Error),
    /// The scratch worktree's directory could not be made or is not UTF-8.
    #[error("land: the scratch worktree {}: {why}", path.display())]
    Scratch {
        /// Its path.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// A signal asked greenlight to stop; nothing was advanced.
    #[error("land: interrupted by {}", .0.name())]
    Interrupted(Interrupt),
    /// The fast-forward of a worktree failed after the target moved, and putting the target
    /// back failed too: a person must look (both tips are named).
    #[error("land: {} could not be fast-forwarded ({why}) and the target could not be put back from {new} to {old}; run `git -C {} status` and reset the target by hand", worktree.display(), worktree.display())]
    Desynced {
        /// The worktree.
        worktree: PathBuf,
        /// The tip before.
        old: String,
        /// The tip the target was moved to.
        new: String,
        /// git's word.
        why: String,
    },
}

/// Lands one member onto its target, as the module says: merge or rebase in a scratch worktree,
/// the landing gates on the result (definitions from [`Landing::judged_by`]), the target
/// advanced by compare-and-swap only when green, and a worktree that has the target checked out
/// fast-forwarded with it.
///
/// `gate_options` are the runner options the run's gates use (lock root, environment, kill
/// grace, cache, remote); this function sets their `cwd`, `base_ref`, `only` and
/// `skip_work_evidence`.
pub async fn land(
    landing: &Landing<'_>,
    gate_options: &RunOptions,
    interrupt: &mut InterruptWatch,
) -> Result<LandOutcome, LandError> {
    scratch::sweep_stale(landing.repo)?;
    let member = git::commit_of(landing.repo, landing.member)?;
    let mut retried = false;
    loop {
        let old = git::commit_of(landing.repo, &format!("refs/heads/{}", landing.target))?;
        if let Some(busy) = advance::dirty_target(landing.repo, landing.target)? {
            return Ok(LandOutcome::Busy(busy));
        }
        let scratch = scratch::Scratch::create(landing.repo, landing.item, &old)?;
        let loaded = judge::gate_config(landing, &old, scratch.path())?;
        let merged = match landing.strategy {
            Strategy::Merge => git::merge(scratch.path(), &member, &message(landing)),
            Strategy::Rebase => git::rebase(scratch.path(), &old, &member),
        }?;
        let new = match merged {
            git::Merged::Commit(new) => new,
            git::Merged::Conflict(files) => return Ok(LandOutcome::Conflict { files }),
        };
        stop_if_interrupted(interrupt)?;
        let gates = match &loaded {
            Some(loaded) => {
                let judged = judge::run_gates(
                    loaded,
                    landing,
                    scratch.path(),
                    &old,
                    gate_options,
                    interrupt,
                )
                .await?;
                if !judged.green {
                    let failed = judge::red_gates(&judged.gates);
                    return Ok(LandOutcome::Red {
                        failed,
                        gates: judged.gates,
                    });
                }
                judged.gates
            }
            None => Vec::new(),
        };
        drop(scratch);
        stop_if_interrupted(interrupt)?;
        match advance::advance(landing.repo, landing.target, &old, &new, &message(landing))? {
            advance::Advanced::Done { synced } => {
                return Ok(LandOutcome::Landed {
                    old,
                    new,
                    synced,
                    retried,
                    gates,
                });
            }
            advance::Advanced::Dirty(busy) => return Ok(LandOutcome::Busy(busy)),
            advance::Advanced::Moved { found } if retried => {
                return Ok(LandOutcome::Busy(Busy::Moved {
                    expected: old,
                    found,
                }));
            }
            advance::Advanced::Moved { .. } => retried = true,
        }
    }
}

/// The merge commit's message (and the reflog's): the run, the step and the member.
fn message(landing: &Landing<'_>) -> String {
    format!(
        "Land {} ({} of workflow run {})\n\ngreenlight workflow run {}, land step {}, member {}: {} merged onto {}.",
        landing.item,
        landing.step,
        landing.run_id,
        landing.run_id,
        landing.step,
        landing.item,
        landing.member,
        landing.target
    )
}

fn stop_if_interrupted(interrupt: &InterruptWatch) -> Result<(), LandError> {
    match *interrupt.borrow() {
        Some(signal) => Err(LandError::Interrupted(signal)),
        None => Ok(()),
    }
}
