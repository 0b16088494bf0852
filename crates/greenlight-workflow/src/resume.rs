//! Whether a recorded run may be resumed with this plan and these arguments, decided in one fixed
//! order before anything is probed or spent. Pure: no I/O (the runtime reads the record).
//!
//! The order is the contract: a run greenlight did not record is refused first, then one that
//! completed, then one whose inputs changed. There is no override for a changed input: a plan or
//! an argument that changed is a new run, never a continuation. (Whether each model still
//! answers comes after, with the probe, which is I/O and not decided here.)

use std::collections::BTreeMap;

use greenlight_types::Reason;

use crate::plan::{self, Plan};

/// What the store recorded about the run a resume names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The plan digest the run started with.
    pub plan_digest: String,
    /// The argument hash the run started with.
    pub args_hash: String,
    /// Whether the run finished (completed, terminal or failed).
    pub finished: bool,
}

/// Why a resume is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The reason, from the one closed list.
    pub reason: Reason,
    /// What was found and what to do, for the person resuming.
    pub message: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

/// Decides a resume of run `run_id`, which the store recorded as `recorded` (`None`: no such
/// run), with `plan` and the arguments `given` now.
pub fn check(
    run_id: &str,
    recorded: Option<&Recorded>,
    plan: &Plan,
    given: &BTreeMap<String, String>,
) -> Result<(), Refusal> {
    let Some(recorded) = recorded else {
        return Err(Refusal {
            reason: Reason::ForeignRunRefused,
            message: format!(
                "no workflow run `{run_id}` is recorded in this state database; `greenlight \
                 workflow list` shows the runs it has"
            ),
        });
    };
    if recorded.finished {
        return Err(Refusal {
            reason: Reason::ResumeAlreadyCompleted,
            message: format!("run `{run_id}` has finished; start a new run instead"),
        });
    }
    let digest = plan::digest(plan);
    if digest != recorded.plan_digest {
        return Err(Refusal {
            reason: Reason::StaleInputRefused,
            message: format!(
                "the plan changed since run `{run_id}` started (digest {} then, {} now); \
                 restore the plan or start a new run",
                short(&recorded.plan_digest),
                short(&digest)
            ),
        });
    }
    if plan::args_hash(plan, given) != recorded.args_hash {
        return Err(Refusal {
            reason: Reason::StaleInputRefused,
            message: format!(
                "the arguments changed since run `{run_id}` started (a resume may add only a \
                 pause's resume argument); give the same `--arg` values or start a new run"
            ),
        });
    }
    Ok(())
}

fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}
