//! The agent's turn: the prompt, one dispatch recorded in the ledger, and what comes next.
//!
//! A transport failure (the agent timed out or died) spends the turn and the next one retries
//! within the budget; a refusal (bad model id, prompt over the ceiling, a path outside the
//! worktree) would fail the same way again, so it pauses the goal.

use greenlight_agent::ledger::{NoLedger, ToolLedger};
use greenlight_agent::{Deliverable, DispatchRequest, Family, Outcome, Reason};
use greenlight_proc::{Interrupt, InterruptWatch};
use greenlight_store::{DispatchStep, NewDispatch};

use std::time::Duration;

use greenlight_store::greenlight_stream::{ACTIVITY_INTERVAL_MS, ActivityCoalescer, FrameBody};

use crate::engine::{Engine, Step};
use crate::error::Error;
use crate::frames::{self, ActivityBuffer};
use crate::ledger::{interrupted_end, ledger_end, next_attempt};
use crate::progress::Progress;
use crate::prompt;
use crate::tool_ledger::StoreToolLedger;

/// A failure the next turn may not repeat: the agent died, ran out of time, or (openai) spent
/// its bound of requests or tokens with its work so far left in the worktree.
fn is_transport(reason: Reason) -> bool {
    matches!(
        reason,
        Reason::DispatchTimeout | Reason::DispatchDead | Reason::DispatchBudgetExhausted
    )
}

impl Engine<'_> {
    /// Starts a turn and dispatches the agent; next is the turn's gate phase, another turn, or
    /// the end.
    pub(crate) async fn turn(&mut self, interrupt: &mut InterruptWatch) -> Result<Step, Error> {
        if let Some(signal) = *interrupt.borrow() {
            return Ok(Step::Finish(self.interrupted(signal, None)?));
        }
        let (goal, gates) = match self.ready()? {
            Ok(ready) => ready,
            Err(stop) => return Ok(stop),
        };
        let commands: Vec<String> = gates.iter().map(|g| g.command.clone()).collect();
        let text = prompt::turn_prompt(&goal.text, &commands, self.evidence.as_deref());
        let turn = match self.begin_turn(&goal, &text)? {
            Ok(turn) => turn,
            Err(finish) => return Ok(Step::Finish(finish)),
        };
        (self.on_progress)(Progress::TurnStarted {
            turn,
            prompt: &text,
        });
        self.dispatch_turn(&goal, turn, &text, interrupt).await
    }

    /// Dispatches one agent turn and records it (and its reply) in the ledger.
    async fn dispatch_turn(
        &mut self,
        goal: &greenlight_store::Goal,
        turn: u32,
        text: &str,
        interrupt: &mut InterruptWatch,
    ) -> Result<Step, Error> {
        let goal_id = self.goal;
        let attempt = next_attempt(self.store, goal_id, turn, DispatchStep::Agent)?;
        let ledger = NewDispatch {
            step: DispatchStep::Agent,
            goal: goal_id,
            turn,
            attempt,
            family: self.settings.family,
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
        // The agent's activity is buffered by the sink as it arrives and turned into frames
        // here, between polls of the dispatch, at the coalescer's rate.
        let sink = ActivityBuffer::default();
        let mut live = ActivityCoalescer::default();
        let agent = std::sync::Arc::clone(&self.settings.agent);
        // The tool calls greenlight runs itself (openai) are recorded write-ahead beside the
        // dispatch's ledger row; an agent CLI's own tools are not greenlight's to record.
        let ledger: Box<dyn ToolLedger> = if self.settings.family == Family::OpenAi {
            Box::new(StoreToolLedger::open(self.store.path(), dispatch_id)?)
        } else {
            Box::new(NoLedger)
        };
        let dispatch = agent.dispatch_recorded(&request, &sink, ledger.as_ref());
        tokio::pin!(dispatch);
        let started = tokio::time::Instant::now();
        let mut tick = tokio::time::interval(Duration::from_millis(ACTIVITY_INTERVAL_MS));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let result = loop {
            tokio::select! {
                r = &mut dispatch => break r,
                _ = interrupt.changed() => {
                    // Dropping the dispatch ends the agent's process group.
                    let signal = (*interrupt.borrow()).unwrap_or(Interrupt::Int);
                    let end = interrupted_end("the agent");
                    let rest = self.take_activity(turn, &sink, &mut live);
                    let leftovers = greenlight_proc::end_adopted_and_marked(&self.settings.gate_env);
                    self.store.write(|tx| {
                        append_all(tx, goal_id, &rest)?;
                        tx.finish_dispatch(dispatch_id, &end)?;
                        record_leftovers(tx, goal_id, turn, &leftovers)?;
                        tx.append_frame(frames::stream(goal_id), &frames::turn_interrupted(turn))
                    })?;
                    self.report_leftovers(turn, &leftovers);
                    return Ok(Step::Finish(self.interrupted(signal, Some((turn, "interrupted")))?));
                }
                _ = tick.tick() => {
                    for piece in sink.drain() {
                        live.push(frames::activity(turn, piece));
                    }
                    let now = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                    if let Some(frame) = live.poll(now) {
                        self.store.write(|tx| tx.append_frame(frames::stream(goal_id), &frame))?;
                    }
                }
            }
        };
        // Nothing of the agent may run once its turn is over, least of all while the gates
        // judge it: a process that escaped its group (`setsid env -i …`: no marker, no token)
        // was adopted by this runner, a child subreaper with nothing else running now.
        let leftovers = greenlight_proc::end_adopted_and_marked(&self.settings.gate_env);
        // What is left of the activity lands before the turn's end, in its transaction.
        let rest = self.take_activity(turn, &sink, &mut live);
        self.store.write(|tx| {
            append_all(tx, goal_id, &rest)?;
            tx.finish_dispatch(dispatch_id, &ledger_end(&result))?;
            record_leftovers(tx, goal_id, turn, &leftovers)?;
            tx.append_frame(frames::stream(goal_id), &frames::turn_ended(turn, &result))
        })?;
        (self.on_progress)(Progress::Dispatched {
            turn,
            result: &result,
        });
        self.report_leftovers(turn, &leftovers);
        match (&result.outcome, &result.failure) {
            (Outcome::Ok, _) => Ok(Step::Gates(turn)),
            (_, Some(failure)) if failure.reason == Reason::MachineFailure => {
                // Not the agent's failure, and the next turn would meet the same machine: pause
                // now, and give the turn back (the agent never had it).
                let reason = Reason::MachineFailure;
                let detail = format!("{}; then `greenlight goal resume`", failure.detail);
                self.store.write(|tx| {
                    tx.end_turn(goal_id, turn, reason.as_str())?;
                    tx.refund_turn(goal_id)?;
                    tx.pause_goal(goal_id, reason.as_str(), Some(&detail))
                })?;
                Ok(Step::Finish(crate::engine::Finish::Paused {
                    reason,
                    detail,
                }))
            }
            (_, Some(failure)) if is_transport(failure.reason) => {
                // The agent died or ran out of time: try again next turn, within the budget.
                self.store
                    .write(|tx| tx.end_turn(goal_id, turn, failure.reason.as_str()))?;
                Ok(Step::Turn)
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
                Ok(Step::Finish(self.pause(
                    reason,
                    detail,
                    Some((turn, "dispatch-refused")),
                )?))
            }
        }
    }

    /// Tells the live view what the turn left running and was ended.
    pub(crate) fn report_leftovers(
        &mut self,
        turn: u32,
        leftovers: &[greenlight_proc::LeftoverProcess],
    ) {
        if !leftovers.is_empty() {
            (self.on_progress)(Progress::AgentLeftoversEnded {
                turn,
                processes: leftovers,
            });
        }
    }

    /// Everything the agent did that is not a frame yet, coalesced, whatever the rate.
    fn take_activity(
        &self,
        turn: u32,
        sink: &ActivityBuffer,
        live: &mut ActivityCoalescer,
    ) -> Vec<FrameBody> {
        for piece in sink.drain() {
            live.push(frames::activity(turn, piece));
        }
        live.finish()
    }
}

/// The `agent-leftovers-ended` event, when the turn left anything running.
pub(crate) fn record_leftovers(
    tx: &greenlight_store::Tx<'_>,
    goal: greenlight_store::GoalId,
    turn: u32,
    leftovers: &[greenlight_proc::LeftoverProcess],
) -> Result<(), greenlight_store::Error> {
    if leftovers.is_empty() {
        return Ok(());
    }
    tx.append_event(
        Some(goal),
        Some(turn),
        "agent-leftovers-ended",
        &serde_json::json!({ "processes": leftovers }),
    )?;
    Ok(())
}

fn append_all(
    tx: &greenlight_store::Tx<'_>,
    goal: greenlight_store::GoalId,
    bodies: &[FrameBody],
) -> Result<(), greenlight_store::Error> {
    for body in bodies {
        tx.append_frame(frames::stream(goal), body)?;
    }
    Ok(())
}
