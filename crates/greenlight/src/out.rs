//! The binary's only way to write to stdout and stderr: a write never panics.
//!
//! The rule for stdout: its first failed write decides how the command ends, and nothing is
//! written to it afterwards. A reader that went away (EPIPE: `| head -c1`) ends the command
//! quietly with [`STDOUT_CLOSED`]; a long-running command hears of it through the hook set with
//! [`on_stdout_failure`] and stops the way it stops on SIGTERM (gates ended, locks released, a
//! goal paused). Any other error (`> /dev/full`) ends the command with [`STDOUT_FAILED`] and a
//! message naming stdout. stderr failures are ignored: there is nowhere left to say anything.
//!
//! Use the macros, never `print!`/`println!`/`eprint!`/`eprintln!` (they panic when a write
//! fails; the crate denies them): `outln!`, `out!`, `errln!`, `err!`. Each returns
//! `true` while stdout is still usable, so a loop can stop writing into a closed pipe.

use std::fmt;
use std::io::{self, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};

/// Exit code when stdout's reader went away: 128 + SIGPIPE (13), what a shell reports for a
/// command a closed pipe ended, so `set -o pipefail` scripts see what they would see for `git`.
pub const STDOUT_CLOSED: i32 = 141;

/// Exit code when stdout could not be written for any other reason (a full disk, an I/O error).
pub const STDOUT_FAILED: i32 = 1;

const OPEN: u8 = 0;
const CLOSED: u8 = 1;
const FAILED: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(OPEN);
static FAILURE: Mutex<Option<String>> = Mutex::new(None);
type Hook = Box<dyn FnOnce() + Send>;
static ON_FAILURE: Mutex<Option<Hook>> = Mutex::new(None);

/// Runs `hook` once, the first time a write to stdout fails (at once if one already has). A
/// command that runs gates or an agent uses it to stop as it would on SIGTERM.
pub fn on_stdout_failure(hook: impl FnOnce() + Send + 'static) {
    if STATE.load(Ordering::SeqCst) != OPEN {
        hook();
        return;
    }
    if let Ok(mut slot) = ON_FAILURE.lock() {
        *slot = Some(Box::new(hook));
    }
}

/// The interrupt a long-running command stops on: the ending signals, and a stdout nobody reads
/// any more (`| head -c1`), which counts as SIGTERM (gates ended, locks released, a goal paused).
/// Must run inside the tokio runtime.
pub fn interrupt_with_closed_stdout(
    mut signals: greenlight_proc::InterruptWatch,
) -> greenlight_proc::InterruptWatch {
    let (tx, rx) = tokio::sync::watch::channel(None);
    let on_closed = tx.clone();
    on_stdout_failure(move || {
        let _ = on_closed.send(Some(greenlight_proc::Interrupt::Term));
    });
    tokio::spawn(async move {
        if let Ok(received) = signals.wait_for(Option::is_some).await {
            let _ = tx.send(*received);
        }
    });
    rx
}

/// Whether a write to stdout has failed (closed or broken): the command should wind down.
pub fn stdout_failed() -> bool {
    STATE.load(Ordering::SeqCst) != OPEN
}

fn record(error: &io::Error) {
    let state = if error.kind() == io::ErrorKind::BrokenPipe {
        CLOSED
    } else {
        FAILED
    };
    if STATE
        .compare_exchange(OPEN, state, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return; // the first failure decides
    }
    if state == FAILED
        && let Ok(mut slot) = FAILURE.lock()
    {
        *slot = Some(error.to_string());
    }
    let hook = ON_FAILURE.lock().ok().and_then(|mut slot| slot.take());
    if let Some(hook) = hook {
        hook();
    }
}

/// Writes to stdout and flushes, so a failure shows at the write that caused it. Returns
/// whether stdout is still usable.
pub fn stdout(args: fmt::Arguments<'_>) -> bool {
    if stdout_failed() {
        return false;
    }
    let mut out = io::stdout().lock();
    match out.write_fmt(args).and_then(|()| out.flush()) {
        Ok(()) => true,
        Err(e) => {
            drop(out);
            record(&e);
            false
        }
    }
}

/// Writes to stderr; a failure is ignored.
pub fn stderr(args: fmt::Arguments<'_>) {
    let mut err = io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.flush());
}

/// The exit code the process ends with: `code`, unless stdout failed on the way. Says why on
/// stderr for a failure other than a closed reader.
pub fn finish(code: i32) -> i32 {
    if !stdout_failed()
        && let Err(e) = io::stdout().lock().flush()
    {
        record(&e);
    }
    match STATE.load(Ordering::SeqCst) {
        OPEN => code,
        CLOSED => STDOUT_CLOSED,
        _ => {
            let why = FAILURE
                .lock()
                .ok()
                .and_then(|slot| slot.clone())
                .unwrap_or_else(|| "unknown error".to_owned());
            stderr(format_args!(
                "greenlight: cannot write to stdout ({why}); the output above is incomplete. \
                 Send stdout somewhere writable.\n"
            ));
            STDOUT_FAILED
        }
    }
}

/// `println!` that never panics (see [`stdout_failed`] to stop a loop early).
macro_rules! outln {
    () => {{
        let _ = $crate::out::stdout(format_args!("\n"));
    }};
    ($($arg:tt)*) => {{
        let _ = $crate::out::stdout(format_args!("{}\n", format_args!($($arg)*)));
    }};
}

/// `print!` that never panics (see [`stdout_failed`] to stop a loop early).
macro_rules! out {
    ($($arg:tt)*) => {{
        let _ = $crate::out::stdout(format_args!($($arg)*));
    }};
}

/// `eprintln!` that never panics.
macro_rules! errln {
    () => {
        $crate::out::stderr(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` that never panics.
macro_rules! err {
    ($($arg:tt)*) => {
        $crate::out::stderr(format_args!($($arg)*))
    };
}
