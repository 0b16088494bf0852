//! The signals that end a greenlight run, and the one entry point every long-running
//! subcommand starts from: a runtime, the child-subreaper bit, and those signals turned into an
//! [`Interrupt`] its children are ended by.
//!
//! The rule: every signal whose default action would kill greenlight and leave its children
//! running is caught. SIGINT is an [`Interrupt::Int`] (exit 130); SIGTERM, SIGHUP (a closed
//! terminal), SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM are an [`Interrupt::Term`] (exit 143): each
//! asks the run to stop, none of them is a reason to stop differently. A second signal during
//! the cleanup is caught and ignored, so the cleanup finishes.

use std::future::Future;

use tokio::signal::unix::{Signal as Stream, SignalKind, signal};
use tokio::sync::watch;

/// A signal delivered to greenlight itself while children run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupt {
    /// SIGINT (Ctrl-C): exit 130.
    Int,
    /// SIGTERM, or SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM: exit 143.
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

    /// The signal's name as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Interrupt::Int => "SIGINT",
            Interrupt::Term => "SIGTERM",
        }
    }
}

/// Receives an interrupt while children run; `None` until one arrives.
pub type InterruptWatch = watch::Receiver<Option<Interrupt>>;

/// The signals that end a run, with the interrupt each one means.
pub const ENDING_SIGNALS: &[(i32, Interrupt)] = &[
    (libc_sig::INT, Interrupt::Int),
    (libc_sig::TERM, Interrupt::Term),
    (libc_sig::HUP, Interrupt::Term),
    (libc_sig::QUIT, Interrupt::Term),
    (libc_sig::USR1, Interrupt::Term),
    (libc_sig::USR2, Interrupt::Term),
    (libc_sig::ALRM, Interrupt::Term),
];

/// Signal numbers, from rustix so no libc dependency is needed.
mod libc_sig {
    use rustix::process::Signal;
    pub const INT: i32 = Signal::INT.as_raw();
    pub const TERM: i32 = Signal::TERM.as_raw();
    pub const HUP: i32 = Signal::HUP.as_raw();
    pub const QUIT: i32 = Signal::QUIT.as_raw();
    pub const USR1: i32 = Signal::USR1.as_raw();
    pub const USR2: i32 = Signal::USR2.as_raw();
    pub const ALRM: i32 = Signal::ALARM.as_raw();
}

/// Makes this process a child subreaper, so descendants of a child that escape its process
/// group are re-parented to us when their parent dies, and can be found and killed. Linux only;
/// elsewhere escaped processes are found by their token alone.
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    {
        let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    }
}

/// Asks the kernel to send this process SIGTERM once its parent dies (Linux), then says whether
/// `parent` is its parent still. A process a supervisor started stops with that supervisor,
/// even one SIGKILLed, instead of running on with nobody to stop it; checked after the request,
/// so a parent that died just before it is seen too.
pub fn stop_with_parent(parent: i32) -> bool {
    #[cfg(target_os = "linux")]
    {
        let _ =
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM));
    }
    rustix::process::getppid().map(|p| p.as_raw_pid()) == Some(parent)
}

/// Installs handlers for every [`ENDING_SIGNALS`] member and returns the watch they feed. Must
/// run inside a tokio runtime. The handlers are installed before this returns, so a signal that
/// arrives while the first child is being spawned is not lost.
pub fn catch_ending_signals() -> std::io::Result<InterruptWatch> {
    let mut streams: Vec<(Stream, Interrupt)> = Vec::with_capacity(ENDING_SIGNALS.len());
    for &(number, meaning) in ENDING_SIGNALS {
        streams.push((signal(SignalKind::from_raw(number))?, meaning));
    }
    let (tx, rx) = watch::channel(None);
    tokio::spawn(async move {
        let first = next_signal(&mut streams).await;
        let _ = tx.send(Some(first));
        // Keep the handlers installed so a second signal does not kill us mid-cleanup.
        loop {
            next_signal(&mut streams).await;
        }
    });
    Ok(rx)
}

/// Waits for any of `streams` and says what it means.
async fn next_signal(streams: &mut [(Stream, Interrupt)]) -> Interrupt {
    std::future::poll_fn(|cx| {
        for (stream, meaning) in streams.iter_mut() {
            if stream.poll_recv(cx).is_ready() {
                return std::task::Poll::Ready(*meaning);
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// How long after the first signal a run bounded by [`run_main_bounded`] may still wait on a
/// child: the gates' grace (SIGTERM to SIGKILL, `grace`), the settle window and the drain
/// limit, which an orderly end takes at most, and a second for what follows (a lock released, a
/// record written).
pub fn ending_bound(grace: std::time::Duration) -> std::time::Duration {
    grace + crate::LEAK_SETTLE + crate::DRAIN_LIMIT + std::time::Duration::from_secs(1)
}

/// [`run_main`] for a run that must end on a signal even while it waits on a child without
/// polling its runtime (a git call in `verify` that hangs: a `core.fsmonitor` hook, a stalled
/// filesystem). The signals are caught on a thread of their own; once [`ending_bound`] has
/// passed after the first one and the run is still going, every live child of this process is
/// SIGKILLed with its group, again every 100 ms until the run ends, so each such wait returns
/// and the run ends as interrupted. `grace`: the run's gates' grace. Not for a foreground child
/// that may outlive a signal on purpose (`init --write`).
pub fn run_main_bounded<F, Fut, T>(grace: std::time::Duration, body: F) -> std::io::Result<T>
where
    F: FnOnce(InterruptWatch) -> Fut,
    Fut: Future<Output = T>,
{
    run_with(|| catch_on_a_thread(ending_bound(grace)), body)
}

/// The ending signals caught on a thread with a runtime of its own, which then ends every
/// child once `bound` has passed after the first signal; it stops when every receiver of the
/// returned watch is gone (the run is over).
fn catch_on_a_thread(bound: std::time::Duration) -> std::io::Result<InterruptWatch> {
    let (tx, rx) = watch::channel(None);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("greenlight-signals".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            runtime.block_on(async move {
                let mut streams = Vec::with_capacity(ENDING_SIGNALS.len());
                for &(number, meaning) in ENDING_SIGNALS {
                    match signal(SignalKind::from_raw(number)) {
                        Ok(stream) => streams.push((stream, meaning)),
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    }
                }
                let _ = ready_tx.send(Ok(()));
                let first = tokio::select! {
                    first = next_signal(&mut streams) => first,
                    () = tx.closed() => return,
                };
                let _ = tx.send(Some(first));
                // Later signals are swallowed so they do not kill us mid-cleanup.
                let ended_by = tokio::time::Instant::now() + bound;
                loop {
                    tokio::select! {
                        _ = next_signal(&mut streams) => {}
                        () = tx.closed() => return,
                        () = tokio::time::sleep_until(ended_by) => break,
                    }
                }
                loop {
                    crate::kill::end_every_child();
                    tokio::select! {
                        _ = next_signal(&mut streams) => {}
                        () = tx.closed() => return,
                        () = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
                    }
                }
            });
        })?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(rx),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(std::io::Error::other(
            "the signal thread ended before it was ready",
        )),
    }
}

/// The one entry point of a subcommand that runs children: builds a current-thread runtime,
/// makes this process a child subreaper, catches the ending signals, and runs `body` with the
/// interrupt they feed. Errors only when the runtime or a handler cannot be set up.
pub fn run_main<F, Fut, T>(body: F) -> std::io::Result<T>
where
    F: FnOnce(InterruptWatch) -> Fut,
    Fut: Future<Output = T>,
{
    run_with(catch_ending_signals, body)
}

/// What both entry points share: a current-thread runtime, the child subreaper, then `body`
/// with the interrupt that `catch` sets up inside the runtime.
fn run_with<C, F, Fut, T>(catch: C, body: F) -> std::io::Result<T>
where
    C: FnOnce() -> std::io::Result<InterruptWatch>,
    F: FnOnce(InterruptWatch) -> Fut,
    Fut: Future<Output = T>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        become_subreaper();
        let interrupt = catch()?;
        Ok(body(interrupt).await)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ending_signal_is_caught_once_and_means_int_or_term() {
        let mut numbers: Vec<i32> = ENDING_SIGNALS.iter().map(|(n, _)| *n).collect();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(numbers.len(), ENDING_SIGNALS.len());
        let ints: Vec<_> = ENDING_SIGNALS
            .iter()
            .filter(|(_, i)| *i == Interrupt::Int)
            .collect();
        assert_eq!(ints.len(), 1, "only SIGINT is Ctrl-C");
        assert_eq!(Interrupt::Term.exit_code(), 143);
        assert_eq!(Interrupt::Int.exit_code(), 130);
    }

    #[test]
    fn a_hangup_sent_to_ourselves_becomes_a_term_interrupt() {
        let got = run_main(|mut interrupt| async move {
            let me = rustix::process::getpid();
            let _ = rustix::process::kill_process(me, rustix::process::Signal::HUP);
            let _ =
                tokio::time::timeout(std::time::Duration::from_secs(5), interrupt.changed()).await;
            *interrupt.borrow()
        })
        .expect("runtime starts");
        assert_eq!(got, Some(Interrupt::Term));
    }
}
