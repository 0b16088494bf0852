//! The runner: spawn one child as the leader of its own process group, feed it, read it, bound
//! it, end it, and say what it left behind.
//!
//! Theory of operation: the child gets a fresh run token in its environment ([`TOKEN_VAR`]) so
//! that anything it starts is recognisable even after escaping its group. Its output is read
//! into bounded tails and handed to an [`Observer`] as it arrives. When the leader exits,
//! anything still alive in its group, or adopted by us (a child subreaper) and carrying the
//! token, gets [`Spec::settle`] to finish on its own, then SIGKILL, and is reported. Only then
//! is the rest of the output drained, for at most [`Spec::drain_limit`]: a pipe still held open
//! by something we could not find does not hold the run hostage, and what was read is kept. On
//! the deadline or an interrupt the group and the token's holders get SIGTERM, then SIGKILL
//! after the grace period whether or not the leader is still there. Dropping the run's future
//! SIGKILLs the group, so a cancelled run leaves nothing either.

use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rustix::process::Signal;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe::Receiver;
use tokio::signal::unix::{SignalKind, signal};

use crate::kill;
use crate::procs::{self, TOKEN_VAR};
use crate::signals::InterruptWatch;
use crate::spec::{
    Ending, Error, Exit, Input, Observer, OnSignal, Output, Program, RunOutcome, Spec, Stream,
    next_token,
};
use crate::tail::TailBuffer;

/// SIGKILLs the group and the token's holders when a run is dropped before it finished.
struct DropGuard<'a> {
    leader: i32,
    token: &'a str,
    armed: bool,
}

impl Drop for DropGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            kill::group(self.leader, Signal::KILL);
            for pid in procs::processes_with_token(self.token) {
                kill::with_its_group(pid);
            }
        }
    }
}

/// An output pipe being read, or none.
struct Pipe {
    rx: Option<Receiver>,
    eof: bool,
    buf: Vec<u8>,
}

impl Pipe {
    fn none() -> Self {
        Self {
            rx: None,
            eof: true,
            buf: Vec::new(),
        }
    }

    fn some(rx: Receiver) -> Self {
        Self {
            rx: Some(rx),
            eof: false,
            buf: vec![0u8; 64 * 1024],
        }
    }

    /// Reads one chunk; `None` at end-of-file (or a read error, which ends the stream too).
    async fn read(&mut self) -> Option<&[u8]> {
        let Some(rx) = self.rx.as_mut() else {
            return std::future::pending().await;
        };
        loop {
            match rx.read(&mut self.buf).await {
                Ok(0) => return None,
                Ok(n) => return self.buf.get(..n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
    }
}

/// Signals passed on to a foreground child.
struct Forwarder {
    streams: Vec<(tokio::signal::unix::Signal, Signal)>,
}

impl Forwarder {
    fn new(mode: OnSignal) -> std::io::Result<Self> {
        let mut streams = Vec::new();
        if mode == OnSignal::Forward {
            for sig in [Signal::INT, Signal::TERM, Signal::HUP, Signal::QUIT] {
                streams.push((signal(SignalKind::from_raw(sig.as_raw()))?, sig));
            }
        }
        Ok(Self { streams })
    }

    async fn next(&mut self) -> Signal {
        if self.streams.is_empty() {
            return std::future::pending().await;
        }
        std::future::poll_fn(|cx| {
            for (stream, sig) in self.streams.iter_mut() {
                if stream.poll_recv(cx).is_ready() {
                    return std::task::Poll::Ready(*sig);
                }
            }
            std::task::Poll::Pending
        })
        .await
    }
}

/// Runs one child to its end and leaves nothing of it behind. `interrupt` ends it early (with
/// [`OnSignal::End`]); `None` when nobody can interrupt.
pub async fn run<O: Observer + ?Sized>(
    spec: &Spec,
    observer: &mut O,
    mut interrupt: Option<&mut InterruptWatch>,
) -> Result<RunOutcome, Error> {
    let shown = spec.program.shown();
    let pipe_error = |source| Error::Pipe {
        program: shown.clone(),
        source,
    };
    let token = next_token(&spec.sweep_scope);
    let mut command = match &spec.program {
        Program::Shell(script) => {
            let mut c = tokio::process::Command::new("/bin/sh");
            c.arg("-c").arg(script);
            c
        }
        Program::Argv { program, args } => {
            let mut c = tokio::process::Command::new(program);
            c.args(args);
            c
        }
    };
    command
        .current_dir(&spec.cwd)
        .process_group(0)
        .kill_on_drop(false);
    match &spec.env.base {
        Some(base) => {
            command.env_clear();
            command.envs(
                base.iter()
                    .filter(|(k, _)| !spec.env.remove.contains(k))
                    .map(|(k, v)| (k, v)),
            );
        }
        None => {
            for var in &spec.env.remove {
                command.env_remove(var);
            }
        }
    }
    command.envs(spec.env.add.iter().map(|(k, v)| (k, v)));
    command.env(TOKEN_VAR, &token);
    command.stdin(match spec.input {
        Input::Null => Stdio::null(),
        Input::Text(_) => Stdio::piped(),
        Input::Inherit => Stdio::inherit(),
    });
    let (mut out, mut err) = (Pipe::none(), Pipe::none());
    let mut readers: Vec<(OwnedFd, bool)> = Vec::new();
    match spec.output {
        Output::Interleaved => {
            let (reader, writer) = std::io::pipe().map_err(pipe_error)?;
            command.stdout(Stdio::from(writer.try_clone().map_err(pipe_error)?));
            command.stderr(Stdio::from(writer));
            readers.push((OwnedFd::from(reader), true));
        }
        Output::Separate => {
            let (out_r, out_w) = std::io::pipe().map_err(pipe_error)?;
            let (err_r, err_w) = std::io::pipe().map_err(pipe_error)?;
            command.stdout(Stdio::from(out_w));
            command.stderr(Stdio::from(err_w));
            readers.push((OwnedFd::from(out_r), true));
            readers.push((OwnedFd::from(err_r), false));
        }
        Output::Inherit => {
            command.stdout(Stdio::inherit());
            command.stderr(Stdio::inherit());
        }
    }
    let mut forwarder = Forwarder::new(spec.on_signal).map_err(pipe_error)?;
    let started = Instant::now();
    // Listed as a helper while it runs: a gate run on another thread sweeps the adopted children
    // of this process, and this child, still run here, is not one of them.
    let spawned = procs::spawn_listed(|| command.spawn(), tokio::process::Child::id);
    // The Command keeps its copies of the pipes' write ends: drop them, or EOF never comes.
    drop(command);
    let (mut child, mut listed) = spawned.map_err(|source| Error::Spawn {
        program: shown.clone(),
        cwd: spec.cwd.display().to_string(),
        source,
    })?;
    let pid = child.id();
    let leader = pid.and_then(|id| i32::try_from(id).ok()).unwrap_or(0);
    let mut guard = DropGuard {
        leader,
        token: &token,
        armed: true,
    };
    for (fd, is_out) in readers {
        let rx = Receiver::from_owned_fd(fd).map_err(pipe_error)?;
        if is_out {
            out = Pipe::some(rx);
        } else {
            err = Pipe::some(rx);
        }
    }
    let writer = match (&spec.input, child.stdin.take()) {
        (Input::Text(text), Some(mut stdin)) => {
            let bytes = text.clone();
            // A child that exits without reading gives EPIPE; that is its business.
            Some(tokio::spawn(async move {
                let _ = stdin.write_all(&bytes).await;
                let _ = stdin.shutdown().await;
            }))
        }
        _ => None,
    };

    let mut tail = TailBuffer::new(spec.tail_bytes);
    let mut stderr_tail = TailBuffer::new(if spec.output == Output::Separate {
        spec.tail_bytes
    } else {
        0
    });
    let mut exit: Option<(Option<Exit>, Duration)> = None;
    let mut ended_by: Option<Ending> = None;
    let mut kill_at: Option<tokio::time::Instant> = None;
    let mut settle_until: Option<tokio::time::Instant> = None;
    let deadline = spec
        .deadline
        .map(|d| tokio::time::Instant::from_std(started + d));
    let mut leftovers = Vec::new();
    let ends = spec.on_signal == OnSignal::End;
    let mut interrupt_open = interrupt.is_some() && ends;
    if ends && let Some(signal) = interrupt.as_ref().and_then(|i| *i.borrow()) {
        // Interrupted before the child even started: end it at once.
        ended_by = Some(Ending::Interrupted(signal));
        kill_at = Some(signal_all(leader, &token, spec.grace));
    }

    loop {
        if exit.is_some() {
            if settle_until.is_none() {
                // The leader is gone: its group and adopted strays must follow within the
                // settle window (or the grace period, when we are already ending the child).
                settle_until =
                    Some(kill_at.unwrap_or_else(|| tokio::time::Instant::now() + spec.settle));
            }
            if out.eof && err.eof && nothing_left(leader, &token, spec.claim_adopted) {
                break;
            }
        }
        tokio::select! {
            chunk = out.read(), if !out.eof => match chunk {
                Some(bytes) => { tail.push(bytes); observer.chunk(Stream::Out, bytes); }
                None => out.eof = true,
            },
            chunk = err.read(), if !err.eof => match chunk {
                Some(bytes) => { stderr_tail.push(bytes); observer.chunk(Stream::Err, bytes); }
                None => err.eof = true,
            },
            status = child.wait(), if exit.is_none() => {
                let status = status.ok().map(|s| match s.signal() {
                    Some(sig) => Exit::Signal(sig),
                    None => Exit::Code(s.code().unwrap_or(-1)),
                });
                exit = Some((status, started.elapsed()));
                // Reaped: no longer a child of ours to keep apart.
                drop(listed.take());
            },
            () = sleep_until_opt(deadline), if ended_by.is_none() => {
                ended_by = Some(Ending::TimedOut);
                kill_at = Some(signal_all(leader, &token, spec.grace));
                if exit.is_some() { settle_until = kill_at; }
            },
            changed = changed_opt(&mut interrupt), if ended_by.is_none() && interrupt_open => {
                // A closed sender means nobody can interrupt us any more.
                interrupt_open = changed;
                let received = if changed { interrupt.as_ref().and_then(|i| *i.borrow()) } else { None };
                if let Some(signal) = received {
                    ended_by = Some(Ending::Interrupted(signal));
                    kill_at = Some(signal_all(leader, &token, spec.grace));
                    if exit.is_some() { settle_until = kill_at; }
                }
            },
            sig = forwarder.next(), if exit.is_none() => kill::group(leader, sig),
            () = sleep_until_opt(kill_at.filter(|_| exit.is_none())) => {
                // Grace is over and the leader is still there: kill the whole group now.
                kill::group(leader, Signal::KILL);
                kill_at = None;
            },
            () = sleep_until_opt(settle_until) => {
                leftovers = kill::leftovers(leader, &token, spec.claim_adopted);
                break;
            },
        }
    }

    // Every writer we know of is dead; read what is left in the pipes.
    let drained = drain(
        &mut out,
        &mut err,
        &mut tail,
        &mut stderr_tail,
        observer,
        spec.drain_limit,
    )
    .await;
    kill::reap_group(leader);
    kill::reap_adopted_zombies();
    if let Some(writer) = writer {
        writer.abort();
    }
    guard.armed = false;
    let (exit, duration) = exit.unwrap_or((None, started.elapsed()));
    Ok(RunOutcome {
        exit,
        ended_by,
        duration,
        pid,
        tail,
        stderr_tail,
        leftovers,
        pipe_left_open: !drained,
    })
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Waits for the interrupt to change; false when its sender is gone.
async fn changed_opt(interrupt: &mut Option<&mut InterruptWatch>) -> bool {
    match interrupt {
        Some(watch) => watch.changed().await.is_ok(),
        None => std::future::pending().await,
    }
}

fn nothing_left(leader: i32, token: &str, claim_adopted: bool) -> bool {
    let group_gone = procs::pid(leader).is_none_or(|pgid| {
        rustix::process::test_kill_process_group(pgid).is_err()
            || procs::group_members(leader).is_empty()
    });
    group_gone && kill::strays(token, claim_adopted).is_empty()
}

/// SIGTERM to the child's group and to the token's holders; returns when SIGKILL is due.
fn signal_all(leader: i32, token: &str, grace: Duration) -> tokio::time::Instant {
    kill::group(leader, Signal::TERM);
    for stray in procs::processes_with_token(token) {
        if let Some(pid) = procs::pid(stray) {
            let _ = rustix::process::kill_process(pid, Signal::TERM);
        }
    }
    tokio::time::Instant::now() + grace
}

/// Reads both pipes to their end; false when one stayed open past `limit`.
async fn drain<O: Observer + ?Sized>(
    out: &mut Pipe,
    err: &mut Pipe,
    tail: &mut TailBuffer,
    stderr_tail: &mut TailBuffer,
    observer: &mut O,
    limit: Duration,
) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while !(out.eof && err.eof) {
        tokio::select! {
            chunk = out.read(), if !out.eof => match chunk {
                Some(bytes) => { tail.push(bytes); observer.chunk(Stream::Out, bytes); }
                None => out.eof = true,
            },
            chunk = err.read(), if !err.eof => match chunk {
                Some(bytes) => { stderr_tail.push(bytes); observer.chunk(Stream::Err, bytes); }
                None => err.eof = true,
            },
            () = tokio::time::sleep_until(deadline) => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signals::Interrupt;

    fn sh(script: &str) -> Spec {
        let mut spec = Spec::new(Program::Shell(script.to_owned()), "/");
        spec.grace = Duration::from_millis(300);
        spec
    }

    fn alive(pid: i32) -> bool {
        !procs::is_dead(pid)
            && std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| !s.contains(") Z "))
    }

    fn wait_dead(pid: i32) -> bool {
        for _ in 0..200 {
            if !alive(pid) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    struct Collect(Vec<(Stream, Vec<u8>)>);
    impl Observer for Collect {
        fn chunk(&mut self, stream: Stream, bytes: &[u8]) {
            self.0.push((stream, bytes.to_vec()));
        }
    }

    #[tokio::test]
    async fn interleaved_output_reaches_the_tail_and_the_observer_in_order() {
        let mut seen = Collect(Vec::new());
        let out = run(&sh("echo one; echo two >&2; exit 3"), &mut seen, None)
            .await
            .expect("runs");
        assert_eq!(out.exit, Some(Exit::Code(3)));
        assert_eq!(out.ended_by, None);
        assert_eq!(out.tail.text(), "one\ntwo\n");
        let observed: Vec<u8> = seen.0.iter().flat_map(|(_, b)| b.clone()).collect();
        assert_eq!(observed, b"one\ntwo\n");
        assert!(seen.0.iter().all(|(s, _)| *s == Stream::Out));
        assert!(out.leftovers.is_empty() && !out.pipe_left_open);
    }

    #[tokio::test]
    async fn separate_streams_get_a_tail_each_and_text_arrives_on_stdin() {
        let mut spec = sh("tr a-z A-Z; echo oops >&2");
        spec.output = Output::Separate;
        spec.input = Input::Text(b"hello".to_vec());
        let out = run(&spec, &mut (), None).await.expect("runs");
        assert_eq!(out.tail.text(), "HELLO");
        assert_eq!(out.stderr_tail.text(), "oops\n");
        assert_eq!(out.exit, Some(Exit::Code(0)));
    }

    #[tokio::test]
    async fn the_environment_loses_the_scrub_list_and_gains_the_token_and_additions() {
        let mut spec = sh("echo \"${HOME-unset}|$ADDED|${GREENLIGHT_RUN_TOKEN:+token}\"");
        spec.env.remove.push("HOME".into());
        spec.env.add.push(("ADDED".into(), "yes".into()));
        let out = run(&spec, &mut (), None).await.expect("runs");
        assert_eq!(out.tail.text(), "unset|yes|token\n");
    }

    #[tokio::test]
    async fn a_missing_program_is_a_spawn_error_naming_it() {
        let spec = Spec::new(
            Program::Argv {
                program: "/nonexistent/tool".into(),
                args: Vec::new(),
            },
            "/",
        );
        let err = run(&spec, &mut (), None).await.expect_err("cannot start");
        assert!(err.to_string().contains("/nonexistent/tool"), "{err}");
    }

    #[tokio::test]
    async fn the_deadline_ends_a_group_that_ignores_sigterm() {
        let mut spec = sh("(trap '' TERM; sleep 30) & echo $!; trap '' TERM; sleep 30");
        spec.deadline = Some(Duration::from_millis(300));
        let started = Instant::now();
        let out = run(&spec, &mut (), None).await.expect("runs");
        assert_eq!(out.ended_by, Some(Ending::TimedOut));
        assert!(started.elapsed() < Duration::from_secs(5));
        let bg: i32 = out.tail.text().trim().parse().expect("a pid");
        assert!(wait_dead(bg), "the SIGTERM-proof grandchild survived");
    }

    #[tokio::test]
    async fn a_backgrounded_child_is_killed_and_reported_after_the_leader_exits() {
        let out = run(&sh("sleep 30 >/dev/null 2>&1 & echo $!"), &mut (), None)
            .await
            .expect("runs");
        let bg: i32 = out.tail.text().trim().parse().expect("a pid");
        assert_eq!(out.exit, Some(Exit::Code(0)));
        assert!(out.leftovers.iter().any(|l| l.pid == bg), "{out:?}");
        assert!(wait_dead(bg));
    }

    /// An escaped child holding the output pipe: what was written is kept, the run does not
    /// wait for the child, and the child is found by its token and killed.
    #[tokio::test]
    async fn a_setsid_child_holding_the_pipe_is_killed_by_token_and_the_output_kept() {
        let mut spec = sh("setsid sleep 30 & echo $!; echo reply");
        spec.drain_limit = Duration::from_secs(20);
        let started = Instant::now();
        let out = run(&spec, &mut (), None).await.expect("runs");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "waited for the escaped child"
        );
        let text = out.tail.text();
        assert!(text.ends_with("reply\n"), "{text}");
        let bg: i32 = text.lines().next().unwrap_or("").parse().expect("a pid");
        assert!(out.leftovers.iter().any(|l| l.pid == bg && l.escaped));
        assert!(!out.pipe_left_open);
        assert!(wait_dead(bg));
    }

    /// One that also cleared its environment cannot be found (we are no subreaper here): the
    /// drain limit ends the wait, and what was read is still there.
    #[tokio::test]
    async fn the_drain_limit_bounds_the_wait_for_a_pipe_nobody_can_find() {
        let mut spec = sh("setsid env -i sleep 30 & echo $!; echo reply");
        spec.drain_limit = Duration::from_millis(300);
        let out = run(&spec, &mut (), None).await.expect("runs");
        assert!(out.pipe_left_open);
        let text = out.tail.text();
        assert!(text.ends_with("reply\n"), "{text}");
        let bg: i32 = text.lines().next().unwrap_or("").parse().expect("a pid");
        kill::with_its_group(bg);
        assert!(wait_dead(bg));
    }

    #[tokio::test]
    async fn an_interrupt_ends_the_group_and_says_so() {
        let (tx, mut rx) = tokio::sync::watch::channel(None);
        let spec = sh("echo $$; sleep 30");
        let send = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let _ = tx.send(Some(Interrupt::Term));
            tx
        });
        let out = run(&spec, &mut (), Some(&mut rx)).await.expect("runs");
        drop(send);
        assert_eq!(out.ended_by, Some(Ending::Interrupted(Interrupt::Term)));
        assert_eq!(out.exit, Some(Exit::Signal(15)));
        let leader: i32 = out.tail.text().trim().parse().expect("a pid");
        assert!(procs::group_members(leader).is_empty());
    }

    #[tokio::test]
    async fn dropping_the_run_kills_the_group() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pidfile = dir.path().join("pid");
        let spec = sh(&format!("echo $$ > '{}'; sleep 30", pidfile.display()));
        let cancelled =
            tokio::time::timeout(Duration::from_millis(300), run(&spec, &mut (), None)).await;
        assert!(cancelled.is_err(), "the sleep outlasts the timeout");
        let leader: i32 = std::fs::read_to_string(&pidfile)
            .expect("pidfile")
            .trim()
            .parse()
            .expect("a pid");
        assert!(wait_dead(leader) || procs::group_members(leader).is_empty());
    }
}
