//! The workflow tools: `workflow_status` and `workflow_list` answer what `greenlight workflow
//! status --json` and `workflow list --json` print, from the same state database.
//!
//! What they show is decided by `greenlight_run::workflow_control`; this module turns its
//! answers into the tools' documents.

use std::path::Path;

pub use greenlight_run::workflow_control::WorkflowReport;
use greenlight_run::workflow_control::{self, LIST_DEFAULT};
use greenlight_store::{Store, WorkflowRun, WorkflowRunId};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Arguments of `workflow_status`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkflowStatusArgs {
    /// The workflow run's id (as `workflow_list` or `greenlight workflow list` shows it).
    pub id: i64,
}

/// Arguments of `workflow_list`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkflowListArgs {
    /// At most this many runs, newest first (default and largest: 50).
    #[serde(default)]
    pub limit: Option<u32>,
}

/// What `workflow_list` answers.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WorkflowList {
    /// The runs, newest first.
    pub runs: Vec<WorkflowRun>,
}

/// A workflow tool's failure: the message says what to do.
pub type Failure = String;

fn open(state: &Path) -> Result<Option<Store>, Failure> {
    if !state.exists() {
        return Ok(None);
    }
    Store::open(state).map(Some).map_err(|e| e.to_string())
}

/// `workflow_status`.
pub fn status(state: &Path, args: &WorkflowStatusArgs) -> Result<WorkflowReport, Failure> {
    let Some(mut store) = open(state)? else {
        return Err(format!(
            "{}: no state database yet, so no workflow run {}",
            state.display(),
            args.id
        ));
    };
    workflow_control::status(&mut store, WorkflowRunId(args.id)).map_err(|e| e.to_string())
}

/// `workflow_list`.
pub fn list(state: &Path, args: &WorkflowListArgs) -> Result<WorkflowList, Failure> {
    let Some(mut store) = open(state)? else {
        return Ok(WorkflowList { runs: Vec::new() });
    };
    let max = args
        .limit
        .map_or(LIST_DEFAULT, |n| (n as usize).clamp(1, LIST_DEFAULT));
    let runs = workflow_control::list(&mut store, max).map_err(|e| e.to_string())?;
    Ok(WorkflowList { runs })
}
