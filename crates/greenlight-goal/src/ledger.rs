//! Between the agent's results and the store's ledger rows, and what the loop reads back from
//! the ledger (the agent's last reply, the judge's failure streaks) so that a resume carries on
//! exactly where the crashed run stopped.

use greenlight_agent::{DispatchResult, Reason, ReplyVerdict, parse_verdict};
use greenlight_store::{DispatchEnd, DispatchOutcome, DispatchStep, GoalId, Reads, Store, Tokens};

use crate::error::Error;

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

/// The ledger completion of a finished dispatch, reply included.
pub(crate) fn ledger_end(result: &DispatchResult) -> DispatchEnd {
    DispatchEnd {
        outcome: result.outcome,
        wall_ms: Some(result.wall_ms),
        tokens: tokens_of(result),
        reason: result
            .failure
            .as_ref()
            .map(|f| f.reason.as_str().to_owned()),
        detail: result.failure.as_ref().map(|f| f.detail.clone()),
        reply: result.text.clone(),
    }
}

/// The ledger completion of a dispatch greenlight cut short (Ctrl-C, SIGTERM): `who` was
/// working, its result is unknown.
pub(crate) fn interrupted_end(who: &str) -> DispatchEnd {
    DispatchEnd {
        outcome: DispatchOutcome::Interrupted,
        wall_ms: None,
        tokens: Tokens::default(),
        reason: Some(Reason::DispatchInterrupted.as_str().to_owned()),
        detail: Some(format!("greenlight was interrupted while {who} worked")),
        reply: None,
    }
}

/// The 1-based attempt number of the next `step` dispatch in `turn`.
pub(crate) fn next_attempt(
    store: &Store,
    goal: GoalId,
    turn: u32,
    step: DispatchStep,
) -> Result<u32, Error> {
    let done = store
        .dispatches(goal)?
        .iter()
        .filter(|d| d.turn == turn && d.step == step)
        .count();
    Ok(u32::try_from(done).unwrap_or(u32::MAX).saturating_add(1))
}

/// The agent's last reply that came back ok (what the judge judges), or empty.
pub(crate) fn last_reply(store: &Store, goal: GoalId) -> Result<String, Error> {
    Ok(store
        .dispatches(goal)?
        .into_iter()
        .rev()
        .find(|d| d.step == DispatchStep::Agent && d.outcome == DispatchOutcome::Ok)
        .and_then(|d| d.reply)
        .unwrap_or_default())
}

/// The judge's current streaks, read back from the ledger: answers outside the verdict grammar
/// and failed dispatches since its last clear verdict. Interrupted questions count for neither.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JudgeStreaks {
    pub unparseable: u32,
    pub failed: u32,
}

pub(crate) fn judge_streaks(store: &Store, goal: GoalId) -> Result<JudgeStreaks, Error> {
    let mut streaks = JudgeStreaks::default();
    for d in store.dispatches(goal)?.iter().rev() {
        if d.step != DispatchStep::Judge {
            continue;
        }
        match (d.outcome, d.reply.as_deref()) {
            (DispatchOutcome::Interrupted | DispatchOutcome::InFlight, _) => {}
            (DispatchOutcome::Ok, Some(reply)) => match parse_verdict(reply) {
                ReplyVerdict::Unparseable(_) => streaks.unparseable += 1,
                ReplyVerdict::Pass | ReplyVerdict::Fail => break,
            },
            _ => streaks.failed += 1,
        }
    }
    Ok(streaks)
}
