//! Gate execution: spawn one gate, bound its output, end its process group.
//!
//! Every process a gate starts dies with the gate. This module is the only place that signals a
//! gate's processes; callers ask for an outcome and never see a pid.
//!
//! Theory of operation: the gate runs as `/bin/sh -c <command>` in a new process group, stdin
//! from /dev/null, stdout and stderr on one pipe (so the tail interleaves them as written). The
//! pipe is read into a [`TailBuffer`] and, when asked, a streaming digester. When the leader
//! exits, anything still alive in its group, or adopted by us (we are a child subreaper) and
//! carrying the gate's token, is a leftover: it gets a short settle window, then SIGKILL, and is
//! reported. On timeout or interrupt the group gets SIGTERM, then SIGKILL after the grace period
//! whether or not the leader is still there.

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::process::{Signal, WaitOptions};
use tokio::io::AsyncReadExt;
use tokio::sync::watch;

use crate::procs::{self, GATE_TOKEN_VAR, LeftoverProcess};
use crate::tail::TailBuffer;

/// How long a gate's process group gets between SIGTERM and SIGKILL. Five seconds is what
/// CommandMate's runner gives (`KILL_GRACE_SEC=5`), so a gate behaves the same under either.
pub const KILL_GRACE: Duration = Duration::from_secs(5);

/// How long processes may outlive their gate's leader before they count as leaked. Long enough
/// for a pipeline's last member to finish exiting, short enough not to slow a run of many gates;
/// nextest waits 100 ms by default before calling a test leaky.
pub const LEAK_SETTLE: Duration = Duration::from_millis(100);

/// How long to wait for the output pipe to close once every known writer is dead.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// A signal delivered to greenlight itself while a gate runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupt {
    /// SIGINT (Ctrl-C): exit 130.
    Int,
    /// SIGTERM: exit 143.
    Term,
}

impl Interrupt {
    /// The conventional exit code of a process ended by this signal.
    pub fn exit_code(self) -> i32 {
        match self {
            Interrupt::Int => 130,
            Interrupt::Term => 143,
        }
    }
}

/// Receives an interrupt while gates run; `None` until one arrives.
pub type InterruptWatch = watch::Receiver<Option<Interrupt>>;

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

fn next_token() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{}-{}-{n}-{nanos:x}", std::process::id(), sweep_scope())
}

/// Which greenlight runs may end each other's orphaned gates: those sharing a lock root (the
/// same user's machine-wide domain; each test gets its own). FNV-1a of the lock root's path, so
/// it is stable across runs and builds.
fn sweep_scope() -> &'static str {
    static SCOPE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SCOPE.get_or_init(|| {
        let root = crate::lock::lock_root();
        let hash = root
            .as_os_str()
            .as_encoded_bytes()
            .iter()
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
        format!("{hash:016x}")
    })
}

/// Makes this process a child subreaper, so descendants of a gate that escape its process group
/// are re-parented to us when their parent dies, and can be found and killed. Linux only;
/// elsewhere escaped processes are found by their token alone.
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    {
        let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    }
}

/// Kills every process on the machine whose environment holds `var=value`, with its process
/// group when it leads one, and waits (up to two seconds) until they are gone. This is how a
/// restarted goal ends what a runner killed with SIGKILL left behind: every gate and agent
/// process of a goal run carries the goal's marker, and nothing in-process can act on SIGKILL.
pub fn sweep_marked(var: &str, value: &str) -> Vec<LeftoverProcess> {
    let me = std::process::id() as i32;
    let mut found: Vec<LeftoverProcess> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let pids: Vec<i32> = procs::processes_with_env(var, value)
            .into_iter()
            .filter(|&p| p != me)
            .collect();
        if pids.is_empty() || Instant::now() >= deadline {
            return found;
        }
        for &raw in &pids {
            if !found.iter().any(|f| f.pid == raw) {
                found.push(procs::describe(raw, 0));
            }
            kill_with_its_group(raw);
            reap(raw); // ours only if we adopted it; otherwise its parent or init reaps it
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills the gate processes of greenlight runs that died without cleaning up (SIGKILL, a power
/// cut of the parent): processes whose gate token names an owner pid that no longer exists.
/// A live owner's gates are never touched; a reused owner pid reads as alive (the safe side);
/// only runs that share this run's lock root are swept.
pub fn sweep_orphaned_gates() -> Vec<LeftoverProcess> {
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    for (pid, owner, scope) in procs::gate_processes() {
        if owner == me || pid == me || scope != sweep_scope() {
            continue;
        }
        if !procs::is_dead(owner) {
            continue;
        }
        found.push(procs::describe(pid, 0));
        kill_with_its_group(pid);
        reap(pid);
    }
    found
}

/// Runs one gate to its end and leaves nothing of it behind.
pub async fn run(
    spec: &ExecSpec<'_>,
    sink: &mut dyn OutputSink,
    interrupt: &mut InterruptWatch,
) -> io::Result<ExecOutcome> {
    let token = next_token();
    let (reader, writer) = std::io::pipe()?;
    let mut command = tokio::process::Command::new("/bin/sh");
    command
        .arg("-c")
        .arg(spec.command)
        .current_dir(spec.cwd)
        .env(GATE_TOKEN_VAR, &token)
        .envs(spec.extra_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::from(writer.try_clone()?))
        .stderr(Stdio::from(writer))
        .process_group(0)
        .kill_on_drop(false);
    let started = Instant::now();
    let mut child = command.spawn()?;
    // The Command keeps its copies of the pipe's write end: drop them, or EOF never comes.
    drop(command);
    let leader = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .unwrap_or(0);
    let mut pipe = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader))?;

    let mut tail = TailBuffer::new(spec.tail_bytes);
    let mut buf = vec![0u8; 64 * 1024];
    let mut eof = false;
    let mut exit: Option<(i32, Duration)> = None;
    let mut ending: Option<Termination> = None; // timeout or interrupt in progress
    let mut kill_at: Option<tokio::time::Instant> = None;
    let mut settle_until: Option<tokio::time::Instant> = None;
    let deadline = tokio::time::Instant::from_std(started + spec.timeout);
    let mut leftovers = Vec::new();
    let mut interrupt_open = true;
    if let Some(signal) = *interrupt.borrow() {
        // Interrupted before the gate even started: end it at once.
        ending = Some(Termination::Interrupted(signal));
        kill_at = Some(signal_gate(leader, &token, spec.kill_grace));
    }

    loop {
        if let Some((_, _)) = exit {
            if settle_until.is_none() {
                // The leader is gone: its group and adopted strays must follow within the
                // settle window (or the grace period, when we are already ending the gate).
                settle_until =
                    Some(kill_at.unwrap_or_else(|| tokio::time::Instant::now() + LEAK_SETTLE));
            }
            if eof && nothing_left(leader, &token, spec.claim_adopted) {
                break;
            }
        }
        tokio::select! {
            read = pipe.read(&mut buf), if !eof => match read {
                Ok(0) => eof = true,
                Ok(n) => { tail.push(&buf[..n]); sink.chunk(&buf[..n]); }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => eof = true,
            },
            status = child.wait(), if exit.is_none() => {
                let code = match status {
                    Ok(s) => std::os::unix::process::ExitStatusExt::signal(&s)
                        .map(|sig| 128 + sig)
                        .or(s.code())
                        .unwrap_or(-1),
                    Err(_) => -1,
                };
                exit = Some((code, started.elapsed()));
            },
            () = tokio::time::sleep_until(deadline), if ending.is_none() => {
                ending = Some(Termination::TimedOut);
                kill_at = Some(signal_gate(leader, &token, spec.kill_grace));
                if exit.is_some() { settle_until = kill_at; }
            },
            changed = interrupt.changed(), if ending.is_none() && interrupt_open => {
                // A closed sender means nobody can interrupt us any more.
                interrupt_open = changed.is_ok();
                let received = if interrupt_open { *interrupt.borrow() } else { None };
                if let Some(signal) = received {
                    ending = Some(Termination::Interrupted(signal));
                    kill_at = Some(signal_gate(leader, &token, spec.kill_grace));
                    if exit.is_some() { settle_until = kill_at; }
                }
            },
            () = sleep_until_opt(kill_at.filter(|_| exit.is_none())) => {
                // Grace is over and the leader is still there: kill the whole group now.
                kill_group(leader, Signal::KILL);
                kill_at = None;
            },
            () = sleep_until_opt(settle_until) => {
                leftovers = kill_leftovers(leader, &token, spec.claim_adopted);
                break;
            },
        }
    }

    // Every writer we know of is dead; read what is left in the pipe.
    let pipe_left_open = !eof && !drain(&mut pipe, &mut buf, &mut tail, sink).await;
    reap_group(leader);
    let (code, duration) = exit.unwrap_or((-1, started.elapsed()));
    let termination = ending.unwrap_or(Termination::Exited(code));
    Ok(ExecOutcome {
        termination,
        duration,
        tail,
        leftovers,
        pipe_left_open,
    })
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn nothing_left(leader: i32, token: &str, claim_adopted: bool) -> bool {
    let group_gone = procs::pid(leader).is_none_or(|pgid| {
        rustix::process::test_kill_process_group(pgid).is_err()
            || procs::group_members(leader).is_empty()
    });
    group_gone && strays(token, claim_adopted).is_empty()
}

/// Adopted processes that belong to the gate: those carrying its token, or every live adopted
/// child when the caller claims them all.
fn strays(token: &str, claim_adopted: bool) -> Vec<i32> {
    if claim_adopted {
        procs::adopted_children()
    } else {
        procs::adopted_strays(token)
    }
}

fn kill_group(pgid: i32, signal: Signal) {
    if let Some(pgid) = procs::pid(pgid) {
        let _ = rustix::process::kill_process_group(pgid, signal);
    }
}

/// SIGTERM to the gate's group and to strays; returns when SIGKILL is due.
fn signal_gate(leader: i32, token: &str, grace: Duration) -> tokio::time::Instant {
    kill_group(leader, Signal::TERM);
    for stray in procs::processes_with_token(token) {
        if let Some(pid) = procs::pid(stray) {
            let _ = rustix::process::kill_process(pid, Signal::TERM);
        }
    }
    tokio::time::Instant::now() + grace
}

/// SIGKILLs everything of the gate still alive, reaps what was adopted, and says what it was.
fn kill_leftovers(leader: i32, token: &str, claim_adopted: bool) -> Vec<LeftoverProcess> {
    let mut found: Vec<LeftoverProcess> = Vec::new();
    // Escaped processes can start others while we work; a few rounds catch a double fork.
    for _ in 0..8 {
        let mut pids = procs::group_members(leader);
        pids.extend(procs::processes_with_token(token));
        if claim_adopted {
            pids.extend(procs::adopted_children());
        }
        pids.sort_unstable();
        pids.dedup();
        pids.retain(|&p| p != std::process::id() as i32);
        if pids.is_empty() {
            break;
        }
        for &raw in &pids {
            if !found.iter().any(|f| f.pid == raw) {
                found.push(procs::describe(raw, leader));
            }
        }
        kill_group(leader, Signal::KILL);
        for &raw in &pids {
            kill_with_its_group(raw);
        }
        std::thread::sleep(Duration::from_millis(5));
        for &raw in &pids {
            reap(raw);
        }
        reap_group(leader);
    }
    found
}

/// SIGKILLs a process, and the whole group it leads when it leads one (an escaped process
/// that called `setsid` took its own children into a group of its own).
fn kill_with_its_group(raw: i32) {
    let Some(pid) = procs::pid(raw) else { return };
    if procs::pgrp_of(raw) == Some(raw) {
        let _ = rustix::process::kill_process_group(pid, Signal::KILL);
    }
    let _ = rustix::process::kill_process(pid, Signal::KILL);
}

/// Reaps one adopted process, waiting briefly for a SIGKILL to land.
fn reap(raw: i32) {
    let Some(pid) = procs::pid(raw) else { return };
    for _ in 0..200 {
        match rustix::process::waitpid(Some(pid), WaitOptions::NOHANG) {
            Ok(Some(_)) | Err(_) => return, // reaped, or not our child
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// Reaps adopted zombies of the gate's group (the leader itself was reaped by its `Child`).
fn reap_group(leader: i32) {
    let Some(pgid) = procs::pid(leader) else {
        return;
    };
    while let Ok(Some(_)) = rustix::process::waitpgid(pgid, WaitOptions::NOHANG) {}
}

/// Reads the pipe to its end; false when it stayed open past [`DRAIN_LIMIT`].
async fn drain(
    pipe: &mut tokio::net::unix::pipe::Receiver,
    buf: &mut [u8],
    tail: &mut TailBuffer,
    sink: &mut dyn OutputSink,
) -> bool {
    let deadline = tokio::time::Instant::now() + DRAIN_LIMIT;
    loop {
        match tokio::time::timeout_at(deadline, pipe.read(buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(n)) => {
                tail.push(&buf[..n]);
                sink.chunk(&buf[..n]);
            }
            Err(_) => return false,
        }
    }
}
