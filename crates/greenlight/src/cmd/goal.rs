//! `greenlight goal …`: create, run, inspect and steer the goal of a worktree.
//!
//! Every decision lives in `greenlight-goal`, `greenlight-run`'s goal control and
//! `greenlight-store`; this module parses arguments and renders state (a running loop is
//! rendered by `crate::goal_run`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::agents::EveryFamily;
use greenlight_goal::drive::{GoalRequest, OpenAiArgs, inside_run_of, parse_agent, plan_goal};
use greenlight_run::goal_control::{self, Pause, Resume, Selector, Via};
use greenlight_store::{AgentSpec, Goal, GoalState, Reads, Store};

use crate::duration::parse_duration;
use crate::goal_run::{CliResult, LoopArgs, check_agent, drive, exit, render_progress};

/// The agent `goal run` gives a goal when `--agent` is not passed.
const DEFAULT_AGENT: &str = "claude";

/// Options shared by every `goal` subcommand.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// The state database: a file, or a postgres:// URL [default: $GREENLIGHT_STORE, else $GREENLIGHT_STATE, else $XDG_STATE_HOME/greenlight/state.db].
    #[arg(long, global = true, visible_alias = "store", value_name = "PATH|URL")]
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
    Run(Box<RunArgs>),
    /// Show the worktree's goal, its gates and their last results.
    Status {
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Pause the worktree's goal (a running loop stops at its next step).
    Pause,
    /// Resume a paused goal and run it in the foreground (new turn budget; gate attempts kept);
    /// `--agent` gives it another agent first (checked and probed before it is stored).
    Resume(ResumeArgs),
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
    /// Put a goal on the store's queue, for whichever `goal worker` is free to run it.
    Submit(Box<super::goal_queue::SubmitArgs>),
    /// Claim queued goals and workflow runs and run them, each in a worktree prepared from its
    /// repository and base, renewing a lease on each (another worker takes over if this one
    /// dies).
    Worker(Box<super::goal_queue::WorkerArgs>),
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

/// The agent flags of `goal run` and `goal resume`.
#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// claude, codex, openai, or command:<argv template> (placeholders {prompt}, {prompt_file},
    /// {model}; without a prompt placeholder the prompt goes on stdin) [default: claude for
    /// `goal run`; `goal resume` keeps the goal's agent unless given one].
    #[arg(long, value_name = "AGENT")]
    pub agent: Option<String>,
    /// The agent's model id [default: sonnet for claude, `default` for command; required for
    /// codex and openai].
    #[arg(long)]
    pub model: Option<String>,
    /// For --agent openai: the server's OpenAI-compatible base URL (e.g. http://127.0.0.1:8080/v1).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// For --agent openai: the variable holding the API key; only its name is stored
    /// [default: OPENAI_API_KEY].
    #[arg(long, value_name = "NAME")]
    pub api_key_env: Option<String>,
    /// For --agent openai: native, tags or auto [default: auto].
    #[arg(long, value_name = "FORMAT")]
    pub tool_format: Option<String>,
}

impl AgentArgs {
    pub fn openai(&self) -> OpenAiArgs {
        OpenAiArgs {
            base_url: self.base_url.clone(),
            api_key_env: self.api_key_env.clone(),
            tool_format: self.tool_format.clone(),
        }
    }

    /// Whether any flag other than `--agent` was given.
    fn any_setting(&self) -> bool {
        self.model.is_some() || self.openai() != OpenAiArgs::default()
    }
}

/// Arguments of `greenlight goal resume`.
#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    #[command(flatten)]
    pub agent: AgentArgs,
    #[command(flatten)]
    pub loop_args: LoopArgs,
}

/// How long a goal may go on and who accepts it: the same for `goal run` and `goal submit`.
#[derive(Debug, clap::Args)]
pub struct GoalLimits {
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
}

/// Arguments of `greenlight goal run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// What the agent must achieve.
    pub goal: String,
    #[command(flatten)]
    pub agent: AgentArgs,
    /// A gate command; repeat for several, run in order [default: the gates of
    /// .greenlight/verify.yaml, else .commandmate/verify.yaml].
    #[arg(long = "gate", value_name = "CMD")]
    pub gates: Vec<String>,
    #[command(flatten)]
    pub limits: GoalLimits,
    /// Also serve the dashboard and the live API while the goal runs (`--serve` on
    /// 127.0.0.1:7357, or `--serve=ADDR`; loopback only: use `greenlight serve` for a token).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, require_equals = true,
          default_missing_value = greenlight_server::DEFAULT_LISTEN)]
    pub serve: Option<std::net::SocketAddr>,
    #[command(flatten)]
    pub loop_args: LoopArgs,
}

/// Starts the in-process server of `goal run --serve` on the run's state file.
fn serve_beside(
    store: &Store,
    listen: std::net::SocketAddr,
) -> Result<greenlight_server::Server, (i32, String)> {
    let config = greenlight_server::Config::new(listen, store.path().to_path_buf());
    let server = greenlight_server::start(config).map_err(|e| (exit::ERROR, e.to_string()))?;
    errln!(
        "greenlight: serving the dashboard on {} while the goal runs",
        server.url()
    );
    Ok(server)
}

fn open_store(common: &Common) -> Result<Store, String> {
    let path = crate::environment::get()
        .state_path(common.state.as_deref())
        .map_err(|e| e.to_string())?;
    Store::open(&path).map_err(|e| e.to_string())
}

fn worktree(common: &Common) -> PathBuf {
    let dir = common.cwd.clone().unwrap_or_else(|| PathBuf::from("."));
    dir.canonicalize().unwrap_or(dir)
}

/// The worktree's goal, as every front end selects it: its active or paused goal, else the
/// newest it had.
fn worktree_goal(store: &Store, worktree: &Path) -> Result<Goal, (i32, String)> {
    goal_control::select(store, Selector::Worktree(worktree)).map_err(control_err)
}

/// A goal-control error as an exit: no such goal is the user's (usage).
fn control_err(e: goal_control::Error) -> (i32, String) {
    match e {
        goal_control::Error::Store(e) => store_err(e),
        other => usage(other.to_string()),
    }
}

fn live_goal(store: &Store, worktree: &Path) -> Result<Goal, (i32, String)> {
    store
        .live_goal(worktree)
        .map_err(|e| (exit::ERROR, e.to_string()))?
        .ok_or_else(|| {
            usage(format!(
                "{} has no active or paused goal; start one with `greenlight goal run \"<goal>\"`",
                worktree.display()
            ))
        })
}

/// A store error as an exit: what the user asked for that cannot be (usage), or the database
/// itself failing (error).
fn store_err(e: greenlight_store::Error) -> (i32, String) {
    use greenlight_store::Error as E;
    let code = match &e {
        E::GoalAlreadyLive { .. }
        | E::Worktree { .. }
        | E::NoSuchGoal(_)
        | E::InvalidTransition { .. }
        | E::NoSuchGate { .. }
        | E::LastGate { .. }
        | E::EmptyGateCommand { .. } => exit::USAGE,
        _ => exit::ERROR,
    };
    (code, e.to_string())
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

fn usage(message: String) -> (i32, String) {
    (exit::USAGE, message)
}

fn dispatch(args: Args) -> CliResult {
    let families = EveryFamily::from_process_env();
    let mut store = open_store(&args.common).map_err(|e| (exit::ERROR, e))?;
    let worktree = worktree(&args.common);
    let common = args.common;
    match args.command {
        Command::Run(run) => {
            let agent = run
                .agent
                .agent
                .clone()
                .unwrap_or_else(|| DEFAULT_AGENT.into());
            let new = plan_goal(
                GoalRequest {
                    worktree: worktree.clone(),
                    text: run.goal,
                    agent: agent.clone(),
                    model: run.agent.model.clone(),
                    openai: run.agent.openai(),
                    gates: run.gates,
                    max_turns: run.limits.max_turns,
                    retries: run.limits.retries,
                    gate_timeout: run.limits.gate_timeout,
                    judge: run.limits.judge,
                },
                &families,
            )
            .map_err(usage)?;
            // A worktree with a live goal is refused before the agent's probe spends a model call
            // (creating the goal checks again, in its transaction).
            if let Some(existing) = store.live_goal(&worktree).map_err(store_err)? {
                return Err(store_err(greenlight_store::Error::GoalAlreadyLive {
                    worktree: worktree.clone(),
                    existing: existing.id,
                    state: existing.state,
                }));
            }
            // Checked before the goal exists, so an agent that cannot run leaves no goal behind.
            let probed = check_agent(
                &new.goal.agent,
                &agent,
                &worktree,
                &families,
                "no goal was created",
            )?;
            // Started before the goal exists, so a busy port refuses the run, not half of it.
            let server = run
                .serve
                .map(|listen| serve_beside(&store, listen))
                .transpose()?;
            // The goal and the verify.yaml its gates are run and keyed by, fixed together.
            let config = new.config.as_ref().map(|c| c.to_json());
            let id = store
                .write(|tx| {
                    let id = tx.create_goal(&new.goal)?;
                    tx.set_gate_config(id, config.as_deref())?;
                    if let Some(model) = &probed {
                        tx.record_probe(id, model)?;
                    }
                    Ok::<_, greenlight_store::Error>(id)
                })
                .map_err(store_err)?;
            outln!("greenlight: goal {id} for {}", worktree.display());
            let driven = drive(
                &mut store,
                id,
                &run.loop_args,
                &families,
                None,
                true,
                &mut render_progress,
            );
            if let Some(server) = server
                && let Err(e) = server.stop()
            {
                errln!("greenlight: {e}");
            }
            driven
        }
        Command::Resume(resume) => {
            let goal = worktree_goal(&store, &worktree)?;
            // The runner itself marks a paused goal active once it holds the goal's lock; an
            // active goal with no runner (one killed) is simply run again.
            if let Some(refusal) = Resume::for_state(goal.state).refusal(goal.id) {
                return Err(usage(refusal));
            }
            let agent_checked = match &resume.agent.agent {
                Some(agent) => {
                    change_agent(&mut store, &goal, agent, &resume.agent, &families)?;
                    true
                }
                None if resume.agent.any_setting() => {
                    return Err(usage(format!(
                        "--model, --base-url, --api-key-env and --tool-format go with --agent on `goal resume` (goal {} keeps its agent {} otherwise); pass --agent too",
                        goal.id, goal.agent.family
                    )));
                }
                None => false,
            };
            // Said once the run holds the goal's lock: a refused resume must not claim to resume.
            let announce = format!(
                "greenlight: resuming goal {} (turn budget {} again; gate attempts kept)",
                goal.id, goal.max_turns
            );
            drive(
                &mut store,
                goal.id,
                &resume.loop_args,
                &families,
                Some(&announce),
                agent_checked,
                &mut render_progress,
            )
        }
        Command::Pause => {
            let goal = worktree_goal(&store, &worktree)?;
            let steered =
                goal_control::pause(&mut store, goal.id, Via::Cli).map_err(control_err)?;
            if let Some(refusal) = steered.outcome.refusal(goal.id) {
                return Err(usage(refusal));
            }
            if steered.outcome == Pause::AlreadyPaused {
                outln!("greenlight: goal {} is already paused", goal.id);
            } else {
                outln!("greenlight: goal {} paused", goal.id);
            }
            Ok(exit::DONE)
        }
        Command::Clear => {
            let goal = live_goal(&store, &worktree)?;
            store
                .write(|tx| tx.clear_goal(goal.id))
                .map_err(|e| (exit::ERROR, e.to_string()))?;
            outln!(
                "greenlight: goal {} cleared (kept in the state for audit)",
                goal.id
            );
            Ok(exit::DONE)
        }
        Command::Status { json } => status(&mut store, &worktree, json),
        Command::Log { follow, json } => log(&store, &worktree, follow, json),
        Command::Gate(command) => gate(&mut store, &worktree, command),
        Command::Submit(submit) => {
            super::goal_queue::submit(&mut store, &worktree, *submit, &families)
        }
        Command::Worker(args) => {
            if let Some(cwd) = &common.cwd {
                // Refused rather than ignored: someone who names a tree expects it to be used.
                return Err(usage(format!(
                    "--cwd {}: a worker runs no goal of a worktree you name; it prepares each \
                     item's own under --work-dir DIR",
                    cwd.display()
                )));
            }
            let state = store.path().to_path_buf();
            drop(store);
            super::goal_queue::worker(&state, *args)
        }
    }
}

/// `goal resume --agent`: the new agent is checked and probed, then stored with the paused goal
/// (an `agent-changed` event in its log); a refused agent leaves the goal as it was.
fn change_agent(
    store: &mut Store,
    goal: &Goal,
    agent: &str,
    args: &AgentArgs,
    families: &EveryFamily,
) -> Result<(), (i32, String)> {
    if goal.state != GoalState::Paused {
        return Err(usage(format!(
            "goal {} is {}: --agent changes the agent of a paused goal only; pause it first with `greenlight goal pause`",
            goal.id, goal.state
        )));
    }
    let spec = parse_agent(agent, args.model.clone(), &args.openai(), families).map_err(usage)?;
    let kept = format!("goal {} keeps its agent {}", goal.id, goal.agent.family);
    let probed = check_agent(&spec, agent, &goal.worktree, families, &kept)?;
    store
        .write(|tx| tx.change_agent(goal.id, &spec, probed.as_deref()))
        .map_err(store_err)?;
    outln!(
        "greenlight: goal {}'s agent is now {} (was {})",
        goal.id,
        describe_agent(&spec),
        describe_agent(&goal.agent)
    );
    Ok(())
}

/// An agent as a person tells two apart: the family and model, or the command's template.
fn describe_agent(agent: &AgentSpec) -> String {
    match &agent.argv_template {
        Some(template) => format!("command:{}", template.join(" ")),
        None => format!(
            "{} {}",
            agent.family,
            agent.model.as_deref().unwrap_or("default")
        ),
    }
}

fn status(store: &mut Store, worktree: &Path, json: bool) -> CliResult {
    let doc = goal_control::status(store, Selector::Worktree(worktree)).map_err(control_err)?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        return Ok(exit::DONE);
    }
    let goal_control::GoalStatus { goal, gates, .. } = doc;
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
    let server = goal
        .agent
        .endpoint
        .as_ref()
        .map(|e| format!(" at {} ({} tools)", e.base_url, e.tool_format))
        .unwrap_or_default();
    outln!(
        "  turns {}/{}, agent {} {}{server}",
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
    let goal = worktree_goal(store, worktree)?.id;
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

fn gate(store: &mut Store, worktree: &Path, command: GateCommand) -> CliResult {
    let goal = store
        .live_goal(worktree)
        .map_err(store_err)?
        .ok_or_else(|| {
            usage(format!(
                "`goal gate` works on the gates of a worktree's active or paused goal, and {} has none; start one with `greenlight goal run \"<goal>\" --gate CMD`",
                worktree.display()
            ))
        })?;
    let id = goal.id;
    if !matches!(command, GateCommand::List) {
        // The gates judge the agent, so the agent's own processes must not change them.
        let marker = crate::environment::get()
            .vars
            .var(greenlight_goal::drive::RUN_MARKER_VAR);
        if inside_run_of(store.path(), id, marker.as_deref()) {
            return Err(usage(format!(
                "goal {id}'s gates cannot be changed from inside its own run (this process carries {} or descends from the goal's runner): the gates judge the agent; a person changes them from another terminal",
                greenlight_goal::drive::RUN_MARKER_VAR
            )));
        }
    }
    match command {
        GateCommand::List => {}
        GateCommand::Add { command } => {
            // A person adding a gate also fixes verify.yaml as it is now: the goal's gates are
            // run and keyed by it from here on (and by nothing the agent writes later).
            let config = match greenlight_goal::drive::snapshot_verify_yaml(&goal.worktree) {
                Ok(config) => config.map(|(snapshot, _)| snapshot.to_json()),
                Err(why) => {
                    errln!(
                        "greenlight: {why}; goal {id}'s gates will use no result cache until a `goal gate add` finds a readable verify.yaml"
                    );
                    None
                }
            };
            store
                .write(|tx| {
                    tx.add_gate(id, &command)?;
                    tx.set_gate_config(id, config.as_deref())
                })
                .map_err(store_err)?;
        }
        GateCommand::Remove { n } => {
            store.write(|tx| tx.remove_gate(id, n)).map_err(store_err)?;
        }
        GateCommand::Clear => {
            store.write(|tx| tx.clear_gates(id)).map_err(store_err)?;
        }
    }
    for gate in store.gates(id).map_err(store_err)? {
        outln!("{}. {}", gate.number.unwrap_or(0), gate.command);
    }
    Ok(exit::DONE)
}
