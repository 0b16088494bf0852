//! `greenlight serve`: the dashboard and the live API for a state file, until SIGINT/SIGTERM;
//! and MCP (streamable HTTP) at `/mcp`, in a build with the `mcp` feature.

use std::net::SocketAddr;
use std::path::PathBuf;

use greenlight_server::{Config, DEFAULT_LISTEN, read_token_file};

/// Arguments of `greenlight serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The address to listen on; anything but loopback requires --token-file.
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// The state database: a file, or a postgres:// URL [default: $GREENLIGHT_STORE, else $GREENLIGHT_STATE, else $XDG_STATE_HOME/greenlight/state.db].
    #[arg(long, visible_alias = "store", value_name = "PATH|URL")]
    pub state: Option<PathBuf>,
    /// A file whose first line is the token every request must carry (bearer header, or the
    /// cookie `/login?token=…` sets).
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Another host name the server answers to (behind a proxy); repeatable.
    #[arg(long = "allow-host", value_name = "NAME")]
    pub allow_hosts: Vec<String>,
}

/// Exit codes of `greenlight serve`.
mod exit {
    /// Stopped by SIGINT/SIGTERM after closing every stream.
    pub const STOPPED: i32 = 0;
    /// Could not start (address, token file, state database).
    pub const ERROR: i32 = 1;
}

/// How long a stop waits for a verify running for an MCP client to end its gates.
#[cfg(feature = "mcp")]
const MCP_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// The server's setup from the arguments.
pub fn config(
    listen: SocketAddr,
    state: Option<PathBuf>,
    token_file: Option<&PathBuf>,
    allow_hosts: Vec<String>,
) -> Result<Config, String> {
    let state = crate::environment::get()
        .state_path(state.as_deref())
        .map_err(|e| e.to_string())?;
    let token = token_file
        .map(|path| read_token_file(path))
        .transpose()
        .map_err(|e| e.to_string())?;
    Ok(Config {
        token,
        allow_hosts,
        ..Config::new(listen, state)
    })
}

/// Runs the server until SIGINT/SIGTERM; returns the exit code.
pub fn run(args: Args) -> i32 {
    let config = match config(
        args.listen,
        args.state,
        args.token_file.as_ref(),
        args.allow_hosts,
    ) {
        Ok(config) => config,
        Err(e) => {
            errln!("greenlight: {e}");
            return exit::ERROR;
        }
    };
    let token = config.token.is_some();
    // The MCP endpoint's verify ends its gates on the same signals as the rest of the server.
    #[cfg(feature = "mcp")]
    let (mcp_stop, mcp_signals) = tokio::sync::watch::channel(None);
    #[cfg(feature = "mcp")]
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    #[cfg(feature = "mcp")]
    let mcp = greenlight_mcp::McpServer::new(
        greenlight_mcp::Options {
            cwd,
            state: Some(config.state.clone()),
            remote: Some(crate::remote::settings()),
            env: crate::environment::get().clone(),
        },
        mcp_signals,
    );
    #[cfg(feature = "mcp")]
    let config = Config {
        extra_routes: Some(axum::Router::new().nest_service(
            "/mcp",
            greenlight_mcp::http::router(mcp.clone(), greenlight_mcp::http::Limits::default()),
        )),
        ..config
    };
    let server = match greenlight_server::start(config) {
        Ok(server) => server,
        Err(e) => {
            errln!("greenlight: {e}");
            return exit::ERROR;
        }
    };
    let url = server.url();
    if token {
        errln!("greenlight: serving on {url} (open {url}login?token=<token> once in a browser)");
    } else {
        errln!("greenlight: serving on {url}");
    }
    if let Some(e) = server.wake_unavailable() {
        errln!(
            "greenlight: note: writers cannot wake this server ({e}); it looks for new frames every {} ms instead",
            greenlight_server::POLL_INTERVAL.as_millis()
        );
    }
    #[cfg(feature = "mcp")]
    errln!("greenlight: MCP (streamable HTTP) on {url}mcp");
    #[cfg(not(feature = "mcp"))]
    errln!(
        "greenlight: {}",
        crate::left_out::MCP.refusal(&format!("MCP at {url}mcp"))
    );
    // The signals every long-running subcommand stops on; the server runs on its own threads.
    let waited = greenlight_proc::run_main(|mut interrupt| async move {
        while interrupt.borrow().is_none() {
            if interrupt.changed().await.is_err() {
                break;
            }
        }
        // A verify running for an MCP client ends its gates before the server goes.
        #[cfg(feature = "mcp")]
        mcp_stop.send_replace(*interrupt.borrow());
        #[cfg(feature = "mcp")]
        mcp.shutdown(MCP_PATIENCE).await;
    });
    if let Err(e) = waited {
        errln!("greenlight: cannot wait for signals: {e}");
    }
    match server.stop() {
        Ok(()) => {
            errln!("greenlight: server stopped");
            exit::STOPPED
        }
        Err(e) => {
            errln!("greenlight: {e}");
            exit::ERROR
        }
    }
}
