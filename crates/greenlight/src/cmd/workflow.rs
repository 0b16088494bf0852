//! `greenlight workflow check PLAN`: read a workflow plan and report every problem in it, or what
//! it would run; `greenlight workflow run PLAN` runs it (in [`crate::workflow_run`]), and
//! `workflow submit PLAN` queues it for a worker (in [`super::workflow_queue`]).
//!
//! The plan is checked whole, by `greenlight-workflow`; this module only reads the file, prints
//! the result and picks the exit code.

use std::io::Read;
use std::path::{Path, PathBuf};

use greenlight_workflow::plan::{self, Problem};

/// Exit codes of `greenlight workflow check` and `workflow run`.
pub mod exit {
    /// The plan is valid; a run completed.
    pub const VALID: i32 = 0;
    /// A run failed: a step, a join, a gate with no redos left, or a member that did not land.
    pub const FAILED: i32 = 1;
    /// The plan has problems, cannot be read, or an argument or the preflight refused it;
    /// nothing ran.
    pub const PLAN_ERROR: i32 = 2;
    /// A run ended at a gate's `terminal:<label>` route.
    pub const TERMINAL: i32 = 3;
    /// A resume was refused (foreign run, completed run, stale input, model unavailable, an
    /// extension past the cap); nothing ran.
    pub const RESUME_REFUSED: i32 = 4;
    /// The state database or git failed under the run; `--resume` carries on.
    pub const ERROR: i32 = 5;
    /// A run paused (a budget or wall clock spent, a pause step, a pause request); `--resume`
    /// carries on.
    pub const PAUSED: i32 = 75;
}

/// Largest plan file read; a plan is a page of YAML, and anything this large is not one.
const MAX_PLAN_BYTES: u64 = 4 << 20;

/// The `workflow` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Check a plan: every problem with its file:line:column (exit 2), or a summary of the
    /// steps, fan-outs and worst-case dispatch units (exit 0). Nothing runs.
    Check {
        /// The plan file (YAML).
        #[arg(value_name = "PLAN.yaml")]
        plan: PathBuf,
        /// One JSON object on stdout instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Run a plan: every step in its own linked worktree, recorded as it goes; or resume a
    /// paused or killed run (exit 0 completed, 1 failed, 2 plan or input error, 3 terminal,
    /// 4 resume refused, 5 state or git error, 75 paused).
    Run(crate::workflow_run::RunArgs),
    /// Put a run of a plan on the store's queue, for whichever `goal worker` is free: the plan
    /// and its arguments are checked now (exit 2 names the fault, nothing queued); a worker
    /// runs it in a clone of the repository at the base, and another resumes it if it dies.
    Submit(Box<super::workflow_queue::SubmitArgs>),
    /// Show a workflow run: its status, budget and spend, each step and member reached, and the
    /// worktrees kept for a person.
    Status(super::workflow_view::RunArgs),
    /// Show a workflow run's recorded events and its dispatch ledger.
    Log(super::workflow_view::RunArgs),
    /// List the workflow runs in the state database, newest first.
    List(super::workflow_view::ListArgs),
    /// Ask a running workflow run to pause at its next boundary (it is recorded; the process
    /// driving the run pauses there).
    Pause(super::workflow_view::PauseArgs),
}

/// Runs a `workflow` subcommand and returns its exit code.
pub fn run(command: Command) -> i32 {
    match command {
        Command::Check { plan, json } => check(&plan, json),
        Command::Run(args) => crate::workflow_run::run(args),
        Command::Submit(args) => super::workflow_queue::submit(*args),
        Command::Status(args) => super::workflow_view::status(&args),
        Command::Log(args) => super::workflow_view::log(&args),
        Command::List(args) => super::workflow_view::list(&args),
        Command::Pause(args) => super::workflow_view::pause(&args),
    }
}

fn check(path: &Path, json: bool) -> i32 {
    let shown = path.display().to_string();
    let text = match read_plan(path) {
        Ok(text) => text,
        Err(why) => {
            if json {
                let doc = serde_json::json!({ "plan": shown, "valid": false, "error": why });
                outln!("{doc}");
            } else {
                errln!("greenlight: cannot read the plan {shown}: {why}");
            }
            return exit::PLAN_ERROR;
        }
    };
    match plan::check(&text) {
        Ok(checked) => {
            let summary = plan::summary(&checked);
            let digest = plan::digest(&checked);
            if json {
                let doc = serde_json::json!({
                    "plan": shown,
                    "valid": true,
                    "name": checked.name,
                    "digest": digest,
                    "summary": summary,
                });
                outln!("{doc}");
            } else {
                outln!(
                    "PLAN {} valid: {} {}, {} {} ({} {}), worst case {} dispatch {}",
                    checked.name,
                    summary.steps,
                    plural(summary.steps as u64, "step", "steps"),
                    summary.fanouts,
                    plural(summary.fanouts as u64, "fan-out", "fan-outs"),
                    summary.members,
                    plural(summary.members, "member", "members"),
                    summary.worst_case_dispatches,
                    plural(summary.worst_case_dispatches, "unit", "units"),
                );
                outln!("digest {digest}");
            }
            exit::VALID
        }
        Err(problems) => {
            if json {
                let list: Vec<_> = problems
                    .iter()
                    .map(|p| {
                        serde_json::json!({
                            "line": p.at.line,
                            "column": p.at.column,
                            "message": p.message,
                        })
                    })
                    .collect();
                let doc = serde_json::json!({ "plan": shown, "valid": false, "problems": list });
                outln!("{doc}");
            } else {
                for Problem { at, message } in &problems {
                    errln!("{shown}:{}:{}: {message}", at.line, at.column);
                }
                errln!(
                    "greenlight: {} {} in {shown}; nothing was run",
                    problems.len(),
                    plural(problems.len() as u64, "problem", "problems")
                );
            }
            exit::PLAN_ERROR
        }
    }
}

fn plural(n: u64, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}

/// The plan's text and the plan checked from it, for a command that acts on it (`run`,
/// `submit`): every problem printed at its file:line:column, and `Err` says how many and that
/// nothing was `done` (run, queued).
pub fn read_checked(path: &Path, done: &str) -> Result<(String, plan::Plan), String> {
    let shown = path.display();
    let text = read_plan(path).map_err(|why| format!("cannot read the plan {shown}: {why}"))?;
    match plan::check(&text) {
        Ok(checked) => Ok((text, checked)),
        Err(problems) => {
            for p in &problems {
                errln!("{shown}:{}:{}: {}", p.at.line, p.at.column, p.message);
            }
            Err(format!(
                "{} problem(s) in {shown}; nothing was {done}",
                problems.len()
            ))
        }
    }
}

/// The plan's text: a regular file of UTF-8, at most [`MAX_PLAN_BYTES`].
pub fn read_plan(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("it is not a regular file; name the plan's YAML file".into());
    }
    let mut bytes = Vec::new();
    file.take(MAX_PLAN_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_PLAN_BYTES {
        return Err(format!(
            "it is larger than {} MiB; a plan is a page of YAML",
            MAX_PLAN_BYTES >> 20
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "byte {} is not UTF-8; save the plan as UTF-8",
            e.utf8_error().valid_up_to()
        )
    })
}
