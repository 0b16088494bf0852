//! The [`Journal`] in the state database: each entry is a `workflow_events` row, and what it
//! means for the run row, the dispatch ledger, the member worktrees and the `wf-<id>` stream
//! is written in the same transaction.
//!
//! The rule: one entry, one transaction (`Store::write`), so a kill leaves either the entry
//! and everything it implies, or neither.

use std::collections::BTreeMap;
use std::path::PathBuf;

use greenlight_store::greenlight_stream::FrameBody;
use greenlight_store::greenlight_types::{Family, MemberState, WorkflowStatus};
use greenlight_store::{
    NewWorkflowDispatch, NewWorkflowMember, NewWorkflowRun, QueueItemId, Reads, Store,
    WorkflowBudget, WorkflowDetail, WorkflowDispatchEnd, WorkflowDispatchId, WorkflowRunId,
};

use crate::run::journal::{Entry, Journal, JournalError, LedgerRow, NewRun, RecordedRun};
use crate::schedule::Event;

/// The state database as a run's journal.
pub struct StoreJournal<'s> {
    store: &'s mut Store,
    /// Ledger rows in flight, by unit.
    open: BTreeMap<(String, Option<String>), WorkflowDispatchId>,
    /// Gate tries so far, by gate step (for the frames' `attempt`).
    gate_tries: BTreeMap<String, u32>,
    /// Ledger rows so far, by unit: a row's attempt is the unit's dispatch number in the ledger
    /// (a redo round or a dispatch again after a kill is a new row, never the same one).
    dispatches: BTreeMap<(String, Option<String>), u32>,
    /// The repository's common git directory, recorded with a new run.
    repository: PathBuf,
    /// The queue item a worker runs this run for: a new run is linked to it in the transaction
    /// that creates the run.
    queue_item: Option<QueueItemId>,
}

impl<'s> StoreJournal<'s> {
    /// The journal of runs in `store`, of the repository whose common git dir is `repository`.
    pub fn new(store: &'s mut Store, repository: PathBuf) -> Self {
        Self {
            store,
            open: BTreeMap::new(),
            gate_tries: BTreeMap::new(),
            dispatches: BTreeMap::new(),
            repository,
            queue_item: None,
        }
    }

    /// The journal of a run a queue worker runs for `item`.
    pub fn for_queue_item(mut self, item: QueueItemId) -> Self {
        self.queue_item = Some(item);
        self
    }
}

fn err(e: impl std::fmt::Display) -> JournalError {
    JournalError::new(e.to_string())
}

fn run_id(id: &str) -> Result<WorkflowRunId, JournalError> {
    id.parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .map(WorkflowRunId)
        .ok_or_else(|| {
            JournalError::new(format!(
                "`{id}` is not a workflow run id (a positive number)"
            ))
        })
}

fn family(name: &str) -> Option<Family> {
    Family::from_name(name)
}

fn end_of(row: &LedgerRow) -> WorkflowDispatchEnd {
    WorkflowDispatchEnd {
        outcome: row.outcome.clone(),
        reason: row.reason.map(|r| r.as_str().to_owned()),
        wall_ms: Some(row.wall_ms),
        tokens_in: row.tokens_in,
        tokens_out: row.tokens_out,
        cost_usd: row.cost_usd,
    }
}

impl Journal for StoreJournal<'_> {
    fn recorded(&mut self, id: &str) -> Result<Option<RecordedRun>, JournalError> {
        let Ok(run) = run_id(id) else {
            return Ok(None);
        };
        let Some(record) = self.store.read(|s| s.workflow_record(run))? else {
            return Ok(None);
        };
        let mut entries = Vec::with_capacity(record.events.len());
        for event in &record.events {
            let entry: Entry = serde_json::from_str(&event.event).map_err(|e| {
                JournalError::new(format!(
                    "run {id}'s event {} is not one this greenlight wrote ({e}); start a new run",
                    event.seq
                ))
            })?;
            if let Entry::Event {
                event: Event::GateStarted { step },
                ..
            } = &entry
            {
                *self.gate_tries.entry(step.clone()).or_default() += 1;
            }
            entries.push((u64::try_from(event.at).unwrap_or(0), entry));
        }
        for d in &record.dispatches {
            let n = self
                .dispatches
                .entry((d.step.clone(), d.item.clone()))
                .or_default();
            *n = (*n).max(d.attempt);
        }
        let row = record.run;
        let args = serde_json::from_str(&row.args_json).unwrap_or_default();
        Ok(Some(RecordedRun {
            run: NewRun {
                name: row.name,
                plan_path: row.plan_path.to_string_lossy().into_owned(),
                started_in: row.worktree.to_string_lossy().into_owned(),
                base_commit: row.base_commit,
                plan_digest: row.plan_digest,
                args_hash: row.args_hash,
                plan_json: row.plan_json,
                args,
                budget: row.budget.units.unwrap_or(0),
                wall_clock_sec: row.budget.wall_clock_ms.map(|ms| ms / 1000),
                token_cap: row.budget.token_cap,
                cost_cap_usd: row.budget.cost_cap_usd,
            },
            finished: row.status.is_ended(),
            entries,
        }))
    }

    fn create(&mut self, run: &NewRun, id: Option<&str>) -> Result<String, JournalError> {
        let id = id.map(run_id).transpose()?;
        let new = NewWorkflowRun {
            id,
            name: run.name.clone(),
            plan_path: PathBuf::from(&run.plan_path),
            repository: self.repository.clone(),
            worktree: PathBuf::from(&run.started_in),
            base_commit: run.base_commit.clone(),
            plan_digest: run.plan_digest.clone(),
            args_hash: run.args_hash.clone(),
            plan_json: run.plan_json.clone(),
            args_json: serde_json::to_string(&run.args).map_err(err)?,
            budget: WorkflowBudget {
                units: Some(run.budget),
                token_cap: run.token_cap,
                cost_cap_usd: run.cost_cap_usd,
                wall_clock_ms: run.wall_clock_sec.map(|s| s.saturating_mul(1000)),
            },
        };
        let id = self
            .store
            .write(|tx| {
                let id = tx.create_workflow_run(&new)?;
                if let Some(item) = self.queue_item {
                    tx.attach_queue_workflow(item, id)?;
                }
                Ok::<_, greenlight_store::Error>(id)
            })
            .map_err(JournalError::from)?;
        Ok(id.to_string())
    }

    fn append(&mut self, id: &str, entry: &Entry) -> Result<(), JournalError> {
        let run = run_id(id)?;
        let json = serde_json::to_string(entry).map_err(err)?;
        let r = run.0;
        // What the entry means besides itself, decided before the transaction.
        let frame: Option<FrameBody> = match entry {
            Entry::Event {
                event: Event::GateStarted { step },
                ..
            } => {
                let tries = self.gate_tries.entry(step.clone()).or_default();
                *tries += 1;
                Some(FrameBody::WorkflowGateStarted {
                    run: r,
                    step: step.clone(),
                    item: None,
                    attempt: *tries,
                })
            }
            Entry::Event {
                event: Event::Judged { step, passed },
                ..
            } => Some(FrameBody::WorkflowGateJudged {
                run: r,
                step: step.clone(),
                item: None,
                attempt: self.gate_tries.get(step).copied().unwrap_or(1),
                passed: *passed,
                route: None,
            }),
            Entry::JoinDecided {
                step,
                policy,
                passed,
                passed_items,
                failed_items,
            } => Some(FrameBody::WorkflowJoinDecided {
                run: r,
                step: step.clone(),
                policy: policy.clone(),
                passed: *passed,
                passed_items: passed_items.clone(),
                failed_items: failed_items.clone(),
            }),
            Entry::Event {
                event: Event::LandStarted { step, item },
                via,
            } => Some(FrameBody::WorkflowLandStarted {
                run: r,
                step: step.clone(),
                item: Some(item.clone()),
                branch: via.as_ref().map(|v| v.worktree.clone()).unwrap_or_default(),
            }),
            Entry::LandEnded {
                step,
                item,
                branch,
                outcome,
                commit,
                ..
            } => Some(FrameBody::WorkflowLanded {
                run: r,
                step: step.clone(),
                item: Some(item.clone()),
                branch: branch.clone(),
                outcome: outcome.clone(),
                commit: commit.clone(),
            }),
            _ => None,
        };
        let mut number = |step: &str, item: &Option<String>| {
            let n = self
                .dispatches
                .entry((step.to_owned(), item.clone()))
                .or_default();
            *n += 1;
            *n
        };
        let attempt_no = match entry {
            Entry::Event {
                event: Event::Dispatched { step, item, .. },
                ..
            } => number(step, item),
            Entry::Ledger { row }
                if !self
                    .open
                    .contains_key(&(row.step.clone(), row.item.clone())) =>
            {
                number(&row.step, &row.item)
            }
            _ => 0,
        };
        let mut opened: Option<(String, Option<String>)> = None;
        let mut closing: Option<(WorkflowDispatchId, LedgerRow)> = None;
        let mut settle_now: Option<LedgerRow> = None;
        match entry {
            Entry::Event {
                event: Event::Dispatched { step, item, .. },
                ..
            } => opened = Some((step.clone(), item.clone())),
            Entry::Ledger { row } => {
                match self.open.remove(&(row.step.clone(), row.item.clone())) {
                    Some(id) => closing = Some((id, row.clone())),
                    // A verdict agent's dispatch has no scheduler event: started and settled at once.
                    None => settle_now = Some(row.clone()),
                }
            }
            _ => {}
        }
        let dispatch_id = self
            .store
            .write(
                |tx| -> Result<Option<WorkflowDispatchId>, greenlight_store::Error> {
                    tx.append_workflow_event(run, &json, frame.as_ref())?;
                    let mut started = None;
                    match entry {
                        Entry::Event {
                            event: Event::Dispatched { step, item, .. },
                            via,
                        } => {
                            let (id, _) = tx.start_workflow_dispatch(&NewWorkflowDispatch {
                                run,
                                step: step.clone(),
                                item: item.clone(),
                                attempt: attempt_no,
                                family: via
                                    .as_ref()
                                    .and_then(|v| family(&v.family))
                                    .unwrap_or(Family::Command),
                                model: via.as_ref().map(|v| v.model.clone()),
                                worktree: via.as_ref().map(|v| PathBuf::from(&v.worktree)),
                            })?;
                            started = Some(id);
                        }
                        Entry::Segment { resume: true } => {
                            tx.resume_workflow_run(run)?;
                        }
                        Entry::Probed {
                            agent, answered, ..
                        } => {
                            let fam = greenlight_agent_family(agent);
                            tx.record_workflow_probe(run, fam, answered)?;
                        }
                        // A spend cap's extension lives in the records only (the runtime sums
                        // them); the store keeps units and wall clock.
                        Entry::Extended {
                            dispatches,
                            wall_clock_sec,
                            ..
                        } => {
                            if *dispatches > 0 {
                                tx.extend_workflow_budget(run, *dispatches)?;
                            }
                            if *wall_clock_sec > 0 {
                                tx.extend_workflow_wall_clock(
                                    run,
                                    wall_clock_sec.saturating_mul(1000),
                                )?;
                            }
                        }
                        Entry::Worktree {
                            step,
                            item,
                            branch,
                            path,
                            state,
                        } => match state.as_str() {
                            "created" => tx.add_workflow_member(&NewWorkflowMember {
                                run,
                                step: step.clone(),
                                item: item.clone(),
                                branch: branch.clone(),
                                worktree: PathBuf::from(path),
                            })?,
                            "kept" => tx.set_workflow_member_state(
                                run,
                                step,
                                item.as_deref(),
                                MemberState::Kept,
                                Some("the run did not complete; kept for a person"),
                            )?,
                            _ => tx.set_workflow_member_state(
                                run,
                                step,
                                item.as_deref(),
                                MemberState::Removed,
                                None,
                            )?,
                        },
                        Entry::Paused {
                            reason,
                            step,
                            message,
                        } => {
                            tx.pause_workflow_run(
                                run,
                                &WorkflowDetail {
                                    reason: reason.map_or("pause-step", |r| r.as_str()).to_owned(),
                                    step: Some(step.clone()),
                                    label: None,
                                    message: Some(message.clone()),
                                },
                            )?;
                        }
                        Entry::Finished {
                            status,
                            step,
                            reason,
                        } => {
                            let (status, detail) = match status.as_str() {
                                "completed" => (WorkflowStatus::Completed, None),
                                "terminal" => (
                                    WorkflowStatus::Terminal,
                                    Some(WorkflowDetail {
                                        reason: "terminal".into(),
                                        step: None,
                                        label: step.clone(),
                                        message: None,
                                    }),
                                ),
                                _ => (
                                    WorkflowStatus::Failed,
                                    Some(WorkflowDetail {
                                        reason: reason.map_or("failed", |r| r.as_str()).to_owned(),
                                        step: step.clone(),
                                        label: None,
                                        message: None,
                                    }),
                                ),
                            };
                            tx.finish_workflow_run(run, status, detail.as_ref())?;
                        }
                        _ => {}
                    }
                    if let Some((id, row)) = &closing {
                        tx.finish_workflow_dispatch(*id, &end_of(row))?;
                    }
                    if let Some(row) = &settle_now {
                        let (id, _) = tx.start_workflow_dispatch(&NewWorkflowDispatch {
                            run,
                            step: row.step.clone(),
                            item: row.item.clone(),
                            attempt: attempt_no,
                            family: family(&row.family).unwrap_or(Family::Command),
                            model: Some(row.model.clone()),
                            worktree: Some(PathBuf::from(&row.worktree)),
                        })?;
                        tx.finish_workflow_dispatch(id, &end_of(row))?;
                    }
                    Ok(started)
                },
            )
            .map_err(JournalError::from)?;
        if let (Some(id), Some(unit)) = (dispatch_id, opened) {
            self.open.insert(unit, id);
        }
        Ok(())
    }

    fn pause_requested(&mut self, id: &str) -> Result<bool, JournalError> {
        let run = run_id(id)?;
        let found = self.store.read(|s| s.workflow_run(run))?;
        Ok(found.is_some_and(|r| r.pause_requested_at.is_some()))
    }
}

/// The family an agent spec names (`claude`, `codex`, `openai`, `command:…`).
fn greenlight_agent_family(agent: &str) -> Family {
    if agent.starts_with("command:") {
        return Family::Command;
    }
    Family::from_name(agent).unwrap_or(Family::Command)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use greenlight_store::{HandClock, NewQueueItem, QueueKind};

    use super::*;

    fn new_run() -> NewRun {
        NewRun {
            name: "fan".into(),
            plan_path: "plan.yaml".into(),
            started_in: "/r".into(),
            base_commit: "0123abcd".into(),
            plan_digest: "sha256:plan".into(),
            args_hash: "sha256:args".into(),
            plan_json: "{}".into(),
            args: BTreeMap::new(),
            budget: 3,
            wall_clock_sec: None,
            token_cap: None,
            cost_cap_usd: None,
        }
    }

    /// A worker that stalled past its lease and finds the item taken writes nothing more, and
    /// its journal says the lease was lost (the worker stops without ending the item), where any
    /// other failure says it was not.
    #[test]
    fn a_write_refused_for_a_lost_lease_is_told_apart_from_other_failures() {
        let dir = tempfile::tempdir().expect("tmp");
        let db = dir.path().join("state.db");
        let clock = Arc::new(HandClock::new(1_000));
        let mut holder = Store::open_with_clock(&db, clock.clone()).expect("open");
        let mut taker = Store::open_with_clock(&db, clock.clone()).expect("open");
        let item = holder
            .write(|tx| {
                tx.submit_queue_item(&NewQueueItem {
                    kind: QueueKind::Workflow,
                    repository: "/r/.git".into(),
                    base: "0123abcd".into(),
                    spec_json: "{}".into(),
                    labels: Vec::new(),
                })
            })
            .expect("submit");
        let (_, fence) = holder
            .claim_queue_item("holder", &[], 30_000)
            .expect("claim")
            .expect("the item");
        holder.set_fence(Some(fence));
        let mut journal =
            StoreJournal::new(&mut holder, PathBuf::from("/r/.git")).for_queue_item(item);
        let run = journal.create(&new_run(), None).expect("create the run");
        journal
            .append(&run, &Entry::Segment { resume: false })
            .expect("an entry while the lease holds");

        let not_a_run = journal
            .append("wf-x", &Entry::Segment { resume: false })
            .expect_err("not a run id");
        assert!(!not_a_run.lease_lost, "{not_a_run}");

        clock.set(40_000);
        taker
            .claim_queue_item("taker", &[], 30_000)
            .expect("claim")
            .expect("the expired item");
        let refused = journal
            .append(&run, &Entry::Segment { resume: true })
            .expect_err("the lease was lost");
        assert!(refused.lease_lost, "{refused}");
        let recorded = taker
            .workflow_record(WorkflowRunId(run.parse().expect("id")))
            .expect("read");
        assert_eq!(
            recorded.expect("the run").events.len(),
            1,
            "nothing written after the loss"
        );
    }
}
