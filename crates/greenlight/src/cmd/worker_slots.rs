//! `goal worker --capacity N` for N > 1: a supervisor and N one-slot worker processes. Each slot
//! is a process, and so a child subreaper, of its own: the sweep that ends what an item's agent
//! left running (at the item's gates, at a workflow run's end) sees only its own slot's
//! adoptions, never the background processes of an item another slot is still running.
//!
//! The supervisor claims nothing itself. It passes a signal on to every slot (each then ends
//! its item's run and gives the item back), stops the others when one slot fails, and ends
//! what a slot that died left behind. A slot stops when its supervisor dies, even by SIGKILL.

use std::ffi::OsString;
use std::process::{ExitStatus, Stdio};

use greenlight_proc::{Interrupt, ProcessEnv};

use crate::goal_run::{CliResult, exit};

/// Set by a supervisor on each slot process it starts: `<supervisor pid> <slot> <slot name>`.
pub(super) const SLOT_VAR: &str = "GREENLIGHT_WORKER_SLOT";

/// What a slot process was told by its supervisor.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Slot {
    /// Its number among the supervisor's slots, from 0.
    pub index: u32,
    /// Its name in the queue's records: the worker's name, `/`, the slot number.
    pub name: String,
}

/// This process's slot, when a supervisor started it as one; an error when [`SLOT_VAR`] is set
/// but is not a supervisor's word to this process (set by hand, or inherited by a worker an
/// agent started).
pub(super) fn slot_of(env: &ProcessEnv) -> Result<Option<Slot>, String> {
    let Some(value) = env.get(SLOT_VAR) else {
        return Ok(None);
    };
    let value = value.to_string_lossy();
    let mut parts = value.splitn(3, ' ');
    let (Some(supervisor), Some(index), Some(name)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(not_ours(&value, "it is not `<pid> <slot> <name>`"));
    };
    let (Ok(supervisor), Ok(index)) = (supervisor.parse::<i32>(), index.parse::<u32>()) else {
        return Err(not_ours(&value, "it is not `<pid> <slot> <name>`"));
    };
    if !greenlight_proc::stop_with_parent(supervisor) {
        return Err(not_ours(
            &value,
            &format!("process {supervisor} is not this worker's parent"),
        ));
    }
    Ok(Some(Slot {
        index,
        name: name.to_owned(),
    }))
}

fn not_ours(value: &str, why: &str) -> String {
    format!(
        "{SLOT_VAR}={value:?}: {why}; `goal worker --capacity N` sets it for the slot processes \
         it starts: unset it"
    )
}

/// The environment an item's agents and gates start from: the slot's own word left out.
pub(super) fn without_slot_var(env: &ProcessEnv) -> ProcessEnv {
    ProcessEnv::from_vars(
        env.iter()
            .filter(|(name, _)| *name != SLOT_VAR)
            .map(|(name, value)| (name.to_owned(), value.to_owned())),
    )
}

/// Runs `capacity` slot processes, each this same command line as one slot named
/// `<name>/<slot>`, until every one has ended.
pub(super) fn supervise(capacity: u32, name: &str) -> CliResult {
    let exe = std::env::current_exe().map_err(|e| {
        (
            exit::ERROR,
            format!("cannot find greenlight's own binary: {e}"),
        )
    })?;
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let ran = greenlight_proc::run_main(|mut signals| async move {
        let mut slots = Vec::new();
        for index in 0..capacity {
            // Spawned from the runtime's thread, the main one, which lives as long as this
            // process does: the kernel's parent-death signal follows the spawning thread.
            let spawned = tokio::process::Command::new(&exe)
                .args(&args)
                .env(
                    SLOT_VAR,
                    format!("{} {index} {name}/{index}", std::process::id()),
                )
                .stdin(Stdio::null())
                .process_group(0)
                .spawn();
            match spawned {
                Ok(child) => slots.push((index, child)),
                Err(e) => {
                    pass_on_to_all(&slots, Interrupt::Term);
                    for (_, mut child) in slots {
                        let _ = child.wait().await;
                    }
                    return Err((
                        exit::ERROR,
                        format!("cannot start worker slot {index}: {e}"),
                    ));
                }
            }
        }
        errln!(
            "greenlight: worker {name}: {capacity} slots, each a process of its own (pids {})",
            slots
                .iter()
                .filter_map(|(_, c)| c.id())
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut stopping: Option<Interrupt> = None;
        let mut failed: Option<String> = None;
        // Polled rather than awaited: a slot's pid is signalled only while `try_wait` has not
        // reaped it (`id()` is `None` after), so no signal can reach a process that took over
        // its number.
        while !slots.is_empty() {
            tokio::select! {
                () = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
                _ = signals.changed(), if stopping.is_none() => {
                    if let Some(signal) = *signals.borrow() {
                        stopping = Some(signal);
                        pass_on_to_all(&slots, signal);
                    }
                }
            }
            // Each slot that ended is reaped here and leaves the list.
            slots.retain_mut(|(index, child)| {
                let why = match child.try_wait() {
                    Ok(None) => return true,
                    Ok(Some(status)) => slot_failure(status),
                    Err(e) => Some(format!("could not be waited for: {e}")),
                };
                if let Some(why) = why
                    && stopping.is_none()
                    && failed.is_none()
                {
                    failed = Some(format!("worker slot {index} {why}"));
                }
                false
            });
            if failed.is_some() && stopping.is_none() {
                stopping = Some(Interrupt::Term);
                pass_on_to_all(&slots, Interrupt::Term);
            }
        }
        // What a slot that died left running came to this process, their subreaper.
        let left = greenlight_proc::end_adopted();
        if !left.is_empty() {
            errln!(
                "greenlight: worker {name}: ended {} processes a dead slot left running",
                left.len()
            );
        }
        match (failed, stopping) {
            (Some(why), _) => Err((
                exit::ERROR,
                format!("{why}; the other slots were stopped and gave their items back"),
            )),
            (None, Some(signal)) => Ok(signal.exit_code()),
            (None, None) => Ok(exit::DONE),
        }
    });
    ran.unwrap_or_else(|e| {
        Err((
            exit::ERROR,
            format!("cannot start the async runtime or its signal handlers: {e}"),
        ))
    })
}

/// Why a slot's exit is a failure; `None` for a clean end (`--until-empty` with nothing left,
/// or the signal it was passed).
fn slot_failure(status: ExitStatus) -> Option<String> {
    match status.code() {
        Some(0 | 130 | 143) => None,
        Some(code) => Some(format!("exited with status {code}")),
        None => Some(format!("was killed ({status})")),
    }
}

/// Passes `signal` on to every slot not yet reaped.
fn pass_on_to_all(slots: &[(u32, tokio::process::Child)], signal: Interrupt) {
    for pid in slots.iter().filter_map(|(_, child)| child.id()) {
        greenlight_proc::pass_on(pid, signal);
    }
}
