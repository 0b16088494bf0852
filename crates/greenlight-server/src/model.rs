//! What the API answers with (JSON) and the dashboard renders: summaries built from the store.

use serde::Serialize;

/// One goal, as the goals list shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GoalSummary {
    /// Its id (`#7`; its stream is `7`).
    pub id: i64,
    /// The goal as the user wrote it.
    pub text: String,
    /// `active`, `paused`, `done` or `cleared`.
    pub state: String,
    /// Why it paused (kebab-case), when paused.
    pub pause_reason: Option<String>,
    /// What to do about the pause.
    pub pause_detail: Option<String>,
    /// Turns used in this run of the goal.
    pub turns_used: u32,
    /// The turn bound.
    pub max_turns: u32,
    /// The verdict of the last gate recorded (`pass`, `fail`, `timeout`), if any.
    pub last_verdict: Option<String>,
    /// How many of the goal's gates are green now (their last result passed).
    pub gates_green: usize,
    /// How many gates the goal has.
    pub gates_total: usize,
    /// `claude`, `codex` or `command`.
    pub agent: String,
    /// The worktree (lossy UTF-8).
    pub worktree: String,
    /// Created, ms since the epoch.
    pub created_at: i64,
    /// Last changed, ms since the epoch.
    pub updated_at: i64,
    /// Its stream's last seq.
    pub head: u64,
}

/// One recorded verify or hook run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    /// Its id (its stream is `run-<id>`).
    pub id: i64,
    /// `verify` or `hook`.
    pub kind: String,
    /// The worktree (lossy UTF-8).
    pub worktree: String,
    /// How many gates.
    pub gates: u32,
    /// `passed`, `failed`, … once ended.
    pub result: Option<String>,
    /// Its exit code once ended.
    pub exit_code: Option<i32>,
    /// Started, ms since the epoch.
    pub started_at: i64,
    /// Ended, ms since the epoch.
    pub ended_at: Option<i64>,
}

/// One gate of a goal.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateSummary {
    /// 1-based position.
    pub number: usize,
    /// Its command.
    pub command: String,
    /// Consecutive failures.
    pub attempts: u32,
    /// Last verdict, if any.
    pub last_verdict: Option<String>,
    /// Last exit code.
    pub last_exit_code: Option<i32>,
    /// The evidence of its last failure.
    pub last_evidence: Option<String>,
}

/// One turn of a goal.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnSummary {
    /// Its number.
    pub number: u32,
    /// Started, ms since the epoch.
    pub started_at: i64,
    /// Ended, ms since the epoch.
    pub ended_at: Option<i64>,
    /// How it ended (kebab-case).
    pub outcome: Option<String>,
}

/// A goal page's snapshot: `GET /api/goals/{id}`, and what the page reloads from after a gap.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GoalSnapshot {
    /// The goal.
    pub goal: GoalSummary,
    /// Its live gates in order.
    pub gates: Vec<GateSummary>,
    /// Its turns in order.
    pub turns: Vec<TurnSummary>,
}

/// A page of the goal list and the recent runs: `GET /api/goals` (its goals), the goals page,
/// and `/api/live`'s first event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Overview {
    /// The page's goals, newest first.
    pub goals: Vec<GoalSummary>,
    /// The cursor of the next (older) page: `?before=<next>`; none on the last page.
    pub next: Option<i64>,
    /// The recent runs, newest first.
    pub runs: Vec<RunSummary>,
    /// The event log's last seq when read.
    #[serde(skip)]
    pub event_seq: i64,
    /// The frames' last position when read.
    #[serde(skip)]
    pub frame_position: i64,
}

/// What changed since `/api/live` last sent: each goal and run touched, whole, newest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Changed {
    /// The goals with an event or a frame since.
    pub goals: Vec<GoalSummary>,
    /// The runs with a frame since.
    pub runs: Vec<RunSummary>,
    /// The event log's last seq when read.
    #[serde(skip)]
    pub event_seq: i64,
    /// The frames' last position when read.
    #[serde(skip)]
    pub frame_position: i64,
}
