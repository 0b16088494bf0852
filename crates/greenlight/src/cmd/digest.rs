//! `greenlight digest`.

/// Arguments of `greenlight digest`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the subcommand and returns the process exit code.
pub fn run(_args: Args) -> i32 {
    2
}
