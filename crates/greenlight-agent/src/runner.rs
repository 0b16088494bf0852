//! The child runner every adapter rides: spawn one agent process, feed it, bound it, end it.
//!
//! Every process an agent starts dies with the dispatch. The runner spawns argv directly (no
//! shell) as the leader of a new process group, gives stdin either the prompt (written, then
//! closed) or `/dev/null` — never an open pipe, because both agent CLIs wait forever on one —
//! and on the deadline sends SIGTERM to the group, waits a grace period, then SIGKILL to the
//! group even if the leader already exited. This is the only module that sends signals.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group, test_kill_process_group};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;

use crate::clock::{Clock, elapsed_ms};
use crate::env::scrub_env;

/// How long a process group gets between SIGTERM and SIGKILL. Five seconds matches the gate
/// runner, so an agent and a gate are ended the same way.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);

/// How many bytes of each stream are kept (the tail). Both CLIs put what greenlight reads at the
/// end (claude's envelope, codex's last `agent_message`), so the tail is the part worth keeping.
pub const DEFAULT_CAPTURE_LIMIT: usize = 8 * 1024 * 1024;

/// How long the runner waits for stdout/stderr to reach end-of-file after the group is gone. Only
/// a process that left the group (setsid) can hold them open longer.
const DRAIN_WAIT: Duration = Duration::from_secs(2);

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
pub enum Classification {
    /// The deadline fired: "it was still working".
    Timeout,
    /// The child never ran, or ended without an exit code: "nothing came back".
    Dead(String),
    /// The child exited with this code; the family parser decides what it means.
    Exited(i32),
}

/// Timeout beats everything; then a spawn error or a missing exit code is dead; else exited.
pub fn classify(run: &ChildRun) -> Classification {
    if run.timed_out {
        return Classification::Timeout;
    }
    if let Some(err) = &run.spawn_error {
        return Classification::Dead(err.clone());
    }
    match (run.exit_code, run.signal) {
        (Some(code), _) => Classification::Exited(code),
        (None, Some(sig)) => Classification::Dead(format!(
            "the agent was killed by signal {sig} before the deadline"
        )),
        (None, None) => Classification::Dead(
            "the agent ended with no exit code and the deadline never fired".into(),
        ),
    }
}

/// Sends SIGKILL to the group when dropped while armed, so a cancelled dispatch leaves nothing.
struct GroupGuard {
    pgid: Option<Pid>,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid {
            let _ = kill_process_group(pgid, Signal::KILL);
        }
    }
}

/// Runs one child to completion (or to its deadline) and returns what happened. Never panics
/// and never returns an error: a failure to start is recorded in [`ChildRun::spawn_error`].
pub async fn run_child(spec: &ChildSpec, clock: &dyn Clock) -> ChildRun {
    let start = clock.now();
    let mut cmd = tokio::process::Command::new(&spec.program);
    cmd.args(&spec.args)
        .current_dir(&spec.cwd)
        .process_group(0)
        .kill_on_drop(true)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(match spec.stdin {
            StdinSource::Text(_) => Stdio::piped(),
            StdinSource::Null => Stdio::null(),
        })
        .env_clear()
        .envs(scrub_env(
            spec.base_env
                .clone()
                .unwrap_or_else(|| std::env::vars_os().collect()),
        ));

    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(err) => {
            return ChildRun {
                spawn_error: Some(format!(
                    "cannot start `{}` in `{}`: {err}",
                    spec.program.display(),
                    spec.cwd.display()
                )),
                wall_ms: elapsed_ms(clock, start),
                ..ChildRun::default()
            };
        }
    };
    let pid = child.id();
    let pgid = pid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(Pid::from_raw);
    let mut guard = GroupGuard { pgid };

    let writer: Option<JoinHandle<()>> = match (&spec.stdin, child.stdin.take()) {
        (StdinSource::Text(text), Some(mut stdin)) => {
            let bytes = text.clone().into_bytes();
            // A child that exits without reading gives EPIPE; that is its business, not an error.
            Some(tokio::spawn(async move {
                let _ = stdin.write_all(&bytes).await;
                let _ = stdin.shutdown().await;
                drop(stdin);
            }))
        }
        _ => None,
    };
    let out_reader = child
        .stdout
        .take()
        .map(|s| tokio::spawn(read_tail(s, spec.capture_limit)));
    let err_reader = child
        .stderr
        .take()
        .map(|s| tokio::spawn(read_tail(s, spec.capture_limit)));

    let mut timed_out = false;
    let status: Option<ExitStatus> = tokio::select! {
        status = child.wait() => status.ok(),
        () = tokio::time::sleep(spec.timeout) => {
            timed_out = true;
            None
        }
    };
    let status = match status {
        Some(status) => Some(status),
        None => {
            signal_group(pgid, Signal::TERM);
            let after_term = tokio::time::timeout(spec.grace, child.wait()).await;
            // SIGKILL goes to the group whether or not the leader left: a grandchild that ignores
            // SIGTERM must not outlive the dispatch.
            signal_group(pgid, Signal::KILL);
            match after_term {
                Ok(Ok(status)) => Some(status),
                _ => child.wait().await.ok(),
            }
        }
    };
    end_group(pgid, spec.grace).await;
    guard.pgid = None;

    if let Some(writer) = writer {
        writer.abort();
    }
    let mut run = ChildRun {
        exit_code: status.and_then(|s| s.code()),
        signal: status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s)),
        timed_out,
        pid,
        ..ChildRun::default()
    };
    if let Some(reader) = out_reader {
        let (bytes, truncated, complete) = join_reader(reader).await;
        run.stdout = bytes;
        run.stdout_truncated = truncated;
        run.pipes_held_open |= !complete;
    }
    if let Some(reader) = err_reader {
        let (bytes, truncated, complete) = join_reader(reader).await;
        run.stderr = bytes;
        run.stderr_truncated = truncated;
        run.pipes_held_open |= !complete;
    }
    run.wall_ms = elapsed_ms(clock, start);
    run
}

fn signal_group(pgid: Option<Pid>, signal: Signal) {
    if let Some(pgid) = pgid {
        // ESRCH means the group is already gone, which is what we want.
        let _ = kill_process_group(pgid, signal);
    }
}

/// Ends whatever is left of the group after the leader exited: SIGTERM, grace, SIGKILL.
async fn end_group(pgid: Option<Pid>, grace: Duration) {
    let Some(pgid) = pgid else { return };
    if !group_alive(pgid) {
        return;
    }
    let _ = kill_process_group(pgid, Signal::TERM);
    let poll = Duration::from_millis(20);
    let mut waited = Duration::ZERO;
    while waited < grace {
        if !group_alive(pgid) {
            return;
        }
        tokio::time::sleep(poll).await;
        waited += poll;
    }
    let _ = kill_process_group(pgid, Signal::KILL);
    // SIGKILL is delivered asynchronously; wait (briefly) until callers can observe it done.
    let mut waited = Duration::ZERO;
    while waited < Duration::from_secs(1) && group_alive(pgid) {
        tokio::time::sleep(poll).await;
        waited += poll;
    }
}

/// Whether any process of the group is still running. A zombie does not count: it has already
/// died and waits only for its parent (often an init that reaps slowly in containers), while
/// `kill(-pgid, 0)` would still report it. Where `/proc` is missing, the signal test decides.
fn group_alive(pgid: Pid) -> bool {
    if test_kill_process_group(pgid).is_err() {
        return false;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    let want = pgid.as_raw_nonzero().get();
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .any(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // After the `(comm)` field: state, ppid, pgrp.
            let Some((_, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let mut fields = rest.split_whitespace();
            let state = fields.next();
            let pgrp = fields.nth(1).and_then(|p| p.parse::<i32>().ok());
            pgrp == Some(want) && !matches!(state, Some("Z" | "X"))
        })
}

async fn join_reader(mut reader: JoinHandle<(Vec<u8>, bool)>) -> (Vec<u8>, bool, bool) {
    match tokio::time::timeout(DRAIN_WAIT, &mut reader).await {
        Ok(Ok((bytes, truncated))) => (bytes, truncated, true),
        Ok(Err(_)) => (Vec::new(), false, false),
        Err(_) => {
            reader.abort();
            (Vec::new(), false, false)
        }
    }
}

/// Reads to end-of-file keeping only the last `limit` bytes; says whether anything was dropped.
async fn read_tail<R: AsyncRead + Unpin>(mut stream: R, limit: usize) -> (Vec<u8>, bool) {
    let mut tail: VecDeque<u8> = VecDeque::new();
    let mut truncated = false;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                tail.extend(&buf[..n]);
                if tail.len() > limit {
                    let excess = tail.len() - limit;
                    tail.drain(..excess);
                    truncated = true;
                }
            }
        }
    }
    (tail.into_iter().collect(), truncated)
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
        assert_eq!(classify(&timed), Classification::Timeout);
        let spawn = ChildRun {
            spawn_error: Some("no such file".into()),
            ..ChildRun::default()
        };
        assert_eq!(
            classify(&spawn),
            Classification::Dead("no such file".into())
        );
        assert!(matches!(
            classify(&ChildRun::default()),
            Classification::Dead(_)
        ));
        let exited = ChildRun {
            exit_code: Some(3),
            ..ChildRun::default()
        };
        assert_eq!(classify(&exited), Classification::Exited(3));
    }
}
