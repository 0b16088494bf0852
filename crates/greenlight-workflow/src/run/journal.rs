//! What a run keeps, and the seam it is kept through: the state database behind [`Journal`].
//!
//! The one rule: every [`Entry`] is persisted before the runtime acts on it, so what a
//! resume replays is exactly what happened (a dispatch recorded as started but never settled
//! was in flight at the kill, and is dispatched again).

use std::collections::BTreeMap;

use greenlight_types::Reason;
use serde::{Deserialize, Serialize};

use crate::schedule::Event;

/// One thing a run recorded, in order. Stored as JSON; the names are the stored contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "kebab-case")]
pub enum Entry {
    /// A scheduler event: the scheduler's input on resume.
    Event {
        /// The event.
        event: Event,
        /// For a dispatch: who it went to and where.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        via: Option<Via>,
    },
    /// One invocation of `workflow run` (the first or a resume) began driving the run.
    Segment {
        /// Whether it is a resume.
        resume: bool,
    },
    /// An agent answered its probe with this model id (once per run and agent).
    Probed {
        /// The agent spec as the plan names it (`claude`, `command:…`).
        agent: String,
        /// The model the plan asked for (`default` when none).
        asked: String,
        /// The id that answered.
        answered: String,
    },
    /// A resume granted more budget.
    Extended {
        /// Dispatch units added.
        dispatches: u64,
        /// Wall-clock seconds added.
        wall_clock_sec: u64,
        /// Reported tokens added to the token cap.
        #[serde(default, skip_serializing_if = "is_zero")]
        tokens: u64,
        /// US dollars added to the cost cap.
        #[serde(default, skip_serializing_if = "is_zero_usd")]
        cost_usd: f64,
    },
    /// A worktree was created, removed or kept.
    Worktree {
        /// The step.
        step: String,
        /// The member, for a fan-out.
        item: Option<String>,
        /// The branch it is on.
        branch: String,
        /// Where it is.
        path: String,
        /// `created`, `removed` or `kept`.
        state: String,
    },
    /// The run stopped before a boundary, at a pause step, or at a person's request.
    Paused {
        /// Why.
        reason: Option<Reason>,
        /// The step it stopped at or before.
        step: String,
        /// For a person.
        message: String,
    },
    /// The verify.yaml files the run's gate steps judge by, as they were when it started (read
    /// from the worktree it was started in, never from a worktree an agent wrote to).
    Gates {
        /// The verify.yaml the worktree the run started in is judged by (`gates:` steps).
        config: Option<greenlight_gate::config::Snapshot>,
        /// Each `verify:` step's file, by the path the plan names.
        files: BTreeMap<String, greenlight_gate::config::Snapshot>,
    },
    /// One finished dispatch: the ledger row (the state database keeps it in its ledger too).
    Ledger {
        /// The row.
        row: LedgerRow,
    },
    /// A unit recorded as dispatched never settled: its process was killed with greenlight.
    /// Its unsettled dispatch is dropped from the replay, so it is dispatched again.
    Abandoned {
        /// The step.
        step: String,
        /// The member.
        item: Option<String>,
    },
    /// A unit recorded as done whose declared writes are gone: every record of it is dropped
    /// from the replay, so it runs again.
    Rerun {
        /// The step.
        step: String,
        /// The member.
        item: Option<String>,
        /// The write that is gone.
        missing: String,
    },
    /// A join decided, once every member of its fan-out finished.
    JoinDecided {
        /// The join step.
        step: String,
        /// Its policy.
        policy: String,
        /// Whether its policy was met.
        passed: bool,
        /// The members that passed.
        passed_items: Vec<String>,
        /// The members that failed.
        failed_items: Vec<String>,
    },
    /// A member's landing ended (`Event::Landed` is the scheduler's record of it).
    LandEnded {
        /// The land step.
        step: String,
        /// The member.
        item: String,
        /// Its branch.
        branch: String,
        /// `landed`, or the reason it did not.
        outcome: String,
        /// The target's new commit.
        commit: Option<String>,
        /// For a person.
        summary: String,
    },
    /// The run ended.
    Finished {
        /// `completed`, `failed` or `terminal`.
        status: String,
        /// The failed step or the terminal label.
        step: Option<String>,
        /// Why, when it failed.
        reason: Option<Reason>,
    },
}

/// Who a dispatch went to, and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Via {
    /// The agent family.
    pub family: String,
    /// The model id.
    pub model: String,
    /// The worktree.
    pub worktree: String,
}

/// A run as first recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewRun {
    /// The plan's name.
    pub name: String,
    /// The plan file, as given.
    pub plan_path: String,
    /// The directory the run was started in.
    pub started_in: String,
    /// The commit the run's worktrees start from.
    pub base_commit: String,
    /// [`crate::plan::digest`].
    pub plan_digest: String,
    /// [`crate::plan::args_hash`].
    pub args_hash: String,
    /// The plan's canonical JSON.
    pub plan_json: String,
    /// The arguments (given over defaults).
    pub args: BTreeMap<String, String>,
    /// Dispatch units.
    pub budget: u64,
    /// Wall-clock limit, seconds.
    pub wall_clock_sec: Option<u64>,
    /// A cap on reported tokens.
    pub token_cap: Option<u64>,
    /// A cap on reported cost.
    pub cost_cap_usd: Option<f64>,
}

/// What the journal holds about a run.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRun {
    /// As first recorded.
    pub run: NewRun,
    /// Whether it ended (completed, failed or terminal).
    pub finished: bool,
    /// Everything recorded, in order, each with when (ms since the epoch).
    pub entries: Vec<(u64, Entry)>,
}

/// One row of the per-dispatch ledger. Counts are `None` when the agent did not report them,
/// never 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerRow {
    /// The step.
    pub step: String,
    /// The member.
    pub item: Option<String>,
    /// 1-based.
    pub attempt: u64,
    /// The agent family.
    pub family: String,
    /// The model id dispatched.
    pub model: String,
    /// The worktree it ran in.
    pub worktree: String,
    /// Wall time.
    pub wall_ms: u64,
    /// Reported input tokens.
    pub tokens_in: Option<u64>,
    /// Reported output tokens.
    pub tokens_out: Option<u64>,
    /// Reported cost.
    pub cost_usd: Option<f64>,
    /// `ok`, `null` or `error`.
    pub outcome: String,
    /// Why it failed.
    pub reason: Option<Reason>,
}

/// Why the journal could not keep or read something.
#[derive(Debug, thiserror::Error)]
#[error("{detail}")]
pub struct JournalError {
    /// What went wrong, in words.
    pub detail: String,
    /// The store refused the write because the lease this process held on the run's queue item
    /// was lost to another worker: the run is that worker's now, and this one only stops.
    pub lease_lost: bool,
}

impl JournalError {
    /// Any failure but a lost lease.
    pub fn new(detail: impl Into<String>) -> JournalError {
        JournalError {
            detail: detail.into(),
            lease_lost: false,
        }
    }
}

impl From<greenlight_store::Error> for JournalError {
    fn from(e: greenlight_store::Error) -> JournalError {
        JournalError {
            lease_lost: matches!(e, greenlight_store::Error::LeaseLost { .. }),
            detail: e.to_string(),
        }
    }
}

/// Where a run's records are kept (the state database).
pub trait Journal {
    /// The run `id`, when one is recorded.
    fn recorded(&mut self, id: &str) -> Result<Option<RecordedRun>, JournalError>;
    /// Records a new run, running, with the id asked for (`--run-id`) or the next free one;
    /// returns its id.
    fn create(&mut self, run: &NewRun, id: Option<&str>) -> Result<String, JournalError>;
    /// Appends one entry (and its frame), in one transaction.
    fn append(&mut self, id: &str, entry: &Entry) -> Result<(), JournalError>;
    /// Whether a person asked the run to pause (`greenlight workflow pause`) and it has not
    /// paused since.
    fn pause_requested(&mut self, id: &str) -> Result<bool, JournalError>;
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_usd(n: &f64) -> bool {
    *n == 0.0
}
