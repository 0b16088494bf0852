//! Workflow runs in the store: the run row, its events (the scheduler's input on resume), its
//! dispatch ledger and its member worktrees, each change with its frame on the `wf-<id>` stream.
//!
//! The rule: **the store never reads an event body**. Events are JSON text the runtime wrote
//! (the workflow crate's events), numbered 1, 2, 3, … per run in the transaction that appends
//! them; the store checks only that they are JSON, so it does not depend on the plan's types.
//! The budget's spend is never stored: it is counted from the ledger (one unit per dispatch
//! row, tokens and cost summed where reported), so the two can never disagree.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::db::{Backend, OptionalExtension, Row, params};
use greenlight_stream::{Frame, FrameBody, StreamId, TurnTokens};
use greenlight_types::{Family, MemberState, WorkflowStatus};

use crate::Error;
use crate::model::{Millis, is_kebab};
use crate::owner::{Liveness, RunOwner};
use crate::read::sealed::Access;
use crate::read::{collect, path_from_blob, sql_err};
use crate::tx::Tx;

/// A workflow run's id; `wf-<id>` is its stream.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct WorkflowRunId(pub i64);

impl WorkflowRunId {
    /// Its stream.
    pub fn stream(self) -> StreamId {
        StreamId::Workflow(self.0)
    }
}

impl std::fmt::Display for WorkflowRunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A row of the dispatch ledger.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct WorkflowDispatchId(pub i64);

/// The limits a run started with. Each `None` is "no limit".
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct WorkflowBudget {
    /// Dispatch units (one per dispatch) granted at the start, before extensions.
    pub units: Option<u64>,
    /// Tokens (in + out, as reported) the run may spend.
    pub token_cap: Option<u64>,
    /// US dollars the run may spend.
    pub cost_cap_usd: Option<f64>,
    /// Wall-clock time granted at the start, before extensions.
    pub wall_clock_ms: Option<u64>,
}

/// Why a run paused or ended: a closed reason name and where.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct WorkflowDetail {
    /// The kebab-case reason (`budget-exhausted`, `paused-by-user`, `deliverable-not-landed`…).
    pub reason: String,
    /// The step it happened at (the boundary a pause stopped before).
    pub step: Option<String>,
    /// A `terminal:<label>` route's label, or a `pause` step's state.
    pub label: Option<String>,
    /// What happened and what to do, for a person.
    pub message: Option<String>,
}

/// A workflow run about to start.
#[derive(Debug, Clone, Default)]
pub struct NewWorkflowRun {
    /// The id asked for (`--run-id`); `None` takes the next free one.
    pub id: Option<WorkflowRunId>,
    /// The plan's name.
    pub name: String,
    /// The plan file, as given.
    pub plan_path: PathBuf,
    /// The common git directory of the repository it runs in.
    pub repository: PathBuf,
    /// The worktree it was started in.
    pub worktree: PathBuf,
    /// The commit members branch from.
    pub base_commit: String,
    /// The plan digest (what a resume compares).
    pub plan_digest: String,
    /// The argument hash (what a resume compares).
    pub args_hash: String,
    /// The plan's canonical JSON.
    pub plan_json: String,
    /// The resolved arguments, as a JSON object.
    pub args_json: String,
    /// Its limits.
    pub budget: WorkflowBudget,
}

/// What the ledger says the run has spent so far.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct WorkflowSpend {
    /// Dispatch units: one per ledger row, whatever its outcome (an interrupted dispatch was
    /// still sent).
    pub units: u64,
    /// Input tokens over the dispatches that reported them; `None` when none did.
    pub tokens_in: Option<u64>,
    /// Output tokens, likewise.
    pub tokens_out: Option<u64>,
    /// Cost in US dollars, likewise.
    pub cost_usd: Option<f64>,
}

/// A recorded workflow run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct WorkflowRun {
    /// Its id.
    pub id: WorkflowRunId,
    /// The plan's name.
    pub name: String,
    /// The plan file, as given.
    pub plan_path: PathBuf,
    /// The common git directory of its repository.
    pub repository: PathBuf,
    /// The worktree it was started in.
    pub worktree: PathBuf,
    /// The commit members branch from.
    pub base_commit: String,
    /// The plan digest.
    pub plan_digest: String,
    /// The argument hash.
    pub args_hash: String,
    /// The plan's canonical JSON.
    pub plan_json: String,
    /// The resolved arguments (a JSON object).
    pub args_json: String,
    /// Each probed family's answering model id.
    pub models: BTreeMap<String, String>,
    /// The limits it started with.
    pub budget: WorkflowBudget,
    /// How many budget extensions were granted.
    pub extensions: u32,
    /// The dispatch units they added.
    pub extension_units: u64,
    /// How many wall-clock extensions were granted.
    pub wall_clock_extensions: u32,
    /// The time they added.
    pub wall_clock_extra_ms: u64,
    /// What the ledger says it spent.
    pub spent: WorkflowSpend,
    /// Where it stands.
    pub status: WorkflowStatus,
    /// Why it paused or ended; `None` while running or once completed.
    pub detail: Option<WorkflowDetail>,
    /// When `workflow pause` asked it to pause at its next boundary; `None` when nobody did
    /// (always `None` unless running).
    pub pause_requested_at: Option<Millis>,
    /// The process that drives (or last drove) it; `None` when `/proc` could not say.
    #[serde(skip)]
    pub owner: Option<RunOwner>,
    /// When it started.
    pub started_at: Millis,
    /// When its row last changed.
    pub updated_at: Millis,
    /// When it ended (completed, failed or terminal).
    pub ended_at: Option<Millis>,
}

impl WorkflowRun {
    /// The dispatch units granted in all (start plus extensions); `None` when unlimited.
    pub fn units_total(&self) -> Option<u64> {
        self.budget
            .units
            .map(|u| u.saturating_add(self.extension_units))
    }

    /// The dispatch units left to reserve; `None` when unlimited.
    pub fn units_left(&self) -> Option<u64> {
        self.units_total()
            .map(|total| total.saturating_sub(self.spent.units))
    }

    /// The wall-clock time granted in all; `None` when unlimited.
    pub fn wall_clock_total_ms(&self) -> Option<u64> {
        self.budget
            .wall_clock_ms
            .map(|ms| ms.saturating_add(self.wall_clock_extra_ms))
    }

    /// Whether its owner is known to be gone (see [`RunOwner::liveness`]); a run with no
    /// recorded owner is never judged gone.
    pub fn owner_liveness(&self) -> Liveness {
        self.owner
            .as_ref()
            .map_or(Liveness::Alive, RunOwner::liveness)
    }
}

/// One recorded scheduler event of a run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct WorkflowEvent {
    /// Its run.
    pub run: WorkflowRunId,
    /// Its position in the run: 1, 2, 3, … with no hole.
    pub seq: u64,
    /// The event as the runtime wrote it (JSON text; the store never reads it).
    pub event: String,
    /// When it was appended.
    pub at: Millis,
}

/// A workflow dispatch about to start.
#[derive(Debug, Clone)]
pub struct NewWorkflowDispatch {
    /// Its run.
    pub run: WorkflowRunId,
    /// The step's id.
    pub step: String,
    /// The fan-out item key, for a member.
    pub item: Option<String>,
    /// The attempt (1-based).
    pub attempt: u32,
    /// The agent family.
    pub family: Family,
    /// The model id, when known.
    pub model: Option<String>,
    /// The worktree it runs in.
    pub worktree: Option<PathBuf>,
}

/// How a workflow dispatch settled. Each figure is `None` when the agent did not report it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkflowDispatchEnd {
    /// `ok`, or the kebab-case outcome (`failed`, `timeout`, `interrupted`, …).
    pub outcome: String,
    /// The kebab-case reason of a failure.
    pub reason: Option<String>,
    /// Wall time.
    pub wall_ms: Option<u64>,
    /// Input tokens.
    pub tokens_in: Option<u64>,
    /// Output tokens.
    pub tokens_out: Option<u64>,
    /// Cost in US dollars.
    pub cost_usd: Option<f64>,
}

/// The outcome of a dispatch that has not settled.
pub const IN_FLIGHT: &str = "in-flight";

/// One row of the dispatch ledger.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct WorkflowDispatch {
    /// Its row id.
    pub id: WorkflowDispatchId,
    /// Its run.
    pub run: WorkflowRunId,
    /// The step's id.
    pub step: String,
    /// The fan-out item key.
    pub item: Option<String>,
    /// The attempt (1-based).
    pub attempt: u32,
    /// The agent family.
    pub family: Family,
    /// The model id.
    pub model: Option<String>,
    /// The worktree it ran in.
    pub worktree: Option<PathBuf>,
    /// When it started.
    pub started_at: Millis,
    /// When it settled; `None` while in flight.
    pub ended_at: Option<Millis>,
    /// Wall time.
    pub wall_ms: Option<u64>,
    /// Input tokens (`None`: not reported, never 0 for unknown).
    pub tokens_in: Option<u64>,
    /// Output tokens.
    pub tokens_out: Option<u64>,
    /// Cost in US dollars.
    pub cost_usd: Option<f64>,
    /// [`IN_FLIGHT`], `ok`, or how it ended.
    pub outcome: String,
    /// The reason of a failure.
    pub reason: Option<String>,
}

/// A member worktree just created.
#[derive(Debug, Clone)]
pub struct NewWorkflowMember {
    /// Its run.
    pub run: WorkflowRunId,
    /// The step (a fan-out's member step, or a file step).
    pub step: String,
    /// The item key (`None` for a file step).
    pub item: Option<String>,
    /// Its branch.
    pub branch: String,
    /// The linked worktree's path.
    pub worktree: PathBuf,
}

/// A member worktree of a run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct WorkflowMember {
    /// Its run.
    pub run: WorkflowRunId,
    /// The step.
    pub step: String,
    /// The item key.
    pub item: Option<String>,
    /// Its branch.
    pub branch: String,
    /// The linked worktree's path.
    pub worktree: PathBuf,
    /// Created, removed or kept.
    pub state: MemberState,
    /// Why it was kept.
    pub why_kept: Option<String>,
    /// When it was created.
    pub created_at: Millis,
    /// When its state last changed.
    pub updated_at: Millis,
}

/// A run with everything recorded about it, read from one snapshot.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct WorkflowRecord {
    /// The run row.
    pub run: WorkflowRun,
    /// Its events, in order.
    pub events: Vec<WorkflowEvent>,
    /// Its ledger, oldest first.
    pub dispatches: Vec<WorkflowDispatch>,
    /// Its member worktrees, oldest first.
    pub members: Vec<WorkflowMember>,
}

fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn kebab(what: &'static str, value: &str) -> Result<(), Error> {
    if is_kebab(value) {
        Ok(())
    } else {
        Err(Error::NotKebabCase {
            what,
            found: value.to_owned(),
        })
    }
}

fn json_text(what: &'static str, text: &str) -> Result<(), Error> {
    serde_json::from_str::<serde::de::IgnoredAny>(text)
        .map(|_| ())
        .map_err(|source| Error::NotJson { what, source })
}

fn tokens(end: &WorkflowDispatchEnd) -> Option<TurnTokens> {
    let any = end.tokens_in.is_some() || end.tokens_out.is_some() || end.cost_usd.is_some();
    any.then(|| TurnTokens {
        input: end.tokens_in,
        output: end.tokens_out,
        cost_usd: end.cost_usd,
        ..TurnTokens::default()
    })
}

impl Tx<'_> {
    /// Records a workflow run starting, owned by this process, with its `workflow-run-started`
    /// frame (seq 1).
    pub fn create_workflow_run(&self, new: &NewWorkflowRun) -> Result<WorkflowRunId, Error> {
        json_text("the plan's canonical JSON", &new.plan_json)?;
        json_text("the resolved arguments", &new.args_json)?;
        if let Some(id) = new.id
            && workflow_run(self, id)?.is_some()
        {
            return Err(Error::WorkflowRunExists { run: id.0 });
        }
        let owner = RunOwner::current();
        let b = &new.budget;
        let run_raw = self.insert_id(
            "INSERT INTO workflow_runs (id, name, plan_path, repository, worktree, base_commit, \
             plan_digest, args_hash, plan_json, args_json, budget_units, token_cap, cost_cap_usd, \
             wall_clock_ms, status, owner_pid, owner_start, owner_pidns, owner_host, started_at, \
             updated_at) SELECT COALESCE(CAST(?1 AS BIGINT), MAX(id) + 1, 1), ?2, ?3, ?4, ?5, \
             ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, 'running', ?15, ?16, ?17, ?18, ?19, ?19 \
             FROM workflow_runs RETURNING id",
            params![
                new.id.map(|id| id.0),
                new.name,
                new.plan_path.as_os_str().as_bytes(),
                new.repository.as_os_str().as_bytes(),
                new.worktree.as_os_str().as_bytes(),
                new.base_commit,
                new.plan_digest,
                new.args_hash,
                new.plan_json,
                new.args_json,
                b.units.map(int),
                b.token_cap.map(int),
                b.cost_cap_usd,
                b.wall_clock_ms.map(int),
                owner.as_ref().map(|o| o.pid),
                owner.as_ref().map(|o| o.start),
                owner.as_ref().map(|o| o.pid_ns.as_str()),
                owner.as_ref().map(|o| o.host.as_str()),
                self.now(),
            ],
        )?;
        let run = WorkflowRunId(run_raw);
        self.append_frame(
            run.stream(),
            &FrameBody::WorkflowRunStarted {
                run: run.0,
                name: new.name.clone(),
                plan_digest: new.plan_digest.clone(),
            },
        )?;
        Ok(run)
    }

    /// Appends one scheduler event (JSON text, kept as given) with the run's next event seq,
    /// and `frame` to the run's stream when given, in this transaction. Returns the seq and
    /// the frame as persisted (publish it after the commit).
    pub fn append_workflow_event(
        &self,
        run: WorkflowRunId,
        event: &str,
        frame: Option<&FrameBody>,
    ) -> Result<(u64, Option<Frame>), Error> {
        json_text("a workflow event", event)?;
        self.open_run(run, "given events")?;
        let head: u64 = self
            .conn()
            .query_row(
                "SELECT COALESCE(MAX(seq), 0) FROM workflow_events WHERE run_id = ?1",
                [run.0],
                |r| r.get(0),
            )
            .map_err(|e| sql_err(self, e))?;
        let seq = head + 1;
        self.exec(
            "INSERT INTO workflow_events (run_id, seq, event, at) VALUES (?1, ?2, ?3, ?4)",
            params![run.0, seq, event, self.now()],
        )?;
        self.touch(run)?;
        let frame = frame
            .map(|body| self.append_frame(run.stream(), body))
            .transpose()?;
        Ok((seq, frame))
    }

    /// Records the model id that answered `family`'s probe (replacing an earlier one).
    pub fn record_workflow_probe(
        &self,
        run: WorkflowRunId,
        family: Family,
        answering: &str,
    ) -> Result<(), Error> {
        self.open_run(run, "probed")?;
        // One key of the JSON object set in place: each database spells that its own way.
        let sql = match self.conn().backend() {
            Backend::Sqlite => {
                "UPDATE workflow_runs SET models_json = json_set(models_json, '$.' || ?2, ?3), \
                 updated_at = ?4 WHERE id = ?1"
            }
            Backend::Postgres => {
                "UPDATE workflow_runs SET models_json = CAST(jsonb_set(CAST(models_json AS JSONB), \
                 ARRAY[CAST(?2 AS TEXT)], to_jsonb(CAST(?3 AS TEXT))) AS TEXT), updated_at = ?4 \
                 WHERE id = ?1"
            }
        };
        self.exec(sql, params![run.0, family.as_str(), answering, self.now()])?;
        Ok(())
    }

    /// Records a dispatch starting (outcome [`IN_FLIGHT`]; it spends one unit) with its
    /// `workflow-dispatched` frame. The run must be running.
    pub fn start_workflow_dispatch(
        &self,
        new: &NewWorkflowDispatch,
    ) -> Result<(WorkflowDispatchId, Frame), Error> {
        let status = self.open_run(new.run, "dispatched to")?;
        if status != WorkflowStatus::Running {
            return Err(Error::WorkflowRunNotOpen {
                run: new.run.0,
                status,
                change: "dispatched to",
            });
        }
        let id_raw = self.insert_id(
            "INSERT INTO workflow_dispatches (run_id, step, item, attempt, family, model, \
             worktree, started_at, outcome) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'in-flight') RETURNING id",
            params![
                new.run.0,
                new.step,
                new.item,
                new.attempt,
                new.family.as_str(),
                new.model,
                new.worktree.as_ref().map(|w| w.as_os_str().as_bytes()),
                self.now(),
            ],
        )?;
        let id = WorkflowDispatchId(id_raw);
        self.touch(new.run)?;
        let frame = self.append_frame(
            new.run.stream(),
            &FrameBody::WorkflowDispatched {
                run: new.run.0,
                step: new.step.clone(),
                item: new.item.clone(),
                attempt: new.attempt,
                family: new.family.as_str().to_owned(),
                model: new.model.clone(),
            },
        )?;
        Ok((id, frame))
    }

    /// Records how an in-flight dispatch settled (once) with its `workflow-settled` frame.
    pub fn finish_workflow_dispatch(
        &self,
        id: WorkflowDispatchId,
        end: &WorkflowDispatchEnd,
    ) -> Result<Frame, Error> {
        kebab("dispatch outcome", &end.outcome)?;
        if end.outcome == IN_FLIGHT {
            return Err(Error::NotKebabCase {
                what: "dispatch outcome (a settled one)",
                found: end.outcome.clone(),
            });
        }
        if let Some(reason) = &end.reason {
            kebab("dispatch reason", reason)?;
        }
        let row: Option<(i64, String, Option<String>, u32)> = self
            .conn()
            .query_row(
                "SELECT run_id, step, item, attempt FROM workflow_dispatches \
                 WHERE id = ?1 AND ended_at IS NULL",
                [id.0],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()
            .map_err(|e| sql_err(self, e))?;
        let Some((run, step, item, attempt)) = row else {
            return Err(Error::WorkflowDispatchNotInFlight { dispatch: id.0 });
        };
        self.exec(
            "UPDATE workflow_dispatches SET ended_at = ?2, wall_ms = ?3, tokens_in = ?4, \
             tokens_out = ?5, cost_usd = ?6, outcome = ?7, reason = ?8 WHERE id = ?1",
            params![
                id.0,
                self.now(),
                end.wall_ms.map(int),
                end.tokens_in.map(int),
                end.tokens_out.map(int),
                end.cost_usd,
                end.outcome,
                end.reason,
            ],
        )?;
        let run = WorkflowRunId(run);
        self.touch(run)?;
        self.append_frame(
            run.stream(),
            &FrameBody::WorkflowSettled {
                run: run.0,
                step,
                item,
                attempt,
                outcome: end.outcome.clone(),
                reason: end.reason.clone(),
                wall_ms: end.wall_ms,
                tokens: tokens(end),
            },
        )
    }

    /// Asks a running run to pause at its next boundary (what `workflow pause` records; the
    /// runtime reads [`WorkflowRun::pause_requested_at`] between actions). Returns `false` when
    /// a pause was already asked for.
    pub fn request_workflow_pause(&self, run: WorkflowRunId) -> Result<bool, Error> {
        let status = self.open_run(run, "paused")?;
        if status != WorkflowStatus::Running {
            return Err(Error::WorkflowRunNotOpen {
                run: run.0,
                status,
                change: "paused",
            });
        }
        let changed = self.exec(
            "UPDATE workflow_runs SET pause_requested_at = ?2, updated_at = ?2 \
             WHERE id = ?1 AND pause_requested_at IS NULL",
            params![run.0, self.now()],
        )?;
        Ok(changed == 1)
    }

    /// Pauses a running run at a boundary (clearing any pause request) with its
    /// `workflow-paused` frame.
    pub fn pause_workflow_run(
        &self,
        run: WorkflowRunId,
        detail: &WorkflowDetail,
    ) -> Result<Frame, Error> {
        kebab("pause reason", &detail.reason)?;
        let status = self.open_run(run, "paused")?;
        if status != WorkflowStatus::Running {
            return Err(Error::WorkflowRunNotOpen {
                run: run.0,
                status,
                change: "paused",
            });
        }
        self.set_status(run, WorkflowStatus::Paused, Some(detail))?;
        self.append_frame(
            run.stream(),
            &FrameBody::WorkflowPaused {
                run: run.0,
                reason: detail.reason.clone(),
                step: detail.step.clone(),
                message: detail.message.clone(),
            },
        )
    }

    /// Takes a paused or interrupted run (or a running one whose owner is gone) back into
    /// running, owned by this process, with its `workflow-resumed` frame. Refuses an ended run
    /// and a running one another live process owns, unless this transaction holds the claim on
    /// the queue item the run belongs to: then the queue has already decided that the last
    /// driver's lease ran out, and `/proc` (which cannot see another machine, or another pid
    /// namespace, and so always calls such an owner alive) is not asked. Any dispatch still in
    /// flight from the process that died is settled as `interrupted` first (it still spent its
    /// unit).
    pub fn resume_workflow_run(&self, run: WorkflowRunId) -> Result<Frame, Error> {
        let Some(found) = workflow_run(self, run)? else {
            return Err(Error::NoSuchWorkflowRun { run: run.0 });
        };
        if found.status.is_ended() {
            return Err(Error::WorkflowRunNotOpen {
                run: run.0,
                status: found.status,
                change: "resumed",
            });
        }
        if found.status == WorkflowStatus::Running
            && found.owner_liveness() == Liveness::Alive
            && !self.holds_claim_on(run)?
        {
            return Err(Error::WorkflowRunOwned {
                run: run.0,
                pid: found.owner.as_ref().map_or(0, |o| o.pid),
            });
        }
        self.settle_in_flight(run)?;
        let owner = RunOwner::current();
        self.exec(
            "UPDATE workflow_runs SET status = 'running', detail_reason = NULL, \
             detail_step = NULL, detail_label = NULL, detail_message = NULL, \
             pause_requested_at = NULL, owner_pid = ?2, owner_start = ?3, owner_pidns = ?4, \
             owner_host = ?5, updated_at = ?6 WHERE id = ?1",
            params![
                run.0,
                owner.as_ref().map(|o| o.pid),
                owner.as_ref().map(|o| o.start),
                owner.as_ref().map(|o| o.pid_ns.as_str()),
                owner.as_ref().map(|o| o.host.as_str()),
                self.now(),
            ],
        )?;
        self.append_frame(run.stream(), &FrameBody::WorkflowResumed { run: run.0 })
    }

    /// Ends a run as `completed`, `failed` or `terminal` (once) with its
    /// `workflow-run-finished` frame. `failed` and `terminal` need a detail.
    pub fn finish_workflow_run(
        &self,
        run: WorkflowRunId,
        status: WorkflowStatus,
        detail: Option<&WorkflowDetail>,
    ) -> Result<Frame, Error> {
        if !status.is_ended() {
            return Err(Error::WorkflowRunNotOpen {
                run: run.0,
                status,
                change: "finished with that status (completed, failed or terminal only)",
            });
        }
        match detail {
            Some(detail) => kebab("end reason", &detail.reason)?,
            None if status != WorkflowStatus::Completed => {
                return Err(Error::WorkflowEndWithoutReason { run: run.0, status });
            }
            None => {}
        }
        let now = self.open_run(run, "finished")?;
        if now.is_ended() {
            return Err(Error::WorkflowRunNotOpen {
                run: run.0,
                status: now,
                change: "finished again",
            });
        }
        self.settle_in_flight(run)?;
        self.set_status(run, status, detail)?;
        self.append_frame(
            run.stream(),
            &FrameBody::WorkflowRunFinished {
                run: run.0,
                status,
                reason: detail.map(|d| d.reason.clone()),
                message: detail.and_then(|d| d.label.clone().or_else(|| d.message.clone())),
            },
        )
    }

    /// Grants `units` more dispatch units (one extension, counted).
    pub fn extend_workflow_budget(&self, run: WorkflowRunId, units: u64) -> Result<(), Error> {
        self.open_run(run, "extended")?;
        self.exec(
            "UPDATE workflow_runs SET extensions = extensions + 1, \
             extension_units = extension_units + ?2, updated_at = ?3 WHERE id = ?1",
            params![run.0, int(units), self.now()],
        )?;
        Ok(())
    }

    /// Grants `ms` more wall-clock time (one extension, counted).
    pub fn extend_workflow_wall_clock(&self, run: WorkflowRunId, ms: u64) -> Result<(), Error> {
        self.open_run(run, "extended")?;
        self.exec(
            "UPDATE workflow_runs SET wall_clock_extensions = wall_clock_extensions + 1, \
             wall_clock_extra_ms = wall_clock_extra_ms + ?2, updated_at = ?3 WHERE id = ?1",
            params![run.0, int(ms), self.now()],
        )?;
        Ok(())
    }

    /// Records a member worktree the run created (state `created`).
    pub fn add_workflow_member(&self, new: &NewWorkflowMember) -> Result<(), Error> {
        self.open_run(new.run, "given a member worktree")?;
        self.exec(
            "INSERT INTO workflow_members (run_id, step, item, branch, worktree, state, \
             created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, 'created', ?6, ?6)",
            params![
                new.run.0,
                new.step,
                new.item,
                new.branch,
                new.worktree.as_os_str().as_bytes(),
                self.now(),
            ],
        )?;
        Ok(())
    }

    /// Records that a member worktree was removed, or kept (`why_kept` says why; required for
    /// [`MemberState::Kept`], ignored otherwise).
    pub fn set_workflow_member_state(
        &self,
        run: WorkflowRunId,
        step: &str,
        item: Option<&str>,
        state: MemberState,
        why_kept: Option<&str>,
    ) -> Result<(), Error> {
        let why = match state {
            MemberState::Kept => Some(why_kept.unwrap_or("kept")),
            _ => None,
        };
        let changed = self.exec(
            "UPDATE workflow_members SET state = ?4, why_kept = ?5, updated_at = ?6 \
             WHERE run_id = ?1 AND step = ?2 AND item IS NOT DISTINCT FROM ?3",
            params![run.0, step, item, state.as_str(), why, self.now()],
        )?;
        if changed == 0 {
            return Err(Error::NoSuchWorkflowMember {
                run: run.0,
                step: step.to_owned(),
                item: item.map(str::to_owned),
            });
        }
        Ok(())
    }

    /// Marks every running run whose owner is known to be gone as `interrupted` (its in-flight
    /// dispatches settled as `interrupted`), each with a `workflow-run-finished` frame. A live
    /// owner, or one in another host, boot or pid namespace, is never judged. Returns the runs.
    pub fn interrupt_abandoned_workflow_runs(&self) -> Result<Vec<WorkflowRunId>, Error> {
        let mut interrupted = Vec::new();
        for (run, owner) in open_workflow_runs(self)? {
            if owner.liveness() != Liveness::Gone {
                continue;
            }
            self.settle_in_flight(run)?;
            self.set_status(run, WorkflowStatus::Interrupted, None)?;
            self.append_frame(
                run.stream(),
                &FrameBody::WorkflowRunFinished {
                    run: run.0,
                    status: WorkflowStatus::Interrupted,
                    reason: None,
                    message: Some(format!(
                        "its process ({}) is gone; `greenlight workflow run PLAN --resume {}` \
                         carries on",
                        owner.pid, run.0
                    )),
                },
            )?;
            interrupted.push(run);
        }
        Ok(interrupted)
    }

    /// The run's status, or `NoSuchWorkflowRun`; refuses an ended run.
    fn open_run(&self, run: WorkflowRunId, change: &'static str) -> Result<WorkflowStatus, Error> {
        let status: Option<String> = self
            .conn()
            .query_row(
                "SELECT status FROM workflow_runs WHERE id = ?1",
                [run.0],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| sql_err(self, e))?;
        let Some(status) = status else {
            return Err(Error::NoSuchWorkflowRun { run: run.0 });
        };
        let status = decode_status(self, status)?;
        if status.is_ended() {
            return Err(Error::WorkflowRunNotOpen {
                run: run.0,
                status,
                change,
            });
        }
        Ok(status)
    }

    fn touch(&self, run: WorkflowRunId) -> Result<(), Error> {
        self.exec(
            "UPDATE workflow_runs SET updated_at = ?2 WHERE id = ?1",
            params![run.0, self.now()],
        )?;
        Ok(())
    }

    fn set_status(
        &self,
        run: WorkflowRunId,
        status: WorkflowStatus,
        detail: Option<&WorkflowDetail>,
    ) -> Result<(), Error> {
        self.exec(
            "UPDATE workflow_runs SET status = ?2, detail_reason = ?3, detail_step = ?4, \
             detail_label = ?5, detail_message = ?6, pause_requested_at = NULL, updated_at = ?7, \
             ended_at = CASE WHEN ?8 THEN CAST(?7 AS BIGINT) END WHERE id = ?1",
            params![
                run.0,
                status.as_str(),
                detail.map(|d| d.reason.as_str()),
                detail.and_then(|d| d.step.as_deref()),
                detail.and_then(|d| d.label.as_deref()),
                detail.and_then(|d| d.message.as_deref()),
                self.now(),
                status.is_ended(),
            ],
        )?;
        Ok(())
    }

    /// Settles the run's in-flight dispatches as `interrupted`, each with its frame.
    fn settle_in_flight(&self, run: WorkflowRunId) -> Result<(), Error> {
        let open: Vec<i64> = collect(
            self,
            "SELECT id FROM workflow_dispatches WHERE run_id = ?1 AND ended_at IS NULL ORDER BY id",
            [run.0],
            |r| r.get(0),
        )?;
        for id in open {
            self.finish_workflow_dispatch(
                WorkflowDispatchId(id),
                &WorkflowDispatchEnd {
                    outcome: "interrupted".into(),
                    ..WorkflowDispatchEnd::default()
                },
            )?;
        }
        Ok(())
    }
}

fn decode_status<A: Access + ?Sized>(a: &A, text: String) -> Result<WorkflowStatus, Error> {
    WorkflowStatus::from_name(&text).ok_or_else(|| Error::Corrupt {
        path: a.db_path().to_path_buf(),
        what: "workflow_runs.status",
        found: text,
    })
}

fn to_u64<A: Access + ?Sized>(a: &A, what: &'static str, v: i64) -> Result<u64, Error> {
    u64::try_from(v).map_err(|_| Error::Corrupt {
        path: a.db_path().to_path_buf(),
        what,
        found: v.to_string(),
    })
}

fn opt_u64<A: Access + ?Sized>(
    a: &A,
    what: &'static str,
    v: Option<i64>,
) -> Result<Option<u64>, Error> {
    v.map(|n| to_u64(a, what, n)).transpose()
}

const RUN_COLUMNS: &str = "id, name, plan_path, repository, worktree, base_commit, plan_digest, \
     args_hash, plan_json, args_json, models_json, budget_units, extensions, extension_units, \
     token_cap, cost_cap_usd, wall_clock_ms, wall_clock_extensions, wall_clock_extra_ms, status, \
     detail_reason, detail_step, detail_label, detail_message, pause_requested_at, owner_pid, \
     owner_start, owner_pidns, owner_host, started_at, updated_at, ended_at, \
     (SELECT COUNT(*) FROM workflow_dispatches d WHERE d.run_id = workflow_runs.id), \
     (SELECT CAST(SUM(tokens_in) AS BIGINT) FROM workflow_dispatches d WHERE d.run_id = workflow_runs.id), \
     (SELECT CAST(SUM(tokens_out) AS BIGINT) FROM workflow_dispatches d WHERE d.run_id = workflow_runs.id), \
     (SELECT SUM(cost_usd) FROM workflow_dispatches d WHERE d.run_id = workflow_runs.id)";

/// A run row as SQLite holds it; decoded by [`RawRun::decode`].
struct RawRun {
    id: i64,
    name: String,
    plan_path: Vec<u8>,
    repository: Vec<u8>,
    worktree: Vec<u8>,
    base_commit: String,
    plan_digest: String,
    args_hash: String,
    plan_json: String,
    args_json: String,
    models_json: String,
    budget_units: Option<i64>,
    extensions: i64,
    extension_units: i64,
    token_cap: Option<i64>,
    cost_cap_usd: Option<f64>,
    wall_clock_ms: Option<i64>,
    wall_clock_extensions: i64,
    wall_clock_extra_ms: i64,
    status: String,
    detail: [Option<String>; 4],
    pause_requested_at: Option<i64>,
    owner: (Option<i64>, Option<i64>, Option<String>, Option<String>),
    started_at: i64,
    updated_at: i64,
    ended_at: Option<i64>,
    spent: (i64, Option<i64>, Option<i64>, Option<f64>),
}

impl RawRun {
    fn from_row(r: &Row) -> crate::db::DbResult<Self> {
        Ok(RawRun {
            id: r.get(0)?,
            name: r.get(1)?,
            plan_path: r.get(2)?,
            repository: r.get(3)?,
            worktree: r.get(4)?,
            base_commit: r.get(5)?,
            plan_digest: r.get(6)?,
            args_hash: r.get(7)?,
            plan_json: r.get(8)?,
            args_json: r.get(9)?,
            models_json: r.get(10)?,
            budget_units: r.get(11)?,
            extensions: r.get(12)?,
            extension_units: r.get(13)?,
            token_cap: r.get(14)?,
            cost_cap_usd: r.get(15)?,
            wall_clock_ms: r.get(16)?,
            wall_clock_extensions: r.get(17)?,
            wall_clock_extra_ms: r.get(18)?,
            status: r.get(19)?,
            detail: [r.get(20)?, r.get(21)?, r.get(22)?, r.get(23)?],
            pause_requested_at: r.get(24)?,
            owner: (r.get(25)?, r.get(26)?, r.get(27)?, r.get(28)?),
            started_at: r.get(29)?,
            updated_at: r.get(30)?,
            ended_at: r.get(31)?,
            spent: (r.get(32)?, r.get(33)?, r.get(34)?, r.get(35)?),
        })
    }

    fn decode<A: Access + ?Sized>(self, a: &A) -> Result<WorkflowRun, Error> {
        let models: BTreeMap<String, String> =
            serde_json::from_str(&self.models_json).map_err(|_| Error::Corrupt {
                path: a.db_path().to_path_buf(),
                what: "workflow_runs.models_json",
                found: self.models_json.clone(),
            })?;
        let [reason, step, label, message] = self.detail;
        let detail = reason.map(|reason| WorkflowDetail {
            reason,
            step,
            label,
            message,
        });
        let owner = match self.owner {
            (Some(pid), Some(start), Some(pid_ns), Some(host)) => Some(RunOwner {
                pid,
                start,
                pid_ns,
                host,
            }),
            _ => None,
        };
        let count = |what, v: i64| {
            u32::try_from(v).map_err(|_| Error::Corrupt {
                path: a.db_path().to_path_buf(),
                what,
                found: v.to_string(),
            })
        };
        Ok(WorkflowRun {
            id: WorkflowRunId(self.id),
            name: self.name,
            plan_path: path_from_blob(self.plan_path),
            repository: path_from_blob(self.repository),
            worktree: path_from_blob(self.worktree),
            base_commit: self.base_commit,
            plan_digest: self.plan_digest,
            args_hash: self.args_hash,
            plan_json: self.plan_json,
            args_json: self.args_json,
            models,
            budget: WorkflowBudget {
                units: opt_u64(a, "workflow_runs.budget_units", self.budget_units)?,
                token_cap: opt_u64(a, "workflow_runs.token_cap", self.token_cap)?,
                cost_cap_usd: self.cost_cap_usd,
                wall_clock_ms: opt_u64(a, "workflow_runs.wall_clock_ms", self.wall_clock_ms)?,
            },
            extensions: count("workflow_runs.extensions", self.extensions)?,
            extension_units: to_u64(a, "workflow_runs.extension_units", self.extension_units)?,
            wall_clock_extensions: count(
                "workflow_runs.wall_clock_extensions",
                self.wall_clock_extensions,
            )?,
            wall_clock_extra_ms: to_u64(
                a,
                "workflow_runs.wall_clock_extra_ms",
                self.wall_clock_extra_ms,
            )?,
            spent: WorkflowSpend {
                units: to_u64(a, "workflow_dispatches (count)", self.spent.0)?,
                tokens_in: opt_u64(a, "workflow_dispatches.tokens_in", self.spent.1)?,
                tokens_out: opt_u64(a, "workflow_dispatches.tokens_out", self.spent.2)?,
                cost_usd: self.spent.3,
            },
            status: decode_status(a, self.status)?,
            detail,
            pause_requested_at: self.pause_requested_at,
            owner,
            started_at: self.started_at,
            updated_at: self.updated_at,
            ended_at: self.ended_at,
        })
    }
}

/// The run with this id.
pub(crate) fn workflow_run<A: Access + ?Sized>(
    a: &A,
    id: WorkflowRunId,
) -> Result<Option<WorkflowRun>, Error> {
    let sql = format!("SELECT {RUN_COLUMNS} FROM workflow_runs WHERE id = ?1");
    let raw = a
        .conn()
        .query_row(&sql, [id.0], RawRun::from_row)
        .optional()
        .map_err(|e| sql_err(a, e))?;
    raw.map(|raw| raw.decode(a)).transpose()
}

/// The most recent runs, newest first, at most `max`.
pub(crate) fn workflow_runs<A: Access + ?Sized>(
    a: &A,
    max: usize,
) -> Result<Vec<WorkflowRun>, Error> {
    let sql = format!("SELECT {RUN_COLUMNS} FROM workflow_runs ORDER BY id DESC LIMIT ?1");
    let max = i64::try_from(max).unwrap_or(i64::MAX);
    collect(a, &sql, [max], RawRun::from_row)?
        .into_iter()
        .map(|raw| raw.decode(a))
        .collect()
}

/// The running runs that name an owner (through the `workflow_runs_open` index: a handful).
fn open_workflow_runs<A: Access + ?Sized>(a: &A) -> Result<Vec<(WorkflowRunId, RunOwner)>, Error> {
    collect(
        a,
        "SELECT id, owner_pid, owner_start, owner_pidns, owner_host FROM workflow_runs \
         WHERE status = 'running' AND owner_pid IS NOT NULL AND owner_start IS NOT NULL \
         AND owner_pidns IS NOT NULL AND owner_host IS NOT NULL ORDER BY id",
        (),
        |r| Ok((WorkflowRunId(r.get(0)?), RunOwner::from_row(r, 1)?)),
    )
}

/// Whether any running run's owner is known to be gone (a look without the write lock).
pub(crate) fn any_abandoned<A: Access + ?Sized>(a: &A) -> Result<bool, Error> {
    Ok(open_workflow_runs(a)?
        .iter()
        .any(|(_, owner)| owner.liveness() == Liveness::Gone))
}

/// The run's events, in order.
pub(crate) fn workflow_events<A: Access + ?Sized>(
    a: &A,
    run: WorkflowRunId,
) -> Result<Vec<WorkflowEvent>, Error> {
    collect(
        a,
        "SELECT seq, event, at FROM workflow_events WHERE run_id = ?1 ORDER BY seq",
        [run.0],
        |r| {
            Ok(WorkflowEvent {
                run,
                seq: r.get(0)?,
                event: r.get(1)?,
                at: r.get(2)?,
            })
        },
    )
}

type RawDispatch = (
    i64,
    String,
    Option<String>,
    u32,
    String,
    Option<String>,
    Option<Vec<u8>>,
    i64,
    Option<i64>,
    [Option<i64>; 3],
    Option<f64>,
    String,
    Option<String>,
);

/// The run's ledger, oldest first.
pub(crate) fn workflow_dispatches<A: Access + ?Sized>(
    a: &A,
    run: WorkflowRunId,
) -> Result<Vec<WorkflowDispatch>, Error> {
    let raws: Vec<RawDispatch> = collect(
        a,
        "SELECT id, step, item, attempt, family, model, worktree, started_at, ended_at, \
         wall_ms, tokens_in, tokens_out, cost_usd, outcome, reason FROM workflow_dispatches \
         WHERE run_id = ?1 ORDER BY id",
        [run.0],
        |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
                [r.get(9)?, r.get(10)?, r.get(11)?],
                r.get(12)?,
                r.get(13)?,
                r.get(14)?,
            ))
        },
    )?;
    raws.into_iter()
        .map(|raw| {
            let (id, step, item, attempt, family, model, worktree, started_at, ended_at) = (
                raw.0, raw.1, raw.2, raw.3, raw.4, raw.5, raw.6, raw.7, raw.8,
            );
            let [wall_ms, tokens_in, tokens_out] = raw.9;
            let family = Family::from_name(&family).ok_or_else(|| Error::Corrupt {
                path: a.db_path().to_path_buf(),
                what: "workflow_dispatches.family",
                found: family.clone(),
            })?;
            Ok(WorkflowDispatch {
                id: WorkflowDispatchId(id),
                run,
                step,
                item,
                attempt,
                family,
                model,
                worktree: worktree.map(path_from_blob),
                started_at,
                ended_at,
                wall_ms: opt_u64(a, "workflow_dispatches.wall_ms", wall_ms)?,
                tokens_in: opt_u64(a, "workflow_dispatches.tokens_in", tokens_in)?,
                tokens_out: opt_u64(a, "workflow_dispatches.tokens_out", tokens_out)?,
                cost_usd: raw.10,
                outcome: raw.11,
                reason: raw.12,
            })
        })
        .collect()
}

type RawMember = (
    String,
    Option<String>,
    String,
    Vec<u8>,
    String,
    Option<String>,
    i64,
    i64,
);

/// The run's member worktrees, oldest first.
pub(crate) fn workflow_members<A: Access + ?Sized>(
    a: &A,
    run: WorkflowRunId,
) -> Result<Vec<WorkflowMember>, Error> {
    let raws: Vec<RawMember> = collect(
        a,
        "SELECT step, item, branch, worktree, state, why_kept, created_at, updated_at \
         FROM workflow_members WHERE run_id = ?1 ORDER BY rowid",
        [run.0],
        |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
            ))
        },
    )?;
    raws.into_iter()
        .map(
            |(step, item, branch, worktree, state, why_kept, created_at, updated_at)| {
                let state = MemberState::from_name(&state).ok_or_else(|| Error::Corrupt {
                    path: a.db_path().to_path_buf(),
                    what: "workflow_members.state",
                    found: state.clone(),
                })?;
                Ok(WorkflowMember {
                    run,
                    step,
                    item,
                    branch,
                    worktree: path_from_blob(worktree),
                    state,
                    why_kept,
                    created_at,
                    updated_at,
                })
            },
        )
        .collect()
}

/// The run with its events, ledger and members.
pub(crate) fn workflow_record<A: Access + ?Sized>(
    a: &A,
    id: WorkflowRunId,
) -> Result<Option<WorkflowRecord>, Error> {
    let Some(run) = workflow_run(a, id)? else {
        return Ok(None);
    };
    Ok(Some(WorkflowRecord {
        run,
        events: workflow_events(a, id)?,
        dispatches: workflow_dispatches(a, id)?,
        members: workflow_members(a, id)?,
    }))
}
