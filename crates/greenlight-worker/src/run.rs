//! One action's command through `greenlight-proc`, shaped like a gate: its own process group,
//! stdin from `/dev/null`, stdout and stderr on one pipe (interleaved as written, as
//! greenlight's gates run), the action's timeout as the deadline, leftovers killed, and a
//! sweep scope shared by the workers of one cache directory.
//!
//! The output goes to a file as it arrives, hashed on the way, so it can be uploaded without
//! being held in memory. It is bounded: the first [`HEAD_LIMIT`] bytes and the last
//! [`TAIL_LIMIT`] are kept, with one line saying how much was left out between them.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use greenlight_proc::{
    Ending, Env, Input, InterruptWatch, LeftoverProcess, Observer, Output, Program, Spec, Stream,
};
use sha2::{Digest as _, Sha256};

/// Output bytes kept from the start. Together with [`TAIL_LIMIT`] this is the 64 MiB that
/// greenlight's digest scans of a gate's output.
pub(crate) const HEAD_LIMIT: u64 = 32 * 1024 * 1024;
/// Output bytes kept from the end (held in memory only while they are past the head).
pub(crate) const TAIL_LIMIT: usize = 32 * 1024 * 1024;

/// The exit code reported for a command its deadline ended: what `timeout(1)` returns, and
/// what `greenlight verify` shows for a TIMEOUT.
pub(crate) const TIMED_OUT_EXIT: i32 = 124;

/// The variables of the minimal base every command starts from; all else comes from the
/// action (its declared environment) and the worker (the cache directories).
const BASE_VARS: [&str; 2] = ["PATH", "HOME"];
/// `PATH` when the worker itself has none.
const FALLBACK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// One command to run.
#[derive(Debug)]
pub(crate) struct CommandSpec<'a> {
    /// `arguments` of the REAPI Command: the program, then its arguments.
    pub(crate) argv: &'a [String],
    /// The working directory (inside the input root).
    pub(crate) cwd: &'a Path,
    /// The whole environment (see [`environment`]).
    pub(crate) env: Vec<(OsString, OsString)>,
    /// The action's timeout; `None` for none.
    pub(crate) timeout: Option<Duration>,
    /// Which workers may sweep this command's orphans.
    pub(crate) scope: &'a str,
    /// The file the output is written to (created).
    pub(crate) output: &'a Path,
}

/// How the command ended.
#[derive(Debug)]
pub(crate) struct Ran {
    /// The exit code (`128 + n` for signal `n`; [`TIMED_OUT_EXIT`] when the deadline ended it).
    pub(crate) exit_code: i32,
    /// The deadline ended it.
    pub(crate) timed_out: bool,
    /// The worker stopped it (shutdown, or the grid withdrew the lease).
    pub(crate) stopped: bool,
    /// The output file's SHA-256 (lowercase hex) and size.
    pub(crate) output_hash: String,
    /// The output file's size.
    pub(crate) output_size: u64,
    /// When the command started and when it ended.
    pub(crate) started: SystemTime,
    /// When the leader exited and its leftovers were gone.
    pub(crate) finished: SystemTime,
    /// Processes still alive after the leader exited, all killed by now.
    pub(crate) leftovers: Vec<LeftoverProcess>,
}

/// Why a command could not be run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    /// The Command has no arguments.
    #[error("the action's command has no arguments")]
    NoProgram,
    /// The program could not be started.
    #[error("{0}")]
    Start(#[from] greenlight_proc::Error),
    /// The output file could not be written.
    #[error("cannot write the command's output to {}: {source}", path.display())]
    Output {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
}

/// The environment of a command: `PATH` and `HOME` from the worker, then `extra` (the cache
/// directories), then the action's own variables, each replacing an earlier one of its name.
pub(crate) fn environment(
    extra: Vec<(OsString, OsString)>,
    declared: &[(String, String)],
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    let mut set = |name: OsString, value: OsString| {
        env.retain(|(n, _)| *n != name);
        env.push((name, value));
    };
    for name in BASE_VARS {
        match std::env::var_os(name) {
            Some(value) => set(name.into(), value),
            None if name == "PATH" => set(name.into(), FALLBACK_PATH.into()),
            None => {}
        }
    }
    for (name, value) in extra {
        set(name, value);
    }
    for (name, value) in declared {
        set(name.into(), value.into());
    }
    env
}

/// Writes the head of the output to the file and hashes it as it arrives.
struct HeadWriter {
    file: std::fs::File,
    hasher: Sha256,
    written: u64,
    error: Option<std::io::Error>,
}

impl Observer for HeadWriter {
    fn chunk(&mut self, _stream: Stream, bytes: &[u8]) {
        let room = HEAD_LIMIT.saturating_sub(self.written);
        let take = bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        if take == 0 || self.error.is_some() {
            return;
        }
        let Some(head) = bytes.get(..take) else {
            return;
        };
        match self.file.write_all(head) {
            Ok(()) => {
                self.hasher.update(head);
                self.written += take as u64;
            }
            Err(e) => self.error = Some(e),
        }
    }
}

/// Runs the command to its end; `stop` ends it early (SIGTERM, grace, SIGKILL).
pub(crate) async fn run(spec: CommandSpec<'_>, stop: &mut InterruptWatch) -> Result<Ran, RunError> {
    let (program, args) = spec.argv.split_first().ok_or(RunError::NoProgram)?;
    let output_error = |source| RunError::Output {
        path: spec.output.to_path_buf(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(spec.output)
        .map_err(output_error)?;
    let mut child = Spec::new(
        Program::Argv {
            program: program.into(),
            args: args.iter().map(OsString::from).collect(),
        },
        spec.cwd,
    );
    child.input = Input::Null;
    child.output = Output::Interleaved;
    child.env = Env {
        base: Some(spec.env),
        remove: Vec::new(),
        add: Vec::new(),
    };
    child.deadline = spec.timeout;
    child.grace = greenlight_proc::kill_grace_from(|name| std::env::var_os(name));
    child.tail_bytes = TAIL_LIMIT;
    // Several leases run side by side in this process: an adopted orphan cannot be told apart
    // by anything but its token.
    child.claim_adopted = false;
    child.sweep_scope = spec.scope.to_owned();

    let mut head = HeadWriter {
        file,
        hasher: Sha256::new(),
        written: 0,
        error: None,
    };
    let started = SystemTime::now();
    let outcome = greenlight_proc::run(&child, &mut head, Some(stop)).await?;
    let finished = SystemTime::now();
    if let Some(e) = head.error.take() {
        return Err(output_error(e));
    }

    // Past the head: a line for what was left out, then the kept end.
    let total = outcome.tail.total_bytes();
    if total > head.written {
        let tail = outcome.tail.bytes();
        let missing = total - head.written;
        let kept = usize::try_from(missing)
            .unwrap_or(usize::MAX)
            .min(tail.len());
        let dropped = missing - kept as u64;
        let mut rest = Vec::new();
        if dropped > 0 {
            rest.extend_from_slice(
                format!("\n[greenlight worker: {dropped} bytes of output left out here]\n")
                    .as_bytes(),
            );
        }
        rest.extend_from_slice(tail.get(tail.len() - kept..).unwrap_or_default());
        head.file.write_all(&rest).map_err(output_error)?;
        head.hasher.update(&rest);
        head.written += rest.len() as u64;
    }
    head.file.flush().map_err(output_error)?;

    let (timed_out, stopped) = match outcome.ended_by {
        Some(Ending::TimedOut) => (true, false),
        Some(Ending::Interrupted(_)) => (false, true),
        None => (false, false),
    };
    let exit_code = if timed_out {
        TIMED_OUT_EXIT
    } else {
        outcome.exit.map_or(-1, |e| e.as_shell_code())
    };
    Ok(Ran {
        exit_code,
        timed_out,
        stopped,
        output_hash: hex(&head.hasher.finalize()),
        output_size: head.written,
        started,
        finished,
        leftovers: outcome.leftovers,
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        vec!["/bin/sh".into(), "-c".into(), script.into()]
    }

    async fn run_in(dir: &Path, argv: &[String], timeout: Option<Duration>) -> (Ran, Vec<u8>) {
        let (_tx, mut stop) = tokio::sync::watch::channel(None);
        let output = dir.join("out");
        let ran = run(
            CommandSpec {
                argv,
                cwd: dir,
                env: environment(Vec::new(), &[("X".into(), "declared".into())]),
                timeout,
                scope: "test",
                output: &output,
            },
            &mut stop,
        )
        .await
        .expect("runs");
        let bytes = std::fs::read(&output).expect("output file");
        (ran, bytes)
    }

    #[tokio::test]
    async fn stdout_and_stderr_arrive_interleaved_with_their_hash() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (ran, bytes) = run_in(
            dir.path(),
            &sh("echo out; echo err >&2; echo $X; exit 3"),
            None,
        )
        .await;
        assert_eq!(bytes, b"out\nerr\ndeclared\n");
        assert_eq!(ran.exit_code, 3);
        assert_eq!(ran.output_size, bytes.len() as u64);
        assert_eq!(ran.output_hash, hex(&Sha256::digest(&bytes)));
        assert!(!ran.timed_out && !ran.stopped);
    }

    #[tokio::test]
    async fn the_deadline_ends_the_command_as_a_timeout() {
        let dir = tempfile::tempdir().expect("temp dir");
        // SAFETY of the test: the grace is read from the environment by kill_grace_from().
        let (ran, _) = run_in(
            dir.path(),
            &sh("echo started; exec sleep 30"),
            Some(Duration::from_millis(300)),
        )
        .await;
        assert!(ran.timed_out);
        assert_eq!(ran.exit_code, TIMED_OUT_EXIT);
    }

    #[tokio::test]
    async fn a_huge_output_keeps_its_head_and_tail_and_says_what_was_left_out() {
        let dir = tempfile::tempdir().expect("temp dir");
        // 80 MiB of 'x' between a first and a last line.
        let script = "echo FIRST; head -c 83886080 /dev/zero | tr '\\0' x; echo; echo LAST";
        let (ran, bytes) = run_in(dir.path(), &sh(script), None).await;
        assert!(bytes.starts_with(b"FIRST\n"));
        assert!(bytes.ends_with(b"\nLAST\n"));
        let marker = b"bytes of output left out here]";
        assert!(bytes.windows(marker.len()).any(|w| w == marker));
        assert!(bytes.len() as u64 <= HEAD_LIMIT + TAIL_LIMIT as u64 + 100);
        assert_eq!(ran.output_hash, hex(&Sha256::digest(&bytes)));
    }

    #[test]
    fn declared_variables_win_over_the_base_and_the_caches() {
        let env = environment(
            vec![("CARGO_HOME".into(), "/c".into())],
            &[
                ("CARGO_HOME".into(), "/mine".into()),
                ("PATH".into(), "/p".into()),
            ],
        );
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("CARGO_HOME"), Some("/mine".into()));
        assert_eq!(get("PATH"), Some("/p".into()));
        assert_eq!(env.iter().filter(|(n, _)| n == "PATH").count(), 1);
    }
}
