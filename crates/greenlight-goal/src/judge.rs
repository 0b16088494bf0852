//! The judge: after every gate passed, a model of the agent's family must accept the goal as
//! met, answering in the `GATE: PASS` / `GATE: FAIL` grammar.
//!
//! It judges the agent's last reply as the ledger recorded it, and its failure streaks are read
//! back from the ledger, so a judge after a crash and resume sees exactly what it would have.

use greenlight_agent::{
    Deliverable, DispatchRequest, DispatchResult, Outcome, Reason, ReplyVerdict, parse_verdict,
};
use greenlight_proc::{Interrupt, InterruptWatch};
use greenlight_store::{DispatchStep, NewDispatch};

use crate::engine::{Engine, Finish, JUDGE_FAILED_LIMIT, JUDGE_UNPARSEABLE_LIMIT, Step};
use crate::error::Error;
use crate::frames;
use crate::ledger::{interrupted_end, judge_streaks, last_reply, ledger_end, next_attempt};
use crate::progress::Progress;
use crate::prompt;

impl Engine<'_> {
    /// Asks the judge about open turn `turn`, whose gates all passed; next is done, another
    /// turn with the judge's reply as evidence, or a pause.
    pub(crate) async fn judge(
        &mut self,
        turn: u32,
        interrupt: &mut InterruptWatch,
    ) -> Result<Step, Error> {
        // The gate phase asks for the judge only when there is one; without, its gates decide.
        let Some(judge) = self.settings.judge.clone() else {
            return Ok(Step::Gates(turn));
        };
        let goal_id = self.goal;
        let goal = self.goal_row()?;
        let question = prompt::judge_prompt(&goal.text, &last_reply(self.store, goal_id)?);
        let attempt = next_attempt(self.store, goal_id, turn, DispatchStep::Judge)?;
        let mut request = DispatchRequest::new(
            self.settings.family,
            judge.clone(),
            question,
            goal.worktree.clone(),
            self.settings.dispatch_timeout,
        );
        request.step_id = "judge".into();
        request.deliverable = Deliverable::ReturnValue;
        request.attempt = attempt;
        let ledger = NewDispatch {
            step: DispatchStep::Judge,
            goal: goal_id,
            turn,
            attempt,
            family: self.settings.family,
            model: Some(judge.clone()),
        };
        let dispatch = self.store.write(|tx| tx.begin_dispatch(&ledger))?;
        let reply = tokio::select! {
            r = self.settings.agent.dispatch(&request) => r,
            _ = interrupt.changed() => {
                let end = interrupted_end("the judge");
                self.store.write(|tx| tx.finish_dispatch(dispatch, &end))?;
                // Left open like a cut gate phase: resume re-runs the gates, then the judge.
                let signal = (*interrupt.borrow()).unwrap_or(Interrupt::Int);
                return Ok(Step::Finish(self.interrupted(signal, None)?));
            }
        };
        self.store
            .write(|tx| tx.finish_dispatch(dispatch, &ledger_end(&reply)))?;
        self.judged(turn, &reply)
    }

    /// What the judge's answer (now in the ledger) means: done, its reply as the next turn's
    /// evidence, another turn after a failed call, or a pause when a streak reached its limit.
    fn judged(&mut self, turn: u32, reply: &DispatchResult) -> Result<Step, Error> {
        let goal_id = self.goal;
        // This answer is in the ledger now, so the streaks include it.
        let streaks = judge_streaks(self.store, goal_id)?;
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
                        tx.append_frame(
                            frames::stream(goal_id),
                            &frames::judge_verdict(turn, true, text),
                        )?;
                        tx.end_turn(goal_id, turn, "done")?;
                        tx.complete_goal(goal_id)
                    })?;
                    return Ok(Step::Finish(Finish::Done));
                }
                ReplyVerdict::Fail => ("it answered GATE: FAIL".to_owned(), text.to_owned()),
                ReplyVerdict::Unparseable(why) => {
                    if streaks.unparseable >= JUDGE_UNPARSEABLE_LIMIT {
                        let finish = self.pause(
                            Reason::JudgeUnparseable,
                            format!("the judge answered outside the `GATE: PASS|FAIL` grammar {} times in a row ({why}); check the judge model, then `greenlight goal resume`", streaks.unparseable),
                            Some((turn, Reason::JudgeUnparseable.as_str())),
                        )?;
                        return Ok(Step::Finish(finish));
                    }
                    (
                        format!("its answer did not end in a verdict line: {why}"),
                        text.to_owned(),
                    )
                }
            },
            _ => {
                let why = reply
                    .failure
                    .as_ref()
                    .map(|f| f.detail.clone())
                    .unwrap_or_default();
                if streaks.failed >= JUDGE_FAILED_LIMIT {
                    let finish = self.pause(
                        Reason::JudgeFailed,
                        format!("the judge could not be run {} times in a row ({why}); check the judge model, then `greenlight goal resume`", streaks.failed),
                        Some((turn, Reason::JudgeFailed.as_str())),
                    )?;
                    return Ok(Step::Finish(finish));
                }
                self.store
                    .write(|tx| tx.end_turn(goal_id, turn, Reason::JudgeFailed.as_str()))?;
                return Ok(Step::Turn);
            }
        };
        (self.on_progress)(Progress::Judged {
            passed: false,
            reply: &reply_text,
        });
        let text = prompt::judge_evidence(&reply_text, &problem);
        self.store.write(|tx| {
            tx.append_event(
                Some(goal_id),
                Some(turn),
                "judge-verdict",
                &serde_json::json!({"verdict": "fail", "reply": reply_text, "problem": problem}),
            )?;
            tx.append_frame(
                frames::stream(goal_id),
                &frames::judge_verdict(turn, false, &reply_text),
            )?;
            tx.end_turn(goal_id, turn, "judge-rejected")
        })?;
        self.evidence = Some(text);
        Ok(Step::Turn)
    }
}
