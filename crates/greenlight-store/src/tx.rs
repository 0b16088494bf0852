//! The write side: one [`Tx`] per transaction, one method per state transition.
//!
//! Each mutating method checks the transition is allowed, changes its rows and appends exactly
//! one event describing the change, all inside the caller's transaction. A method that returns
//! `Err` may have written part of its change; the caller returns that error from the closure and
//! [`Store::write`](crate::Store::write) rolls the whole transaction back.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::db::{Conn, OptionalExtension, params};
use greenlight_stream::{FrameBody, StreamId};
use serde_json::{Value, json};

use crate::Error;
use crate::model::{
    AgentSpec, DispatchEnd, DispatchId, DispatchOutcome, GateId, GateRun, GateVerdict, GoalId,
    GoalState, Millis, NewDispatch, NewGate, NewGateRun, NewGoal, NewToolCall, Recovered, Tokens,
    ToolCallStatus, is_kebab,
};
use crate::read::{self, Reads, sealed::Access};

/// One open IMMEDIATE transaction. Obtained only through [`Store::write`](crate::Store::write).
pub struct Tx<'a> {
    tx: Conn<'a>,
    path: &'a Path,
    now: Millis,
    /// Which PostgreSQL channels to notify when this transaction commits.
    notify: std::cell::Cell<Notify>,
    /// The queue claim this transaction was checked against (see [`crate::Store::set_fence`]):
    /// held, under its epoch, for as long as the transaction runs.
    fence: Option<crate::Fence>,
}

/// What a committed transaction tells PostgreSQL listeners besides that it changed something.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Notify {
    /// Work was queued (or given back): idle workers look.
    pub(crate) queue: bool,
}

impl Access for Tx<'_> {
    fn conn(&self) -> Conn<'_> {
        self.tx
    }
    fn db_path(&self) -> &Path {
        self.path
    }
}

impl Reads for Tx<'_> {}

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

fn opt_kebab(what: &'static str, value: Option<&str>) -> Result<(), Error> {
    value.map_or(Ok(()), |v| kebab(what, v))
}

/// SQLite integers are signed 64-bit; figures beyond that saturate rather than wrap.
fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl<'a> Tx<'a> {
    pub(crate) fn new(
        tx: Conn<'a>,
        path: &'a Path,
        now: Millis,
        fence: Option<crate::Fence>,
    ) -> Self {
        Tx {
            tx,
            path,
            now,
            notify: std::cell::Cell::default(),
            fence,
        }
    }

    /// The queue claim this transaction holds, checked at its start; `None` when unfenced.
    pub(crate) fn fence(&self) -> Option<crate::Fence> {
        self.fence
    }

    /// Marks that this transaction queued work, so idle PostgreSQL workers are notified when it
    /// commits.
    pub(crate) fn note(&self, change: impl FnOnce(&mut Notify)) {
        let mut n = self.notify.get();
        change(&mut n);
        self.notify.set(n);
    }

    /// What ends this transaction on PostgreSQL: its notifications, then `COMMIT` (a
    /// notification is delivered only if, and when, the transaction commits).
    pub(crate) fn pg_commit_sql(&self) -> String {
        let n = self.notify.get();
        let mut sql = format!("NOTIFY {}; ", crate::CHANGES_CHANNEL);
        if n.queue {
            sql.push_str(&format!("NOTIFY {}; ", crate::QUEUE_CHANNEL));
        }
        sql.push_str("COMMIT");
        sql
    }

    /// Runs an `INSERT … RETURNING id` and gives the new row's id.
    pub(crate) fn insert_id(
        &self,
        sql: &str,
        params: impl crate::db::Params,
    ) -> Result<i64, Error> {
        self.tx
            .query_row(sql, params, |r| r.get(0))
            .map_err(|e| self.sql(e))
    }

    /// The timestamp every row of this transaction carries.
    pub fn now(&self) -> Millis {
        self.now
    }

    fn sql(&self, e: crate::db::DbError) -> Error {
        Error::sql(self.path, e)
    }

    pub(crate) fn exec(&self, sql: &str, params: impl crate::db::Params) -> Result<usize, Error> {
        self.tx.execute(sql, params).map_err(|e| self.sql(e))
    }

    /// Append an event; returns its seq. Mutating methods call this themselves; call it directly
    /// for events that change no table (evidence sent, a prompt assembled, a replay decided).
    pub fn append_event(
        &self,
        goal: Option<GoalId>,
        turn: Option<u32>,
        kind: &str,
        payload: &Value,
    ) -> Result<i64, Error> {
        kebab("event kind", kind)?;
        let text = serde_json::to_string(payload).map_err(|source| Error::Json {
            what: "event payload",
            source,
        })?;
        self.insert_id(
            // The next seq by hand, under the write lock, so the log stays gap-free on both
            // backends (a PostgreSQL sequence would keep the numbers a rollback used).
            "INSERT INTO events (seq, goal_id, turn, kind, payload, at) \
             SELECT COALESCE(MAX(seq), 0) + 1, ?1, ?2, ?3, ?4, ?5 FROM events RETURNING seq",
            params![goal.map(|g| g.0), turn, kind, text, self.now],
        )
    }

    fn goal_state(&self, goal: GoalId) -> Result<GoalState, Error> {
        let state: Option<String> = self
            .tx
            .query_row("SELECT state FROM goals WHERE id = ?1", [goal.0], |r| {
                r.get(0)
            })
            .optional()
            .map_err(|e| self.sql(e))?;
        let state = state.ok_or(Error::NoSuchGoal(goal))?;
        GoalState::from_name(&state).ok_or_else(|| Error::Corrupt {
            path: self.path.to_path_buf(),
            what: "goals.state",
            found: state,
        })
    }

    fn require_state(
        &self,
        goal: GoalId,
        allowed: &[GoalState],
        action: &'static str,
    ) -> Result<GoalState, Error> {
        let from = self.goal_state(goal)?;
        if allowed.contains(&from) {
            Ok(from)
        } else {
            Err(Error::InvalidTransition { goal, from, action })
        }
    }

    // ---- goals ----

    /// Create an active goal with its gates. Fails with [`Error::GoalAlreadyLive`] when the
    /// worktree already has an active or paused goal.
    pub fn create_goal(&self, new: &NewGoal) -> Result<GoalId, Error> {
        let worktree = std::fs::canonicalize(&new.worktree).map_err(|source| Error::Worktree {
            path: new.worktree.clone(),
            source,
        })?;
        if let Some(existing) = self.live_goal(&worktree)? {
            return Err(Error::GoalAlreadyLive {
                worktree,
                existing: existing.id,
                state: existing.state,
            });
        }
        let (argv, endpoint) = agent_json_columns(&new.agent)?;
        let id_raw = self.insert_id(
            "INSERT INTO goals (worktree, text, state, agent_family, agent_model, agent_argv, judge, \
             max_turns, retries, gate_timeout_sec, created_at, updated_at, agent_endpoint) \
             VALUES (?1, ?2, 'active', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, ?11) RETURNING id",
            params![
                worktree.as_os_str().as_bytes(),
                new.text,
                new.agent.family.as_str(),
                new.agent.model,
                argv,
                new.judge,
                new.max_turns,
                new.retries,
                new.gate_timeout_sec,
                self.now,
                endpoint,
            ],
        )?;
        let id = GoalId(id_raw);
        self.append_event(
            Some(id),
            None,
            "goal-created",
            &json!({
                "worktree": worktree.to_string_lossy(),
                "text": new.text,
                "agent": new.agent,
                "judge": new.judge,
                "max_turns": new.max_turns,
                "retries": new.retries,
                "gate_timeout_sec": new.gate_timeout_sec,
            }),
        )?;
        self.append_frame(
            StreamId::Goal(id.0),
            &FrameBody::GoalState {
                state: GoalState::Active.as_str().to_owned(),
                reason: None,
                detail: None,
            },
        )?;
        for gate in &new.gates {
            self.add_new_gate(id, gate)?;
        }
        Ok(id)
    }

    /// Every state change writes its `goal-state` frame here, so no caller (the loop, the CLI,
    /// the server) can change a goal's state without its stream saying so.
    fn set_state(
        &self,
        goal: GoalId,
        state: GoalState,
        pause: Option<(&str, Option<&str>)>,
        reset_turns: bool,
    ) -> Result<(), Error> {
        self.exec(
            "UPDATE goals SET state = ?2, pause_reason = ?3, pause_detail = ?4, updated_at = ?5, \
             turns_used = CASE WHEN ?6 THEN 0 ELSE turns_used END WHERE id = ?1",
            params![
                goal.0,
                state.as_str(),
                pause.map(|p| p.0),
                pause.and_then(|p| p.1),
                self.now,
                reset_turns
            ],
        )?;
        self.append_frame(
            StreamId::Goal(goal.0),
            &FrameBody::GoalState {
                state: state.as_str().to_owned(),
                reason: pause.map(|p| p.0.to_owned()),
                detail: pause.and_then(|p| p.1).map(str::to_owned),
            },
        )?;
        Ok(())
    }

    /// Pause an active goal with a kebab-case reason and a detail for people.
    pub fn pause_goal(
        &self,
        goal: GoalId,
        reason: &str,
        detail: Option<&str>,
    ) -> Result<(), Error> {
        kebab("pause reason", reason)?;
        self.require_state(goal, &[GoalState::Active], "paused")?;
        self.set_state(goal, GoalState::Paused, Some((reason, detail)), false)?;
        self.append_event(
            Some(goal),
            None,
            "goal-paused",
            &json!({"reason": reason, "detail": detail}),
        )?;
        Ok(())
    }

    /// Resume a paused goal: active again, turn count back to 0, gate attempts untouched.
    pub fn resume_goal(&self, goal: GoalId) -> Result<(), Error> {
        self.require_state(goal, &[GoalState::Paused], "resumed")?;
        self.set_state(goal, GoalState::Active, None, true)?;
        self.append_event(Some(goal), None, "goal-resumed", &json!({}))?;
        Ok(())
    }

    /// Mark an active goal done.
    pub fn complete_goal(&self, goal: GoalId) -> Result<(), Error> {
        self.require_state(goal, &[GoalState::Active], "marked done")?;
        self.set_state(goal, GoalState::Done, None, false)?;
        self.append_event(Some(goal), None, "goal-done", &json!({}))?;
        Ok(())
    }

    /// Clear an active or paused goal; the row stays, in state cleared, for audit.
    pub fn clear_goal(&self, goal: GoalId) -> Result<(), Error> {
        self.require_state(goal, &[GoalState::Active, GoalState::Paused], "cleared")?;
        self.set_state(goal, GoalState::Cleared, None, false)?;
        self.append_event(Some(goal), None, "goal-cleared", &json!({}))?;
        Ok(())
    }

    /// Record the model id the start-of-goal probe found answering.
    pub fn record_probe(&self, goal: GoalId, model: &str) -> Result<(), Error> {
        self.goal_state(goal)?;
        self.exec(
            "UPDATE goals SET model_probed = ?2, updated_at = ?3 WHERE id = ?1",
            params![goal.0, model, self.now],
        )?;
        self.append_event(Some(goal), None, "model-probed", &json!({"model": model}))?;
        Ok(())
    }

    /// Give a paused goal another agent (`goal resume --agent`): its family, model, template
    /// and server replace the old ones, `probed` (the model id the new agent's probe found
    /// answering) replaces the old probe, and an `agent-changed` event names both agents.
    pub fn change_agent(
        &self,
        goal: GoalId,
        agent: &AgentSpec,
        probed: Option<&str>,
    ) -> Result<(), Error> {
        self.require_state(goal, &[GoalState::Paused], "given another agent")?;
        let before = self.goal(goal)?.ok_or(Error::NoSuchGoal(goal))?.agent;
        let (argv, endpoint) = agent_json_columns(agent)?;
        self.exec(
            "UPDATE goals SET agent_family = ?2, agent_model = ?3, agent_argv = ?4, \
             agent_endpoint = ?5, model_probed = ?6, updated_at = ?7 WHERE id = ?1",
            params![
                goal.0,
                agent.family.as_str(),
                agent.model,
                argv,
                endpoint,
                probed,
                self.now
            ],
        )?;
        self.append_event(
            Some(goal),
            None,
            "agent-changed",
            &json!({"from": before, "to": agent, "model_probed": probed}),
        )?;
        Ok(())
    }

    // ---- gates ----

    /// Append a gate to an active or paused goal; returns its id.
    pub fn add_gate(&self, goal: GoalId, command: &str) -> Result<GateId, Error> {
        self.add_new_gate(goal, &NewGate::from(command))
    }

    /// Append a gate with its own time limit and mutex to an active or paused goal. An empty or
    /// whitespace-only command is refused: `sh -c ''` exits 0, so it would pass without judging.
    pub fn add_new_gate(&self, goal: GoalId, gate: &NewGate) -> Result<GateId, Error> {
        self.require_state(goal, &[GoalState::Active, GoalState::Paused], "given gates")?;
        if gate.command.trim().is_empty() {
            return Err(Error::EmptyGateCommand { goal });
        }
        let id_raw = self.insert_id(
            "INSERT INTO gates (goal_id, position, command, timeout_sec, mutex, created_at) \
             VALUES (?1, (SELECT COALESCE(MAX(position), 0) + 1 FROM gates WHERE goal_id = ?1), \
             ?2, ?3, ?4, ?5) RETURNING id",
            params![goal.0, gate.command, gate.timeout_sec, gate.mutex, self.now],
        )?;
        let id = GateId(id_raw);
        self.append_event(
            Some(goal),
            None,
            "gate-added",
            &json!({
                "gate": id,
                "command": gate.command,
                "timeout_sec": gate.timeout_sec,
                "mutex": gate.mutex,
            }),
        )?;
        Ok(id)
    }

    /// Remove the `n`th live gate (1-based, as `gate list` numbers them); it is kept, marked
    /// removed, for audit. Returns its id.
    pub fn remove_gate(&self, goal: GoalId, n: usize) -> Result<GateId, Error> {
        self.require_state(goal, &[GoalState::Active, GoalState::Paused], "changed")?;
        let live = self.gates(goal)?;
        let gate = n
            .checked_sub(1)
            .and_then(|i| live.get(i))
            .ok_or(Error::NoSuchGate {
                goal,
                n,
                live: live.len(),
            })?;
        // A goal is done only when its gates pass; with none left nothing could judge it.
        if live.len() == 1 {
            return Err(Error::LastGate { goal });
        }
        self.exec(
            "UPDATE gates SET removed = 1, removed_at = ?2 WHERE id = ?1",
            params![gate.id.0, self.now],
        )?;
        self.append_event(
            Some(goal),
            None,
            "gate-removed",
            &json!({"gate": gate.id, "number": n, "command": gate.command}),
        )?;
        Ok(gate.id)
    }

    /// Remove every live gate; returns how many. Refused ([`Error::LastGate`]) while the goal
    /// has any: an active or paused goal always keeps at least one gate.
    pub fn clear_gates(&self, goal: GoalId) -> Result<usize, Error> {
        self.require_state(goal, &[GoalState::Active, GoalState::Paused], "changed")?;
        if !self.gates(goal)?.is_empty() {
            return Err(Error::LastGate { goal });
        }
        let n = self.exec(
            "UPDATE gates SET removed = 1, removed_at = ?2 WHERE goal_id = ?1 AND removed = 0",
            params![goal.0, self.now],
        )?;
        self.append_event(Some(goal), None, "gates-cleared", &json!({"removed": n}))?;
        Ok(n)
    }

    // ---- turns ----

    /// Start the next turn of an active goal; returns its number. Fails with
    /// [`Error::TurnBudgetSpent`] when `turns_used` has reached `max_turns`.
    pub fn begin_turn(&self, goal: GoalId) -> Result<u32, Error> {
        self.require_state(goal, &[GoalState::Active], "given a turn")?;
        let (used, max): (u32, u32) = self
            .tx
            .query_row(
                "SELECT turns_used, max_turns FROM goals WHERE id = ?1",
                [goal.0],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(|e| self.sql(e))?;
        if used >= max {
            return Err(Error::TurnBudgetSpent {
                goal,
                max_turns: max,
            });
        }
        let number: u32 = self
            .tx
            .query_row(
                "SELECT COALESCE(MAX(number), 0) + 1 FROM turns WHERE goal_id = ?1",
                [goal.0],
                |r| r.get(0),
            )
            .map_err(|e| self.sql(e))?;
        self.exec(
            "INSERT INTO turns (goal_id, number, started_at) VALUES (?1, ?2, ?3)",
            params![goal.0, number, self.now],
        )?;
        self.exec(
            "UPDATE goals SET turns_used = turns_used + 1, updated_at = ?2 WHERE id = ?1",
            params![goal.0, self.now],
        )?;
        self.append_event(
            Some(goal),
            Some(number),
            "turn-started",
            &json!({"turns_used": used + 1}),
        )?;
        Ok(number)
    }

    /// Give back the turn `begin_turn` charged, for a turn the agent never had (the machine
    /// failed before it could start): it does not count against the budget.
    pub fn refund_turn(&self, goal: GoalId) -> Result<(), Error> {
        self.exec(
            "UPDATE goals SET turns_used = CASE WHEN turns_used > 0 THEN turns_used - 1 ELSE 0 END, updated_at = ?2 WHERE id = ?1",
            params![goal.0, self.now],
        )?;
        Ok(())
    }

    /// End an open turn with a kebab-case outcome.
    pub fn end_turn(&self, goal: GoalId, turn: u32, outcome: &str) -> Result<(), Error> {
        kebab("turn outcome", outcome)?;
        let changed = self.exec(
            "UPDATE turns SET ended_at = ?3, outcome = ?4 \
             WHERE goal_id = ?1 AND number = ?2 AND ended_at IS NULL",
            params![goal.0, turn, self.now, outcome],
        )?;
        if changed == 0 {
            return Err(Error::NoOpenTurn { goal, turn });
        }
        self.append_event(
            Some(goal),
            Some(turn),
            "turn-ended",
            &json!({"outcome": outcome}),
        )?;
        Ok(())
    }

    // ---- gate runs ----

    /// Record a gate run and update the gate's attempt count (a pass resets it to 0, a fail or
    /// timeout adds one) and last result. Returns the stored run, whose `attempt` is the new count.
    pub fn record_gate_run(&self, run: &NewGateRun) -> Result<GateRun, Error> {
        let attempts: Option<u32> = self
            .tx
            .query_row(
                "SELECT attempts FROM gates WHERE id = ?1 AND goal_id = ?2 AND removed = 0",
                params![run.gate.0, run.goal.0],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.sql(e))?;
        let attempts = attempts.ok_or(Error::GateNotLive {
            goal: run.goal,
            gate: run.gate.0,
        })?;
        let attempt = match run.verdict {
            GateVerdict::Pass => 0,
            GateVerdict::Fail | GateVerdict::Timeout => attempts.saturating_add(1),
            // A goal's gate runs once per phase, never retried, never skipped: verify's other
            // verdicts belong in `run_gates`, and the column refuses them too.
            GateVerdict::Flaky | GateVerdict::Skip => {
                return Err(Error::VerdictNotForGoal {
                    goal: run.goal,
                    verdict: run.verdict,
                });
            }
        };
        let digest = run
            .digest
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(|source| Error::Json {
                what: "gate digest",
                source,
            })?;
        self.exec(
            "UPDATE gates SET attempts = ?2, last_verdict = ?3, last_exit_code = ?4, \
             last_workspace_key = ?5, last_evidence = ?6, last_at = ?7 WHERE id = ?1",
            params![
                run.gate.0,
                attempt,
                run.verdict.as_str(),
                run.exit_code,
                run.workspace_key,
                run.evidence,
                self.now
            ],
        )?;
        let id = self.insert_id(
            "INSERT INTO gate_runs (goal_id, gate_id, turn, attempt, verdict, exit_code, duration_ms, \
             workspace_key, replayed, digest, evidence, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) RETURNING id",
            params![
                run.goal.0,
                run.gate.0,
                run.turn,
                attempt,
                run.verdict.as_str(),
                run.exit_code,
                int(run.duration_ms),
                run.workspace_key,
                run.replayed,
                digest,
                run.evidence,
                self.now,
            ],
        )?;
        self.append_event(
            Some(run.goal),
            run.turn,
            "gate-run",
            &json!({
                "gate_run": id,
                "gate": run.gate,
                "verdict": run.verdict,
                "exit_code": run.exit_code,
                "attempt": attempt,
                "duration_ms": run.duration_ms,
                "workspace_key": run.workspace_key,
                "replayed": run.replayed,
            }),
        )?;
        let sql = "SELECT id, goal_id, gate_id, turn, attempt, verdict, exit_code, duration_ms, \
                   workspace_key, replayed, digest, evidence, created_at FROM gate_runs WHERE id = ?1";
        self.tx
            .query_row(sql, [id], read::RawGateRun::from_row)
            .map_err(|e| self.sql(e))?
            .decode(self.path)
    }

    // ---- the dispatch ledger ----

    /// Write an `in-flight` ledger row; call (and commit) this BEFORE starting the dispatch, so
    /// a crash leaves a row for [`Tx::recover_interrupted`] to find.
    pub fn begin_dispatch(&self, d: &NewDispatch) -> Result<DispatchId, Error> {
        self.require_state(d.goal, &[GoalState::Active], "dispatched")?;
        let id_raw = self.insert_id(
            "INSERT INTO dispatches (goal_id, turn, attempt, family, model, outcome, started_at, step) \
             VALUES (?1, ?2, ?3, ?4, ?5, 'in-flight', ?6, ?7) RETURNING id",
            params![d.goal.0, d.turn, d.attempt, d.family.as_str(), d.model, self.now, d.step.as_str()],
        )?;
        let id = DispatchId(id_raw);
        self.append_event(
            Some(d.goal),
            Some(d.turn),
            "dispatch-started",
            &json!({"dispatch": id, "step": d.step.as_str(), "attempt": d.attempt, "family": d.family, "model": d.model}),
        )?;
        Ok(id)
    }

    /// Complete an in-flight ledger row. A row is completed exactly once: a second call fails
    /// with [`Error::DispatchNotInFlight`], so a replayed step cannot double-count.
    pub fn finish_dispatch(&self, id: DispatchId, end: &DispatchEnd) -> Result<(), Error> {
        if end.outcome == DispatchOutcome::InFlight {
            return Err(Error::FinishInFlight(id));
        }
        opt_kebab("dispatch reason", end.reason.as_deref())?;
        let row = self.dispatch(id)?.ok_or(Error::NoSuchDispatch(id))?;
        if row.outcome != DispatchOutcome::InFlight {
            return Err(Error::DispatchNotInFlight {
                id,
                outcome: row.outcome,
            });
        }
        let Tokens {
            input,
            output,
            cache_read,
            cache_write,
            cost_usd,
            source,
        } = &end.tokens;
        self.exec(
            "UPDATE dispatches SET outcome = ?2, wall_ms = ?3, tokens_in = ?4, tokens_out = ?5, \
             cache_read_tokens = ?6, cache_write_tokens = ?7, cost_usd = ?8, token_source = ?9, \
             reason = ?10, detail = ?11, ended_at = ?12, reply = ?13 WHERE id = ?1",
            params![
                id.0,
                end.outcome.as_str(),
                end.wall_ms.map(int),
                input.map(int),
                output.map(int),
                cache_read.map(int),
                cache_write.map(int),
                cost_usd,
                source,
                end.reason,
                end.detail,
                self.now,
                end.reply,
            ],
        )?;
        self.append_event(
            Some(row.goal),
            Some(row.turn),
            "dispatch-ended",
            &json!({
                "dispatch": id,
                "outcome": end.outcome,
                "reason": end.reason,
                "wall_ms": end.wall_ms,
                "tokens": end.tokens,
            }),
        )?;
        Ok(())
    }

    // ---- tool calls (the openai family's write-ahead record) ----

    /// Record a tool call's intent; commit this BEFORE the call has any effect, so a crash
    /// leaves a row saying the effect may have happened. The dispatch must be in flight.
    pub fn begin_tool_call(&self, call: &NewToolCall) -> Result<(), Error> {
        let row = self
            .dispatch(call.dispatch)?
            .ok_or(Error::NoSuchDispatch(call.dispatch))?;
        if row.outcome != DispatchOutcome::InFlight {
            return Err(Error::ToolCallOutsideDispatch {
                id: call.dispatch,
                outcome: row.outcome,
            });
        }
        self.exec(
            "INSERT INTO tool_calls (dispatch_id, seq, step, call_id, tool, arguments, status, started_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'intent', ?7)",
            params![
                call.dispatch.0,
                call.seq,
                call.step,
                call.call_id,
                call.tool,
                call.arguments,
                self.now
            ],
        )?;
        self.append_event(
            Some(row.goal),
            Some(row.turn),
            "tool-call-started",
            &json!({"dispatch": call.dispatch, "seq": call.seq, "step": call.step, "tool": call.tool, "call_id": call.call_id}),
        )?;
        Ok(())
    }

    /// Complete a tool call's intent with how it ended and what the model was sent. A call is
    /// completed exactly once.
    pub fn finish_tool_call(
        &self,
        dispatch: DispatchId,
        seq: u32,
        status: ToolCallStatus,
        result: &str,
        wall_ms: u64,
    ) -> Result<(), Error> {
        if status == ToolCallStatus::Intent {
            return Err(Error::ToolCallFinishedAsIntent { dispatch, seq });
        }
        let row = self
            .dispatch(dispatch)?
            .ok_or(Error::NoSuchDispatch(dispatch))?;
        let changed = self.exec(
            "UPDATE tool_calls SET status = ?3, result = ?4, wall_ms = ?5, ended_at = ?6 \
             WHERE dispatch_id = ?1 AND seq = ?2 AND status = 'intent'",
            params![
                dispatch.0,
                seq,
                status.as_str(),
                result,
                int(wall_ms),
                self.now
            ],
        )?;
        if changed == 0 {
            return Err(Error::ToolCallNotOpen { dispatch, seq });
        }
        self.append_event(
            Some(row.goal),
            Some(row.turn),
            "tool-call-ended",
            &json!({"dispatch": dispatch, "seq": seq, "status": status.as_str(), "wall_ms": wall_ms}),
        )?;
        Ok(())
    }

    /// Crash recovery for one goal: its leftover `in-flight` ledger rows become `interrupted`
    /// (reason `dispatch-interrupted`), and its open turns end as `interrupted` — except the
    /// latest open turn when its latest dispatch finished `ok`: that turn stays open and is
    /// reported in `gates_owed`, because the agent's work landed and only its gate phase is
    /// missing. Call it only from the process that now runs the goal (other worktrees' runners
    /// may have live dispatches in the same file).
    pub fn recover_interrupted(&self, goal: GoalId) -> Result<Recovered, Error> {
        self.goal_state(goal)?;
        let dispatches: Vec<DispatchId> = read::collect(
            self,
            "SELECT id FROM dispatches WHERE goal_id = ?1 AND outcome = 'in-flight' ORDER BY id",
            [goal.0],
            |r| Ok(DispatchId(r.get(0)?)),
        )?;
        let open: Vec<u32> = read::collect(
            self,
            "SELECT number FROM turns WHERE goal_id = ?1 AND ended_at IS NULL ORDER BY number",
            [goal.0],
            |r| r.get(0),
        )?;
        // Read before the in-flight rows are rewritten: an in-flight dispatch never owes gates.
        let owed = match open.last() {
            Some(&turn) => {
                let last: Option<String> = self
                    .tx
                    .query_row(
                        "SELECT outcome FROM dispatches WHERE goal_id = ?1 AND turn = ?2 \
                         AND step = 'agent' ORDER BY id DESC LIMIT 1",
                        params![goal.0, turn],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(|e| self.sql(e))?;
                (last.as_deref() == Some("ok")).then_some(turn)
            }
            None => None,
        };
        let turns: Vec<u32> = open.into_iter().filter(|&t| Some(t) != owed).collect();
        let tool_calls: Vec<(DispatchId, u32)> = read::collect(
            self,
            "SELECT c.dispatch_id, c.seq FROM tool_calls c JOIN dispatches d ON d.id = c.dispatch_id \
             WHERE d.goal_id = ?1 AND d.outcome = 'in-flight' AND c.status = 'intent' \
             ORDER BY c.dispatch_id, c.seq",
            [goal.0],
            |r| Ok((DispatchId(r.get(0)?), r.get(1)?)),
        )?;
        let recovered = Recovered {
            dispatches,
            turns,
            tool_calls,
            gates_owed: owed.into_iter().collect(),
        };
        if recovered == Recovered::default() {
            return Ok(recovered);
        }
        // Before the dispatches change: the calls are found through their in-flight dispatch.
        self.exec(
            "UPDATE tool_calls SET status = 'interrupted', ended_at = ?2, \
             result = 'the process running this call ended before recording its result' \
             WHERE status = 'intent' AND dispatch_id IN \
             (SELECT id FROM dispatches WHERE goal_id = ?1 AND outcome = 'in-flight')",
            params![goal.0, self.now],
        )?;
        self.exec(
            "UPDATE dispatches SET outcome = 'interrupted', ended_at = ?2, \
             reason = 'dispatch-interrupted', \
             detail = 'the process running this dispatch ended before recording its result' \
             WHERE goal_id = ?1 AND outcome = 'in-flight'",
            params![goal.0, self.now],
        )?;
        for turn in &recovered.turns {
            self.exec(
                "UPDATE turns SET outcome = 'interrupted', ended_at = ?3 \
                 WHERE goal_id = ?1 AND number = ?2 AND ended_at IS NULL",
                params![goal.0, turn, self.now],
            )?;
        }
        self.append_event(
            Some(goal),
            None,
            "recovered",
            &json!({
                "interrupted_dispatches": recovered.dispatches,
                "interrupted_turns": recovered.turns,
                "interrupted_tool_calls": recovered.tool_calls,
                "gates_owed": recovered.gates_owed,
            }),
        )?;
        Ok(recovered)
    }

    // ---- the Stop hook ----

    /// Count one more consecutive block for a hook session; returns the new count.
    /// (Hook counters are bookkeeping for one agent session, not goal history: no event.)
    pub fn hook_block(&self, session_id: &str) -> Result<u32, Error> {
        self.exec(
            "INSERT INTO hook_sessions (session_id, blocks, updated_at) VALUES (?1, 1, ?2) \
             ON CONFLICT (session_id) DO UPDATE SET blocks = hook_sessions.blocks + 1, updated_at = ?2",
            params![session_id, self.now],
        )?;
        self.hook_blocks(session_id)
    }

    /// Reset a hook session's count to 0 (the agent stopped without being blocked).
    pub fn hook_reset(&self, session_id: &str) -> Result<(), Error> {
        self.exec(
            "INSERT INTO hook_sessions (session_id, blocks, updated_at) VALUES (?1, 0, ?2) \
             ON CONFLICT (session_id) DO UPDATE SET blocks = 0, updated_at = ?2",
            params![session_id, self.now],
        )?;
        Ok(())
    }

    /// Forget hook sessions not updated since `before`; returns how many.
    pub fn prune_hook_sessions(&self, before: Millis) -> Result<usize, Error> {
        self.exec("DELETE FROM hook_sessions WHERE updated_at < ?1", [before])
    }

    /// Record the commit a hook session's work is counted from, unless one is recorded for
    /// this session and worktree already: the first record wins, so a later push or fetch
    /// cannot move it. Returns the recorded base.
    pub fn hook_record_base(
        &self,
        session_id: &str,
        worktree: &Path,
        base: &str,
    ) -> Result<String, Error> {
        let worktree = worktree.as_os_str().as_bytes();
        self.exec(
            "INSERT INTO hook_bases (session_id, worktree, base, recorded_at) \
             VALUES (?1, ?2, ?3, ?4) ON CONFLICT (session_id, worktree) DO NOTHING",
            params![session_id, worktree, base, self.now],
        )?;
        Ok(self
            .hook_base(session_id, Path::new(std::ffi::OsStr::from_bytes(worktree)))?
            .unwrap_or_else(|| base.to_owned()))
    }

    /// Remember that `gate` runs on the cluster as `operation` (the action digest `action`),
    /// replacing any earlier one.
    pub fn begin_remote_operation(
        &self,
        gate: GateId,
        action: &str,
        operation: &str,
    ) -> Result<(), Error> {
        self.exec(
            "INSERT INTO remote_operations (gate_id, action, operation, started_at) \
             VALUES (?1, ?2, ?3, ?4) ON CONFLICT (gate_id) DO UPDATE SET \
             action = excluded.action, operation = excluded.operation, \
             started_at = excluded.started_at",
            params![gate.0, action, operation, self.now],
        )?;
        Ok(())
    }

    /// Forget `gate`'s remote operation (it was decided, or cannot be re-attached).
    pub fn end_remote_operation(&self, gate: GateId) -> Result<(), Error> {
        self.exec(
            "DELETE FROM remote_operations WHERE gate_id = ?1",
            params![gate.0],
        )?;
        Ok(())
    }

    /// Forget session bases (and the configs kept beside them) recorded before `before`;
    /// returns how many bases.
    pub fn prune_hook_bases(&self, before: Millis) -> Result<usize, Error> {
        self.exec("DELETE FROM hook_configs WHERE recorded_at < ?1", [before])?;
        self.exec("DELETE FROM hook_bases WHERE recorded_at < ?1", [before])
    }

    /// Record the verify.yaml snapshot (JSON) a hook session is judged by, unless one is
    /// recorded for this session and worktree already: the first record wins, so nothing the
    /// session writes later changes its gates. Returns the recorded snapshot.
    pub fn hook_record_config(
        &self,
        session_id: &str,
        worktree: &Path,
        config: &str,
    ) -> Result<String, Error> {
        self.exec(
            "INSERT INTO hook_configs (session_id, worktree, config, recorded_at) \
             VALUES (?1, ?2, ?3, ?4) ON CONFLICT (session_id, worktree) DO NOTHING",
            params![
                session_id,
                worktree.as_os_str().as_bytes(),
                config,
                self.now
            ],
        )?;
        Ok(self
            .hook_config(session_id, worktree)?
            .unwrap_or_else(|| config.to_owned()))
    }

    /// Set the verify.yaml snapshot (JSON) `goal`'s gates are run and keyed by; `None`: no
    /// verify.yaml, so its gates use no result cache and no cluster.
    pub fn set_gate_config(&self, goal: GoalId, config: Option<&str>) -> Result<(), Error> {
        self.exec(
            "UPDATE goals SET gate_config = ?2 WHERE id = ?1",
            params![goal.0, config],
        )?;
        Ok(())
    }
}

/// The agent's template and server as the JSON text their columns hold (`None`: no column value).
fn agent_json_columns(agent: &AgentSpec) -> Result<(Option<String>, Option<String>), Error> {
    let argv = agent
        .argv_template
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|source| Error::Json {
            what: "agent argv template",
            source,
        })?;
    let endpoint = agent
        .endpoint
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|source| Error::Json {
            what: "agent endpoint",
            source,
        })?;
    Ok((argv, endpoint))
}
