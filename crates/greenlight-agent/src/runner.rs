//! What an agent process is, for the process runner: argv (no shell), stdin the prompt (then
//! closed) or `/dev/null` — never an open pipe, because both agent CLIs wait forever on one —
//! stdout and stderr apart, a scrubbed environment, a deadline.
//!
//! Everything else is `greenlight-proc`'s, the same rules as a gate: its own process group,
//! SIGTERM → grace → SIGKILL of the whole group on the deadline, a run token in the
//! environment. When the agent exits, what it left behind (its group, and a `setsid` child found
//! by the token) is killed and only then is the rest of its output read, so a leftover holding
//! stdout can neither delay the reply nor lose it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use greenlight_proc::{Ending, Exit, Input, Observer, Output, Program, Spec};

use crate::clock::{Clock, elapsed_ms};

/// How long a process group gets between SIGTERM and SIGKILL. Five seconds matches the gate
/// runner, so an agent and a gate are ended the same way.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// How many bytes of each stream are kept (the tail). Both CLIs put what greenlight reads at the
/// end (claude's envelope, codex's last `agent_message`), so the tail is the part worth keeping.
pub const DEFAULT_CAPTURE_LIMIT: usize = 8 * 1024 * 1024;

/// What the child reads on stdin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StdinSource {
    /// These bytes are written, then stdin is closed.
    Text(String),
    /// `/dev/null`: the child sees end-of-file at once.
    Null,
}

/// Everything needed to run one child.
#[derive(Debug, Clone)]
pub struct ChildSpec {
    /// The executable, found on `PATH` when it has no slash.
    pub program: PathBuf,
    /// The arguments, each passed as one argv element.
    pub args: Vec<OsString>,
    /// The working directory.
    pub cwd: PathBuf,
    /// What stdin carries.
    pub stdin: StdinSource,
    /// When SIGTERM goes to the group.
    pub timeout: Duration,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Bytes kept per stream (the tail).
    pub capture_limit: usize,
    /// The environment before scrubbing; `None` means this process's own environment.
    pub base_env: Option<Vec<(OsString, OsString)>>,
}

impl ChildSpec {
    /// A spec with the default grace and capture limit, inheriting (scrubbed) environment.
    pub fn new(program: impl Into<PathBuf>, cwd: impl Into<PathBuf>, timeout: Duration) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            cwd: cwd.into(),
            stdin: StdinSource::Null,
            timeout,
            grace: DEFAULT_GRACE,
            capture_limit: DEFAULT_CAPTURE_LIMIT,
            base_env: None,
        }
    }
}

/// What happened to one child. Classification reads only these fields.
#[derive(Debug, Clone, Default)]
pub struct ChildRun {
    /// The tail of stdout.
    pub stdout: Vec<u8>,
    /// Whether stdout was longer than the capture limit.
    pub stdout_truncated: bool,
    /// The tail of stderr.
    pub stderr: Vec<u8>,
    /// Whether stderr was longer than the capture limit.
    pub stderr_truncated: bool,
    /// The leader's exit code; `None` when it was killed by a signal or never ran.
    pub exit_code: Option<i32>,
    /// The signal that ended the leader, if one did.
    pub signal: Option<i32>,
    /// Whether the deadline fired.
    pub timed_out: bool,
    /// Why the child could not be started, if it could not.
    pub spawn_error: Option<String>,
    /// The OS error number of that failure, when there is one (to tell a full machine from a
    /// missing program).
    pub spawn_errno: Option<i32>,
    /// Whether stdout or stderr was still held open by an escaped process when the runner gave up
    /// waiting for end-of-file (the captured output may be incomplete).
    pub pipes_held_open: bool,
    /// The leader's pid (also its process group id).
    pub pid: Option<u32>,
    /// Wall time from just before spawn to after the group was gone, by the injected clock.
    pub wall_ms: u64,
}

impl ChildRun {
    /// stdout decoded as UTF-8, invalid bytes replaced (never dropped).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    /// stderr decoded as UTF-8, invalid bytes replaced (never dropped).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// The runner's verdict, decided from its own fields and nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitClass {
    /// The deadline fired: "it was still working".
    Timeout,
    /// The child never ran, or ended without an exit code: "nothing came back".
    Dead(String),
    /// The child exited with this code; the family parser decides what it means.
    Exited(i32),
}

/// Timeout beats everything; then a spawn error or a missing exit code is dead; else exited.
pub fn classify(run: &ChildRun) -> ExitClass {
    if run.timed_out {
        return ExitClass::Timeout;
    }
    if let Some(err) = &run.spawn_error {
        return ExitClass::Dead(err.clone());
    }
    match (run.exit_code, run.signal) {
        (Some(code), _) => ExitClass::Exited(code),
        (None, Some(sig)) => ExitClass::Dead(format!(
            "the agent was killed by signal {sig} before the deadline"
        )),
        (None, None) => {
            ExitClass::Dead("the agent ended with no exit code and the deadline never fired".into())
        }
    }
}

/// Runs one child to completion (or to its deadline) and returns what happened. Never panics
/// and never returns an error: a failure to start is recorded in [`ChildRun::spawn_error`].
pub async fn run_child(spec: &ChildSpec, clock: &dyn Clock) -> ChildRun {
    run_child_observed(spec, clock, &mut ()).await
}

/// [`run_child`], handing each chunk of output to `observer` as it is read (from the task that
/// reads the pipes: the observer must not block). What is captured does not depend on it.
pub async fn run_child_observed(
    spec: &ChildSpec,
    clock: &dyn Clock,
    observer: &mut (dyn Observer + Send),
) -> ChildRun {
    let start = clock.now();
    let mut child = Spec::new(
        Program::Argv {
            program: spec.program.clone(),
            args: spec.args.clone(),
        },
        &spec.cwd,
    );
    child.input = match &spec.stdin {
        StdinSource::Text(text) => Input::Text(text.clone().into_bytes()),
        StdinSource::Null => Input::Null,
    };
    child.output = Output::Separate;
    child.deadline = Some(spec.timeout);
    child.grace = spec.grace;
    child.tail_bytes = spec.capture_limit;
    child.env.base = spec.base_env.clone();
    child.env.remove = crate::env::scrubbed_names();
    // Something else may spawn while an agent runs (a probe, a judge): only the token decides.
    child.claim_adopted = false;
    let outcome = match greenlight_proc::run(&child, observer, None).await {
        Ok(outcome) => outcome,
        Err(err) => {
            return ChildRun {
                spawn_error: Some(err.to_string()),
                spawn_errno: err.source_io().raw_os_error(),
                wall_ms: elapsed_ms(clock, start),
                ..ChildRun::default()
            };
        }
    };
    ChildRun {
        stdout: outcome.tail.bytes(),
        stdout_truncated: outcome.tail.truncated(),
        stderr: outcome.stderr_tail.bytes(),
        stderr_truncated: outcome.stderr_tail.truncated(),
        exit_code: match outcome.exit {
            Some(Exit::Code(code)) => Some(code),
            _ => None,
        },
        signal: match outcome.exit {
            Some(Exit::Signal(signal)) => Some(signal),
            _ => None,
        },
        timed_out: outcome.ended_by == Some(Ending::TimedOut),
        spawn_error: None,
        spawn_errno: None,
        pipes_held_open: outcome.pipe_left_open,
        pid: outcome.pid,
        wall_ms: elapsed_ms(clock, start),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_reads_only_the_runner_fields() {
        let timed = ChildRun {
            timed_out: true,
            exit_code: Some(0),
            ..ChildRun::default()
        };
        assert_eq!(classify(&timed), ExitClass::Timeout);
        let spawn = ChildRun {
            spawn_error: Some("no such file".into()),
            ..ChildRun::default()
        };
        assert_eq!(classify(&spawn), ExitClass::Dead("no such file".into()));
        assert!(matches!(classify(&ChildRun::default()), ExitClass::Dead(_)));
        let exited = ChildRun {
            exit_code: Some(3),
            ..ChildRun::default()
        };
        assert_eq!(classify(&exited), ExitClass::Exited(3));
    }
}
