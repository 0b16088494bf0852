//! Print the workspace key of a directory (default: the current one); exit 1 when unknown.
//! The key the goal loop records a gate result under (`gate_phase::result_key`), for a look by hand.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use greenlight_gate::{WorkspaceKey, workspace_key};

fn main() -> ExitCode {
    let dir = std::env::args_os()
        .nth(1)
        .map_or_else(|| PathBuf::from("."), PathBuf::from);
    let (line, code) = match workspace_key(&dir) {
        WorkspaceKey::Known(key) => (key, ExitCode::SUCCESS),
        WorkspaceKey::Unknown { reason } => (format!("unknown: {reason}"), ExitCode::FAILURE),
    };
    // A closed stdout (e.g. piped into `head`) is not worth a panic.
    let _ = writeln!(std::io::stdout().lock(), "{line}");
    code
}
