//! Ending processes: a child's group, its leftovers, and what earlier runs left behind.
//!
//! This module and the runner are the only places that signal a child's processes; callers
//! ask for an outcome or a sweep and get back what was ended.

use std::time::{Duration, Instant};

use rustix::process::{Signal, WaitOptions};

use crate::procs::{self, LeftoverProcess};

/// Sends `signal` to process group `pgid`; a group already gone is what we wanted.
pub(crate) fn group(pgid: i32, signal: Signal) {
    if let Some(pgid) = procs::group_pid(pgid) {
        let _ = rustix::process::kill_process_group(pgid, signal);
    }
}

/// Adopted processes that belong to the child: those carrying its token, or every live adopted
/// child when the caller claims them all.
pub(crate) fn strays(token: &str, claim_adopted: bool) -> Vec<i32> {
    if claim_adopted {
        procs::adopted_children()
    } else {
        procs::adopted_strays(token)
    }
}

/// SIGKILLs everything of the child still alive, reaps what was adopted, and says what it was.
pub(crate) fn leftovers(leader: i32, token: &str, claim_adopted: bool) -> Vec<LeftoverProcess> {
    end_in_rounds(leader, || {
        let mut pids = procs::group_members(leader);
        pids.extend(procs::processes_with_token(token));
        if claim_adopted {
            pids.extend(procs::adopted_children());
        }
        pids
    })
}

/// SIGKILLs every live child of this process, with the groups they lead, reaps them, and says
/// what they were. Called once every child a run started has ended (a verify run whose gates
/// are all done), whatever is still our child was adopted as a child subreaper from one of them,
/// even one that left the group and cleared its environment; the caller decides whose it was.
/// A child that [`run`](crate::run) or the git helper is still running elsewhere in this
/// process (another step's agent, another gate) is listed as a helper and never counted; any
/// other child is assumed adopted.
pub fn end_adopted() -> Vec<LeftoverProcess> {
    end_in_rounds(0, procs::adopted_children)
}

/// SIGKILLs every live child of this process, our own git calls included, with their groups:
/// the last resort of a run that a signal asked to end and that still waits on a child.
pub(crate) fn end_every_child() -> Vec<LeftoverProcess> {
    end_in_rounds(0, procs::live_children)
}

/// Kills what `find` names (and `leader`'s group, when there is one) until it names nothing,
/// describing each process once. Escaped processes can start others while we work; a few
/// rounds catch a double fork.
fn end_in_rounds(leader: i32, find: impl Fn() -> Vec<i32>) -> Vec<LeftoverProcess> {
    let me = std::process::id() as i32;
    let mut found: Vec<LeftoverProcess> = Vec::new();
    for _ in 0..8 {
        let mut pids = find();
        pids.sort_unstable();
        pids.dedup();
        pids.retain(|&p| p != me);
        if pids.is_empty() {
            break;
        }
        for &raw in &pids {
            if !found.iter().any(|f| f.pid == raw) {
                found.push(procs::describe(raw, leader));
            }
        }
        group(leader, Signal::KILL);
        for &raw in &pids {
            with_its_group(raw);
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
pub fn with_its_group(raw: i32) {
    let Some(pid) = procs::pid(raw) else { return };
    if procs::pgrp_of(raw) == Some(raw)
        && let Some(group) = procs::group_pid(raw)
    {
        let _ = rustix::process::kill_process_group(group, Signal::KILL);
    }
    let _ = rustix::process::kill_process(pid, Signal::KILL);
}

/// Passes an interrupt on to a child process that ends itself in order on it (a supervisor's
/// slot): SIGINT for [`Interrupt::Int`](crate::signals::Interrupt::Int), SIGTERM for
/// [`Interrupt::Term`](crate::signals::Interrupt::Term). The caller has not
/// yet waited for `child`, so its pid names it still.
pub fn pass_on(child: u32, interrupt: crate::Interrupt) {
    let signal = match interrupt {
        crate::Interrupt::Int => Signal::INT,
        crate::Interrupt::Term => Signal::TERM,
    };
    if let Some(pid) = i32::try_from(child).ok().and_then(procs::pid) {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// Reaps one adopted process, waiting briefly for a SIGKILL to land.
pub(crate) fn reap(raw: i32) {
    let Some(pid) = procs::pid(raw) else { return };
    for _ in 0..200 {
        match rustix::process::waitpid(Some(pid), WaitOptions::NOHANG) {
            Ok(Some(_)) | Err(_) => return, // reaped, or not our child
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// Reaps the zombies adopted from other sessions ([`procs::adopted_zombies_of_other_sessions`]):
/// a descendant that left with `setsid`, outlived its parent and then ended is ours to wait for,
/// and a long-lived greenlight (`serve`, `mcp`, `worker`) would otherwise keep one zombie per
/// such process until it exits.
pub(crate) fn reap_adopted_zombies() {
    for raw in procs::adopted_zombies_of_other_sessions() {
        if let Some(pid) = procs::pid(raw) {
            let _ = rustix::process::waitpid(Some(pid), WaitOptions::NOHANG);
        }
    }
}

/// Reaps adopted zombies of the child's group (the leader itself is reaped by its `Child`).
pub(crate) fn reap_group(leader: i32) {
    let Some(pgid) = procs::pid(leader) else {
        return;
    };
    while let Ok(Some(_)) = rustix::process::waitpgid(pgid, WaitOptions::NOHANG) {}
}

/// Kills every process on the machine whose environment holds `var=value`, with its process
/// group when it leads one, and waits (up to two seconds) until they are gone. This is how a
/// restarted goal ends what a runner killed with SIGKILL left behind: every gate and agent
/// process of a goal run carries the goal's marker, and nothing in-process can act on SIGKILL.
/// A process whose run token belongs to another pid namespace is never touched: its runner is
/// not ours to judge.
pub fn sweep_marked(var: &str, value: &str) -> Vec<LeftoverProcess> {
    let me = std::process::id() as i32;
    let mut found: Vec<LeftoverProcess> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let pids: Vec<i32> = procs::processes_with_env(var, value)
            .into_iter()
            .filter(|&p| p != me)
            .filter(|&p| procs::token_of(p).is_none_or(|t| procs::owner_is_in_our_namespace(&t, p)))
            .collect();
        if pids.is_empty() || Instant::now() >= deadline {
            return found;
        }
        for &raw in &pids {
            if !found.iter().any(|f| f.pid == raw) {
                found.push(procs::describe(raw, 0));
            }
            with_its_group(raw);
            reap(raw); // ours only if we adopted it; otherwise its parent or init reaps it
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Ends what a finished child left behind that only this process can still find: every live
/// child adopted by the subreaper (the caller claims them all: nothing else of its own is
/// running) and every process whose environment holds one of `markers` (`var`, `value`), each
/// with the group it
/// leads, in a few rounds so that what they start meanwhile is caught too; reaps what was
/// adopted and says what it ended. This is how the goal loop makes sure nothing of an agent's
/// turn runs while the gates judge it, even a process that left with `setsid env -i`.
pub fn end_adopted_and_marked(markers: &[(String, String)]) -> Vec<LeftoverProcess> {
    end_in_rounds(0, || {
        let mut pids = procs::adopted_children();
        for (var, value) in markers {
            pids.extend(procs::processes_with_env(var, value));
        }
        pids
    })
}

/// Kills the children of greenlight runs that died without cleaning up (SIGKILL, a power cut of
/// the parent): processes whose run token names an owner pid that no longer exists. A live
/// owner's children are never touched; a reused owner pid reads as alive (the safe side); only
/// runs with the same `scope` and of our own pid namespace are swept (another namespace's pid
/// means nothing here, so its owner cannot be judged dead).
pub fn sweep_orphaned(scope: &str) -> Vec<LeftoverProcess> {
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    for (pid, owner) in procs::token_processes() {
        if owner.pid == me || pid == me || owner.scope != scope {
            continue;
        }
        if !procs::owner_is_in_our_namespace(&owner, pid) || !procs::is_dead(owner.pid) {
            continue;
        }
        found.push(procs::describe(pid, 0));
    }
    end_all(&found);
    found
}

/// SIGKILLs each of `found` with its group, once all are described (killing one's group first
/// would leave the others' descriptions empty), and reaps those we adopted.
fn end_all(found: &[LeftoverProcess]) {
    for p in found {
        with_its_group(p.pid);
    }
    for p in found {
        reap(p.pid);
    }
}

/// One round of ending what a dead greenlight `owner` (a pid of our namespace) started: every
/// live process whose run token names it, whatever its scope, is SIGKILLed with its group.
/// Returns what was found alive; the caller repeats until a round finds nothing, which is when
/// they are gone (a SIGKILLed process is a zombie or nothing by the next look). Does nothing
/// while `owner` is alive: its processes are its own.
pub fn end_processes_of(owner: i32) -> Vec<LeftoverProcess> {
    let me = std::process::id() as i32;
    if owner == me || !procs::is_dead(owner) {
        return Vec::new();
    }
    let mut found = Vec::new();
    for (pid, token) in procs::token_processes() {
        if token.pid != owner || pid == me || !procs::owner_is_in_our_namespace(&token, pid) {
            continue;
        }
        found.push(procs::describe(pid, 0));
    }
    end_all(&found);
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// A git call another thread has running (the recorder's, the workspace listing's) is this
    /// process's own helper, not an adopted escapee: a sweep of adopted children while it runs
    /// used to SIGKILL it, and a hook run lost its repository under load.
    #[test]
    fn a_sweep_of_adopted_children_leaves_our_own_helpers_running() {
        // Listing, not killing: other tests of this binary have children of their own running.
        let mut cmd = Command::new("sleep");
        cmd.arg("0.3").stdin(Stdio::null());
        let (child, guard) = procs::spawn_helper(&mut cmd).expect("sleep runs");
        let pid = child.id() as i32;
        assert!(
            procs::live_children().contains(&pid),
            "the helper is our child"
        );
        assert!(
            !procs::adopted_children().contains(&pid),
            "the helper was taken for an escapee"
        );
        let out = child.wait_with_output().expect("waited");
        drop(guard);
        assert!(out.status.success(), "{:?}", out.status);
    }

    /// A `sleep` carrying a run token of a dead owner in namespace `ns`, and a goal marker.
    fn orphan(ns: u64, scope: &str, marker: &str) -> std::process::Child {
        let mut dead = Command::new("true").spawn().expect("true runs");
        let dead_pid = dead.id();
        dead.wait().expect("reaped");
        Command::new("sleep")
            .arg("30")
            .env(procs::TOKEN_VAR, format!("{dead_pid}.{ns}-{scope}-0-0"))
            .env("GREENLIGHT_TEST_MARK", marker)
            .stdin(Stdio::null())
            .spawn()
            .expect("sleep runs")
    }

    /// A pid in a token means something only in its namespace: a sweep never ends a process
    /// whose token names another, however dead its owner's pid looks here.
    #[test]
    fn sweeps_end_orphans_of_our_pid_namespace_only() {
        let ours = procs::pid_namespace().expect("/proc/self/ns/pid is readable");
        let scope = format!("killtest{}", std::process::id()); // a scope has no `-`
        let marker = format!("mark-{}", std::process::id());
        let mut foreign = orphan(ours + 1, &scope, &marker);
        let mut local = orphan(ours, &scope, &format!("{marker}-local"));
        let (foreign_pid, local_pid) = (foreign.id() as i32, local.id() as i32);
        let swept: Vec<i32> = sweep_orphaned(&scope).iter().map(|p| p.pid).collect();
        assert_eq!(swept, [local_pid], "only our namespace's orphan");
        let _ = local.wait(); // the sweep reaped it already: it was our child
        assert!(procs::is_dead(local_pid));
        assert!(
            sweep_marked("GREENLIGHT_TEST_MARK", &marker).is_empty(),
            "a marked process of another namespace's run is not ours to end"
        );
        assert!(
            !procs::is_dead(foreign_pid),
            "the foreign orphan still runs"
        );
        let _ =
            rustix::process::kill_process(procs::pid(foreign_pid).expect("positive"), Signal::KILL);
        assert!(foreign.wait().is_ok());
    }
}
