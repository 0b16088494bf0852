//! `greenlight worker`: a Remote Workers API bot for a REAPI grid (BuildGrid). It takes leases
//! whose platform matches its properties and runs each action like a gate (its own process
//! group, the action's timeout, one interleaved output, nothing left behind), at most
//! `--capacity` at once, until SIGINT or SIGTERM; then it ends what runs, tells the grid it is
//! terminating, hands the leases back for another worker, and exits 0. It prints one line per
//! event on stderr. A build without the `remote` feature refuses it, naming the feature.

use std::path::PathBuf;

#[cfg(feature = "remote")]
use greenlight_worker::{Config, Event};

/// Arguments of `greenlight worker`.
#[derive(Debug, clap::Args)]
// Without the `remote` feature the arguments are parsed (so `--help` still shows them) and unread.
#[cfg_attr(not(feature = "remote"), allow(dead_code))]
pub struct Args {
    /// The grid's URL, e.g. http://127.0.0.1:50051 (https:// for TLS with the system's roots).
    #[arg(long, value_name = "URL")]
    pub grid: String,
    /// The REAPI instance name (empty: the grid's default instance).
    #[arg(long, value_name = "NAME", default_value = "")]
    pub instance: String,
    /// How many leases may run at once.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u16).range(1..))]
    pub capacity: u16,
    /// A platform property offered to the scheduler, as key=value; repeatable. OSFamily and
    /// ISA are offered from this machine unless given.
    #[arg(long = "property", value_name = "KEY=VALUE")]
    pub properties: Vec<String>,
    /// Where the per-toolchain caches (CARGO_HOME, npm_config_cache) and the lease directories
    /// live [default: worker-cache/ beside the state database]. Workers sharing it end the
    /// processes a killed one left behind.
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// The bot id the grid knows this worker by; unique within the grid [default:
    /// <host name>-<pid>].
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
}

/// Exit codes of `greenlight worker`.
#[cfg_attr(not(feature = "remote"), allow(dead_code))]
pub mod exit {
    /// Stopped by SIGINT or SIGTERM, every lease ended and handed back.
    pub const STOPPED: i32 = 0;
    /// The grid could not be reached or refused the worker, or the cache directory is unusable.
    pub const ERROR: i32 = 1;
    /// A bad argument (a `--property` that is not key=value, no cache directory to be found).
    pub const USAGE: i32 = 2;
}

/// In a build without the `remote` feature: the refusal, as a usage error.
#[cfg(not(feature = "remote"))]
pub fn run(_: Args) -> i32 {
    errln!(
        "greenlight worker: {}",
        crate::left_out::REMOTE.refusal("greenlight worker")
    );
    exit::USAGE
}

/// Runs the worker until it is told to stop; returns the exit code.
#[cfg(feature = "remote")]
pub fn run(args: Args) -> i32 {
    let config = match config(args) {
        Ok(config) => config,
        Err(message) => {
            errln!("greenlight worker: {message}");
            return exit::USAGE;
        }
    };
    let shown: Vec<String> = config
        .properties
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let instance = if config.instance.is_empty() {
        "the default instance".to_owned()
    } else {
        format!("instance `{}`", config.instance)
    };
    errln!(
        "greenlight worker: {} on {} ({instance}), capacity {}, properties {}, cache {}",
        config.name,
        config.grid,
        config.capacity,
        shown.join(" "),
        config.cache_dir.display()
    );
    let served =
        greenlight_proc::run_main(|interrupt| greenlight_worker::serve(config, interrupt, show));
    match served {
        Ok(Ok(())) => {
            errln!("greenlight worker: stopped");
            exit::STOPPED
        }
        Ok(Err(e)) => {
            errln!("greenlight worker: {e}");
            exit::ERROR
        }
        Err(e) => {
            errln!("greenlight worker: cannot start: {e}");
            exit::ERROR
        }
    }
}

#[cfg(feature = "remote")]
fn config(args: Args) -> Result<Config, String> {
    let mut properties = Vec::new();
    for text in &args.properties {
        properties
            .push(greenlight_worker::parse_property(text).map_err(|e| format!("--property {e}"))?);
    }
    let cache_dir = match args.cache_dir {
        Some(dir) => dir,
        None => crate::environment::get()
            .state_path(None)
            .map_err(|e| format!("{e}; or name a cache directory with --cache-dir"))?
            .parent()
            .map(|dir| dir.join("worker-cache"))
            .ok_or("the state database has no parent directory; name one with --cache-dir")?,
    };
    Ok(Config {
        grid: args.grid,
        instance: args.instance,
        capacity: usize::from(args.capacity),
        properties: greenlight_worker::default_properties(properties),
        name: args.name.unwrap_or_else(greenlight_worker::default_name),
        cache_dir,
    })
}

/// One stderr line per event.
#[cfg(feature = "remote")]
fn show(event: Event) {
    match event {
        Event::Connected { session } => errln!("greenlight worker: connected, session {session}"),
        Event::LeaseStarted { lease, action } => {
            errln!("greenlight worker: lease {lease} started (action {action})")
        }
        Event::LeaseFinished { lease, outcome } => {
            errln!("greenlight worker: lease {lease} finished: {outcome}")
        }
        Event::LeaseWithdrawn { lease } => {
            errln!(
                "greenlight worker: lease {lease} withdrawn by the grid; its processes were ended"
            )
        }
        Event::Swept {
            processes,
            directories,
        } => {
            errln!(
                "greenlight worker: ended {} processes and removed {directories} lease directories left by a dead worker",
                processes.len()
            );
            for process in processes {
                errln!("  {process}");
            }
        }
        Event::GridTrouble { detail, retry_in } => errln!(
            "greenlight worker: the grid did not answer ({detail}); trying again in {}ms",
            retry_in.as_millis()
        ),
        Event::SessionLost { detail } => {
            errln!("greenlight worker: the grid lost the session ({detail}); starting a new one")
        }
        Event::Stopping { running } => errln!(
            "greenlight worker: stopping: telling the grid (BOT_TERMINATING), ending {running} running leases and handing them back"
        ),
    };
}
