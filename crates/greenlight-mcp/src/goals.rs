//! The goal tools: `goal_status` and `goal_log` answer what `greenlight goal status --json` and
//! `goal log --json` print; `goal_pause` and `goal_resume` change a goal's state as the CLI and
//! the dashboard do. They read and write the same state database as every other greenlight.
//!
//! Which goal, its status and whether it may be paused or resumed are decided by
//! `greenlight_run::goal_control`; this module turns its answers into the tools' documents.

use std::path::Path;

pub use greenlight_run::goal_control::GoalStatus;
use greenlight_run::goal_control::{self, Pause, Resume, Selector, Via};
use greenlight_store::{Event, Goal, GoalId, Reads, Store};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which goal: by id, or the live (else newest) goal of a worktree.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GoalSelector {
    /// The goal's id (as `goal_status` or `greenlight goal status` shows it).
    #[serde(default)]
    pub id: Option<i64>,
    /// A worktree: its live goal, else the newest it had [default: the server's directory].
    #[serde(default)]
    pub cwd: Option<String>,
}

/// Arguments of `goal_log`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GoalLogArgs {
    /// The goal's id.
    pub id: i64,
    /// Only events after this sequence number (the `next_after` of the previous page).
    #[serde(default)]
    pub after: Option<i64>,
    /// At most this many events (default 200, at most 1000).
    #[serde(default)]
    pub limit: Option<u32>,
}

/// What `goal_log` answers: a page of the goal's events (each as `goal log --json` prints it).
#[derive(Debug, Serialize, JsonSchema)]
pub struct GoalLog {
    /// The goal's id.
    pub goal: i64,
    /// The events, in order.
    pub events: Vec<Event>,
    /// Pass as `after` for the next page; `null` when this page reached the end.
    pub next_after: Option<i64>,
}

/// What `goal_pause` and `goal_resume` answer.
#[derive(Debug, Serialize, JsonSchema)]
pub struct GoalChange {
    /// The goal after the change.
    pub goal: Goal,
    /// Whether this call changed it (false: it already was so).
    pub changed: bool,
    /// What to do next.
    pub hint: String,
}

/// A goal tool's failure: the message says what to do.
pub type Failure = String;

/// The default and largest page of `goal_log`.
const DEFAULT_LOG_PAGE: u32 = 200;
const MAX_LOG_PAGE: u32 = 1000;

fn open(state: &Path) -> Result<Store, Failure> {
    if !state.exists() {
        return Err(format!(
            "{}: no state database yet, so no goal; start one with `greenlight goal run \"<goal>\"`",
            state.display()
        ));
    }
    Store::open(state).map_err(|e| e.to_string())
}

fn select(store: &Store, which: &GoalSelector, default_cwd: &Path) -> Result<Goal, Failure> {
    selecting(which, default_cwd, |selector| {
        goal_control::select(store, selector)
    })
}

/// Runs `f` on the goal `which` names: by id, or the worktree it names (the server's directory
/// by default), keyed as `greenlight goal` keys it: the directory, canonical.
fn selecting<T>(
    which: &GoalSelector,
    default_cwd: &Path,
    f: impl FnOnce(Selector<'_>) -> Result<T, goal_control::Error>,
) -> Result<T, Failure> {
    let answer = match which.id {
        Some(id) => f(Selector::Id(GoalId(id))),
        None => {
            let cwd = crate::handler::resolve_dir(which.cwd.as_deref(), default_cwd)?;
            let worktree = cwd.canonicalize().unwrap_or(cwd);
            f(Selector::Worktree(&worktree))
        }
    };
    answer.map_err(failure)
}

/// A goal-control error in the tools' words.
fn failure(e: goal_control::Error) -> Failure {
    match e {
        goal_control::Error::NoSuchGoal(id) => {
            format!("no goal {id}; `goal_status` with a `cwd` finds a worktree's goal")
        }
        other => other.to_string(),
    }
}

/// `goal_status`.
pub fn status(state: &Path, which: &GoalSelector, cwd: &Path) -> Result<GoalStatus, Failure> {
    let mut store = open(state)?;
    selecting(which, cwd, |selector| {
        goal_control::status(&mut store, selector)
    })
}

/// `goal_log`.
pub fn log(state: &Path, args: &GoalLogArgs) -> Result<GoalLog, Failure> {
    let store = open(state)?;
    let goal = store
        .goal(GoalId(args.id))
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no goal {}", args.id))?;
    let limit = args
        .limit
        .unwrap_or(DEFAULT_LOG_PAGE)
        .clamp(1, MAX_LOG_PAGE);
    let events = store
        .events_after(Some(goal.id), args.after.unwrap_or(0), limit as usize + 1)
        .map_err(|e| e.to_string())?;
    let more = events.len() > limit as usize;
    let events: Vec<Event> = events.into_iter().take(limit as usize).collect();
    Ok(GoalLog {
        goal: goal.id.0,
        next_after: if more {
            events.last().map(|e| e.seq)
        } else {
            None
        },
        events,
    })
}

/// `goal_pause`: a loop running the goal stops at its next step.
pub fn pause(state: &Path, which: &GoalSelector, cwd: &Path) -> Result<GoalChange, Failure> {
    let mut store = open(state)?;
    let goal = select(&store, which, cwd)?;
    let steered = goal_control::pause(&mut store, goal.id, Via::Mcp).map_err(failure)?;
    if let Some(refusal) = steered.outcome.refusal(goal.id) {
        return Err(refusal);
    }
    Ok(GoalChange {
        hint: "a runner of this goal stops at its next step; `goal_resume` continues it".into(),
        changed: steered.outcome == Pause::Paused,
        goal: steered.goal,
    })
}

/// `goal_resume`: marks a paused goal active (a new turn budget, gate attempts kept). The
/// server runs no agent itself: the answer says how to run the loop where none is attached.
pub fn resume(state: &Path, which: &GoalSelector, cwd: &Path) -> Result<GoalChange, Failure> {
    let mut store = open(state)?;
    let goal = select(&store, which, cwd)?;
    let steered = goal_control::resume(&mut store, goal.id).map_err(failure)?;
    if let Some(refusal) = steered.outcome.refusal(goal.id) {
        return Err(refusal);
    }
    Ok(GoalChange {
        hint: format!(
            "the goal is active; a runner continues it: run `greenlight goal resume` in {} if none is running",
            steered.goal.worktree.display()
        ),
        changed: steered.outcome == Resume::Resumed,
        goal: steered.goal,
    })
}
