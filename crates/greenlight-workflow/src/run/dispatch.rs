//! One agent dispatch of a run: the request built from the step, the declared writes
//! snapshotted before, the landed barrier after, and the outcome classified for the scheduler.
//!
//! The rule: an `ok` from the agent is only a claim. A `file` step is `ok` to the scheduler
//! when every declared write exists and changed (else `deliverable-not-landed`, a failure with
//! no retry class, so never retried); containment is checked again by the seam itself just
//! before the child starts.

use std::sync::Arc;
use std::time::Duration;

use greenlight_agent::{
    DispatchRequest, DispatchResult, Dispatcher, Reason, WriteBaseline, parse_verdict,
};
use greenlight_types::Family;

use crate::plan::{self, FailureClass};
use crate::run::journal::LedgerRow;
use crate::run::worktrees::Tree;
use crate::schedule::Outcome;

/// Builds an agent's dispatcher. The code that knows every agent family (the binary)
/// implements it, as it does for the goal loop.
pub trait Agents {
    /// The dispatcher of `agent` (`claude`, `codex`, `openai`, `command:<argv template>`), with
    /// `env` added to the environment its children start from, and the model id to ask for
    /// (`model`, or the family's default).
    fn dispatcher(
        &self,
        agent: &str,
        model: Option<&str>,
        env: &[(String, String)],
    ) -> Result<(Arc<dyn Dispatcher>, String), String>;
}

/// The class a failure's `retry.on` is matched against; `None` is never retried.
pub fn class_of(reason: Reason) -> Option<FailureClass> {
    match reason {
        Reason::DispatchTimeout => Some(FailureClass::Timeout),
        Reason::DispatchDead | Reason::ProbeFailed => Some(FailureClass::Transport),
        Reason::GateVerdictUnparseable => Some(FailureClass::MalformedOutput),
        _ => None,
    }
}

/// What one dispatch came to.
#[derive(Debug, Clone)]
pub struct Dispatched {
    /// For the scheduler.
    pub outcome: Outcome,
    /// For the ledger.
    pub row: LedgerRow,
    /// The agent's answer, when it gave one.
    pub text: Option<String>,
    /// Why it failed, for a person.
    pub detail: Option<String>,
}

/// One dispatch, decided.
pub struct Job<'a> {
    /// The step's agent (or the fan-out's template).
    pub agent: &'a plan::Agent,
    /// The step.
    pub step: &'a str,
    /// The member.
    pub item: Option<&'a str>,
    /// 1-based.
    pub attempt: u64,
    /// The prompt, placeholders filled.
    pub prompt: String,
    /// The model id that answered the probe.
    pub model: String,
    /// Where it runs.
    pub tree: &'a Tree,
    /// The deadline when the step sets none.
    pub default_timeout: Duration,
}

/// Runs `job` through `dispatcher` and classifies what came back.
pub async fn run(dispatcher: &dyn Dispatcher, job: Job<'_>) -> Dispatched {
    let agent = job.agent;
    let file = agent.deliverable == plan::Deliverable::File;
    let request = DispatchRequest {
        step_id: job.step.to_owned(),
        item_key: job.item.map(str::to_owned),
        attempt: u32::try_from(job.attempt).unwrap_or(u32::MAX),
        prompt: job.prompt,
        family: dispatcher.family(),
        model: job.model.clone(),
        deliverable: if file {
            greenlight_agent::Deliverable::File
        } else {
            greenlight_agent::Deliverable::ReturnValue
        },
        reads: agent.reads.iter().map(|r| fill_item(r, job.item)).collect(),
        writes: agent
            .writes
            .iter()
            .map(|w| fill_item(w, job.item))
            .collect(),
        timeout: agent
            .timeout_sec
            .map_or(job.default_timeout, Duration::from_secs),
        cwd: job.tree.path.clone(),
    };
    // The writes' state before: the barrier compares against it. Taking it checks containment.
    let baseline = match WriteBaseline::take(&request.cwd, &request.writes) {
        Ok(b) => b,
        Err(e) => {
            let result = DispatchResult::failed(
                greenlight_agent::Outcome::Error,
                request.family,
                &request.model,
                0,
                e.reason(),
                e.to_string(),
            );
            return settle(job.step, job.item, job.attempt, job.tree, result, None);
        }
    };
    let result = dispatcher.dispatch(&request).await;
    let landed = match (&result.failure, file) {
        (None, true) => baseline.check_landed().err(),
        _ => None,
    };
    settle(job.step, job.item, job.attempt, job.tree, result, landed)
}

/// A verdict agent's dispatch: `Ok(passed)` from its `GATE: PASS|FAIL` line, or the failure.
pub fn verdict_of(done: &Dispatched) -> Result<bool, (Reason, String)> {
    if let Outcome::Failed { reason, .. } = done.outcome {
        return Err((reason, done.detail.clone().unwrap_or_default()));
    }
    match parse_verdict(done.text.as_deref().unwrap_or_default()) {
        greenlight_agent::ReplyVerdict::Pass => Ok(true),
        greenlight_agent::ReplyVerdict::Fail => Ok(false),
        greenlight_agent::ReplyVerdict::Unparseable(why) => {
            Err((Reason::GateVerdictUnparseable, why))
        }
    }
}

fn settle(
    step: &str,
    item: Option<&str>,
    attempt: u64,
    tree: &Tree,
    result: DispatchResult,
    landed: Option<greenlight_agent::ContainmentError>,
) -> Dispatched {
    let failure = match (&result.failure, &landed) {
        (_, Some(e)) => Some((e.reason(), e.to_string())),
        (Some(f), None) => Some((f.reason, f.detail.clone())),
        (None, None) => None,
    };
    let outcome = match failure {
        None => Outcome::Ok,
        Some((reason, _)) => Outcome::Failed {
            reason,
            class: if landed.is_some() {
                None
            } else {
                class_of(reason)
            },
        },
    };
    let row = LedgerRow {
        step: step.to_owned(),
        item: item.map(str::to_owned),
        attempt,
        family: family_name(result.family),
        model: result.model_used.clone().unwrap_or_default(),
        worktree: tree.path.to_string_lossy().into_owned(),
        wall_ms: result.wall_ms,
        tokens_in: result.tokens_in,
        tokens_out: result.tokens_out,
        cost_usd: result.cost_usd,
        outcome: if landed.is_some() {
            "error".to_owned()
        } else {
            result.outcome.as_str().to_owned()
        },
        reason: failure.as_ref().map(|(r, _)| *r),
    };
    Dispatched {
        outcome,
        row,
        text: result.text,
        detail: failure.map(|(_, d)| d),
    }
}

fn family_name(family: Family) -> String {
    family.as_str().to_owned()
}

/// `text` with `{{item}}` replaced by the member's key.
fn fill_item(text: &str, item: Option<&str>) -> String {
    match item {
        Some(item) => plan::fill(text, Some(item), &Default::default()),
        None => text.to_owned(),
    }
}
