//! Running one child command in the foreground of the terminal the user is looking at.
//!
//! The child gets its own process group (so everything it starts can be signalled as one),
//! inherits stdin/stdout/stderr, and is always waited for. Because its group is not the
//! terminal's foreground group, Ctrl-C reaches only greenlight: the one rule here is that
//! every SIGINT, SIGTERM and SIGHUP greenlight receives is forwarded to the child's group and
//! greenlight keeps waiting, so the child ends the way it would have in the foreground.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;

use tokio::signal::unix::{SignalKind, signal};

use crate::Error;

/// Runs `program args…` in `cwd` and returns its exit code (128 + N when a signal N ended it).
pub fn run(program: &Path, args: &[OsString], cwd: &Path) -> Result<i32, Error> {
    let spawn_error = |source| Error::Spawn {
        program: program.display().to_string(),
        source,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(spawn_error)?;
    runtime.block_on(async {
        let mut interrupt = signal(SignalKind::interrupt()).map_err(spawn_error)?;
        let mut terminate = signal(SignalKind::terminate()).map_err(spawn_error)?;
        let mut hangup = signal(SignalKind::hangup()).map_err(spawn_error)?;
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .current_dir(cwd)
            .process_group(0)
            .spawn()
            .map_err(spawn_error)?;
        let group = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(rustix::process::Pid::from_raw);
        let forward = |sig: rustix::process::Signal| {
            if let Some(group) = group {
                // The group may already be gone; then there is nothing left to stop.
                let _ = rustix::process::kill_process_group(group, sig);
            }
        };
        loop {
            tokio::select! {
                status = child.wait() => {
                    let status = status.map_err(spawn_error)?;
                    return Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)));
                }
                _ = interrupt.recv() => forward(rustix::process::Signal::INT),
                _ = terminate.recv() => forward(rustix::process::Signal::TERM),
                _ = hangup.recv() => forward(rustix::process::Signal::HUP),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_and_signals_come_back_as_codes() {
        let sh = Path::new("/bin/sh");
        let code = |script: &str| run(sh, &["-c".into(), script.into()], Path::new("/")).ok();
        assert_eq!(code("exit 7"), Some(7));
        assert_eq!(code("kill -TERM $$"), Some(128 + 15));
        assert!(run(Path::new("/nonexistent/program"), &[], Path::new("/")).is_err());
    }

    #[test]
    fn the_child_runs_in_its_own_process_group() {
        let out = tempfile::NamedTempFile::new().ok();
        let Some(out) = out else {
            panic!("cannot create a temporary file");
        };
        // Field 5 of /proc/PID/stat is the process group id (no `ps` needed).
        let script = format!(
            "cut -d' ' -f5 /proc/$$/stat > {path}; echo $$ >> {path}",
            path = out.path().display()
        );
        let code = run(
            Path::new("/bin/sh"),
            &["-c".into(), script.into()],
            Path::new("/"),
        )
        .ok();
        assert_eq!(code, Some(0));
        let text = std::fs::read_to_string(out.path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0], lines[1], "the child's pgid must be its own pid");
    }
}
