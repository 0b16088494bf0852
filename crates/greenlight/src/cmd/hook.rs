//! `greenlight hook install|uninstall|stop`.

/// The `hook` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Not built yet.
    Install,
}

/// Runs the subcommand and returns the process exit code.
pub fn run(_command: Command) -> i32 {
    2
}
