//! `greenlight store check|migrate`: what an operator asks of a state store (a SQLite file or a
//! PostgreSQL database) before pointing workers and servers at it.

use std::path::PathBuf;

use greenlight_store::{Reads, SCHEMA_VERSION, Store};

/// Exit codes of `greenlight store`.
pub mod exit {
    /// The store is current (check), or now is (migrate).
    pub const OK: i32 = 0;
    /// `check`: the store is older than this greenlight, or has none yet: `migrate` it.
    pub const NEEDS_MIGRATE: i32 = 1;
    /// The store cannot be reached or read, or is newer than this greenlight.
    pub const ERROR: i32 = 2;
}

/// Arguments of `greenlight store`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The state database: a file, or a postgres:// URL [default: $GREENLIGHT_STORE, else
    /// $GREENLIGHT_STATE, else $XDG_STATE_HOME/greenlight/state.db].
    #[arg(long, global = true, visible_alias = "store", value_name = "PATH|URL")]
    pub state: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Say which store this is, whether it can be reached and whether its schema is this
    /// greenlight's, changing nothing.
    Check,
    /// Bring the store's schema up to this greenlight's (one transaction per step; a store
    /// from a newer greenlight is refused and left as it is).
    Migrate,
}

/// Runs `greenlight store …`.
pub fn run(args: Args) -> i32 {
    let location = match crate::environment::get().state_path(args.state.as_deref()) {
        Ok(l) => l,
        Err(e) => {
            errln!("greenlight: {e}");
            return exit::ERROR;
        }
    };
    let shown = match location
        .to_str()
        .filter(|l| greenlight_store::pg::is_url(l))
    {
        Some(url) => match greenlight_store::pg::PgTarget::parse(url) {
            Ok(target) => format!("PostgreSQL store {}", target.shown()),
            Err(e) => {
                errln!("greenlight: {e}");
                return exit::ERROR;
            }
        },
        None => format!("SQLite store {}", location.display()),
    };
    let found = match greenlight_store::stored_schema_version(&location) {
        Ok(v) => v,
        Err(e) => {
            errln!("greenlight: {e}");
            return exit::ERROR;
        }
    };
    match args.command {
        Command::Check => match found {
            None => {
                outln!(
                    "greenlight: {shown}: reachable, no greenlight schema yet; \
                     `greenlight store migrate` creates it (schema {SCHEMA_VERSION})"
                );
                exit::NEEDS_MIGRATE
            }
            Some(v) if v == SCHEMA_VERSION => {
                let open = Store::open(&location).and_then(|s| s.queue_open_count());
                match open {
                    Ok(n) => {
                        outln!(
                            "greenlight: {shown}: reachable, schema {v} (current); {n} queued \
                             or running goal(s)"
                        );
                        exit::OK
                    }
                    Err(e) => {
                        errln!("greenlight: {e}");
                        exit::ERROR
                    }
                }
            }
            Some(v) if v < SCHEMA_VERSION => {
                outln!(
                    "greenlight: {shown}: reachable, schema {v}, older than this greenlight's \
                     {SCHEMA_VERSION}; run `greenlight store migrate` (every greenlight that \
                     opens it would migrate it too)"
                );
                exit::NEEDS_MIGRATE
            }
            Some(v) => {
                errln!(
                    "greenlight: {shown}: schema {v} is newer than the {SCHEMA_VERSION} this \
                     greenlight understands; upgrade greenlight before using this store"
                );
                exit::ERROR
            }
        },
        Command::Migrate => match Store::open(&location) {
            Ok(_) => {
                match found {
                    Some(v) if v == SCHEMA_VERSION => {
                        outln!("greenlight: {shown}: schema {v} already current; nothing to do");
                    }
                    Some(v) => {
                        outln!("greenlight: {shown}: migrated from schema {v} to {SCHEMA_VERSION}")
                    }
                    None => outln!("greenlight: {shown}: created at schema {SCHEMA_VERSION}"),
                }
                exit::OK
            }
            Err(e) => {
                errln!("greenlight: {e}");
                exit::ERROR
            }
        },
    }
}
