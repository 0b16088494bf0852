//! `greenlight goal …`: create, run, inspect and steer the goal of a worktree.
//!
//! Every decision lives in `greenlight-goal` and `greenlight-store`; this module parses
//! arguments, builds the agent's dispatcher, and renders progress and state.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use greenlight_agent::{AdapterOptions, Dispatcher, Family};
use greenlight_gate::Interrupt;
use greenlight_goal::{Engine, Finish, Progress, Settings};
use greenlight_store::{AgentSpec, Goal, GoalState, NewGoal, Reads, Store};

/// Exit codes of `greenlight goal`.
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

/// Options shared by every `goal` subcommand.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// The state database [default: $GREENLIGHT_STATE, else $XDG_STATE_HOME/greenlight/state.db].
    #[arg(long, global = true, value_name = "PATH")]
    pub state: Option<PathBuf>,
    /// The worktree whose goal this is [default: the current directory].
    #[arg(long, global = true, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
}

/// Arguments of `greenlight goal`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: Command,
}

/// The `goal` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Create a goal for this worktree and run it until done or paused.
    Run(RunArgs),
    /// Show the worktree's goal, its gates and their last results.
    Status {
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Pause the worktree's goal (a running loop stops at its next step).
    Pause,
    /// Resume a paused goal and run it in the foreground (new turn budget; gate attempts kept).
    Resume(LoopArgs),
    /// Clear the worktree's goal (kept in the state for audit).
    Clear,
    /// Show the goal's event log.
    Log {
        /// Keep printing new events until the goal stops running.
        #[arg(long)]
        follow: bool,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// List, add or remove the goal's gates.
    #[command(subcommand)]
    Gate(GateCommand),
}

/// `goal gate …`.
#[derive(Debug, clap::Subcommand)]
pub enum GateCommand {
    /// List the gates, numbered.
    List,
    /// Append a gate (a shell command judged by its exit code).
    Add {
        /// The command.
        command: String,
    },
    /// Remove gate N (as `gate list` numbers them).
    Remove {
        /// 1-based.
        n: usize,
    },
    /// Remove every gate.
    Clear,
}

/// Knobs of a running loop.
#[derive(Debug, Clone, clap::Args)]
pub struct LoopArgs {
    /// How long one agent turn may run.
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = parse_duration)]
    pub agent_timeout: Duration,
}

/// Arguments of `greenlight goal run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// What the agent must achieve.
    pub goal: String,
    /// claude, codex, or command:<argv template> (placeholders {prompt}, {prompt_file}, {model};
    /// without a prompt placeholder the prompt goes on stdin).
    #[arg(long, default_value = "claude")]
    pub agent: String,
    /// The agent's model id [default: sonnet for claude, `default` for command; required for codex].
    #[arg(long)]
    pub model: Option<String>,
    /// A gate command; repeat for several, run in order [default: the gates of .commandmate/verify.yaml].
    #[arg(long = "gate", value_name = "CMD")]
    pub gates: Vec<String>,
    /// Turns before the goal pauses.
    #[arg(long, default_value_t = 20)]
    pub max_turns: u32,
    /// Consecutive failures of one gate before the goal pauses.
    #[arg(long, default_value_t = 3)]
    pub retries: u32,
    /// Time limit of each gate [default: 300s with --gate; with verify.yaml's gates, the
    /// largest timeoutSec it declares, so a slow suite is not cut short].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub gate_timeout: Option<Duration>,
    /// A judge model (same family) that must accept the goal after the gates pass, or `none`.
    #[arg(long, default_value = "none")]
    pub judge: String,
    #[command(flatten)]
    pub loop_args: LoopArgs,
}

/// Parses `300s`, `5m`, `2h`, `1500ms` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let (digits, unit) = text.split_at(
        text.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len()),
    );
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a duration; write e.g. 300s, 5m or 2h"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "ms" => return Ok(Duration::from_millis(n)),
        _ => {
            return Err(format!(
                "`{text}`: unknown unit `{unit}`; use ms, s, m or h"
            ));
        }
    };
    Ok(Duration::from_secs(secs))
}

/// Splits an argv template on spaces, honouring single and double quotes.
pub fn split_template(template: &str) -> Result<Vec<String>, String> {
    let mut args = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut started = false;
    for c in template.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => current.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (None, c) if c.is_whitespace() => {
                if started || !current.is_empty() {
                    args.push(std::mem::take(&mut current));
                    started = false;
                }
            }
            (None, c) => current.push(c),
        }
    }
    if quote.is_some() {
        return Err(format!("unclosed quote in the agent template `{template}`"));
    }
    if started || !current.is_empty() {
        args.push(current);
    }
    if args.is_empty() {
        return Err(
            "the agent template is empty; write e.g. --agent 'command:my-agent {prompt_file}'"
                .into(),
        );
    }
    Ok(args)
}

/// Parses `--agent`.
pub fn parse_agent(agent: &str, model: Option<String>) -> Result<AgentSpec, String> {
    let (family, template) = match agent {
        "claude" => ("claude", None),
        "codex" => ("codex", None),
        other => match other.strip_prefix("command:") {
            Some(t) => ("command", Some(split_template(t)?)),
            None => {
                return Err(format!(
                    "--agent `{other}`: use claude, codex, or command:<argv template>"
                ));
            }
        },
    };
    let model = match (family, model) {
        (_, Some(m)) => m,
        ("claude", None) => "sonnet".into(),
        ("command", None) => "default".into(),
        _ => return Err("--agent codex needs --model (the model id codex should run)".into()),
    };
    Ok(AgentSpec {
        family: family.into(),
        model: Some(model),
        argv_template: template,
    })
}

/// The variable every process of a goal's run carries, so that a later runner of the same goal
/// can find and end what a runner killed with SIGKILL left behind.
pub const RUN_MARKER_VAR: &str = "GREENLIGHT_GOAL";

/// The marker of `goal` in the state database at `state`: goal ids are per database.
pub fn run_marker(state: &Path, goal: greenlight_store::GoalId) -> (String, String) {
    let db = blake3::hash(state.to_string_lossy().as_bytes()).to_hex();
    (RUN_MARKER_VAR.to_owned(), format!("{}:{goal}", &db[..16]))
}

/// Builds the dispatcher a stored goal's agent runs through; `marker` joins its environment.
pub fn dispatcher_for(
    agent: &AgentSpec,
    marker: Option<&(String, String)>,
) -> Result<(Arc<dyn Dispatcher>, Family), String> {
    let family = match agent.family.as_str() {
        "claude" => Family::Claude,
        "codex" => Family::Codex,
        "command" => Family::Command,
        other => {
            return Err(format!(
                "unknown agent family `{other}` in the state database"
            ));
        }
    };
    let mut options = AdapterOptions::default();
    if let Some((var, value)) = marker {
        let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os()
            .filter(|(k, _)| k != var.as_str())
            .collect();
        env.push((var.into(), value.into()));
        options.base_env = Some(env);
    }
    if let Some(template) = &agent.argv_template {
        let (bin, args) = template
            .split_first()
            .ok_or("the stored agent template is empty")?;
        options.bin = Some(PathBuf::from(bin));
        options.command_args = args.to_vec();
    }
    let dispatcher = greenlight_agent::dispatcher(family, options).map_err(|e| e.to_string())?;
    Ok((Arc::from(dispatcher), family))
}

fn open_store(common: &Common) -> Result<Store, String> {
    let path = match &common.state {
        Some(p) => p.clone(),
        None => greenlight_store::default_state_path().map_err(|e| e.to_string())?,
    };
    Store::open(&path).map_err(|e| e.to_string())
}

fn worktree(common: &Common) -> PathBuf {
    let dir = common.cwd.clone().unwrap_or_else(|| PathBuf::from("."));
    dir.canonicalize().unwrap_or(dir)
}

fn live_goal(store: &Store, worktree: &Path) -> Result<Goal, String> {
    store
        .live_goal(worktree)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            format!(
                "{} has no active or paused goal; start one with `greenlight goal run \"<goal>\"`",
                worktree.display()
            )
        })
}

/// Runs the subcommand and returns the process exit code.
pub fn run(args: Args) -> i32 {
    match dispatch(args) {
        Ok(code) => code,
        Err((code, message)) => {
            errln!("greenlight: {message}");
            code
        }
    }
}

type CliResult = Result<i32, (i32, String)>;

fn usage(message: String) -> (i32, String) {
    (exit::USAGE, message)
}

fn dispatch(args: Args) -> CliResult {
    let mut store = open_store(&args.common).map_err(|e| (exit::ERROR, e))?;
    let worktree = worktree(&args.common);
    match args.command {
        Command::Run(run) => {
            let agent = parse_agent(&run.agent, run.model.clone()).map_err(usage)?;
            let (gates, declared_timeout) = if run.gates.is_empty() {
                gates_from_verify_yaml(&worktree).map_err(usage)?
            } else {
                (run.gates.clone(), None)
            };
            let gate_timeout = run
                .gate_timeout
                .or(declared_timeout)
                .unwrap_or(DEFAULT_GATE_TIMEOUT);
            if gates.is_empty() {
                return Err(usage(
                    "no gates: pass --gate CMD, or declare gates in .commandmate/verify.yaml"
                        .into(),
                ));
            }
            let judge = (run.judge != "none").then(|| run.judge.clone());
            let new = NewGoal {
                worktree: worktree.clone(),
                text: run.goal.clone(),
                agent,
                judge,
                max_turns: run.max_turns,
                retries: run.retries,
                gate_timeout_sec: u32::try_from(gate_timeout.as_secs().max(1)).unwrap_or(u32::MAX),
                gates,
            };
            let id = store
                .write(|tx| tx.create_goal(&new))
                .map_err(|e| usage(e.to_string()))?;
            outln!("greenlight: goal {id} for {}", worktree.display());
            drive(&mut store, id, &run.loop_args, &mut render_progress)
        }
        Command::Resume(loop_args) => {
            let goal = live_goal(&store, &worktree).map_err(usage)?;
            if goal.state == GoalState::Paused {
                store
                    .write(|tx| tx.resume_goal(goal.id))
                    .map_err(|e| (exit::ERROR, e.to_string()))?;
            }
            outln!(
                "greenlight: resuming goal {} (turn budget {} again; gate attempts kept)",
                goal.id,
                goal.max_turns
            );
            drive(&mut store, goal.id, &loop_args, &mut render_progress)
        }
        Command::Pause => {
            let goal = live_goal(&store, &worktree).map_err(usage)?;
            if goal.state == GoalState::Paused {
                outln!("greenlight: goal {} is already paused", goal.id);
                return Ok(exit::DONE);
            }
            store
                .write(|tx| tx.pause_goal(goal.id, greenlight_agent::Reason::PausedByUser.as_str(), Some("paused with `greenlight goal pause`; `greenlight goal resume` continues")))
                .map_err(|e| (exit::ERROR, e.to_string()))?;
            outln!("greenlight: goal {} paused", goal.id);
            Ok(exit::DONE)
        }
        Command::Clear => {
            let goal = live_goal(&store, &worktree).map_err(usage)?;
            store
                .write(|tx| tx.clear_goal(goal.id))
                .map_err(|e| (exit::ERROR, e.to_string()))?;
            outln!(
                "greenlight: goal {} cleared (kept in the state for audit)",
                goal.id
            );
            Ok(exit::DONE)
        }
        Command::Status { json } => status(&store, &worktree, json),
        Command::Log { follow, json } => log(&store, &worktree, follow, json),
        Command::Gate(command) => gate(&mut store, &worktree, command),
    }
}

/// A goal gate's time limit when neither `--gate-timeout` nor a verify.yaml says otherwise.
pub const DEFAULT_GATE_TIMEOUT: Duration = Duration::from_secs(300);

/// The gate commands of the worktree's verify.yaml, and the largest `timeoutSec` among them (a
/// goal has one time limit for all its gates; the largest keeps every gate within its own).
fn gates_from_verify_yaml(worktree: &Path) -> Result<(Vec<String>, Option<Duration>), String> {
    let path = worktree.join(".commandmate").join("verify.yaml");
    let path = camino::Utf8PathBuf::from_path_buf(path)
        .map_err(|p| format!("{}: not a UTF-8 path", p.display()))?;
    if !path.exists() {
        return Ok((Vec::new(), None));
    }
    let config = greenlight_gate::config::load(&path).map_err(|e| e.to_string())?;
    let longest = config.gates.iter().map(|g| g.timeout_sec).max();
    let commands = config.gates.into_iter().map(|g| g.command).collect();
    Ok((commands, longest.map(|s| Duration::from_secs(u64::from(s)))))
}

/// Runs the loop for `goal` in the foreground, with Ctrl-C / SIGTERM pausing it cleanly.
pub fn drive(
    store: &mut Store,
    goal: greenlight_store::GoalId,
    loop_args: &LoopArgs,
    on_progress: &mut dyn FnMut(Progress<'_>),
) -> CliResult {
    let record = store
        .goal(goal)
        .map_err(|e| (exit::ERROR, e.to_string()))?
        .ok_or((exit::ERROR, format!("goal {goal} vanished")))?;
    let marker = run_marker(store.path(), goal);
    let (agent, family) =
        dispatcher_for(&record.agent, Some(&marker)).map_err(|e| (exit::ERROR, e))?;
    let settings = Settings {
        agent,
        family,
        model: record
            .agent
            .model
            .clone()
            .unwrap_or_else(|| "default".into()),
        judge: record.judge.clone(),
        dispatch_timeout: loop_args.agent_timeout,
        kill_grace: super::verify::kill_grace(),
        gate_env: vec![marker.clone()],
    };
    greenlight_proc::run_main(|interrupt| async move {
        let lock_root = store.path().with_extension("runners");
        // A closed stdout (`| head`) ends the run as SIGTERM does: the goal paused, the agent's
        // processes ended.
        let mut interrupt = crate::out::interrupt_with_closed_stdout(interrupt);
        // One runner per goal: a second `resume` must not drive the same goal at once.
        let guard = match greenlight_gate::lock::acquire(&lock_root, &format!("goal-{goal}"), Duration::ZERO, &mut interrupt).await {
            Ok(greenlight_gate::lock::Acquired::Held { guard, .. }) => guard,
            Ok(greenlight_gate::lock::Acquired::GaveUp { holder, .. }) => {
                let who = holder.map(|h| format!(" (pid {} on {})", h.pid, h.host)).unwrap_or_default();
                return Err((exit::USAGE, format!("goal {goal} is already running{who}; watch it with `greenlight goal log --follow`")));
            }
            Ok(greenlight_gate::lock::Acquired::Interrupted(_)) => return Err((exit::ERROR, "interrupted".into())),
            Err(e) => return Err((exit::ERROR, format!("{}: {e}", lock_root.display()))),
        };
        // We hold the goal's runner lock, so any process still marked with this goal belongs to
        // an earlier runner that died without cleaning up (kill -9): end it before going on.
        let (var, value) = &marker;
        let leftovers = greenlight_proc::sweep_marked(var, value);
        if !leftovers.is_empty() {
            outln!("greenlight: ended {} process(es) an earlier run of goal {goal} left running:", leftovers.len());
            for p in &leftovers {
                outln!("  pid {} {}", p.pid, p.command);
            }
        }
        let finish = Engine::new(store, goal, &settings, on_progress).run(&mut interrupt).await;
        guard.release();
        let finish = finish.map_err(|e| (exit::ERROR, e.to_string()))?;
        Ok(match finish {
            Finish::Done => {
                outln!("greenlight: goal {goal} done: every gate is green");
                exit::DONE
            }
            Finish::Paused { reason, detail } => {
                outln!("greenlight: goal {goal} paused ({}): {detail}", reason.as_str());
                match *interrupt.borrow() {
                    Some(signal @ (Interrupt::Int | Interrupt::Term)) if reason == greenlight_agent::Reason::PausedByUser => signal.exit_code(),
                    _ => exit::PAUSED,
                }
            }
            Finish::NotActive(state) => {
                let why = store
                    .goal(goal)
                    .ok()
                    .flatten()
                    .and_then(|g| g.pause)
                    .map(|p| format!(" ({}): {}", p.reason, p.detail.unwrap_or_default()))
                    .unwrap_or_default();
                outln!("greenlight: goal {goal} is {state}{why}; this run stops here");
                if state == GoalState::Done { exit::DONE } else { exit::PAUSED }
            }
        })
    })
    .map_err(|e| (exit::ERROR, format!("cannot start the async runtime: {e}")))?
}

/// Renders loop progress for a person at a terminal.
pub fn render_progress(progress: Progress<'_>) {
    match progress {
        Progress::TurnStarted { turn, .. } => outln!("── turn {turn}: agent working"),
        Progress::Dispatched { result, .. } => {
            let secs = result.wall_ms as f64 / 1000.0;
            match &result.failure {
                None => outln!("   agent finished in {secs:.1}s"),
                Some(f) => outln!(
                    "   agent failed in {secs:.1}s: {} ({})",
                    f.reason.as_str(),
                    f.detail
                ),
            }
        }
        Progress::GateStarted { .. } => {}
        Progress::GateFinished {
            number,
            command,
            passed,
            exit_code,
            replayed,
            evidence,
        } => {
            let code = exit_code
                .map(|c| c.to_string())
                .unwrap_or_else(|| "-".into());
            let word = if passed { "PASS" } else { "FAIL" };
            let note = if replayed {
                " (not re-run: nothing changed since it failed)"
            } else {
                ""
            };
            outln!("   gate {number} {word} exit={code}  $ {command}{note}");
            if let Some(evidence) = evidence {
                outln!("   evidence for the next turn:");
                for line in evidence.lines() {
                    outln!("   │ {line}");
                }
            }
        }
        Progress::Judged { passed, .. } => {
            outln!("   judge: {}", if passed { "PASS" } else { "FAIL" })
        }
    }
}

fn status(store: &Store, worktree: &Path, json: bool) -> CliResult {
    let goal = live_or_last(store, worktree)?;
    let gates = store
        .gates(goal.id)
        .map_err(|e| (exit::ERROR, e.to_string()))?;
    let dispatches = store
        .dispatches(goal.id)
        .map_err(|e| (exit::ERROR, e.to_string()))?;
    if json {
        let doc = serde_json::json!({
            "greenlight_version": env!("CARGO_PKG_VERSION"),
            "goal": goal,
            "gates": gates,
            "dispatches": dispatches,
        });
        outln!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        return Ok(exit::DONE);
    }
    outln!(
        "goal {} [{}] in {}",
        goal.id,
        goal.state,
        goal.worktree.display()
    );
    outln!("  {}", goal.text);
    if let Some(pause) = &goal.pause {
        outln!(
            "  paused: {} — {}",
            pause.reason,
            pause.detail.as_deref().unwrap_or("")
        );
    }
    outln!(
        "  turns {}/{}, agent {} {}",
        goal.turns_used,
        goal.max_turns,
        goal.agent.family,
        goal.agent.model.as_deref().unwrap_or("")
    );
    for gate in &gates {
        let last = gate
            .last
            .as_ref()
            .map(|l| {
                format!(
                    "{} exit={}",
                    l.verdict,
                    l.exit_code
                        .map(|c| c.to_string())
                        .unwrap_or_else(|| "-".into())
                )
            })
            .unwrap_or_else(|| "not run".into());
        outln!(
            "  {}. $ {}  [{last}; attempts {}/{}]",
            gate.number.unwrap_or(0),
            gate.command,
            gate.attempts,
            goal.retries
        );
    }
    Ok(exit::DONE)
}

fn log(store: &Store, worktree: &Path, follow: bool, json: bool) -> CliResult {
    let goal = live_or_last(store, worktree)?.id;
    let mut after = 0;
    loop {
        let events = store
            .events_after(Some(goal), after, 500)
            .map_err(|e| (exit::ERROR, e.to_string()))?;
        for event in &events {
            after = event.seq;
            if json {
                outln!("{}", serde_json::to_string(event).unwrap_or_default());
            } else {
                let turn = event.turn.map(|t| format!(" turn {t}")).unwrap_or_default();
                outln!("#{}{turn} {} {}", event.seq, event.kind, event.payload);
            }
        }
        if !follow || crate::out::stdout_failed() {
            return Ok(exit::DONE);
        }
        if events.is_empty() {
            let state = store
                .goal(goal)
                .map_err(|e| (exit::ERROR, e.to_string()))?
                .map(|g| g.state);
            if state != Some(GoalState::Active) {
                return Ok(exit::DONE);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The worktree's goal to show: its live goal, else the newest it had (a live goal is always
/// the newest: no goal can be created while one is live).
fn live_or_last(store: &Store, worktree: &Path) -> Result<Goal, (i32, String)> {
    let goals = store.goals().map_err(|e| (exit::ERROR, e.to_string()))?;
    goals
        .into_iter()
        .rev()
        .find(|g| g.worktree == worktree)
        .ok_or_else(|| {
            usage(format!(
                "{} has no goal; start one with `greenlight goal run \"<goal>\"`",
                worktree.display()
            ))
        })
}

fn gate(store: &mut Store, worktree: &Path, command: GateCommand) -> CliResult {
    let goal = live_goal(store, worktree).map_err(usage)?;
    let id = goal.id;
    match command {
        GateCommand::List => {}
        GateCommand::Add { command } => {
            store
                .write(|tx| tx.add_gate(id, &command))
                .map_err(|e| usage(e.to_string()))?;
        }
        GateCommand::Remove { n } => {
            store
                .write(|tx| tx.remove_gate(id, n))
                .map_err(|e| usage(e.to_string()))?;
        }
        GateCommand::Clear => {
            store
                .write(|tx| tx.clear_gates(id))
                .map_err(|e| usage(e.to_string()))?;
        }
    }
    for gate in store.gates(id).map_err(|e| (exit::ERROR, e.to_string()))? {
        outln!("{}. {}", gate.number.unwrap_or(0), gate.command);
    }
    Ok(exit::DONE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_split_on_spaces_and_keep_quoted_words() {
        assert_eq!(
            split_template("my-agent --x 'a b' \"{prompt}\"").unwrap(),
            ["my-agent", "--x", "a b", "{prompt}"]
        );
        assert!(split_template("agent 'open").is_err());
        assert!(split_template("   ").is_err());
        assert_eq!(split_template("a ''").unwrap(), ["a", ""]);
    }

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("300s").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("5 min").is_err());
        assert!(parse_duration("").is_err());
    }
}
