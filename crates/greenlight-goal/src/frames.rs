//! The goal's stream: the frame for each moment of the loop, built from the loop's own data.
//! (The store writes each state change's `goal-state` frame itself.)
//!
//! A frame is appended in the transaction of the state change it describes (persist first, then
//! publish), so a watcher's view and the store can never disagree. Live activity and gate output
//! describe no state change and go in small transactions of their own.

use std::sync::Mutex;

use greenlight_agent::{Activity, ActivitySink, DispatchResult};
use greenlight_store::greenlight_stream::{
    ActivityKind, FrameBody, MAX_PROMPT_BYTES, MAX_TEXT_BYTES, StreamId, ToolStatus, TurnTokens,
    bounded,
};
use greenlight_store::{GoalId, NewGateRun};

use crate::ledger::ledger_end;

/// The code of the error frame that ends a stream whose loop failed (not a pause: the machinery).
pub const HARNESS_ERROR: &str = "HARNESS_ERROR";

/// The goal's stream.
pub fn stream(goal: GoalId) -> StreamId {
    StreamId::Goal(goal.0)
}

/// A turn started with `prompt` (empty when the turn dispatches nothing: its gates run first).
pub(crate) fn turn_started(turn: u32, prompt: &str) -> FrameBody {
    let (prompt, truncated) = bounded(prompt, MAX_PROMPT_BYTES);
    FrameBody::TurnStarted {
        turn,
        prompt,
        truncated,
    }
}

/// The agent's part of a turn ended with `result`.
pub(crate) fn turn_ended(turn: u32, result: &DispatchResult) -> FrameBody {
    let tokens = TurnTokens {
        input: result.tokens_in,
        output: result.tokens_out,
        cache_read: result.cache_read_tokens,
        cache_write: result.cache_creation_tokens,
        cost_usd: result.cost_usd,
    };
    let reported = tokens != TurnTokens::default();
    FrameBody::TurnEnded {
        turn,
        outcome: ledger_end(result).outcome.as_str().to_owned(),
        reason: result
            .failure
            .as_ref()
            .map(|f| f.reason.as_str().to_owned()),
        reply: result
            .text
            .as_deref()
            .map(|text| bounded(text, MAX_TEXT_BYTES).0),
        tokens: reported.then_some(tokens),
        wall_ms: Some(result.wall_ms),
    }
}

/// The agent's part of a turn was cut short: by greenlight (Ctrl-C, SIGTERM) or by a crash
/// found on resume.
pub(crate) fn turn_interrupted(turn: u32) -> FrameBody {
    FrameBody::TurnEnded {
        turn,
        outcome: "interrupted".to_owned(),
        reason: Some(
            greenlight_agent::Reason::DispatchInterrupted
                .as_str()
                .to_owned(),
        ),
        reply: None,
        tokens: None,
        wall_ms: None,
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Gate `number` of `of` starts in `turn`.
pub(crate) fn gate_started(number: usize, of: usize, command: &str, turn: u32) -> FrameBody {
    FrameBody::GateStarted {
        gate: count(number),
        of: count(of),
        command: command.to_owned(),
        turn: Some(turn),
    }
}

/// Gate `number` is decided as `run` records it; `digest` is the evidence of a failure, or the
/// compact digest of a pass the digest recognised.
pub(crate) fn gate_finished(
    number: usize,
    command: &str,
    run: &NewGateRun,
    digest: Option<&str>,
) -> FrameBody {
    FrameBody::GateFinished {
        gate: count(number),
        command: command.to_owned(),
        verdict: run.verdict,
        exit_code: run.exit_code,
        duration_ms: (!run.replayed).then_some(run.duration_ms),
        digest: digest.map(|d| bounded(d, MAX_TEXT_BYTES).0),
        replayed: run.replayed,
        turn: run.turn,
    }
}

/// The judge answered about `turn`.
pub(crate) fn judge_verdict(turn: u32, passed: bool, reply: &str) -> FrameBody {
    FrameBody::JudgeVerdict {
        turn,
        passed,
        reply: bounded(reply, MAX_TEXT_BYTES).0,
    }
}

/// The loop failed (the store, a gate that could not start, …): the stream's last word.
pub(crate) fn harness_error(error: &crate::Error) -> FrameBody {
    FrameBody::Error {
        code: HARNESS_ERROR.to_owned(),
        message: error.to_string(),
    }
}

/// One piece of the agent's activity in `turn`, unbounded (the coalescer bounds it).
pub(crate) fn activity(turn: u32, activity: Activity) -> FrameBody {
    let text = |kind, text| FrameBody::Activity { turn, kind, text };
    match activity {
        Activity::Text(t) => text(ActivityKind::Text, t),
        Activity::Thinking(t) => text(ActivityKind::Thinking, t),
        Activity::Output(t) => text(ActivityKind::Output, t),
        Activity::ToolStarted { id, name, input } => FrameBody::ToolCall {
            turn,
            id,
            name,
            input,
            status: ToolStatus::Started,
            output: None,
        },
        Activity::ToolFinished {
            id,
            name,
            failed,
            output,
        } => FrameBody::ToolCall {
            turn,
            id,
            name,
            input: String::new(),
            status: if failed {
                ToolStatus::Error
            } else {
                ToolStatus::Ok
            },
            output: Some(output),
        },
    }
}

/// Where a dispatch puts its activity: a buffer the loop drains between polls. Never blocks
/// for longer than a push.
#[derive(Debug, Default)]
pub(crate) struct ActivityBuffer(Mutex<Vec<Activity>>);

impl ActivityBuffer {
    /// What arrived since the last call, in order.
    pub(crate) fn drain(&self) -> Vec<Activity> {
        self.0
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default()
    }
}

impl ActivitySink for ActivityBuffer {
    fn activity(&self, activity: Activity) {
        if let Ok(mut v) = self.0.lock() {
            v.push(activity);
        }
    }
}
