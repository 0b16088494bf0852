//! `greenlight workflow submit PLAN`: a workflow run put on the store's queue, checked first so a
//! bad plan or argument is refused now, at its file:line:column, not on a worker later; and the
//! worker's side of such an item: the run started, or resumed, in the item's worktree.
//!
//! The item carries the plan's text, not its path: every worker runs the plan that was checked
//! at submit, and a resume is judged against that same text (the plan digest the run recorded).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use greenlight_goal::drive::DriveOptions;
use greenlight_proc::InterruptWatch;
use greenlight_store::greenlight_types::WorkflowStatus;
use greenlight_store::{QueueItem, QueueKind, Reads, Store, WorkflowRun};
use greenlight_workflow::plan;
use greenlight_workflow::run::gate_step::GateSettings;
use greenlight_workflow::run::store_journal::StoreJournal;
use greenlight_workflow::run::{self, Ended, Error, Launch, Settings, preflight};
use serde::{Deserialize, Serialize};

use super::goal_queue::{Failed, NotQueued, QueuePlace, Ran, queue_item};
use super::workflow::exit;
use crate::agents::EveryFamily;
use crate::duration::parse_duration;
use crate::workflow_run::{PlanAgents, parse_arg};

/// `workflow submit`'s arguments.
#[derive(Debug, clap::Args)]
pub struct SubmitArgs {
    /// The plan file (YAML); its text goes on the queue.
    #[arg(value_name = "PLAN.yaml")]
    pub plan: PathBuf,
    /// An argument of the plan, NAME=VALUE (repeatable).
    #[arg(long = "arg", value_name = "NAME=VALUE", value_parser = parse_arg)]
    pub args: Vec<(String, String)>,
    /// Dispatch units the run may use [default: the plan's budget.dispatches, else its worst case].
    #[arg(long, value_name = "N")]
    pub budget: Option<u64>,
    /// Wall-clock time the run may take [default: the plan's budget.wallClockSec; none].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub max_wall_clock: Option<Duration>,
    #[command(flatten)]
    pub place: QueuePlace,
    /// The state database: a file, or a postgres:// URL [default: $GREENLIGHT_STORE, else $GREENLIGHT_STATE, else $XDG_STATE_HOME/greenlight/state.db].
    #[arg(long, visible_alias = "store", value_name = "PATH|URL")]
    pub state: Option<PathBuf>,
}

/// The run request a queue item carries: `workflow run`'s arguments, with the plan's text.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct QueuedWorkflow {
    /// The plan file as given at submit (recorded with the run, for a person).
    plan_path: String,
    /// The plan's text, as checked at submit.
    plan_text: String,
    args: BTreeMap<String, String>,
    budget: Option<u64>,
    max_wall_clock_ms: Option<u64>,
}

/// Runs `workflow submit` and returns its exit code: 0 queued, 2 the plan or an argument was
/// refused (nothing queued), 5 the store failed.
pub fn submit(args: SubmitArgs) -> i32 {
    match queue(args) {
        Ok(line) => {
            outln!("{line}");
            exit::VALID
        }
        Err((code, why)) => {
            errln!("greenlight: {why}");
            code
        }
    }
}

fn queue(args: SubmitArgs) -> Result<String, (i32, String)> {
    let refused = |why: String| (exit::PLAN_ERROR, why);
    let (text, checked) = super::workflow::read_checked(&args.plan, "queued").map_err(refused)?;
    let given: BTreeMap<String, String> = args.args.into_iter().collect();
    preflight::arguments(&checked, &given)
        .map_err(|why| refused(format!("{why}; nothing was queued")))?;
    let spec = QueuedWorkflow {
        plan_path: args.plan.display().to_string(),
        plan_text: text,
        args: given,
        budget: args.budget,
        max_wall_clock_ms: args
            .max_wall_clock
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    };
    let spec_json = serde_json::to_string(&spec).map_err(|e| (exit::ERROR, e.to_string()))?;
    let env = crate::environment::get();
    let state = env
        .state_path(args.state.as_deref())
        .map_err(|e| refused(e.to_string()))?;
    let mut store = Store::open(&state).map_err(|e| (exit::ERROR, e.to_string()))?;
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let queued =
        queue_item(&mut store, &cwd, QueueKind::Workflow, args.place, spec_json).map_err(|e| {
            match e {
                NotQueued::Usage(why) => refused(why),
                NotQueued::Store(why) => (exit::ERROR, why),
            }
        })?;
    Ok(format!(
        "greenlight: queued workflow item {} `{}` ({} at {})",
        queued.id, checked.name, queued.repository, queued.base
    ))
}

/// Runs `item`'s workflow in `worktree` until it ends, pauses or is stopped by `stop`: a new
/// run, or the run the item's last holder started, resumed by the usual rules.
pub(super) async fn run_item(
    store: &mut Store,
    item: &QueueItem,
    worktree: &Path,
    options: &DriveOptions,
    stop: InterruptWatch,
    families: &EveryFamily,
) -> Result<Ran, Failed> {
    let spec: QueuedWorkflow = serde_json::from_str(&item.spec_json)
        .map_err(|e| format!("its request is not one this greenlight reads: {e}"))?;
    let checked = plan::check(&spec.plan_text).map_err(|problems| {
        let first = problems
            .first()
            .map(|p| format!("{}:{}: {}", p.at.line, p.at.column, p.message))
            .unwrap_or_default();
        format!(
            "its plan {} does not check with this greenlight ({} problem(s); first at {first})",
            spec.plan_path,
            problems.len()
        )
    })?;
    if let Some(id) = item.workflow_run {
        let recorded = store
            .workflow_run(id)?
            .ok_or_else(|| format!("its workflow run {id} is not in the store"))?;
        if recorded.status.is_ended() {
            // The last holder finished the run but died before ending the item.
            return Ok(Ran {
                outcome: outcome_of(&recorded),
                subject: format!("workflow run {id}, already over"),
            });
        }
    }
    let repository = run::worktrees::common_dir(worktree).map_err(|e| e.to_string())?;
    let settings = Settings {
        gates: GateSettings {
            kill_grace: options.kill_grace,
            lock_root: options.lock_root.clone(),
            env: options.env.clone(),
            cache: options.cache.clone(),
            remote: options.remote.clone(),
        },
        agent_timeout: options.agent_timeout,
    };
    let launch = Launch {
        plan_path: spec.plan_path,
        plan: checked,
        start_dir: worktree.to_path_buf(),
        run_id: None,
        resume: item.workflow_run.map(|id| id.to_string()),
        args: spec.args,
        // Read for a new run only; a resume keeps what the run recorded.
        budget: spec.budget,
        max_wall_clock: spec.max_wall_clock_ms.map(Duration::from_millis),
        budget_extra: None,
        wall_clock_extra: None,
        tokens_extra: None,
        cost_extra_usd: None,
    };
    let agents = PlanAgents { families };
    let report = {
        let mut journal = StoreJournal::new(store, repository).for_queue_item(item.id);
        run::run(launch, &settings, &agents, &mut journal, stop).await
    };
    let report = match report {
        Ok(report) => report,
        Err(Error::Refused(refusal)) => {
            return Err(format!(
                "its run was refused ({}): {}",
                refusal.reason.as_str(),
                refusal.message
            )
            .into());
        }
        // A write refused because another worker took the item (this one stalled past its
        // lease) before the renewal noticed: the run is that worker's, nothing is ended here.
        Err(Error::Journal(e)) if e.lease_lost => return Err(Failed::LeaseLost),
        Err(e) => return Err(e.to_string().into()),
    };
    let subject = format!("workflow run {}", report.run);
    if let Ended::Interrupted(_) = report.ended {
        // Stopped by the worker's signal (or its lost lease, which the caller tells apart):
        // the run is resumable; the next holder resumes it.
        return Ok(Ran {
            outcome: None,
            subject,
        });
    }
    let id = report
        .run
        .parse::<i64>()
        .map(greenlight_store::WorkflowRunId)
        .map_err(|_| format!("the run id `{}` is not a number", report.run))?;
    let recorded = store
        .workflow_run(id)?
        .ok_or_else(|| format!("its workflow run {id} is not in the store"))?;
    Ok(Ran {
        outcome: outcome_of(&recorded),
        subject,
    })
}

/// The item's outcome for a run as recorded: `done`, `failed:<reason>`, `terminal:<label>` or
/// `paused:<reason>`; `None` while the run can still go on (running, interrupted).
fn outcome_of(run: &WorkflowRun) -> Option<String> {
    let detail = |pick: fn(&greenlight_store::WorkflowDetail) -> Option<&str>| {
        run.detail.as_ref().and_then(pick).unwrap_or("unknown")
    };
    match run.status {
        WorkflowStatus::Completed => Some("done".into()),
        WorkflowStatus::Failed => Some(format!("failed:{}", detail(|d| Some(&d.reason)))),
        WorkflowStatus::Terminal => Some(format!("terminal:{}", detail(|d| d.label.as_deref()))),
        WorkflowStatus::Paused => Some(format!("paused:{}", detail(|d| Some(&d.reason)))),
        WorkflowStatus::Running | WorkflowStatus::Interrupted => None,
    }
}
