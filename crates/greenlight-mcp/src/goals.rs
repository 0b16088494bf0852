//! The goal tools: `goal_status` and `goal_log` answer what `greenlight goal status --json` and
//! `goal log --json` print; `goal_pause` and `goal_resume` change a goal's state as the CLI and
//! the dashboard do. They read and write the same state database as every other greenlight.

use std::path::Path;

use greenlight_store::{Dispatch, Event, Gate, Goal, GoalId, GoalState, Reads, Store};
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

/// What `goal_status` answers (the document `greenlight goal status --json` prints).
#[derive(Debug, Serialize, JsonSchema)]
pub struct GoalStatus {
    /// The greenlight that answered.
    pub greenlight_version: String,
    /// The goal.
    pub goal: Goal,
    /// Its gates, with each one's last result.
    pub gates: Vec<Gate>,
    /// Its agent dispatches (turns and judge questions), oldest first.
    pub dispatches: Vec<Dispatch>,
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
    if let Some(id) = which.id {
        return store
            .goal(GoalId(id))
            .map_err(|e| e.to_string())?
            .ok_or_else(|| {
                format!("no goal {id}; `goal_status` with a `cwd` finds a worktree's goal")
            });
    }
    // Keyed as `greenlight goal` keys it: the directory, canonical.
    let cwd = crate::handler::resolve_dir(which.cwd.as_deref(), default_cwd)?;
    let worktree = cwd.canonicalize().unwrap_or(cwd);
    let goals = store.goals().map_err(|e| e.to_string())?;
    goals
        .into_iter()
        .rev()
        .find(|g| g.worktree == worktree)
        .ok_or_else(|| {
            format!(
                "{} has no goal; start one with `greenlight goal run \"<goal>\"` there",
                worktree.display()
            )
        })
}

/// `goal_status`.
pub fn status(state: &Path, which: &GoalSelector, cwd: &Path) -> Result<GoalStatus, Failure> {
    let store = open(state)?;
    let goal = select(&store, which, cwd)?;
    Ok(GoalStatus {
        greenlight_version: env!("CARGO_PKG_VERSION").to_owned(),
        gates: store.gates(goal.id).map_err(|e| e.to_string())?,
        dispatches: store.dispatches(goal.id).map_err(|e| e.to_string())?,
        goal,
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
    let changed = match goal.state {
        GoalState::Paused => false,
        GoalState::Active => {
            store
                .write(|tx| {
                    tx.pause_goal(
                        goal.id,
                        greenlight_types::Reason::PausedByUser.as_str(),
                        Some("paused through MCP (`goal_pause`); `goal_resume` or `greenlight goal resume` continues"),
                    )
                })
                .map_err(|e| e.to_string())?;
            true
        }
        other => {
            return Err(format!(
                "goal {} is {other}; only an active goal can be paused",
                goal.id
            ));
        }
    };
    let goal = reread(&store, goal.id)?;
    Ok(GoalChange {
        hint: "a runner of this goal stops at its next step; `goal_resume` continues it".into(),
        goal,
        changed,
    })
}

/// `goal_resume`: marks a paused goal active (a new turn budget, gate attempts kept). The
/// server runs no agent itself: the answer says how to run the loop where none is attached.
pub fn resume(state: &Path, which: &GoalSelector, cwd: &Path) -> Result<GoalChange, Failure> {
    let mut store = open(state)?;
    let goal = select(&store, which, cwd)?;
    let changed = match goal.state {
        GoalState::Active => false,
        GoalState::Paused => {
            store
                .write(|tx| tx.resume_goal(goal.id))
                .map_err(|e| e.to_string())?;
            true
        }
        other => {
            return Err(format!(
                "goal {} is {other}; only a paused goal can be resumed",
                goal.id
            ));
        }
    };
    let goal = reread(&store, goal.id)?;
    Ok(GoalChange {
        hint: format!(
            "the goal is active; a runner continues it: run `greenlight goal resume` in {} if none is running",
            goal.worktree.display()
        ),
        goal,
        changed,
    })
}

fn reread(store: &Store, id: GoalId) -> Result<Goal, Failure> {
    store
        .goal(id)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("goal {id} disappeared from the state database"))
}
