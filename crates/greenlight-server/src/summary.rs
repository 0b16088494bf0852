//! The API's JSON (and the dashboard's input) built from the store: goal and run summaries and a
//! goal's snapshot. One read transaction each, so a snapshot never mixes two instants.

use greenlight_store::{Goal, GoalId, GoalPage, Reads, Run, RunId, Snapshot, Store};
use greenlight_stream::StreamId;

use crate::error::ApiError;
use crate::model::{
    Changed, GateSummary, GoalSnapshot, GoalSummary, Overview, RunSummary, TurnSummary,
};

/// How many recent runs lists show.
pub const RECENT_RUNS: usize = 100;

fn goal_summary(s: &Snapshot<'_>, goal: Goal) -> Result<GoalSummary, ApiError> {
    let gates = s.gates(goal.id)?;
    let last_verdict = gates
        .iter()
        .filter_map(|g| g.last.as_ref())
        .max_by_key(|last| last.at)
        .map(|last| last.verdict.as_str().to_owned());
    // The goal's gates as they stand, not the last one that happened to run.
    let gates_green = gates
        .iter()
        .filter(|g| {
            g.last
                .as_ref()
                .is_some_and(|l| l.verdict.as_str() == "pass")
        })
        .count();
    let (_, head) = s.frame_bounds(StreamId::Goal(goal.id.0))?;
    let (pause_reason, pause_detail) = match goal.pause {
        Some(p) => (Some(p.reason), p.detail),
        None => (None, None),
    };
    Ok(GoalSummary {
        id: goal.id.0,
        text: goal.text,
        state: goal.state.as_str().to_owned(),
        pause_reason,
        pause_detail,
        turns_used: goal.turns_used,
        max_turns: goal.max_turns,
        last_verdict,
        gates_green,
        gates_total: gates.len(),
        agent: goal.agent.family.as_str().to_owned(),
        worktree: goal.worktree.to_string_lossy().into_owned(),
        created_at: goal.created_at,
        updated_at: goal.updated_at,
        head,
    })
}

/// A run as the API shows it.
pub fn run_summary(run: Run) -> RunSummary {
    RunSummary {
        id: run.id.0,
        kind: run.kind.as_str().to_owned(),
        worktree: run.worktree.to_string_lossy().into_owned(),
        gates: run.gates,
        result: run.result,
        exit_code: run.exit_code,
        started_at: run.started_at,
        ended_at: run.ended_at,
    }
}

/// The default and largest page of the goal list.
pub const GOAL_PAGE: usize = 50;
pub const MAX_GOAL_PAGE: usize = 500;

/// A page of the goal list (newest first) and the recent runs, with the positions in the event
/// log and the frames it was read at (where `/api/live` sends changes from).
pub fn overview(store: &mut Store, page: &GoalPage) -> Result<Overview, ApiError> {
    store.read(|s| {
        let goals = s
            .goal_page(page)?
            .into_iter()
            .map(|g| goal_summary(s, g))
            .collect::<Result<Vec<_>, _>>()?;
        let next = (goals.len() == page.limit)
            .then(|| goals.last().map(|g| g.id))
            .flatten();
        let runs = s.runs(RECENT_RUNS)?.into_iter().map(run_summary).collect();
        Ok(Overview {
            goals,
            next,
            runs,
            event_seq: s.last_seq()?,
            frame_position: s.last_frame_position()?,
        })
    })
}

/// The goals and runs that changed after `(event_seq, frame_position)`, and where that leaves
/// the reader: what `/api/live` sends after a commit instead of the whole list again.
pub fn changes(
    store: &mut Store,
    event_seq: i64,
    frame_position: i64,
) -> Result<Changed, ApiError> {
    store.read(|s| {
        let changes = s.changes_since(event_seq, frame_position)?;
        let mut goals = Vec::with_capacity(changes.goals.len());
        for id in changes.goals.iter().rev() {
            if let Some(goal) = s.goal(*id)? {
                goals.push(goal_summary(s, goal)?);
            }
        }
        let mut runs = Vec::with_capacity(changes.runs.len());
        for id in changes.runs.iter().rev() {
            if let Some(run) = s.run(*id)? {
                runs.push(run_summary(run));
            }
        }
        Ok(Changed {
            goals,
            runs,
            event_seq: changes.event_seq,
            frame_position: changes.frame_position,
        })
    })
}

/// The goal `id`'s snapshot.
pub fn goal_snapshot(store: &mut Store, id: i64) -> Result<GoalSnapshot, ApiError> {
    store.read(|s| {
        let goal = s.goal(GoalId(id))?.ok_or_else(|| no_goal(id))?;
        let gates = s
            .gates(goal.id)?
            .into_iter()
            .enumerate()
            .map(|(i, g)| GateSummary {
                number: g.number.unwrap_or(i + 1),
                command: g.command,
                attempts: g.attempts,
                last_verdict: g.last.as_ref().map(|l| l.verdict.as_str().to_owned()),
                last_exit_code: g.last.as_ref().and_then(|l| l.exit_code),
                // Rendered here, at display time, so evidence stored with a gate's colours and
                // overwrites (by an older greenlight) shows as a terminal would show it too.
                last_evidence: g
                    .last
                    .and_then(|l| l.evidence)
                    .map(|e| greenlight_digest::terminal_text(&e)),
            })
            .collect();
        let turns = s
            .turns(goal.id)?
            .into_iter()
            .map(|t| TurnSummary {
                number: t.number,
                started_at: t.started_at,
                ended_at: t.ended_at,
                outcome: t.outcome,
            })
            .collect();
        Ok(GoalSnapshot {
            goal: goal_summary(s, goal)?,
            gates,
            turns,
        })
    })
}

/// The run `id`.
pub fn run(store: &mut Store, id: i64) -> Result<RunSummary, ApiError> {
    store
        .run(RunId(id))?
        .map(run_summary)
        .ok_or_else(|| ApiError::not_found(format!("no run {id} in this state file")))
}

/// 404 for goal `id`.
pub fn no_goal(id: i64) -> ApiError {
    ApiError::not_found(format!("no goal {id} in this state file"))
}

/// Whether `stream` names a goal or run that exists.
pub fn stream_exists(store: &Store, stream: StreamId) -> Result<bool, ApiError> {
    Ok(match stream {
        StreamId::Goal(id) => store.goal(GoalId(id))?.is_some(),
        StreamId::Run(id) => store.run(RunId(id))?.is_some(),
        StreamId::Workflow(id) => store
            .workflow_run(greenlight_store::WorkflowRunId(id))?
            .is_some(),
    })
}
