//! The API's JSON (and the dashboard's input) built from the store: goal and run summaries and a
//! goal's snapshot. One read transaction each, so a snapshot never mixes two instants.

use greenlight_store::{Goal, GoalId, Reads, Run, RunId, Snapshot, Store};
use greenlight_stream::StreamId;

use crate::error::ApiError;
use crate::model::{GateSummary, GoalSnapshot, GoalSummary, RunSummary, TurnSummary};

/// How many recent runs lists show.
pub const RECENT_RUNS: usize = 100;

fn goal_summary(s: &Snapshot<'_>, goal: Goal) -> Result<GoalSummary, ApiError> {
    let gates = s.gates(goal.id)?;
    let last_verdict = gates
        .iter()
        .filter_map(|g| g.last.as_ref())
        .max_by_key(|last| last.at)
        .map(|last| last.verdict.as_str().to_owned());
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
        agent: goal.agent.family,
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

/// Every goal (newest first) and the recent runs.
pub fn overview(store: &mut Store) -> Result<(Vec<GoalSummary>, Vec<RunSummary>), ApiError> {
    store.read(|s| {
        let mut goals = s
            .goals()?
            .into_iter()
            .map(|g| goal_summary(s, g))
            .collect::<Result<Vec<_>, _>>()?;
        goals.reverse();
        let runs = s.runs(RECENT_RUNS)?.into_iter().map(run_summary).collect();
        Ok((goals, runs))
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
                last_evidence: g.last.and_then(|l| l.evidence),
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
    })
}
