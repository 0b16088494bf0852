//! `greenlight workflow status|log|list|pause`: what the state database holds about workflow
//! runs, and a pause asked of a running one.
//!
//! What a view shows and whether a pause may be asked are decided by
//! `greenlight_run::workflow_control`; this module renders its answers and picks the exit code.

use std::path::{Path, PathBuf};

use greenlight_run::workflow_control::{self, PauseAsked, WorkflowReport};
use greenlight_store::{Store, WorkflowDispatch, WorkflowRun, WorkflowRunId};

/// Exit codes of the workflow views.
pub mod exit {
    /// Shown, or asked.
    pub const DONE: i32 = 0;
    /// The state database failed.
    pub const ERROR: i32 = 1;
    /// No such run, or a pause asked of a run that has ended.
    pub const USAGE: i32 = 2;
}

/// The view subcommands' arguments that name a run.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The workflow run's id (as `greenlight workflow list` shows it).
    #[arg(value_name = "ID")]
    pub id: i64,
    /// One JSON document on stdout instead of lines.
    #[arg(long)]
    pub json: bool,
    /// The state database: a file, or a postgres:// URL [default: $GREENLIGHT_STORE, else $GREENLIGHT_STATE, else $XDG_STATE_HOME/greenlight/state.db].
    #[arg(long, visible_alias = "store", value_name = "PATH|URL")]
    pub state: Option<PathBuf>,
}

/// `workflow list`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// One JSON array on stdout instead of lines.
    #[arg(long)]
    pub json: bool,
    /// The state database: a file, or a postgres:// URL [default: $GREENLIGHT_STORE, else $GREENLIGHT_STATE, else $XDG_STATE_HOME/greenlight/state.db].
    #[arg(long, visible_alias = "store", value_name = "PATH|URL")]
    pub state: Option<PathBuf>,
}

/// `workflow pause`'s arguments.
#[derive(Debug, clap::Args)]
pub struct PauseArgs {
    /// The workflow run's id.
    #[arg(value_name = "ID")]
    pub id: i64,
    /// The state database: a file, or a postgres:// URL [default: $GREENLIGHT_STORE, else $GREENLIGHT_STATE, else $XDG_STATE_HOME/greenlight/state.db].
    #[arg(long, visible_alias = "store", value_name = "PATH|URL")]
    pub state: Option<PathBuf>,
}

type CliResult = Result<i32, (i32, String)>;

fn finish(result: CliResult) -> i32 {
    result.unwrap_or_else(|(code, message)| {
        errln!("greenlight: {message}");
        code
    })
}

fn open(state: Option<&Path>) -> Result<Store, (i32, String)> {
    let path = crate::environment::get()
        .state_path(state)
        .map_err(|e| (exit::ERROR, e.to_string()))?;
    Store::open(&path).map_err(|e| (exit::ERROR, e.to_string()))
}

fn control_err(e: workflow_control::Error) -> (i32, String) {
    match e {
        workflow_control::Error::Store(e) => (exit::ERROR, e.to_string()),
        other => (exit::USAGE, other.to_string()),
    }
}

fn json<T: serde::Serialize>(value: &T) -> CliResult {
    let text = serde_json::to_string_pretty(value).map_err(|e| (exit::ERROR, e.to_string()))?;
    outln!("{text}");
    Ok(exit::DONE)
}

/// A figure the agent may not have reported: `-` when unknown, never 0.
fn figure(v: Option<u64>) -> String {
    v.map_or_else(|| "-".into(), |n| n.to_string())
}

fn cost(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |c| format!("${c:.4}"))
}

fn item(item: Option<&str>) -> String {
    item.map(|i| format!(" [{i}]")).unwrap_or_default()
}

/// `units spent/total`, `units spent (no limit)` when unlimited.
fn units(run: &WorkflowRun) -> String {
    match run.units_total() {
        Some(total) => format!("{}/{total}", run.spent.units),
        None => format!("{} (no limit)", run.spent.units),
    }
}

/// `greenlight workflow status ID`.
pub fn status(args: &RunArgs) -> i32 {
    finish((|| {
        let mut store = open(args.state.as_deref())?;
        let report =
            workflow_control::status(&mut store, WorkflowRunId(args.id)).map_err(control_err)?;
        if args.json {
            return json(&report);
        }
        render_status(&report);
        Ok(exit::DONE)
    })())
}

fn render_status(report: &WorkflowReport) {
    let run = &report.run;
    outln!(
        "workflow {} {} [{}] in {}",
        run.id,
        run.name,
        run.status,
        run.worktree.display()
    );
    outln!(
        "  plan {} digest {} base {}",
        run.plan_path.display(),
        run.plan_digest,
        run.base_commit
    );
    let extended = if run.extensions > 0 {
        format!(
            " ({} extension{}, +{})",
            run.extensions,
            if run.extensions == 1 { "" } else { "s" },
            run.extension_units
        )
    } else {
        String::new()
    };
    outln!(
        "  dispatch units {}{extended}; tokens in {} out {}; cost {}",
        units(run),
        figure(run.spent.tokens_in),
        figure(run.spent.tokens_out),
        cost(run.spent.cost_usd)
    );
    if let Some(detail) = &run.detail {
        let at = detail
            .step
            .as_deref()
            .map(|s| format!(" at {s}"))
            .unwrap_or_default();
        let label = detail
            .label
            .as_deref()
            .map(|l| format!(" ({l})"))
            .unwrap_or_default();
        let message = detail
            .message
            .as_deref()
            .map(|m| format!(" — {m}"))
            .unwrap_or_default();
        outln!("  {}: {}{at}{label}{message}", run.status, detail.reason);
    }
    if run.pause_requested_at.is_some() {
        outln!("  pause requested: it pauses at its next boundary");
    }
    for step in &report.steps {
        let reason = step
            .reason
            .as_deref()
            .map(|r| format!(" {r}"))
            .unwrap_or_default();
        outln!(
            "  step {}{} {}{reason} (attempt {})",
            step.step,
            item(step.item.as_deref()),
            step.outcome,
            step.attempts
        );
    }
    for member in workflow_control::kept(report) {
        outln!(
            "  kept worktree {} (branch {}): {}",
            member.worktree.display(),
            member.branch,
            member.why_kept.as_deref().unwrap_or("")
        );
    }
}

/// `greenlight workflow log ID`.
pub fn log(args: &RunArgs) -> i32 {
    finish((|| {
        let mut store = open(args.state.as_deref())?;
        let log = workflow_control::log(&mut store, WorkflowRunId(args.id)).map_err(control_err)?;
        if args.json {
            return json(&log);
        }
        for event in &log.events {
            outln!("event {} {}", event.seq, event.event);
        }
        for d in &log.dispatches {
            outln!("{}", ledger_line(d));
        }
        Ok(exit::DONE)
    })())
}

fn ledger_line(d: &WorkflowDispatch) -> String {
    let reason = d
        .reason
        .as_deref()
        .map(|r| format!(" reason={r}"))
        .unwrap_or_default();
    format!(
        "dispatch {}{} attempt {} {} {} {}{reason} wall_ms={} tokens_in={} tokens_out={} cost={}",
        d.step,
        item(d.item.as_deref()),
        d.attempt,
        d.family,
        d.model.as_deref().unwrap_or("-"),
        d.outcome,
        figure(d.wall_ms),
        figure(d.tokens_in),
        figure(d.tokens_out),
        cost(d.cost_usd)
    )
}

/// `greenlight workflow list`.
pub fn list(args: &ListArgs) -> i32 {
    finish((|| {
        let mut store = open(args.state.as_deref())?;
        let runs = workflow_control::list(&mut store, workflow_control::LIST_DEFAULT)
            .map_err(control_err)?;
        if args.json {
            return json(&runs);
        }
        if runs.is_empty() {
            outln!("no workflow runs in {}", store.path().display());
        }
        for run in &runs {
            outln!(
                "{} {} [{}] units {} in {}",
                run.id,
                run.name,
                run.status,
                units(run),
                run.worktree.display()
            );
        }
        Ok(exit::DONE)
    })())
}

/// `greenlight workflow pause ID`.
pub fn pause(args: &PauseArgs) -> i32 {
    finish((|| {
        let mut store = open(args.state.as_deref())?;
        let id = WorkflowRunId(args.id);
        match workflow_control::pause(&mut store, id).map_err(control_err)? {
            PauseAsked::Requested => {
                outln!("greenlight: workflow run {id} pauses at its next boundary");
            }
            PauseAsked::AlreadyRequested => outln!(
                "greenlight: workflow run {id} was already asked to pause; it pauses at its next \
                 boundary"
            ),
            PauseAsked::AlreadyStopped(status) => outln!(
                "greenlight: workflow run {id} is already {status}; `greenlight workflow run PLAN \
                 --resume {id}` carries on"
            ),
            PauseAsked::Ended(status) => {
                return Err((
                    exit::USAGE,
                    format!("workflow run {id} is {status}: it has ended, so it cannot pause"),
                ));
            }
        }
        Ok(exit::DONE)
    })())
}
