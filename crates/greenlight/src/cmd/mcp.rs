//! `greenlight mcp`: the MCP server on stdin and stdout (what Claude Code, Codex and other MCP
//! clients start), until its input ends or SIGINT/SIGTERM; a verify still running then ends
//! its gates before the server exits. A build without the `mcp` feature refuses to serve,
//! naming the feature; `install` and `uninstall` work in every build.

use std::path::PathBuf;
#[cfg(feature = "mcp")]
use std::time::Duration;

#[cfg(feature = "mcp")]
use greenlight_mcp::{McpServer, Options};

use crate::cmd::mcp_install::{self, McpCommand};

/// Arguments of `greenlight mcp`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Without a subcommand: run the MCP server on stdin/stdout.
    #[command(subcommand)]
    pub command: Option<McpCommand>,
    /// The state database runs and goals are read from and recorded in [default:
    /// $GREENLIGHT_STATE, else $XDG_STATE_HOME/greenlight/state.db].
    #[arg(long, visible_alias = "store", value_name = "PATH|URL")]
    pub state: Option<PathBuf>,
}

/// Exit codes of `greenlight mcp`.
#[cfg_attr(not(feature = "mcp"), allow(dead_code))]
mod exit {
    /// The client closed the session.
    pub const DONE: i32 = 0;
    /// The runtime, the working directory or the session could not be set up.
    pub const ERROR: i32 = 1;
}

/// How long a stop waits for a running verify to end its gates.
#[cfg(feature = "mcp")]
const PATIENCE: Duration = Duration::from_secs(30);

/// Runs the subcommand and returns the process exit code.
pub fn run(args: Args) -> i32 {
    match args.command {
        None => serve(args.state),
        Some(McpCommand::Install(args)) => mcp_install::install(args),
        Some(McpCommand::Uninstall(args)) => mcp_install::uninstall(args),
    }
}

/// In a build without the `mcp` feature: the refusal.
#[cfg(not(feature = "mcp"))]
fn serve(_: Option<PathBuf>) -> i32 {
    errln!(
        "greenlight mcp: {}",
        crate::left_out::MCP.refusal("the MCP server")
    );
    exit::ERROR
}

/// The server on stdin and stdout.
#[cfg(feature = "mcp")]
fn serve(state: Option<PathBuf>) -> i32 {
    let cwd = match std::env::current_dir() {
        Ok(dir) => dir,
        Err(e) => {
            errln!(
                "greenlight mcp: cannot read the working directory ({e}); start the server in the project's directory"
            );
            return exit::ERROR;
        }
    };
    let input = match greenlight_mcp::stdin::stdin() {
        Ok(input) => input,
        Err(e) => {
            errln!("greenlight mcp: cannot start the thread that reads stdin: {e}");
            return exit::ERROR;
        }
    };
    let outcome = greenlight_proc::run_main(|signals| async move {
        let server = McpServer::new(
            Options {
                cwd,
                state,
                remote: Some(crate::remote::settings()),
                env: crate::environment::get().clone(),
            },
            signals.clone(),
        );
        let session = greenlight_mcp::stdio::serve(server.clone(), input, tokio::io::stdout());
        let mut signals = signals;
        tokio::select! {
            ended = session => match ended {
                Ok(ended) if ended.unanswered.is_empty() => exit::DONE,
                Ok(ended) => {
                    errln!(
                        "greenlight mcp: the input ended and no answer naming request {} was written (the MCP library refused {} without its id, or stopped serving); check {} and send {} again",
                        ended.unanswered.join(", "),
                        if ended.unanswered.len() == 1 { "it" } else { "them" },
                        if ended.unanswered.len() == 1 { "it" } else { "them" },
                        if ended.unanswered.len() == 1 { "it" } else { "them" },
                    );
                    exit::ERROR
                }
                Err(e) => {
                    errln!("greenlight mcp: {e}");
                    exit::ERROR
                }
            },
            received = signals.wait_for(Option::is_some) => {
                let signal = received.ok().and_then(|r| *r);
                server.shutdown(PATIENCE).await;
                signal.map_or(exit::ERROR, |s| s.exit_code())
            }
        }
    });
    match outcome {
        Ok(code) => code,
        Err(e) => {
            errln!("greenlight mcp: cannot start the async runtime or its signal handlers: {e}");
            exit::ERROR
        }
    }
}
