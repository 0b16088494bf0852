//! What a child is and what became of it: the options of one run ([`Spec`]: program, stdin,
//! output, environment, deadline, grace, leftovers, drain limit, signals) and its [`RunOutcome`].
//!
//! Plain data, no behaviour beyond small conversions; the runner (`run`) reads a `Spec` and
//! fills an `RunOutcome`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::procs::LeftoverProcess;
use crate::signals::Interrupt;
use crate::tail::TailBuffer;

/// Between SIGTERM and SIGKILL when a deadline or an interrupt ends a child. Five seconds is
/// what CommandMate's runner gives (`KILL_GRACE_SEC=5`), so a gate behaves the same under either.
pub const KILL_GRACE: Duration = Duration::from_secs(5);

/// The variable that sets the grace in milliseconds (tests and impatient users).
pub const KILL_GRACE_VAR: &str = "GREENLIGHT_KILL_GRACE_MS";

/// The grace a run uses: [`KILL_GRACE_VAR`] in `env` when set to a number of milliseconds, else
/// [`KILL_GRACE`]. Every subcommand derives it here from the environment its front end read,
/// so gates, agents and `digest --` agree.
pub fn kill_grace_from(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Duration {
    env(KILL_GRACE_VAR)
        .and_then(|v| v.to_str()?.parse().ok())
        .map(Duration::from_millis)
        .unwrap_or(KILL_GRACE)
}

/// How long processes may outlive their leader before they count as leftovers. Long enough for
/// a pipeline's last member to finish exiting, short enough not to slow a run of many gates;
/// nextest waits 100 ms by default before calling a test leaky.
pub const LEAK_SETTLE: Duration = Duration::from_millis(100);

/// How long to wait for the output pipes to close once every known writer is dead. Only a
/// process we could not find (it escaped the group and cleared its token) holds them longer.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// What to execute.
#[derive(Debug, Clone)]
pub enum Program {
    /// `/bin/sh -c <command>`.
    Shell(String),
    /// An executable (found on `PATH` when it has no slash) and its arguments, no shell.
    Argv {
        /// The executable.
        program: PathBuf,
        /// Each passed as one argv element.
        args: Vec<OsString>,
    },
}

impl Program {
    /// How the program is named in errors.
    pub fn shown(&self) -> String {
        match self {
            Program::Shell(command) => format!("/bin/sh -c {command}"),
            Program::Argv { program, .. } => program.display().to_string(),
        }
    }
}

/// What the child reads on stdin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// `/dev/null`: end-of-file at once.
    Null,
    /// These bytes are written, then stdin is closed (never an open pipe nobody writes to).
    Text(Vec<u8>),
    /// This process's own stdin (a foreground command at a terminal).
    Inherit,
}

/// Where the child's stdout and stderr go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// One pipe for both, so the tail interleaves them as they were written.
    Interleaved,
    /// A pipe each, with a tail each.
    Separate,
    /// This process's own stdout and stderr; nothing is captured.
    Inherit,
}

/// What greenlight's own ending signals do to the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnSignal {
    /// An [`Interrupt`] ends the child's group: SIGTERM, grace, SIGKILL.
    End,
    /// Every SIGINT, SIGTERM, SIGHUP and SIGQUIT greenlight receives is passed on to the
    /// child's group and the run keeps waiting, so a foreground child ends the way it would
    /// have at the terminal.
    Forward,
}

/// The child's environment.
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// The starting environment; `None` means this process's own.
    pub base: Option<Vec<(OsString, OsString)>>,
    /// Variables removed from it (the scrub list).
    pub remove: Vec<OsString>,
    /// Variables added after the removal (a marker, a gate's extra variables).
    pub add: Vec<(OsString, OsString)>,
}

/// One child and its bounds. Build it with [`Spec::new`] and change the fields that differ.
#[derive(Debug, Clone)]
pub struct Spec {
    /// What to run.
    pub program: Program,
    /// The working directory.
    pub cwd: PathBuf,
    /// What stdin carries.
    pub input: Input,
    /// Where stdout and stderr go.
    pub output: Output,
    /// The environment.
    pub env: Env,
    /// The wall-clock budget; `None` for none.
    pub deadline: Option<Duration>,
    /// SIGTERM → SIGKILL grace on the deadline or an interrupt.
    pub grace: Duration,
    /// Bytes kept per tail.
    pub tail_bytes: usize,
    /// How long leftovers get after the leader exits before they are killed.
    pub settle: Duration,
    /// How long the output may stay open once every known writer is dead.
    pub drain_limit: Duration,
    /// Treat every process adopted while the child runs as the child's, even one that cleared
    /// its environment (`setsid env -i …`) and so lost the token. Set only when nothing else in
    /// this process spawns children meanwhile.
    pub claim_adopted: bool,
    /// Which greenlight runs may end each other's orphans (see [`crate::sweep_orphaned`]).
    pub sweep_scope: String,
    /// What an interrupt or greenlight's own signals do.
    pub on_signal: OnSignal,
}

impl Spec {
    /// A child with stdin from `/dev/null`, one interleaved pipe, this process's environment, no
    /// deadline, the default grace, settle and drain limit, and a 64 KiB tail.
    pub fn new(program: Program, cwd: impl Into<PathBuf>) -> Self {
        Self {
            program,
            cwd: cwd.into(),
            input: Input::Null,
            output: Output::Interleaved,
            env: Env::default(),
            deadline: None,
            grace: KILL_GRACE,
            tail_bytes: 64 * 1024,
            settle: LEAK_SETTLE,
            drain_limit: DRAIN_LIMIT,
            claim_adopted: false,
            sweep_scope: "0".to_owned(),
            on_signal: OnSignal::End,
        }
    }
}

/// Which of the child's streams a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// stdout, or both when [`Output::Interleaved`].
    Out,
    /// stderr, when [`Output::Separate`].
    Err,
}

/// Receives the child's output as it arrives, in order per stream (a digester, a live view).
pub trait Observer {
    /// Called with each chunk as it is read.
    fn chunk(&mut self, stream: Stream, bytes: &[u8]);
}

impl Observer for () {
    fn chunk(&mut self, _stream: Stream, _bytes: &[u8]) {}
}

/// How the leader ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
}

impl Exit {
    /// The shell's convention: the code, or `128 + n` for signal `n`.
    pub fn as_shell_code(self) -> i32 {
        match self {
            Exit::Code(code) => code,
            Exit::Signal(signal) => 128 + signal,
        }
    }
}

/// Why the runner ended the child before it ended by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The deadline fired.
    TimedOut,
    /// greenlight was interrupted.
    Interrupted(Interrupt),
}

/// Everything one run produced.
#[derive(Debug)]
pub struct RunOutcome {
    /// How the leader ended; `None` only if it could not be waited for.
    pub exit: Option<Exit>,
    /// Set when the runner ended the child (deadline or interrupt).
    pub ended_by: Option<Ending>,
    /// From spawn to the leader's exit.
    pub duration: Duration,
    /// The leader's pid (also its process group id).
    pub pid: Option<u32>,
    /// The last bytes of stdout (both streams when interleaved).
    pub tail: TailBuffer,
    /// The last bytes of stderr when [`Output::Separate`]; empty otherwise.
    pub stderr_tail: TailBuffer,
    /// Processes still alive after the leader exited, all killed by now.
    pub leftovers: Vec<LeftoverProcess>,
    /// Whether an output pipe was still held open by something we could not find and kill (the
    /// tails hold what was read until then).
    pub pipe_left_open: bool,
}

/// Why a child could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The pipes for its output could not be made.
    #[error("cannot create a pipe for `{program}`: {source}")]
    Pipe {
        /// The program.
        program: String,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The program could not be started.
    #[error("cannot start `{program}` in `{cwd}`: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The working directory.
        cwd: String,
        /// The system's reason.
        source: std::io::Error,
    },
}

impl Error {
    /// The system's reason alone.
    pub fn source_io(&self) -> &std::io::Error {
        match self {
            Error::Pipe { source, .. } | Error::Spawn { source, .. } => source,
        }
    }
}

impl Error {
    /// The system's reason, for a caller whose own error already names the program.
    pub fn into_source(self) -> std::io::Error {
        match self {
            Error::Pipe { source, .. } | Error::Spawn { source, .. } => source,
        }
    }
}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> Self {
        let kind = e.source_io().kind();
        std::io::Error::new(kind, e.to_string())
    }
}

/// A fresh run token: `<owner pid>.<pid namespace>-<scope>-<n>-<nanos>`
/// ([`crate::procs::parse_token`] reads it), so that a later run can tell whose orphans it is
/// looking at, and whether that owner's pid means anything where it looks.
pub fn next_token(scope: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let pid = std::process::id();
    match crate::procs::pid_namespace() {
        Some(ns) => format!("{pid}.{ns}-{scope}-{n}-{nanos:x}"),
        None => format!("{pid}-{scope}-{n}-{nanos:x}"),
    }
}
