//! The `greenlight` command line: argument parsing and rendering only; every decision lives in
//! a library crate. Every byte it writes goes through [`out`], so no write can panic.

#![deny(clippy::print_stdout, clippy::print_stderr)]

#[macro_use]
mod out;
mod agents;
mod cmd;
mod colour;
mod duration;
mod environment;
mod goal_run;
mod left_out;
mod remote;
#[cfg(not(feature = "remote"))]
mod remote_left_out;
mod workflow_run;

use clap::{Parser, Subcommand};

/// Deterministic checks as the authority over AI coding agents.
#[derive(Debug, Parser)]
#[command(name = "greenlight", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the gates declared in a verify.yaml and judge each by its exit code.
    Verify(cmd::verify::Args),
    /// Turn test or build output into exact, compact diagnostics.
    Digest(cmd::digest::Args),
    /// Probe or dispatch an agent CLI (claude, codex, or any command).
    #[command(subcommand)]
    Agent(cmd::agent::Command),
    /// Keep an agent working on a goal until the gates are green.
    Goal(cmd::goal::Args),
    /// Watch greenlight fix a bundled project offline: gates red, evidence, then green.
    Demo(cmd::demo::Args),
    /// The demo's scripted agent (used by `greenlight demo`).
    #[command(hide = true)]
    DemoAgent(cmd::demo::AgentArgs),
    /// The workflow demo's scripted agents (used by `greenlight demo workflow`).
    #[command(hide = true)]
    DemoWorkflowAgent(cmd::demo_workflow::AgentArgs),
    /// Draft a verify.yaml from what the repository already runs.
    Init(cmd::init::Args),
    /// greenlight's config home: move CommandMate's verify.yaml into .greenlight/.
    #[command(subcommand)]
    Config(cmd::config::Command),
    /// Agent Stop hooks: install, uninstall, and the hook itself.
    #[command(subcommand)]
    Hook(cmd::hook::Command),
    /// The recorded verify and hook runs of this repository, and each gate's durations and
    /// failure rates.
    History(cmd::history::Args),
    /// Serve the dashboard and the live API (SSE with resume) for a state file.
    Serve(cmd::serve::Args),
    /// The state store (a SQLite file or a PostgreSQL database): check it, migrate it.
    Store(cmd::store::Args),
    /// The result cache of version 2 gates: stats, prune, clear.
    #[command(subcommand)]
    Cache(cmd::cache::Command),
    /// The MCP server (stdio): verify, digest, evidence and goals as tools for agents; and its
    /// install into Claude Code and Codex.
    Mcp(cmd::mcp::Args),
    /// Take leases from a remote execution grid (BuildGrid) and run them like gates.
    Worker(cmd::worker::Args),
    /// Workflow plans: many agent steps, fanned out, joined and gated (check).
    #[command(subcommand)]
    Workflow(cmd::workflow::Command),
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap's usage error exits 2, which an agent reads as "block" and feeds to the model
            // as its next instruction: a mistyped `hook stop` flag would trap the agent. So the
            // hook reports bad arguments with the non-blocking code instead.
            let mut args = std::env::args_os().skip(1);
            let hook_stop = args.next().is_some_and(|a| a == "hook")
                && args.next().is_some_and(|a| a == "stop");
            if hook_stop && e.use_stderr() {
                let _ = e.print();
                std::process::exit(cmd::hook::exit::BAD_PAYLOAD);
            }
            // clap ignores a failed write of --help or --version; into a pipe or a file it goes
            // through `out`, so a closed pipe is 141 and a full disk exit 1 like any output.
            if !e.use_stderr() && !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                out!("{}", e.render());
                std::process::exit(out::finish(e.exit_code()));
            }
            e.exit()
        }
    };
    // The one read of the process environment, before any subcommand runs.
    environment::get();
    let code = match cli.command {
        Command::Verify(args) => cmd::verify::run(args),
        Command::Digest(args) => cmd::digest::run(args),
        Command::Agent(command) => cmd::agent::run(command),
        Command::Goal(args) => cmd::goal::run(args),
        Command::Demo(args) => cmd::demo::run(args),
        Command::DemoAgent(args) => cmd::demo::agent(args),
        Command::DemoWorkflowAgent(args) => cmd::demo_workflow::agent(args),
        Command::Init(args) => cmd::init::run(args),
        Command::Config(command) => cmd::config::run(command),
        Command::Hook(command) => cmd::hook::run(command),
        Command::History(args) => cmd::history::run(args),
        Command::Serve(args) => cmd::serve::run(args),
        Command::Store(args) => cmd::store::run(args),
        Command::Mcp(args) => cmd::mcp::run(args),
        Command::Cache(command) => cmd::cache::run(command),
        Command::Worker(args) => cmd::worker::run(args),
        Command::Workflow(command) => cmd::workflow::run(command),
    };
    std::process::exit(out::finish(code));
}
