//! `greenlight agent probe|dispatch`.

/// The `agent` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Not built yet.
    Probe,
}

/// Runs the subcommand and returns the process exit code.
pub fn run(_command: Command) -> i32 {
    2
}
