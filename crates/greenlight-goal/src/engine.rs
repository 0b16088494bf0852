//! The goal loop: agent turn → gates → evidence back → bounded retries → judge → done.
//!
//! Every step is committed to the store before the next begins, and every state change is one
//! transaction, so a `kill -9` anywhere leaves a state `resume` can continue from: an in-flight
//! dispatch becomes `interrupted` and is tried again within the turn budget, and a turn whose
//! dispatch had finished runs its gates before anything is dispatched again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use greenlight_agent::{
    Deliverable, DispatchRequest, DispatchResult, Dispatcher, Family, Outcome, Reason,
    ReplyVerdict, parse_verdict,
};
use greenlight_gate::{Interrupt, InterruptWatch};
use greenlight_store::{
    DispatchEnd, DispatchOutcome, DispatchStep, GateRunVerdict as RunVerdict, GoalId, GoalState,
    NewDispatch, NewGateRun, Reads, Store, Tokens,
};

use crate::error::Error;
use crate::gate_phase::{self, result_key};
use crate::prompt::{self, GateFailure, OutputEvidence};

/// How many judge answers outside the verdict grammar, in a row, pause the goal.
pub const JUDGE_UNPARSEABLE_LIMIT: u32 = 3;
/// How many failed judge dispatches, in a row, pause the goal (hermes pauses after 5).
pub const JUDGE_FAILED_LIMIT: u32 = 5;

/// What the loop needs besides the store.
pub struct Settings {
    /// The agent's runtime.
    pub agent: Arc<dyn Dispatcher>,
    /// The agent's family.
    pub family: Family,
    /// The model id the agent runs with.
    pub model: String,
    /// The judge's model id (same family), or none to finish when the gates pass.
    pub judge: Option<String>,
    /// How long one agent turn may take.
    pub dispatch_timeout: Duration,
    /// SIGTERM → SIGKILL grace for gates.
    pub kill_grace: Duration,
    /// Variables every gate of this run carries (the goal's run marker; the agent's come from
    /// its dispatcher's environment).
    pub gate_env: Vec<(String, String)>,
}

/// Something that happened, for a live view. The store has the durable record.
#[derive(Debug)]
pub enum Progress<'a> {
    /// A turn is starting with this prompt.
    TurnStarted {
        /// Its number.
        turn: u32,
        /// What the agent is sent.
        prompt: &'a str,
    },
    /// The agent's turn ended.
    Dispatched {
        /// Its number.
        turn: u32,
        /// What came back.
        result: &'a DispatchResult,
    },
    /// A gate is about to run (or be replayed).
    GateStarted {
        /// 1-based.
        number: usize,
        /// Gate count.
        of: usize,
        /// Its command.
        command: &'a str,
    },
    /// A gate is decided.
    GateFinished {
        /// 1-based.
        number: usize,
        /// Its command.
        command: &'a str,
        /// Passed?
        passed: bool,
        /// Its exit code.
        exit_code: Option<i32>,
        /// Not run: the workspace had not changed since it failed.
        replayed: bool,
        /// The evidence the agent will get, for a failure.
        evidence: Option<&'a str>,
    },
    /// The judge answered.
    Judged {
        /// Its verdict.
        passed: bool,
        /// Its reply.
        reply: &'a str,
    },
}

/// How a run of the loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finish {
    /// Every gate passed (and the judge agreed).
    Done,
    /// The goal paused; `greenlight goal resume` continues it.
    Paused {
        /// The reason, a member of the closed list.
        reason: Reason,
        /// What happened and what to do.
        detail: String,
    },
    /// The goal was not active when the loop looked (done, cleared, or paused elsewhere).
    NotActive(GoalState),
}

fn is_transport(reason: Reason) -> bool {
    matches!(reason, Reason::DispatchTimeout | Reason::DispatchDead)
}

fn tokens_of(result: &DispatchResult) -> Tokens {
    Tokens {
        input: result.tokens_in,
        output: result.tokens_out,
        cache_read: result.cache_read_tokens,
        cache_write: result.cache_creation_tokens,
        cost_usd: result.cost_usd,
        source: result
            .token_source
            .and_then(|s| serde_json::to_value(s).ok()?.as_str().map(str::to_owned)),
    }
}

fn ledger_end(result: &DispatchResult) -> DispatchEnd {
    DispatchEnd {
        outcome: match result.outcome {
            Outcome::Ok => DispatchOutcome::Ok,
            Outcome::Null => DispatchOutcome::Null,
            Outcome::Error => DispatchOutcome::Error,
        },
        wall_ms: Some(result.wall_ms),
        tokens: tokens_of(result),
        reason: result
            .failure
            .as_ref()
            .map(|f| f.reason.as_str().to_owned()),
        detail: result.failure.as_ref().map(|f| f.detail.clone()),
    }
}

/// Drives one goal until it is done or paused.
pub struct Engine<'a> {
    store: &'a mut Store,
    goal: GoalId,
    settings: &'a Settings,
    on_progress: &'a mut dyn FnMut(Progress<'_>),
}

impl<'a> Engine<'a> {
    /// An engine for `goal`.
    pub fn new(
        store: &'a mut Store,
        goal: GoalId,
        settings: &'a Settings,
        on_progress: &'a mut dyn FnMut(Progress<'_>),
    ) -> Self {
        Self {
            store,
            goal,
            settings,
            on_progress,
        }
    }

    fn pause(
        &mut self,
        reason: Reason,
        detail: String,
        turn: Option<(u32, &str)>,
    ) -> Result<Finish, Error> {
        let goal = self.goal;
        self.store.write(|tx| {
            if let Some((turn, outcome)) = turn {
                tx.end_turn(goal, turn, outcome)?;
            }
            tx.pause_goal(goal, reason.as_str(), Some(&detail))
        })?;
        Ok(Finish::Paused { reason, detail })
    }

    /// Pauses because the worktree is gone; any open turn stays open (nothing is charged).
    fn worktree_missing(&mut self, worktree: &std::path::Path) -> Result<Finish, Error> {
        self.pause(
            Reason::WorktreeMissing,
            format!(
                "the worktree {} is gone; restore it, then `greenlight goal resume`",
                worktree.display()
            ),
            None,
        )
    }

    /// Pauses because a person asked (Ctrl-C, SIGTERM).
    fn interrupted(
        &mut self,
        signal: Interrupt,
        turn: Option<(u32, &str)>,
    ) -> Result<Finish, Error> {
        let name = if signal == Interrupt::Int {
            "Ctrl-C"
        } else {
            "SIGTERM"
        };
        self.pause(
            Reason::PausedByUser,
            format!("paused by {name}; `greenlight goal resume` continues where it stopped"),
            turn,
        )
    }

    /// The evidence the next turn starts from: the first gate whose last result failed.
    fn pending_evidence(&self) -> Result<Option<String>, Error> {
        let gates = self.store.gates(self.goal)?;
        Ok(gates
            .iter()
            .filter_map(|g| g.last.as_ref())
            .find(|last| last.verdict != RunVerdict::Pass)
            .and_then(|last| last.evidence.clone()))
    }

    /// Runs the loop. Returns when the goal is done, paused, or not active.
    pub async fn run(&mut self, interrupt: &mut InterruptWatch) -> Result<Finish, Error> {
        match self.run_inner(interrupt).await {
            // Someone else moved the goal on (`goal pause` or `goal clear` from another terminal)
            // between our read and our write. That write's transaction rolled back whole, so the
            // store is as it was: their decision stands and any open turn still owes its gates.
            Err(Error::Store(greenlight_store::Error::InvalidTransition { from, .. }))
                if from != GoalState::Active =>
            {
                Ok(Finish::NotActive(from))
            }
            other => other,
        }
    }

    async fn run_inner(&mut self, interrupt: &mut InterruptWatch) -> Result<Finish, Error> {
        let goal_id = self.goal;
        let recovered = self.store.write(|tx| tx.recover_interrupted(goal_id))?;
        // A turn cut short after its dispatch finished still owes its gate phase: the store
        // left it open, and its gates run before anything is dispatched again.
        let mut owed_gates: Option<u32> = recovered.gates_owed.last().copied();
        let mut evidence = self.pending_evidence()?;
        let mut last_reply = String::new();
        let mut judge_unparseable = 0u32;
        let mut judge_failed = 0u32;

        loop {
            if let Some(signal) = *interrupt.borrow() {
                return self.interrupted(signal, None);
            }
            let goal = self
                .store
                .goal(goal_id)?
                .ok_or(Error::NoSuchGoal(goal_id.0))?;
            if goal.state != GoalState::Active {
                return Ok(Finish::NotActive(goal.state));
            }
            if !goal.worktree.is_dir() {
                return self.worktree_missing(&goal.worktree);
            }
            let gates = self.store.gates(goal_id)?;
            let commands: Vec<String> = gates.iter().map(|g| g.command.clone()).collect();

            let turn = match owed_gates.take() {
                Some(turn) => turn,
                None => {
                    let turn = match self.store.write(|tx| tx.begin_turn(goal_id)) {
                        Ok(t) => t,
                        Err(greenlight_store::Error::TurnBudgetSpent { .. }) => {
                            return self.pause(
                                Reason::TurnBudgetExhausted,
                                format!(
                                    "used all {} turns without green gates; `greenlight goal resume` grants a new turn budget",
                                    goal.max_turns
                                ),
                                None,
                            );
                        }
                        Err(e) => return Err(e.into()),
                    };
                    let text = prompt::turn_prompt(&goal.text, &commands, evidence.as_deref());
                    (self.on_progress)(Progress::TurnStarted {
                        turn,
                        prompt: &text,
                    });
                    match self.dispatch_turn(turn, &text, interrupt).await? {
                        TurnOutcome::Replied(reply) => last_reply = reply,
                        TurnOutcome::Retry => continue,
                        TurnOutcome::Stop(finish) => return Ok(finish),
                    }
                    turn
                }
            };

            // Paused or cleared from elsewhere while the agent worked: stop before the gates.
            // The turn stays open, so a resume runs its gates without dispatching again.
            let state = self
                .store
                .goal(goal_id)?
                .ok_or(Error::NoSuchGoal(goal_id.0))?
                .state;
            if state != GoalState::Active {
                return Ok(Finish::NotActive(state));
            }

            // The agent may have removed its own worktree. No gate can run there, and no attempt
            // is charged: the turn stays open, so once the worktree is back, resume runs its gates.
            if !goal.worktree.is_dir() {
                return self.worktree_missing(&goal.worktree);
            }

            // The gate phase: in order; the first failure ends it and skips the judge.
            let mut failed = false;
            for (index, gate) in gates.iter().enumerate() {
                let number = index + 1;
                (self.on_progress)(Progress::GateStarted {
                    number,
                    of: gates.len(),
                    command: &gate.command,
                });
                let key = result_key(&goal.worktree, &gate.command, goal.gate_timeout_sec);
                let unchanged = gate.last.as_ref().filter(|last| {
                    last.verdict != RunVerdict::Pass && key.is_some() && last.workspace_key == key
                });
                let (run, text) = if let Some(last) = unchanged {
                    let previous = last.evidence.clone().unwrap_or_default();
                    let failure = GateFailure {
                        number,
                        of: gates.len(),
                        command: &gate.command,
                        exit_code: last.exit_code,
                        timed_out: last.verdict == RunVerdict::Timeout,
                        attempt: gate.attempts + 1,
                        max_attempts: goal.retries,
                        output: OutputEvidence::Unchanged {
                            previous: previous.clone(),
                        },
                    };
                    let text = prompt::evidence(&failure);
                    let run = NewGateRun {
                        goal: goal_id,
                        gate: gate.id,
                        turn: Some(turn),
                        verdict: last.verdict,
                        exit_code: last.exit_code,
                        duration_ms: 0,
                        workspace_key: key.clone(),
                        replayed: true,
                        digest: None,
                        // What the gate still waits on stays the original failure, so a second
                        // unchanged turn quotes the tool's output, not this notice.
                        evidence: Some(previous),
                    };
                    (run, Some(text))
                } else {
                    let timeout = Duration::from_secs(u64::from(goal.gate_timeout_sec));
                    let started = Instant::now();
                    let result = gate_phase::run_gate(
                        &goal.worktree,
                        &gate.command,
                        timeout,
                        self.settings.kill_grace,
                        &self.settings.gate_env,
                        interrupt,
                    )
                    .await;
                    let result = match result {
                        Ok(result) => result,
                        // Removed while an earlier gate ran: the same pause, not a machine error.
                        Err(_) if !goal.worktree.is_dir() => {
                            return self.worktree_missing(&goal.worktree);
                        }
                        Err(source) => {
                            return Err(Error::GateSpawn {
                                command: gate.command.clone(),
                                source,
                            });
                        }
                    };
                    if let Some(signal) = result.interrupted {
                        // The turn stays open: its dispatch finished, so resume owes it this
                        // gate phase rather than a new dispatch.
                        return self.interrupted(signal, None);
                    }
                    let failure = GateFailure {
                        number,
                        of: gates.len(),
                        command: &gate.command,
                        exit_code: result.exit_code,
                        timed_out: result.timed_out,
                        attempt: gate.attempts + 1,
                        max_attempts: goal.retries,
                        output: result.output.clone(),
                    };
                    let text = (!result.passed).then(|| prompt::evidence(&failure));
                    let run = NewGateRun {
                        goal: goal_id,
                        gate: gate.id,
                        turn: Some(turn),
                        verdict: if result.passed {
                            RunVerdict::Pass
                        } else if result.timed_out {
                            RunVerdict::Timeout
                        } else {
                            RunVerdict::Fail
                        },
                        exit_code: result.exit_code,
                        duration_ms: started.elapsed().as_millis() as u64,
                        workspace_key: key.clone(),
                        replayed: false,
                        digest: serde_json::to_value(&result.digest).ok(),
                        evidence: text.clone(),
                    };
                    (run, text)
                };
                let passed = run.verdict == RunVerdict::Pass;
                (self.on_progress)(Progress::GateFinished {
                    number,
                    command: &gate.command,
                    passed,
                    exit_code: run.exit_code,
                    replayed: run.replayed,
                    evidence: text.as_deref(),
                });
                if passed {
                    self.store.write(|tx| tx.record_gate_run(&run))?;
                    continue;
                }
                // A failure: record it, and either hand the evidence to the next turn or pause.
                let retries = goal.retries;
                let detail = format!(
                    "gate {number} (`{}`) failed {retries} time(s) in a row; fix it by hand and `greenlight goal resume`, or drop it with `greenlight goal gate remove {number}`",
                    gate.command
                );
                let recorded = self.store.write(|tx| {
                    let recorded = tx.record_gate_run(&run)?;
                    if recorded.attempt >= retries {
                        tx.end_turn(goal_id, turn, "gate-failed")?;
                        tx.pause_goal(goal_id, Reason::RetriesExhausted.as_str(), Some(&detail))?;
                    } else {
                        tx.end_turn(goal_id, turn, "gate-failed")?;
                    }
                    Ok::<_, greenlight_store::Error>(recorded)
                })?;
                if recorded.attempt >= retries {
                    return Ok(Finish::Paused {
                        reason: Reason::RetriesExhausted,
                        detail,
                    });
                }
                evidence = text;
                failed = true;
                break;
            }
            if failed {
                continue;
            }

            // Every gate passed.
            let Some(judge) = self.settings.judge.clone() else {
                self.store.write(|tx| {
                    tx.end_turn(goal_id, turn, "done")?;
                    tx.complete_goal(goal_id)
                })?;
                return Ok(Finish::Done);
            };
            let question = prompt::judge_prompt(&goal.text, &last_reply);
            let mut request = DispatchRequest::new(
                self.settings.family,
                judge.clone(),
                question,
                goal.worktree.clone(),
                self.settings.dispatch_timeout,
            );
            request.step_id = "judge".into();
            request.deliverable = Deliverable::ReturnValue;
            let judge_attempt = self
                .store
                .dispatches(goal_id)?
                .iter()
                .filter(|d| d.turn == turn && d.step == DispatchStep::Judge)
                .count() as u32
                + 1;
            request.attempt = judge_attempt;
            let ledger = NewDispatch {
                step: DispatchStep::Judge,
                goal: goal_id,
                turn,
                attempt: judge_attempt,
                family: self.settings.family.as_str().to_owned(),
                model: Some(judge.clone()),
            };
            let judge_dispatch = self.store.write(|tx| tx.begin_dispatch(&ledger))?;
            let reply = tokio::select! {
                r = self.settings.agent.dispatch(&request) => r,
                _ = interrupt.changed() => {
                    let end = DispatchEnd {
                        outcome: DispatchOutcome::Interrupted,
                        wall_ms: None,
                        tokens: Tokens::default(),
                        reason: Some(Reason::DispatchInterrupted.as_str().to_owned()),
                        detail: Some("greenlight was interrupted while the judge worked".to_owned()),
                    };
                    self.store.write(|tx| tx.finish_dispatch(judge_dispatch, &end))?;
                    // Left open like a cut gate phase: resume re-runs the gates, then the judge.
                    let signal = (*interrupt.borrow()).unwrap_or(Interrupt::Int);
                    return self.interrupted(signal, None);
                }
            };
            self.store
                .write(|tx| tx.finish_dispatch(judge_dispatch, &ledger_end(&reply)))?;
            let (problem, reply_text) = match (&reply.outcome, reply.text.as_deref()) {
                (Outcome::Ok, Some(text)) => match parse_verdict(text) {
                    ReplyVerdict::Pass => {
                        (self.on_progress)(Progress::Judged {
                            passed: true,
                            reply: text,
                        });
                        self.store.write(|tx| {
                            tx.append_event(
                                Some(goal_id),
                                Some(turn),
                                "judge-verdict",
                                &serde_json::json!({"verdict": "pass", "reply": text}),
                            )?;
                            tx.end_turn(goal_id, turn, "done")?;
                            tx.complete_goal(goal_id)
                        })?;
                        return Ok(Finish::Done);
                    }
                    ReplyVerdict::Fail => {
                        judge_unparseable = 0;
                        judge_failed = 0;
                        ("it answered GATE: FAIL".to_owned(), text.to_owned())
                    }
                    ReplyVerdict::Unparseable(why) => {
                        judge_unparseable += 1;
                        if judge_unparseable >= JUDGE_UNPARSEABLE_LIMIT {
                            return self.pause(
                                Reason::JudgeUnparseable,
                                format!("the judge answered outside the `GATE: PASS|FAIL` grammar {judge_unparseable} times in a row ({why}); check the judge model, then `greenlight goal resume`"),
                                Some((turn, "judge-unparseable")),
                            );
                        }
                        (
                            format!("its answer did not end in a verdict line: {why}"),
                            text.to_owned(),
                        )
                    }
                },
                _ => {
                    judge_failed += 1;
                    let why = reply
                        .failure
                        .as_ref()
                        .map(|f| f.detail.clone())
                        .unwrap_or_default();
                    if judge_failed >= JUDGE_FAILED_LIMIT {
                        return self.pause(
                            Reason::JudgeFailed,
                            format!("the judge could not be run {judge_failed} times in a row ({why}); check the judge model, then `greenlight goal resume`"),
                            Some((turn, "judge-failed")),
                        );
                    }
                    self.store
                        .write(|tx| tx.end_turn(goal_id, turn, "judge-failed"))?;
                    continue;
                }
            };
            (self.on_progress)(Progress::Judged {
                passed: false,
                reply: &reply_text,
            });
            let text = prompt::judge_evidence(&reply_text, &problem);
            self.store.write(|tx| {
                tx.append_event(Some(goal_id), Some(turn), "judge-verdict", &serde_json::json!({"verdict": "fail", "reply": reply_text, "problem": problem}))?;
                tx.end_turn(goal_id, turn, "judge-rejected")
            })?;
            evidence = Some(text);
        }
    }

    /// Dispatches one agent turn and records it in the ledger.
    async fn dispatch_turn(
        &mut self,
        turn: u32,
        text: &str,
        interrupt: &mut InterruptWatch,
    ) -> Result<TurnOutcome, Error> {
        let goal_id = self.goal;
        let goal = self
            .store
            .goal(goal_id)?
            .ok_or(Error::NoSuchGoal(goal_id.0))?;
        let attempt = self
            .store
            .dispatches(goal_id)?
            .iter()
            .filter(|d| d.turn == turn && d.step == DispatchStep::Agent)
            .count() as u32
            + 1;
        let ledger = NewDispatch {
            step: DispatchStep::Agent,
            goal: goal_id,
            turn,
            attempt,
            family: self.settings.family.as_str().to_owned(),
            model: Some(self.settings.model.clone()),
        };
        let dispatch_id = self.store.write(|tx| {
            tx.append_event(
                Some(goal_id),
                Some(turn),
                "prompt",
                &serde_json::json!({"prompt": text}),
            )?;
            tx.begin_dispatch(&ledger)
        })?;
        let mut request = DispatchRequest::new(
            self.settings.family,
            self.settings.model.clone(),
            text,
            goal.worktree.clone(),
            self.settings.dispatch_timeout,
        );
        request.step_id = format!("turn-{turn}");
        request.attempt = attempt;
        request.deliverable = Deliverable::File;
        let result = tokio::select! {
            r = self.settings.agent.dispatch(&request) => r,
            _ = interrupt.changed() => {
                // Dropping the dispatch ends the agent's process group.
                let signal = (*interrupt.borrow()).unwrap_or(Interrupt::Int);
                let end = DispatchEnd {
                    outcome: DispatchOutcome::Interrupted,
                    wall_ms: None,
                    tokens: Tokens::default(),
                    reason: Some(Reason::DispatchInterrupted.as_str().to_owned()),
                    detail: Some("greenlight was interrupted while the agent worked".to_owned()),
                };
                self.store.write(|tx| tx.finish_dispatch(dispatch_id, &end))?;
                return Ok(TurnOutcome::Stop(self.interrupted(signal, Some((turn, "interrupted")))?));
            }
        };
        self.store
            .write(|tx| tx.finish_dispatch(dispatch_id, &ledger_end(&result)))?;
        (self.on_progress)(Progress::Dispatched {
            turn,
            result: &result,
        });
        match (&result.outcome, &result.failure) {
            (Outcome::Ok, _) => Ok(TurnOutcome::Replied(
                result.text.clone().unwrap_or_default(),
            )),
            (_, Some(failure)) if is_transport(failure.reason) => {
                // The agent died or ran out of time: try again next turn, within the budget.
                self.store
                    .write(|tx| tx.end_turn(goal_id, turn, failure.reason.as_str()))?;
                Ok(TurnOutcome::Retry)
            }
            (_, failure) => {
                let (reason, detail) = failure
                    .as_ref()
                    .map(|f| (f.reason, f.detail.clone()))
                    .unwrap_or((
                        Reason::DispatchDead,
                        "the agent returned nothing".to_owned(),
                    ));
                let detail =
                    format!("{detail}; fix the agent settings, then `greenlight goal resume`");
                Ok(TurnOutcome::Stop(self.pause(
                    reason,
                    detail,
                    Some((turn, "dispatch-refused")),
                )?))
            }
        }
    }
}

enum TurnOutcome {
    Replied(String),
    Retry,
    Stop(Finish),
}
