//! `greenlight mcp install|uninstall`: register greenlight's MCP server with Claude Code and
//! Codex, or take it out again. Plain `greenlight mcp` is the server itself.
//!
//! Every file is planned before any is written, so a refused file (not valid JSON or TOML, the
//! wrong shape, read-only, a symlink out of the project) leaves every file as it was. Exit
//! codes are `hook install`'s ([`exit`]).

use std::path::PathBuf;

use greenlight_install::Error;
use greenlight_install::mcp_install::{
    self, Agent, Change, ConfigFile, McpPlan, Scope, ServerSpec,
};
use greenlight_install::settings_file::{self, Applied};

pub use crate::cmd::hook::exit;
use crate::cmd::hook::{ScopeArg, exit_code, report_backup, scope_of, warn_if_not_on_path};

/// The `mcp` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum McpCommand {
    /// Register greenlight's MCP server (`greenlight mcp`) with Claude Code and Codex
    /// (idempotent; only greenlight's entry in each file changes).
    Install(InstallArgs),
    /// Take greenlight's MCP server out of Claude Code's and Codex's settings, leaving
    /// everything else as it was.
    Uninstall(UninstallArgs),
}

/// Which files: the agents, the scope, the project.
#[derive(Debug, clap::Args)]
pub struct Targets {
    /// Claude Code: <repo>/.mcp.json, or ~/.claude.json with --scope user
    /// [default: both agents when neither --claude nor --codex is given].
    #[arg(long)]
    pub claude: bool,
    /// Codex: <repo>/.codex/config.toml (read in a trusted project only), or
    /// ~/.codex/config.toml with --scope user.
    #[arg(long)]
    pub codex: bool,
    /// Whose files (see --claude and --codex).
    #[arg(long, value_enum, default_value_t = ScopeArg::Project)]
    pub scope: ScopeArg,
    /// Print the change as a diff and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Directory inside the project [default: the current directory].
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
}

/// `mcp install` arguments.
#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    #[command(flatten)]
    pub targets: Targets,
    /// The program the agent starts with the argument `mcp` [default: `greenlight` for project
    /// scope, this binary's absolute path for user scope].
    #[arg(long, value_name = "CMD")]
    pub command: Option<String>,
    /// Codex's limit for one tool call, in seconds [default: what the gates of
    /// .greenlight/verify.yaml (else .commandmate/verify.yaml) can take, retries included, plus
    /// a margin; 1800 without one].
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
}

/// `mcp uninstall` arguments.
#[derive(Debug, clap::Args)]
pub struct UninstallArgs {
    #[command(flatten)]
    pub targets: Targets,
}

/// `mcp install`.
pub fn install(args: InstallArgs) -> i32 {
    let targets = &args.targets;
    let scope = scope_of(targets.scope);
    let (dir, files) = match files(targets) {
        Ok(found) => found,
        Err(e) => return fail("install", &e),
    };
    let command = args.command.clone().unwrap_or_else(|| {
        mcp_install::server_command(scope, std::env::current_exe().ok().as_deref())
    });
    // Only Codex takes a limit; without --timeout it is fitted to the gates, and said so.
    let (tool_timeout_sec, note) = match args.timeout {
        Some(seconds) => (seconds, None),
        None if files.iter().any(|f| f.agent == Agent::Codex) => {
            let timeout = mcp_install::tool_timeout(&dir, scope);
            (timeout.seconds, Some(timeout.explain()))
        }
        None => (mcp_install::DEFAULT_TOOL_TIMEOUT_SEC, None),
    };
    let spec = ServerSpec::new(command, tool_timeout_sec);
    let plans = match all_planned(
        "install",
        files.iter().map(|f| mcp_install::plan_install(f, &spec)),
    ) {
        Ok(plans) => plans,
        Err(code) => return code,
    };
    if let Some(note) = note {
        errln!("note: {note}");
    }
    let code = finish("install", &plans, targets.dry_run);
    if code == exit::OK {
        warn_if_not_on_path(&format!("{} {}", spec.command, spec.args.join(" ")));
    }
    code
}

/// `mcp uninstall`.
pub fn uninstall(args: UninstallArgs) -> i32 {
    let files = match files(&args.targets) {
        Ok((_, files)) => files,
        Err(e) => return fail("uninstall", &e),
    };
    match all_planned("uninstall", files.iter().map(mcp_install::plan_uninstall)) {
        Ok(plans) => finish("uninstall", &plans, args.targets.dry_run),
        Err(code) => code,
    }
}

/// The directory the command works from (absolute, so the search for verify.yaml can go up)
/// and the files of the chosen agents.
fn files(targets: &Targets) -> Result<(PathBuf, Vec<ConfigFile>), Error> {
    let given = targets.cwd.clone().unwrap_or_else(|| PathBuf::from("."));
    let dir = std::fs::canonicalize(&given).map_err(|source| Error::Read {
        path: given.clone(),
        source,
    })?;
    let root = settings_file::project_root(&dir);
    let scope = scope_of(targets.scope);
    let agents: Vec<Agent> = match (targets.claude, targets.codex) {
        (true, false) => vec![Agent::Claude],
        (false, true) => vec![Agent::Codex],
        _ => vec![Agent::Claude, Agent::Codex],
    };
    let locations = super::hook::locations();
    let mut files = Vec::new();
    for agent in agents {
        let file = mcp_install::config_file(agent, scope, &root, &locations)?;
        if scope == Scope::Project {
            settings_file::check_inside_project(&file.path, &root)?;
        }
        files.push(file);
    }
    Ok((dir, files))
}

/// Every plan, or the exit code after naming each file that cannot be planned: one such file
/// stops the command before a byte is written.
fn all_planned(
    verb: &str,
    plans: impl Iterator<Item = Result<McpPlan, Error>>,
) -> Result<Vec<McpPlan>, i32> {
    let mut ready = Vec::new();
    let mut code = exit::OK;
    for plan in plans {
        match plan {
            Ok(plan) => ready.push(plan),
            Err(e) => code = code.max(fail(verb, &e)),
        }
    }
    if code == exit::OK {
        return Ok(ready);
    }
    if !ready.is_empty() {
        errln!("greenlight mcp {verb}: nothing was written");
    }
    Err(code)
}

/// Shows the plans as diffs, or applies them one by one and says what each did.
fn finish(verb: &str, ready: &[McpPlan], dry_run: bool) -> i32 {
    if dry_run {
        for plan in ready {
            if plan.plan.changes() {
                out!("{}", plan.plan.diff());
            } else {
                outln!("{}: nothing to change", plan.plan.path.display());
            }
        }
        return exit::OK;
    }
    for plan in ready {
        match plan.plan.apply() {
            Ok(applied) => report(verb, plan, &applied),
            Err(e) => return fail(verb, &e),
        }
    }
    if verb == "install" {
        for plan in ready.iter().filter(|p| p.change != Change::Unchanged) {
            outln!("{}", next_step(&plan.file));
        }
    }
    exit::OK
}

/// One line per file: its path and what happened to greenlight's entry.
fn report(verb: &str, plan: &McpPlan, applied: &Applied) {
    let path = plan.plan.path.display();
    match applied {
        Applied::Unchanged if verb == "install" => {
            outln!("{path}: unchanged (the greenlight MCP server is already there)");
        }
        Applied::Unchanged => outln!("{path}: unchanged (no greenlight MCP server in it)"),
        Applied::Removed => outln!(
            "{path}: removed the greenlight MCP server; the file held nothing else and greenlight \
             had created it, so the file is gone"
        ),
        Applied::Written { backup } => {
            outln!("{path}: {} the greenlight MCP server", plan.change.word());
            report_backup(backup.as_ref());
        }
    }
}

/// What the user does next for the agent to start the server.
fn next_step(file: &ConfigFile) -> String {
    match (file.agent, file.scope) {
        (Agent::Claude, Scope::Project) => "Claude Code starts MCP servers when a session starts, \
            and asks once before it trusts a project's .mcp.json: restart it and approve \
            `greenlight` (`claude mcp list` shows it)."
            .to_string(),
        (Agent::Claude, Scope::User) => {
            "Claude Code starts MCP servers when a session starts: restart it (`claude mcp list` \
             shows the server)."
                .to_string()
        }
        (Agent::Codex, Scope::Project) => format!(
            "Codex reads {} only in a project you trust (it asks the first time it runs here): \
             restart Codex in the project (`codex mcp list` shows the server once it is trusted).",
            file.path.display()
        ),
        (Agent::Codex, Scope::User) => {
            "Codex starts MCP servers when a session starts: restart it (`codex mcp list` shows \
             the server)."
                .to_string()
        }
    }
}

fn fail(verb: &str, e: &Error) -> i32 {
    errln!("greenlight mcp {verb}: {e}");
    exit_code(e)
}
