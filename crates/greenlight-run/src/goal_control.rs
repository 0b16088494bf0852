//! Goal control: which goal a request means, the status document that shows it, and pausing
//! and resuming it — one rule for the command line, the MCP tools and the dashboard.
//!
//! Only an active goal can be paused and only a paused one resumed; asking for the state a
//! goal is already in changes nothing and is no error. Each decision is taken inside the write
//! transaction that carries it out, so a runner that changes the goal meanwhile cannot make a
//! front end act on a state it read a moment before. A running loop notices a pause at its next
//! step; resuming only marks the goal active (the front ends say how to run it).

use std::path::{Path, PathBuf};

use greenlight_store::{Dispatch, Gate, Goal, GoalId, GoalState, Reads, Store};
use greenlight_types::Reason;
use serde::Serialize;

/// Which goal a request means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selector<'a> {
    /// The goal with this id, whatever worktree it belongs to.
    Id(GoalId),
    /// The goal of this worktree (as the caller keys it: the directory, canonical): its active
    /// or paused goal, else the newest it had. A live goal is always the newest, since no goal
    /// can be created beside one, so this is the newest goal of the worktree.
    Worktree(&'a Path),
}

/// Why no goal could be found or changed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No goal has this id.
    #[error("no goal {0}")]
    NoSuchGoal(GoalId),
    /// The worktree never had a goal.
    #[error("{} has no goal; start one with `greenlight goal run \"<goal>\"` there", .0.display())]
    NoGoalIn(PathBuf),
    /// The state database failed.
    #[error(transparent)]
    Store(#[from] greenlight_store::Error),
}

/// The goal `which` means.
pub fn select(store: &impl Reads, which: Selector<'_>) -> Result<Goal, Error> {
    match which {
        Selector::Id(id) => store.goal(id)?.ok_or(Error::NoSuchGoal(id)),
        Selector::Worktree(worktree) => store
            .goals()?
            .into_iter()
            .rev()
            .find(|g| g.worktree == worktree)
            .ok_or_else(|| Error::NoGoalIn(worktree.to_path_buf())),
    }
}

/// What `greenlight goal status --json` prints and MCP's `goal_status` answers.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
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

/// The status of the goal `which` means, read from one snapshot so its gates and dispatches
/// agree with it.
pub fn status(store: &mut Store, which: Selector<'_>) -> Result<GoalStatus, Error> {
    store.read(|s| {
        let goal = select(s, which)?;
        Ok(GoalStatus {
            greenlight_version: env!("CARGO_PKG_VERSION").to_owned(),
            gates: s.gates(goal.id)?,
            dispatches: s.dispatches(goal.id)?,
            goal,
        })
    })
}

/// The front end a person paused a goal through; the pause's detail (stored with the goal and
/// shown wherever it is read) says where and how to continue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `greenlight goal pause`.
    Cli,
    /// The dashboard's pause button (`POST /api/goals/{id}/pause`).
    Dashboard,
    /// MCP's `goal_pause`.
    Mcp,
}

impl Via {
    /// The pause detail stored for a pause through this front end.
    pub fn detail(self) -> &'static str {
        match self {
            Via::Cli => "paused with `greenlight goal pause`; `greenlight goal resume` continues",
            Via::Dashboard => {
                "paused from the dashboard; resume it there or with `greenlight goal resume`"
            }
            Via::Mcp => {
                "paused through MCP (`goal_pause`); `goal_resume` or `greenlight goal resume` continues"
            }
        }
    }
}

/// What asking to pause a goal does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pause {
    /// It was active and is paused now.
    Paused,
    /// It was paused already; nothing changed.
    AlreadyPaused,
    /// It is done or cleared; nothing changed.
    NotPausable {
        /// The state it is in.
        state: GoalState,
    },
}

impl Pause {
    /// The rule: what pausing a goal in `state` does.
    pub fn for_state(state: GoalState) -> Pause {
        match state {
            GoalState::Active => Pause::Paused,
            GoalState::Paused => Pause::AlreadyPaused,
            state => Pause::NotPausable { state },
        }
    }

    /// Why goal `goal` was not paused, for a front end that refuses; `None` unless refused.
    pub fn refusal(&self, goal: GoalId) -> Option<String> {
        match self {
            Pause::NotPausable { state } => Some(format!(
                "goal {goal} is {state}; only an active goal can be paused"
            )),
            Pause::Paused | Pause::AlreadyPaused => None,
        }
    }
}

/// What asking to resume a goal does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// It was paused and is active now (a new turn budget; gate attempts kept).
    Resumed,
    /// It was active already; nothing changed.
    AlreadyActive,
    /// It is done or cleared; nothing changed.
    NotResumable {
        /// The state it is in.
        state: GoalState,
    },
}

impl Resume {
    /// The rule: what resuming a goal in `state` does.
    pub fn for_state(state: GoalState) -> Resume {
        match state {
            GoalState::Paused => Resume::Resumed,
            GoalState::Active => Resume::AlreadyActive,
            state => Resume::NotResumable { state },
        }
    }

    /// Why goal `goal` was not resumed, for a front end that refuses; `None` unless refused.
    pub fn refusal(&self, goal: GoalId) -> Option<String> {
        match self {
            Resume::NotResumable { state } => Some(format!(
                "goal {goal} is {state}; only a paused goal can be resumed"
            )),
            Resume::Resumed | Resume::AlreadyActive => None,
        }
    }
}

/// What a pause or resume did, with the goal as it is afterwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Steered<O> {
    /// What happened.
    pub outcome: O,
    /// The goal after it.
    pub goal: Goal,
}

/// Pauses goal `id` as a person asked through `via`, if it is active.
pub fn pause(store: &mut Store, id: GoalId, via: Via) -> Result<Steered<Pause>, Error> {
    store.write(|tx| {
        let before = select(tx, Selector::Id(id))?;
        let outcome = Pause::for_state(before.state);
        if outcome != Pause::Paused {
            return Ok(Steered {
                outcome,
                goal: before,
            });
        }
        tx.pause_goal(id, Reason::PausedByUser.as_str(), Some(via.detail()))?;
        let goal = select(tx, Selector::Id(id))?;
        Ok(Steered { outcome, goal })
    })
}

/// Resumes goal `id`, if it is paused: active again with a new turn budget, gate attempts kept.
pub fn resume(store: &mut Store, id: GoalId) -> Result<Steered<Resume>, Error> {
    store.write(|tx| {
        let before = select(tx, Selector::Id(id))?;
        let outcome = Resume::for_state(before.state);
        if outcome != Resume::Resumed {
            return Ok(Steered {
                outcome,
                goal: before,
            });
        }
        tx.resume_goal(id)?;
        let goal = select(tx, Selector::Id(id))?;
        Ok(Steered { outcome, goal })
    })
}

#[cfg(test)]
mod tests;
