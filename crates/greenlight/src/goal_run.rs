//! Running a goal in the foreground, shared by `greenlight goal run|resume` and `greenlight
//! demo`: the async runtime, the subreaper and the signals, `greenlight_goal::drive`, and the
//! rendering of its progress and outcome.

use std::path::Path;
use std::time::Duration;

use greenlight_goal::preflight::Refusal;
use greenlight_goal::{DriveOptions, Finish, Progress, Started};
use greenlight_proc::Interrupt;
use greenlight_store::{AgentSpec, GoalId, GoalState, Store};

use crate::agents::EveryFamily;
use crate::colour::Stream;
use crate::duration::parse_duration;

/// Exit codes of `greenlight goal` (and `greenlight demo`).
pub mod exit {
    /// Done: every gate passed (and the judge agreed).
    pub const DONE: i32 = 0;
    /// Something went wrong outside the goal (state database, agent setup).
    pub const ERROR: i32 = 1;
    /// Usage: bad arguments, no goal, a goal already live.
    pub const USAGE: i32 = 2;
    /// The goal paused; its reason says what to do (`greenlight goal status`).
    pub const PAUSED: i32 = 75;
}

/// An exit code, or an exit code and the message to print before it.
pub type CliResult = Result<i32, (i32, String)>;

/// Knobs of a running loop.
#[derive(Debug, Clone, clap::Args)]
pub struct LoopArgs {
    /// How long one agent turn may run.
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = parse_duration)]
    pub agent_timeout: Duration,
}

/// How a failure of the loop's machinery exits.
fn loop_error(e: greenlight_goal::Error) -> (i32, String) {
    use greenlight_goal::Error as E;
    let code = match &e {
        E::AlreadyRunning { .. } => exit::USAGE,
        E::Store(greenlight_store::Error::InvalidTransition { .. }) => exit::USAGE,
        _ => exit::ERROR,
    };
    (code, e.to_string())
}

/// Checks an agent before a goal is given it (found on `PATH`, its model probed): the model id
/// that answered. Refused, the exit code and message to end with, naming the agent as the user
/// gave it (`given`) and what was therefore not done (`kept`: "no goal was created"); an
/// interrupted probe exits as its signal asks.
pub fn check_agent(
    spec: &AgentSpec,
    given: &str,
    worktree: &Path,
    families: &EveryFamily,
    kept: &str,
) -> Result<Option<String>, (i32, String)> {
    let search_path = crate::environment::get()
        .vars
        .var("PATH")
        .unwrap_or_default();
    let family = spec.family;
    let checked = greenlight_proc::run_main(|mut signals| async move {
        greenlight_goal::preflight::check_new_agent(
            spec,
            worktree,
            &search_path,
            families,
            &mut signals,
        )
        .await
    })
    .unwrap_or_else(|e| {
        Err(Refusal::Unfit(format!(
            "cannot start the async runtime or its signal handlers: {e}"
        )))
    });
    checked.map_err(|refusal| match refusal {
        Refusal::Unfit(why) => (
            exit::ERROR,
            format!(
                "--agent {given}: {why}; {kept}. Fix that, or choose another agent: {}",
                greenlight_goal::preflight::OTHER_AGENTS
            ),
        ),
        Refusal::Interrupted { signal, model } => (
            signal.exit_code(),
            format!(
                "interrupted by {} while probing the {family} agent's model `{model}`; {kept}",
                signal.name()
            ),
        ),
    })
}

/// Runs the loop for `goal` in the foreground, with Ctrl-C / SIGTERM pausing it cleanly.
/// `announce` is printed once the run holds the goal (a refused run prints nothing); the agent's
/// dispatcher is built by `families`; `agent_checked`: [`check_agent`] has just probed the
/// goal's agent, so the run does not probe it again.
pub fn drive(
    store: &mut Store,
    goal: GoalId,
    loop_args: &LoopArgs,
    families: &EveryFamily,
    announce: Option<&str>,
    agent_checked: bool,
    on_progress: &mut dyn FnMut(Progress<'_>),
) -> CliResult {
    // Everything the loop takes from the environment, read here once.
    let env = crate::environment::get();
    let options = DriveOptions {
        agent_timeout: loop_args.agent_timeout,
        kill_grace: env.kill_grace,
        remote: Some(crate::remote::settings()),
        agent_search_path: env.vars.var("PATH").unwrap_or_default(),
        lock_root: env.lock_root.clone(),
        env: env.vars.clone(),
        cache: greenlight_run::cache_place::cache_settings(Some(store.path()), env),
        agent_checked,
    };
    let ran = greenlight_proc::run_main(|signals| async move {
        // A closed stdout (`| head`) ends the run as SIGTERM does: the goal paused, the agent's
        // processes ended.
        let mut interrupt = crate::out::interrupt_with_closed_stdout(signals);
        let mut on_started = |started: Started<'_>| match started {
            Started::Running => {
                if let Some(announce) = announce {
                    outln!("{announce}");
                }
            }
            Started::LeftoversEnded(leftovers) => {
                outln!(
                    "greenlight: ended {} process(es) an earlier run of goal {goal} left running:",
                    leftovers.len()
                );
                for p in leftovers {
                    outln!("  pid {} {}", p.pid, p.command);
                }
            }
            Started::OrphanedGatesEnded(orphans) => {
                if let Some(note) = greenlight_gate::render::orphans_note(orphans) {
                    errln!("{}", note.trim_end());
                }
            }
        };
        let driven = greenlight_goal::drive(
            store,
            goal,
            &options,
            families,
            &mut interrupt,
            &mut on_started,
            on_progress,
        )
        .await
        .map_err(loop_error)?;
        Ok(match driven.finish {
            Finish::Done => {
                outln!("greenlight: goal {goal} done: every gate is green");
                exit::DONE
            }
            Finish::Paused { reason, detail } => {
                outln!(
                    "greenlight: goal {goal} paused ({}): {detail}",
                    reason.as_str()
                );
                match *interrupt.borrow() {
                    Some(signal @ (Interrupt::Int | Interrupt::Term))
                        if reason == greenlight_agent::Reason::PausedByUser =>
                    {
                        signal.exit_code()
                    }
                    _ => exit::PAUSED,
                }
            }
            Finish::NotActive(state) => {
                let why = driven
                    .pause
                    .map(|(reason, detail)| format!(" ({reason}): {detail}"))
                    .unwrap_or_default();
                outln!("greenlight: goal {goal} is {state}{why}; this run stops here");
                if state == GoalState::Done {
                    exit::DONE
                } else {
                    exit::PAUSED
                }
            }
        })
    });
    ran.unwrap_or_else(|e| {
        Err((
            exit::ERROR,
            format!("cannot start the async runtime or its signal handlers: {e}"),
        ))
    })
}

/// The agent's reply under its turn: every line of it indented to where the first one starts,
/// so a reply of several lines reads as one block under `── turn N`.
fn agent_says(text: &str) -> String {
    const LEAD: &str = "   agent says: ";
    let indent = " ".repeat(LEAD.len());
    let mut block = String::from(LEAD);
    for (i, line) in text.trim().lines().enumerate() {
        if i > 0 {
            block.push('\n');
            if !line.trim().is_empty() {
                block.push_str(&indent);
            }
        }
        block.push_str(line.trim_end());
    }
    block
}

/// Renders loop progress for a person at a terminal.
pub fn render_progress(progress: Progress<'_>) {
    match progress {
        Progress::TurnStarted { turn, .. } => outln!("── turn {turn}: agent working"),
        Progress::GatesFirst { turn } => outln!(
            "── turn {turn}: the worktree changed since the last failure; running the gates first"
        ),
        Progress::Dispatched { result, .. } => {
            let secs = result.wall_ms as f64 / 1000.0;
            if let Some(text) = &result.text {
                outln!("{}", agent_says(text));
            }
            match &result.failure {
                None => outln!("   agent finished in {secs:.1}s"),
                Some(f) => outln!(
                    "   agent failed in {secs:.1}s: {} ({})",
                    f.reason.as_str(),
                    f.detail
                ),
            }
        }
        Progress::AgentLeftoversEnded { processes, .. } => {
            let list: Vec<String> = processes
                .iter()
                .map(|p| format!("pid {} ({})", p.pid, p.command))
                .collect();
            outln!(
                "   ended {} process(es) the agent's turn left running: {}",
                processes.len(),
                list.join(", ")
            );
        }
        Progress::GateStarted { .. } => {}
        Progress::GateFinished {
            number,
            command,
            passed,
            exit_code,
            replayed,
            evidence,
            last_attempt,
        } => {
            let code = exit_code
                .map(|c| c.to_string())
                .unwrap_or_else(|| "-".into());
            let word = if passed { "PASS" } else { "FAIL" };
            let word = crate::colour::paint(word, crate::colour::enabled(Stream::Stdout));
            let note = if replayed {
                " (not re-run: nothing changed since it failed)"
            } else {
                ""
            };
            outln!("   gate {number} {word} exit={code}  $ {command}{note}");
            if let Some(evidence) = evidence {
                if last_attempt {
                    outln!("   its last attempt; what it reported:");
                } else {
                    outln!("   evidence for the next turn:");
                }
                for line in evidence.lines() {
                    outln!("   │ {line}");
                }
            }
        }
        Progress::Judged { passed, .. } => {
            let word = if passed { "PASS" } else { "FAIL" };
            outln!(
                "   judge: {}",
                crate::colour::paint(word, crate::colour::enabled(Stream::Stdout))
            )
        }
    }
}
