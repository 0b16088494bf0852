//! `greenlight hook install|uninstall|stop`.

use std::path::PathBuf;

use greenlight_install::Error;
use greenlight_install::install::{self, Agent, Applied, Backup, HookSpec, Locations, Plan, Scope};
use greenlight_run::stop;

/// Exit codes of `hook install` and `hook uninstall`.
pub mod exit {
    /// Installed, removed, or already as asked.
    pub const OK: i32 = 0;
    /// Reading or writing a file failed.
    pub const IO_ERROR: i32 = 1;
    /// The settings file is not valid JSON or not the expected shape; nothing was written.
    pub const REFUSED: i32 = 2;
    /// `hook stop`: stdin is not a hook payload (or its arguments are wrong). Both agents treat
    /// any exit code but 0 and 2 as a non-blocking error: the stop goes ahead and the agent
    /// shows stderr. (2 would block and feed stderr to the model as its next instruction.)
    pub const BAD_PAYLOAD: i32 = 1;
}

/// The `hook` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Add greenlight's Stop, SubagentStop and SessionStart hooks to an agent's settings
    /// (idempotent; the file is edited only where greenlight's handlers go).
    Install {
        /// The agent whose settings to change.
        #[arg(long, value_enum)]
        agent: AgentArg,
        /// project: <repo>/.claude/settings.json or <repo>/.codex/hooks.json;
        /// user: ~/.claude/settings.json or ~/.codex/hooks.json.
        #[arg(long, value_enum, default_value_t = ScopeArg::Project)]
        scope: ScopeArg,
        /// Print the change as a diff and write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Directory inside the project [default: the current directory].
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// Seconds the agent lets the hook run before cancelling it.
        #[arg(long, value_name = "SECS", default_value_t = install::DEFAULT_TIMEOUT_SEC)]
        timeout: u32,
        /// The hook's command [default: `greenlight hook stop` for project scope, this
        /// binary's absolute path + ` hook stop` for user scope].
        #[arg(long, value_name = "CMD")]
        command: Option<String>,
        /// Install even when the other scope's settings already hold greenlight's hooks (the
        /// agent then runs every gate twice per stop).
        #[arg(long)]
        force: bool,
    },
    /// Remove greenlight's hooks from an agent's settings, leaving everything else as it was.
    Uninstall {
        /// The agent whose settings to change.
        #[arg(long, value_enum)]
        agent: AgentArg,
        /// Which settings file (see `install`).
        #[arg(long, value_enum, default_value_t = ScopeArg::Project)]
        scope: ScopeArg,
        /// Print the change as a diff and write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Directory inside the project [default: the current directory].
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
    },
    // An installed binary has no docs/ beside it, so help points into the repository.
    #[command(about = concat!(
        "The hook itself: read the agent's Stop payload on stdin, run the worktree's gates, and \
         allow the stop or block it with the evidence (docs/integrations/claude-code.md at ",
        env!("CARGO_PKG_REPOSITORY"), ")"
    ))]
    Stop {
        /// Consecutive blocks per session before greenlight lets the agent stop anyway (with a
        /// message that the gates are still red); 0 never blocks, it only reports.
        #[arg(long, value_name = "N", default_value_t = stop::DEFAULT_MAX_BLOCKS)]
        max_blocks: u32,
        /// The state database that keeps the block counts [default: $GREENLIGHT_STATE, else
        /// $XDG_STATE_HOME/greenlight/state.db, else ~/.local/state/greenlight/state.db].
        #[arg(long, value_name = "PATH")]
        state: Option<PathBuf>,
    },
    /// The SessionStart hook: read the agent's payload on stdin and record the commit this
    /// session's work is counted from, so the Stop hook judges the session's work even after
    /// the agent pushes and fetches. Prints nothing on stdout; always exits 0 unless stdin is
    /// not a payload.
    SessionStart {
        /// The state database (as for `hook stop`).
        #[arg(long, value_name = "PATH")]
        state: Option<PathBuf>,
        /// Accepted so one `--command` serves both hooks; unused here.
        #[arg(long, value_name = "N", hide = true)]
        max_blocks: Option<u32>,
    },
}

/// `--agent` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AgentArg {
    /// Claude Code.
    Claude,
    /// Codex CLI.
    Codex,
}

/// `--scope` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ScopeArg {
    /// The repository's settings (shared with everyone who clones it).
    Project,
    /// Your own settings on this machine.
    User,
}

/// Runs the subcommand and returns the process exit code.
pub fn run(command: Command) -> i32 {
    match command {
        Command::Install {
            agent,
            scope,
            dry_run,
            cwd,
            timeout,
            command,
            force,
        } => {
            let scope = scope_of(scope);
            let spec = HookSpec {
                command: command.unwrap_or_else(|| {
                    install::hook_command(scope, std::env::current_exe().ok().as_deref())
                }),
                timeout_sec: timeout,
            };
            let other = installed_in_other_scope(agent, scope, cwd.clone());
            let plan = path_for(agent_of(agent), scope, cwd)
                .and_then(|p| install::plan_install(&p, &spec));
            if let (Ok(plan), Some(other)) = (&plan, other)
                && plan.changes()
            {
                let flag = scope_flag(install::other_scope(scope));
                let why = format!(
                    "{} already holds greenlight's hooks, so installing them in {} too would run every gate twice per stop. Remove them there with `greenlight hook uninstall --agent {} --scope {flag}`, or pass --force to keep both",
                    other.display(),
                    plan.path.display(),
                    agent_of(agent).name()
                );
                if !force && !dry_run {
                    errln!("greenlight hook install: {why}; nothing was written");
                    return exit::REFUSED;
                }
                errln!("warning: {why}");
            }
            let code = finish("install", agent_of(agent), plan, dry_run);
            if code == exit::OK {
                warn_if_not_on_path(&spec.command);
            }
            code
        }
        Command::Uninstall {
            agent,
            scope,
            dry_run,
            cwd,
        } => {
            let plan = path_for(agent_of(agent), scope_of(scope), cwd)
                .and_then(|p| install::plan_uninstall(&p));
            finish("uninstall", agent_of(agent), plan, dry_run)
        }
        Command::Stop { max_blocks, state } => run_stop(max_blocks, state),
        Command::SessionStart { state, .. } => run_session_start(state),
    }
}

/// The agent's hook payload from stdin, or `None` after saying on stderr why it is unusable.
fn read_payload(hook: &str) -> Option<stop::Payload> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    if let Err(e) = std::io::stdin().lock().read_to_end(&mut bytes) {
        errln!("greenlight hook {hook}: cannot read stdin: {e}");
        return None;
    }
    match stop::parse_payload(&bytes) {
        Ok(p) => Some(p),
        Err(e) => {
            errln!("greenlight hook {hook}: {e}");
            None
        }
    }
}

/// `hook stop`: stdout carries exactly one JSON object or nothing; everything else is stderr.
fn run_stop(max_blocks: u32, state: Option<PathBuf>) -> i32 {
    let Some(payload) = read_payload("stop") else {
        return exit::BAD_PAYLOAD;
    };
    let options = stop::StopOptions {
        max_blocks,
        state_path: state,
        env: crate::environment::get().clone(),
        reason_budget: stop::REASON_BUDGET,
        remote: Some(crate::remote::settings()),
    };
    let outcome = match greenlight_proc::run_main(|mut interrupt| async move {
        stop::run(&payload, &options, &mut interrupt).await
    }) {
        Ok(outcome) => outcome,
        Err(e) => {
            let message = format!("greenlight: cannot start the async runtime ({e}); no gate ran");
            stop::StopOutcome {
                decision: stop::Decision::Allow {
                    system_message: Some(message.clone()),
                },
                notes: vec![message],
            }
        }
    };
    for note in &outcome.notes {
        errln!("{note}");
    }
    if let Some(json) = outcome.decision.to_json() {
        outln!("{json}");
    }
    exit::OK
}

/// A project-scope entry names `greenlight` for the agent's `PATH` to find (an absolute path
/// from one machine would be wrong on the next). When this shell's `PATH` has no `greenlight`,
/// the agent's likely has none either, and every run of `command` would fail: say so, and how
/// to fix it.
pub(crate) fn warn_if_not_on_path(command: &str) {
    if command.split(' ').next() != Some("greenlight") {
        return;
    }
    let path = crate::environment::get().vars.var("PATH");
    if !greenlight_init::Programs::Path(path).has("greenlight") {
        let exe = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "the greenlight binary".to_owned());
        errln!(
            "warning: `greenlight` is not on PATH, so the agent cannot run `{command}` as \
             written. Install it on PATH (e.g. `cargo install --locked --path \
             crates/greenlight`), or install for yourself only with `--scope user`, \
             which names {exe} by its absolute path."
        );
    }
}

/// `hook session-start`: stdout stays empty (the agent would add it to the model's context).
fn run_session_start(state: Option<PathBuf>) -> i32 {
    let Some(payload) = read_payload("session-start") else {
        return exit::BAD_PAYLOAD;
    };
    let options = stop::StopOptions {
        max_blocks: stop::DEFAULT_MAX_BLOCKS,
        state_path: state,
        env: crate::environment::get().clone(),
        reason_budget: stop::REASON_BUDGET,
        remote: Some(crate::remote::settings()),
    };
    for note in stop::record_session_start(&payload, &options) {
        errln!("{note}");
    }
    exit::OK
}

/// Where user-level settings live, in the environment this process started with.
pub(crate) fn locations() -> Locations {
    let env = &crate::environment::get().vars;
    Locations::from_env(|name| env.var(name))
}

fn agent_of(agent: AgentArg) -> Agent {
    match agent {
        AgentArg::Claude => Agent::Claude,
        AgentArg::Codex => Agent::Codex,
    }
}

pub(crate) fn scope_of(scope: ScopeArg) -> Scope {
    match scope {
        ScopeArg::Project => Scope::Project,
        ScopeArg::User => Scope::User,
    }
}

/// The other scope's settings file, when it holds greenlight's hooks already. A file that
/// cannot be found or read there is not this install's business: `None`.
fn installed_in_other_scope(
    agent: AgentArg,
    scope: Scope,
    cwd: Option<PathBuf>,
) -> Option<PathBuf> {
    let other = path_for(agent_of(agent), install::other_scope(scope), cwd).ok()?;
    install::holds_greenlight_hooks(&other)
        .unwrap_or(false)
        .then_some(other)
}

/// How `--scope` spells a scope.
fn scope_flag(scope: Scope) -> &'static str {
    match scope {
        Scope::Project => "project",
        Scope::User => "user",
    }
}

fn path_for(agent: Agent, scope: Scope, cwd: Option<PathBuf>) -> Result<PathBuf, Error> {
    let dir = cwd.unwrap_or_else(|| PathBuf::from("."));
    let root = install::project_root(&dir);
    let path = install::settings_path(agent, scope, &root, &locations())?;
    if scope == Scope::Project {
        install::check_inside_project(&path, &root)?;
    }
    Ok(path)
}

/// Renders the outcome of a plan and maps errors to exit codes.
fn finish(verb: &str, agent: Agent, plan: Result<Plan, Error>, dry_run: bool) -> i32 {
    let plan = match plan {
        Ok(plan) => plan,
        Err(e) => return fail(verb, &e),
    };
    let path = plan.path.display();
    if dry_run {
        if plan.changes() {
            out!("{}", plan.diff());
        } else {
            outln!("{path}: nothing to change");
        }
        return exit::OK;
    }
    match plan.apply() {
        Ok(Applied::Unchanged) if verb == "install" => {
            outln!(
                "greenlight's Stop, SubagentStop and SessionStart hooks are already in {path}; \
                 nothing changed"
            );
            exit::OK
        }
        Ok(Applied::Unchanged) => {
            outln!("no greenlight hooks in {path}; nothing changed");
            exit::OK
        }
        Ok(Applied::Removed) => {
            outln!(
                "removed greenlight's hooks from {path}; it held nothing else and greenlight had \
                 created it, so the file is gone"
            );
            exit::OK
        }
        Ok(Applied::Written { backup }) => {
            if verb == "install" {
                outln!(
                    "installed greenlight's Stop, SubagentStop and SessionStart hooks in {path}"
                );
            } else {
                outln!("removed greenlight's hooks from {path}");
            }
            report_backup(backup.as_ref());
            if verb == "install" {
                match agent {
                    Agent::Claude => outln!(
                        "Claude Code reads hooks when a session starts: restart it, or review the change in /hooks."
                    ),
                    Agent::Codex => outln!(
                        "Codex runs a new or changed hook only after you trust it: open /hooks in Codex and trust it."
                    ),
                }
            }
            exit::OK
        }
        Err(e) => fail(verb, &e),
    }
}

/// Says where the file's earlier bytes are kept.
pub(crate) fn report_backup(backup: Option<&Backup>) {
    match backup {
        Some(Backup::Made(backup)) => {
            outln!("the previous file is kept as {}", backup.display());
        }
        Some(Backup::Kept(backup)) => outln!(
            "{} (the file as it was before greenlight first changed it) is kept as it was",
            backup.display()
        ),
        None => {}
    }
}

fn fail(verb: &str, e: &Error) -> i32 {
    errln!("greenlight hook {verb}: {e}");
    exit_code(e)
}

/// The exit code of a failed install or uninstall: [`exit::REFUSED`] when the fault is in a
/// file or setting the user controls, else [`exit::IO_ERROR`].
pub(crate) fn exit_code(e: &Error) -> i32 {
    if e.is_user_input() {
        exit::REFUSED
    } else {
        exit::IO_ERROR
    }
}
