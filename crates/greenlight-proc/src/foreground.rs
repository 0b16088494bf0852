//! Running one child command in the foreground of the terminal the user is looking at.
//!
//! The child gets its own process group (so everything it starts can be signalled as one),
//! inherits stdin/stdout/stderr, and is always waited for. Because its group is not the
//! terminal's foreground group, Ctrl-C reaches only greenlight: the one rule here is that
//! every SIGINT, SIGTERM, SIGHUP and SIGQUIT greenlight receives is forwarded to the child's
//! group and greenlight keeps waiting, so the child ends the way it would have in the
//! foreground. The process runner ([`crate::run`]) does the rest, as for any child: what the
//! child leaves behind when it exits is ended too.

use std::ffi::OsString;
use std::path::Path;

use crate::{Input, Observer, OnSignal, Output, Program, Spec};

/// A child that could not be started (or the runtime to wait for it could not be made).
#[derive(Debug, thiserror::Error)]
#[error("cannot start `{program}`: {source}")]
pub struct Error {
    /// The program that was to be started.
    pub program: String,
    /// The underlying I/O error.
    pub source: std::io::Error,
}

/// Runs `program args…` in `cwd` and returns its exit code (128 + N when a signal N ended it).
pub fn run(program: &Path, args: &[OsString], cwd: &Path) -> Result<i32, Error> {
    start(program, args, cwd, Output::Inherit, &mut ())
}

/// [`run`], with the child's stdout and stderr handed to `observer` as they arrive instead of
/// inherited: the caller shows them and reads what it needs from them (a verdict per line).
pub fn run_observed(
    program: &Path,
    args: &[OsString],
    cwd: &Path,
    observer: &mut dyn Observer,
) -> Result<i32, Error> {
    start(program, args, cwd, Output::Separate, observer)
}

fn start(
    program: &Path,
    args: &[OsString],
    cwd: &Path,
    output: Output,
    observer: &mut dyn Observer,
) -> Result<i32, Error> {
    let spawn_error = |source| Error {
        program: program.display().to_string(),
        source,
    };
    let mut spec = Spec::new(
        Program::Argv {
            program: program.to_path_buf(),
            args: args.to_vec(),
        },
        cwd,
    );
    spec.input = Input::Inherit;
    spec.output = output;
    spec.on_signal = OnSignal::Forward;
    let outcome = crate::run_main(|_interrupt| async {
        // Signals are forwarded, not turned into an end: the interrupt is not used.
        crate::run(&spec, observer, None).await
    })
    .map_err(spawn_error)?
    .map_err(|e| spawn_error(e.into_source()))?;
    Ok(outcome.exit.map_or(1, |e| e.as_shell_code()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_and_signals_come_back_as_codes() {
        let sh = Path::new("/bin/sh");
        let code = |script: &str| run(sh, &["-c".into(), script.into()], Path::new("/")).ok();
        assert_eq!(code("exit 7"), Some(7));
        struct Lines(Vec<u8>);
        impl Observer for Lines {
            fn chunk(&mut self, _stream: crate::Stream, bytes: &[u8]) {
                self.0.extend_from_slice(bytes);
            }
        }
        let mut seen = Lines(Vec::new());
        let args = ["-c".into(), "echo out; echo err >&2; exit 3".into()];
        let observed = run_observed(sh, &args, Path::new("/"), &mut seen).ok();
        assert_eq!(observed, Some(3));
        let text = String::from_utf8_lossy(&seen.0);
        assert!(text.contains("out\n") && text.contains("err\n"), "{text}");
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
