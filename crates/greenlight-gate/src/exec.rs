//! Gate execution: one gate through the process runner, as `/bin/sh -c <command>`.
//!
//! Everything about the child — its process group, the token, the deadline, the leftovers and
//! the drain limit — is `greenlight-proc`'s; this module only says what a gate is: a shell
//! command with stdin from /dev/null, stdout and stderr on one pipe (so the tail interleaves
//! them as written), the git variables that would point it at another repository removed, and
//! the lock root as the scope within which orphaned gates may be swept.

use std::io;
use std::path::Path;
use std::time::Duration;

use greenlight_proc::{Ending, Input, Observer, Output, Program, Spec, Stream};

pub use greenlight_proc::tail::TailBuffer;
pub use greenlight_proc::{Interrupt, InterruptWatch, KILL_GRACE, LeftoverProcess};

/// Ends every process still adopted once no gate runs: see [`greenlight_proc::end_adopted`].
pub(crate) use greenlight_proc::end_adopted;

/// What to run and within which bounds.
#[derive(Debug, Clone)]
pub struct ExecSpec<'a> {
    /// The shell command, run as `/bin/sh -c <command>`.
    pub command: &'a str,
    /// The working directory.
    pub cwd: &'a Path,
    /// The wall-clock budget.
    pub timeout: Duration,
    /// SIGTERM → SIGKILL grace on timeout or interrupt.
    pub kill_grace: Duration,
    /// How many bytes of output to keep.
    pub tail_bytes: usize,
    /// Variables added to the gate's environment (e.g. the goal loop's run marker).
    pub extra_env: &'a [(String, String)],
    /// The run's lock root: the scope within which its orphaned gates may be swept.
    pub lock_root: &'a Path,
    /// Treat every process adopted while the gate runs as the gate's, even one that cleared its
    /// environment (`setsid env -i …`) and so lost the gate token. Set only when nothing else in
    /// this process spawns children while a gate runs (verify, the hook, the goal loop).
    pub claim_adopted: bool,
}

/// How the gate ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    /// The shell exited with this code (a signal `n` is reported as `128 + n`).
    Exited(i32),
    /// The budget ran out and the group was ended.
    TimedOut,
    /// greenlight was interrupted and ended the group.
    Interrupted(Interrupt),
}

/// Everything one gate execution produced.
#[derive(Debug)]
pub struct ExecOutcome {
    /// How it ended.
    pub termination: Termination,
    /// From spawn to the leader's exit.
    pub duration: Duration,
    /// The last bytes of interleaved stdout and stderr.
    pub tail: TailBuffer,
    /// Processes still alive after the leader exited, all killed by now.
    pub leftovers: Vec<LeftoverProcess>,
    /// Whether the output pipe was still held open by something we could not find and kill.
    pub pipe_left_open: bool,
}

/// Something observed while the output flows (a chunk of output), for live consumers.
pub trait OutputSink {
    /// Called with each chunk, in order.
    fn chunk(&mut self, bytes: &[u8]);
}

impl OutputSink for () {
    fn chunk(&mut self, _bytes: &[u8]) {}
}

/// Feeds the runner's observer calls to a gate's sink (a gate has one interleaved stream).
struct Sink<'a>(&'a mut dyn OutputSink);

impl Observer for Sink<'_> {
    fn chunk(&mut self, _stream: Stream, bytes: &[u8]) {
        self.0.chunk(bytes);
    }
}

/// Which greenlight runs may end each other's orphaned gates: those sharing a lock root (the
/// same user's machine-wide domain; each test gets its own). FNV-1a of the lock root's path, so
/// it is stable across runs and builds.
fn sweep_scope(lock_root: &Path) -> String {
    let hash = lock_root
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    format!("{hash:016x}")
}

/// Kills the gate processes of greenlight runs that died without cleaning up (SIGKILL, a power
/// cut of the parent): processes whose token names an owner pid that no longer exists, among
/// the runs that share this run's lock root, `lock_root`.
pub fn sweep_orphaned_gates(lock_root: &Path) -> Vec<LeftoverProcess> {
    greenlight_proc::sweep_orphaned(&sweep_scope(lock_root))
}

/// Runs one gate to its end and leaves nothing of it behind.
pub async fn run(
    spec: &ExecSpec<'_>,
    sink: &mut dyn OutputSink,
    interrupt: &mut InterruptWatch,
) -> io::Result<ExecOutcome> {
    let mut child = Spec::new(Program::Shell(spec.command.to_owned()), spec.cwd);
    child.input = Input::Null;
    child.output = Output::Interleaved;
    child.deadline = Some(spec.timeout);
    child.grace = spec.kill_grace;
    child.tail_bytes = spec.tail_bytes;
    child.claim_adopted = spec.claim_adopted;
    child.sweep_scope = sweep_scope(spec.lock_root);
    child.env.remove = greenlight_proc::git::REDIRECTING
        .iter()
        .map(|r| r.name.into())
        .collect();
    child.env.add = spec
        .extra_env
        .iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    let outcome = greenlight_proc::run(&child, &mut Sink(sink), Some(interrupt)).await?;
    let termination = match outcome.ended_by {
        Some(Ending::TimedOut) => Termination::TimedOut,
        Some(Ending::Interrupted(signal)) => Termination::Interrupted(signal),
        None => Termination::Exited(outcome.exit.map_or(-1, |e| e.as_shell_code())),
    };
    Ok(ExecOutcome {
        termination,
        duration: outcome.duration,
        tail: outcome.tail,
        leftovers: outcome.leftovers,
        pipe_left_open: outcome.pipe_left_open,
    })
}
