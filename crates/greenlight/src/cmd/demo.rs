//! `greenlight demo`: the goal loop on a bundled project, offline and without an API key.
//!
//! The agent is greenlight itself (`greenlight demo-agent`, through the command family): on its
//! first turn it claims success without fixing anything; the gate says otherwise, and on the
//! second turn it reads the evidence and fixes the bug. Everything happens in a temp dir that is
//! removed afterwards.

use std::path::Path;
use std::time::Duration;

use greenlight_store::{AgentSpec, Family, NewGoal, Store};

use crate::agents::EveryFamily;
use crate::goal_run::{LoopArgs, drive, exit, render_progress};

const CALC: &str = include_str!("../../demo/calc.sh");
const TEST: &str = include_str!("../../demo/test.sh");
const README: &str = include_str!("../../demo/README.md");

/// Arguments of `greenlight demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which demo: the goal loop (the default), or `workflow`: a plan fanned out across
    /// worktrees, gated, and landed.
    #[arg(value_enum)]
    pub which: Option<Which>,
    /// Keep the demo project and its state database, and print where they are.
    #[arg(long)]
    pub keep: bool,
}

/// The demos.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Which {
    /// A workflow plan: three members fanned out, a gate redo, the landed barrier, landing.
    Workflow,
}

/// Arguments of the hidden `greenlight demo-agent`.
#[derive(Debug, clap::Args)]
pub struct AgentArgs {
    /// The file holding this turn's prompt.
    pub prompt_file: std::path::PathBuf,
}

/// A quiet git call with the demo's own identity (a machine without one still runs the demo).
pub(crate) fn git(dir: &Path, args: &[&str]) -> bool {
    greenlight_proc::git::command(dir)
        .args([
            "-c",
            "user.name=greenlight demo",
            "-c",
            "user.email=demo@greenlight.invalid",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs the demo and returns the process exit code.
pub fn run(args: Args) -> i32 {
    if args.which == Some(Which::Workflow) {
        return crate::cmd::demo_workflow::run(args.keep);
    }
    match demo(&args) {
        Ok(code) => code,
        Err(message) => {
            errln!("greenlight demo: {message}");
            exit::ERROR
        }
    }
}

fn demo(args: &Args) -> Result<i32, String> {
    let dir = tempfile::Builder::new()
        .prefix("greenlight-demo")
        .tempdir()
        .map_err(|e| format!("cannot make a temp dir: {e}"))?;
    let project = dir.path().join("calc");
    std::fs::create_dir_all(&project).map_err(|e| e.to_string())?;
    for (name, text) in [("calc.sh", CALC), ("test.sh", TEST), ("README.md", README)] {
        std::fs::write(project.join(name), text)
            .map_err(|e| format!("cannot write {name}: {e}"))?;
    }
    // A git repository lets the loop key gate results by content; without git it still works.
    let _ = git(&project, &["init", "-q"])
        && git(&project, &["add", "-A"])
        && git(&project, &["commit", "-q", "-m", "demo"]);

    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the greenlight binary: {e}"))?;
    let mut store = Store::open(&dir.path().join("state.db")).map_err(|e| e.to_string())?;
    let goal = NewGoal {
        worktree: project.canonicalize().unwrap_or(project.clone()),
        text: "Make `sh test.sh` pass: the calculator's add() is wrong.".into(),
        agent: AgentSpec {
            family: Family::Command,
            model: Some("demo".into()),
            argv_template: Some(vec![
                exe.display().to_string(),
                "demo-agent".into(),
                "{prompt_file}".into(),
            ]),
            endpoint: None,
        },
        judge: None,
        max_turns: 5,
        retries: 3,
        gate_timeout_sec: 60,
        gates: vec!["sh test.sh".into()],
    };
    let id = store
        .write(|tx| tx.create_goal(&goal))
        .map_err(|e| e.to_string())?;
    outln!(
        "greenlight demo: a goal, a scripted agent, and one gate (`sh test.sh`) in {}",
        project.display()
    );
    outln!("goal: {}\n", goal.text);
    let loop_args = LoopArgs {
        agent_timeout: Duration::from_secs(60),
    };
    let code = drive(
        &mut store,
        id,
        &loop_args,
        &EveryFamily::from_process_env(),
        None,
        false,
        &mut render_progress,
    )
    .map_err(|(_, m)| m)?;
    if args.keep {
        let kept = dir.keep();
        outln!(
            "\nkept: {} (state database: {})",
            kept.join("calc").display(),
            kept.join("state.db").display()
        );
    }
    Ok(code)
}

/// The scripted agent: claims success on its first turn, fixes the bug once it sees evidence.
pub fn agent(args: AgentArgs) -> i32 {
    let prompt = std::fs::read_to_string(&args.prompt_file).unwrap_or_default();
    let result = if prompt.contains("The last check failed") {
        std::fs::read_to_string("calc.sh")
            .and_then(|text| {
                std::fs::write("calc.sh", text.replace("$(( $1 - $2 ))", "$(( $1 + $2 ))"))
            })
            .map(|()| "The evidence shows add() subtracting: fixed it to add.")
    } else {
        std::fs::write("NOTES.md", "Reviewed calc.sh.\n")
            .map(|()| "Done! The calculator works now.")
    };
    match result {
        Ok(message) => {
            outln!("{message}");
            0
        }
        Err(e) => {
            errln!("demo-agent: {e}");
            1
        }
    }
}
