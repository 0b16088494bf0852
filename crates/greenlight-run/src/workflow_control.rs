//! Workflow control: the documents `workflow status`, `log` and `list` show (and the MCP tools
//! answer), and asking a running workflow run to pause — one rule for every front end.
//!
//! Every view first marks the running runs whose process is gone as interrupted (the store's
//! owner rule: never one that lives, nor one in another host or pid namespace), so no front end
//! shows a dead run as running. A pause is only asked for: it is recorded in the store, and the
//! process driving the run pauses at its next boundary (docs/workflow.md, "The pause contract").

use greenlight_store::{
    Reads, Store, WorkflowDispatch, WorkflowEvent, WorkflowMember, WorkflowRun, WorkflowRunId,
};
use greenlight_types::{MemberState, WorkflowStatus};
use serde::Serialize;

/// Why a workflow view or change could not be had.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No workflow run has this id.
    #[error("no workflow run {0}; `greenlight workflow list` shows the runs this state file holds")]
    NoSuchRun(WorkflowRunId),
    /// The state database failed.
    #[error(transparent)]
    Store(#[from] greenlight_store::Error),
}

/// What `greenlight workflow status ID --json` prints and MCP's `workflow_status` answers.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct WorkflowReport {
    /// The greenlight that answered.
    pub greenlight_version: String,
    /// The run: its inputs, budget, spend, status and why it paused or ended.
    pub run: WorkflowRun,
    /// Each step and fan-out member the run has reached, with where it stands.
    pub steps: Vec<StepState>,
    /// Its member worktrees; a kept one says why.
    pub members: Vec<WorkflowMember>,
}

/// Where one step (or one fan-out member of it) stands, from its newest dispatch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct StepState {
    /// The step's id.
    pub step: String,
    /// The member's item key (none for a step that is not a fan-out's).
    pub item: Option<String>,
    /// Its newest attempt.
    pub attempts: u32,
    /// `in-flight`, `ok`, or how its newest attempt ended.
    pub outcome: String,
    /// The reason of a failure.
    pub reason: Option<String>,
}

/// What `greenlight workflow log ID --json` prints: the run's events and its ledger.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct WorkflowLog {
    /// The run's id.
    pub run: WorkflowRunId,
    /// Its scheduler events, in order (each as the runtime recorded it).
    pub events: Vec<WorkflowEvent>,
    /// Its dispatch ledger, oldest first.
    pub dispatches: Vec<WorkflowDispatch>,
}

/// What `workflow pause` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseAsked {
    /// The request is recorded; the run pauses at its next boundary.
    Requested,
    /// A pause was already asked for and not yet answered.
    AlreadyRequested,
    /// The run is already paused or interrupted: nothing to ask.
    AlreadyStopped(WorkflowStatus),
    /// The run has ended: it cannot pause.
    Ended(WorkflowStatus),
}

/// The default and largest number of runs `workflow list` shows.
pub const LIST_DEFAULT: usize = 50;

/// The steps the ledger shows, in the order each was first dispatched, each at its newest
/// attempt.
fn steps(dispatches: &[WorkflowDispatch]) -> Vec<StepState> {
    let mut steps: Vec<StepState> = Vec::new();
    for d in dispatches {
        let state = StepState {
            step: d.step.clone(),
            item: d.item.clone(),
            attempts: d.attempt,
            outcome: d.outcome.clone(),
            reason: d.reason.clone(),
        };
        match steps
            .iter_mut()
            .find(|s| s.step == d.step && s.item == d.item)
        {
            Some(seen) if d.attempt >= seen.attempts => *seen = state,
            Some(_) => {}
            None => steps.push(state),
        }
    }
    steps
}

/// The status of run `id`, read from one snapshot so its steps and members agree with it.
pub fn status(store: &mut Store, id: WorkflowRunId) -> Result<WorkflowReport, Error> {
    store.interrupt_abandoned_workflow_runs()?;
    store.read(|s| {
        let record = s.workflow_record(id)?.ok_or(Error::NoSuchRun(id))?;
        Ok(WorkflowReport {
            greenlight_version: env!("CARGO_PKG_VERSION").to_owned(),
            steps: steps(&record.dispatches),
            run: record.run,
            members: record.members,
        })
    })
}

/// Run `id`'s events and ledger.
pub fn log(store: &mut Store, id: WorkflowRunId) -> Result<WorkflowLog, Error> {
    store.interrupt_abandoned_workflow_runs()?;
    store.read(|s| {
        let record = s.workflow_record(id)?.ok_or(Error::NoSuchRun(id))?;
        Ok(WorkflowLog {
            run: id,
            events: record.events,
            dispatches: record.dispatches,
        })
    })
}

/// The newest runs, newest first, at most `max`.
pub fn list(store: &mut Store, max: usize) -> Result<Vec<WorkflowRun>, Error> {
    store.interrupt_abandoned_workflow_runs()?;
    Ok(store.workflow_runs(max)?)
}

/// The kept member worktrees of `report`, which status lists so none is forgotten.
pub fn kept(report: &WorkflowReport) -> impl Iterator<Item = &WorkflowMember> {
    report
        .members
        .iter()
        .filter(|m| m.state == MemberState::Kept)
}

/// Asks run `id` to pause at its next boundary, decided inside the write transaction that
/// records it.
pub fn pause(store: &mut Store, id: WorkflowRunId) -> Result<PauseAsked, Error> {
    store.interrupt_abandoned_workflow_runs()?;
    store.write(|tx| {
        let run = tx.workflow_run(id)?.ok_or(Error::NoSuchRun(id))?;
        Ok(match run.status {
            WorkflowStatus::Running => {
                if tx.request_workflow_pause(id)? {
                    PauseAsked::Requested
                } else {
                    PauseAsked::AlreadyRequested
                }
            }
            status if status.is_ended() => PauseAsked::Ended(status),
            status => PauseAsked::AlreadyStopped(status),
        })
    })
}
