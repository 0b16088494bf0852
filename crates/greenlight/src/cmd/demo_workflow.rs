//! `greenlight demo workflow`: a workflow plan on a bundled project, offline and without an API
//! key, through the same runtime as `greenlight workflow run`.
//!
//! The agents are greenlight itself (`greenlight demo-workflow-agent`, through the command
//! family), scripted: the helper step's first answer is wrong, the gate says so, and the redo
//! fixes it; then three operations are written at once, each in its own worktree, and one of
//! them replies "done" without writing its file, which the landed barrier catches; the two that
//! delivered are landed on `main` one at a time, each judged on the merged tree. Everything
//! happens in a temp dir that is removed afterwards (`--keep` keeps it).

use std::path::Path;

use greenlight_store::{Reads, Store};
use greenlight_workflow::run::journal::Entry;
use greenlight_workflow::schedule::{Event, Outcome};

use crate::goal_run::exit;
use crate::workflow_run::RunArgs;

const CALC: &str = include_str!("../../demo/workflow/calc.sh");
const TEST: &str = include_str!("../../demo/workflow/test.sh");
const VERIFY: &str = include_str!("../../demo/workflow/verify.yaml");
const README: &str = include_str!("../../demo/workflow/README.md");
const PLAN: &str = include_str!("../../demo/workflow/plan.yaml");

/// The helper as the scripted agent first writes it: it counts three arguments, not two.
const HELPER_WRONG: &str = "\
# check_args A B: true when A and B are whole numbers.
check_args() { [ $# -eq 3 ]; }
";
/// The helper once the gate's evidence was read.
const HELPER_FIXED: &str = "\
# check_args A B: true when A and B are whole numbers.
check_args() {
  [ $# -eq 2 ] || return 1
  case \"$1$2\" in '' | *[!0-9]*) return 1 ;; esac
}
";

/// Arguments of the hidden `greenlight demo-workflow-agent`.
#[derive(Debug, clap::Args)]
pub struct AgentArgs {
    /// The file holding this dispatch's prompt.
    pub prompt_file: std::path::PathBuf,
}

/// Runs the workflow demo and returns the process exit code.
pub fn run(keep: bool) -> i32 {
    match demo(keep) {
        Ok(code) => code,
        Err(message) => {
            errln!("greenlight demo workflow: {message}");
            exit::ERROR
        }
    }
}

fn demo(keep: bool) -> Result<i32, String> {
    let dir = tempfile::Builder::new()
        .prefix("greenlight-demo-workflow")
        .tempdir()
        .map_err(|e| format!("cannot make a temp dir: {e}"))?;
    let base = dir.path().canonicalize().map_err(|e| e.to_string())?;
    let project = base.join("calc");
    for (name, text) in [
        ("calc.sh", CALC),
        ("test.sh", TEST),
        ("README.md", README),
        (".commandmate/verify.yaml", VERIFY),
    ] {
        let path = project.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("cannot make {name}: {e}"))?;
        }
        std::fs::write(&path, text).map_err(|e| format!("cannot write {name}: {e}"))?;
    }
    // A workflow needs git: members are worktrees and landing moves a branch.
    let made = crate::cmd::demo::git(&project, &["init", "-q", "-b", "main"])
        && crate::cmd::demo::git(&project, &["add", "-A"])
        && crate::cmd::demo::git(
            &project,
            &[
                "commit",
                "-q",
                "-m",
                "calc: the calculator, no operation yet",
            ],
        );
    if !made {
        return Err("cannot make the demo's git repository (is git installed?)".into());
    }
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the greenlight binary: {e}"))?;
    let agent = format!(
        "'{}' demo-workflow-agent {{prompt_file}}",
        exe.display().to_string().replace('\'', "")
    );
    let plan_path = base.join("plan.yaml");
    std::fs::write(&plan_path, PLAN.replace("{agent}", &agent))
        .map_err(|e| format!("cannot write the plan: {e}"))?;
    let state = base.join("state.db");

    outln!(
        "greenlight demo workflow: a plan of 5 steps, scripted agents and one gate (`sh test.sh`) in {}",
        project.display()
    );
    outln!(
        "plan: a helper, gated (its first answer is wrong); three operations written at once in \
         their own worktrees (one claims done without writing); the others landed on main.\n"
    );
    // The runtime starts from the directory it is run in, as `workflow run` does.
    std::env::set_current_dir(&project)
        .map_err(|e| format!("cannot enter {}: {e}", project.display()))?;
    let code = crate::workflow_run::run(RunArgs {
        plan: plan_path,
        run_id: None,
        resume: None,
        args: Vec::new(),
        budget: None,
        max_wall_clock: None,
        budget_extra: None,
        wall_clock_extra: None,
        tokens_extra: None,
        cost_extra: None,
        json: false,
        state: Some(state.clone()),
    });
    // Leave the temp dir before it is removed.
    let _ = std::env::set_current_dir(base.parent().unwrap_or(Path::new("/")));
    outln!();
    tell_the_story(&state)?;
    let log = git_log(&project);
    if !log.is_empty() {
        outln!("\nmain now:\n{log}");
    }
    if keep {
        let kept = dir.keep();
        outln!(
            "\nkept: {} (plan: {}, state database: {})",
            kept.join("calc").display(),
            kept.join("plan.yaml").display(),
            kept.join("state.db").display()
        );
    }
    Ok(code)
}

/// What the run recorded, one line per step that matters, in order.
fn tell_the_story(state: &Path) -> Result<(), String> {
    let store = Store::open(state).map_err(|e| e.to_string())?;
    let runs = store.workflow_runs(1).map_err(|e| e.to_string())?;
    let Some(run) = runs.first() else {
        return Err("the run recorded nothing".into());
    };
    let events = store.workflow_events(run.id).map_err(|e| e.to_string())?;
    outln!("what happened:");
    for event in events {
        let Ok(entry) = serde_json::from_str::<Entry>(&event.event) else {
            continue;
        };
        if let Some(line) = story_line(&entry) {
            outln!("  {line}");
        }
    }
    Ok(())
}

fn unit(step: &str, item: &Option<String>) -> String {
    match item {
        Some(item) => format!("{step}[{item}]"),
        None => step.to_owned(),
    }
}

fn story_line(entry: &Entry) -> Option<String> {
    match entry {
        Entry::Event { event, .. } => match event {
            Event::Dispatched {
                step,
                item,
                attempt,
            } => Some(format!(
                "dispatch  {}{}",
                unit(step, item),
                if *attempt > 1 {
                    format!(" (attempt {attempt})")
                } else {
                    String::new()
                }
            )),
            Event::Settled {
                step,
                item,
                outcome,
            } => Some(match outcome {
                Outcome::Ok => format!("settled   {}: delivered", unit(step, item)),
                Outcome::Failed { reason, .. } => {
                    format!("settled   {}: {reason}", unit(step, item))
                }
            }),
            Event::Judged { step, passed } => Some(format!(
                "gate      {step}: {}",
                if *passed { "PASS" } else { "FAIL" }
            )),
            _ => None,
        },
        Entry::JoinDecided {
            step,
            policy,
            passed,
            passed_items,
            failed_items,
        } => Some(format!(
            "join      {step} ({policy}): {} — passed {}; failed {}",
            if *passed { "met" } else { "not met" },
            list(passed_items),
            list(failed_items)
        )),
        Entry::LandEnded {
            step,
            item,
            summary,
            ..
        } => Some(format!("land      {step}[{item}]: {summary}")),
        _ => None,
    }
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

/// `git log --oneline` of `main`, for the last lines.
fn git_log(project: &Path) -> String {
    greenlight_proc::git::line(project, &["log", "--oneline", "--first-parent", "main"])
        .unwrap_or_default()
}

/// The scripted agent. The helper step: a wrong helper first, the right one once the wrong one
/// is there (the gate's redo). An operation: `add` and `sub` are written; `mul` only says so.
pub fn agent(args: AgentArgs) -> i32 {
    let prompt = std::fs::read_to_string(&args.prompt_file).unwrap_or_default();
    let result = if prompt.trim() == greenlight_agent::PROBE_PROMPT {
        Ok("OK".to_owned())
    } else if prompt.contains("helper:") {
        let wrong = std::fs::read_to_string("ops/common.sh").is_ok_and(|t| t == HELPER_WRONG);
        let (text, message) = if wrong {
            (
                HELPER_FIXED,
                "The test said check_args refused two numbers: it counted three. Fixed.",
            )
        } else {
            (HELPER_WRONG, "Wrote ops/common.sh.")
        };
        write("ops/common.sh", text).map(|()| message.to_owned())
    } else if prompt.contains("op mul:") {
        // Claims done and writes nothing: the landed barrier's case.
        Ok("Done! ops/mul.sh multiplies.".to_owned())
    } else if let Some((op, sign)) = [("add", "+"), ("sub", "-")]
        .into_iter()
        .find(|(op, _)| prompt.contains(&format!("op {op}:")))
    {
        let text = format!("op_{op}() {{ echo $(( $1 {sign} $2 )); }}\n");
        write(&format!("ops/{op}.sh"), &text).map(|()| format!("Wrote ops/{op}.sh."))
    } else {
        Ok("Nothing asked of me.".to_owned())
    };
    match result {
        Ok(message) => {
            outln!("{message}");
            0
        }
        Err(e) => {
            errln!("demo-workflow-agent: {e}");
            1
        }
    }
}

fn write(path: &str, text: &str) -> std::io::Result<()> {
    if let Some(dir) = Path::new(path).parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)
}
