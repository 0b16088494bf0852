//! Ending processes: a child's group, its leftovers, and what earlier runs left behind.
//!
//! This module and the runner are the only places that signal a child's processes; callers
//! ask for an outcome or a sweep and get back what was ended.

use std::time::{Duration, Instant};

use rustix::process::{Signal, WaitOptions};

use crate::procs::{self, LeftoverProcess};

/// Sends `signal` to process group `pgid`; a group already gone is what we wanted.
pub(crate) fn group(pgid: i32, signal: Signal) {
    if let Some(pgid) = procs::pid(pgid) {
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
/// Like the runner's `claim_adopted`, it assumes nothing else in this process has a child
/// running at that moment.
pub fn end_adopted() -> Vec<LeftoverProcess> {
    end_in_rounds(0, procs::adopted_children)
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
    if procs::pgrp_of(raw) == Some(raw) {
        let _ = rustix::process::kill_process_group(pid, Signal::KILL);
    }
    let _ = rustix::process::kill_process(pid, Signal::KILL);
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
            with_its_group(raw);
            reap(raw); // ours only if we adopted it; otherwise its parent or init reaps it
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Kills the children of greenlight runs that died without cleaning up (SIGKILL, a power cut of
/// the parent): processes whose run token names an owner pid that no longer exists. A live
/// owner's children are never touched; a reused owner pid reads as alive (the safe side); only
/// runs with the same `scope` are swept.
pub fn sweep_orphaned(scope: &str) -> Vec<LeftoverProcess> {
    let me = std::process::id() as i32;
    let mut found = Vec::new();
    for (pid, owner, their_scope) in procs::token_processes() {
        if owner == me || pid == me || their_scope != scope {
            continue;
        }
        if !procs::is_dead(owner) {
            continue;
        }
        found.push(procs::describe(pid, 0));
        with_its_group(pid);
        reap(pid);
    }
    found
}
