//! What `/proc` says about the processes a gate left behind: group members, adopted strays,
//! and a short description of each for the leak report.
//!
//! Read-only: this module never signals anything; `exec` decides what to kill.

use std::fs;

use rustix::process::Pid;

/// The environment variable that marks every process a gate starts, so that one which escapes
/// its process group (with `setsid` or a double fork) is still recognised as the gate's.
pub const GATE_TOKEN_VAR: &str = "GREENLIGHT_GATE_RUN";

/// One process found still alive after its gate ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LeftoverProcess {
    /// Its pid at the time it was found.
    pub pid: i32,
    /// Its command line, arguments joined by spaces (its short name when the line is empty).
    pub command: String,
    /// Whether it had left the gate's process group (setsid, double fork).
    pub escaped: bool,
}

/// Pids and process groups parsed from `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy)]
struct Stat {
    pid: i32,
    pgrp: i32,
    zombie: bool,
}

fn stat_of(pid: i32) -> Option<Stat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may itself hold spaces or parentheses.
    let rest = &text[text.rfind(')')? + 2..];
    let mut fields = rest.split(' ');
    let state = fields.next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some(Stat {
        pid,
        pgrp,
        zombie: state == "Z",
    })
}

fn all_pids() -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// Live (non-zombie) members of process group `pgid`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    all_pids()
        .into_iter()
        .filter_map(stat_of)
        .filter(|s| s.pgrp == pgid && !s.zombie)
        .map(|s| s.pid)
        .collect()
}

/// Live children of this process (any thread). While a gate runs and nothing else spawns,
/// these are the gate's descendants adopted because we are a child subreaper.
pub fn adopted_children() -> Vec<i32> {
    let mut pids = Vec::new();
    let Ok(tasks) = fs::read_dir("/proc/self/task") else {
        return pids;
    };
    for task in tasks.flatten() {
        let Ok(children) = fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        pids.extend(
            children
                .split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
    }
    pids.retain(|&pid| stat_of(pid).is_some_and(|s| !s.zombie));
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// Children of this process (any thread) whose environment carries `token`: a gate's
/// descendants that escaped its group and were adopted because we are a child subreaper.
pub fn adopted_strays(token: &str) -> Vec<i32> {
    let needle = format!("{GATE_TOKEN_VAR}={token}");
    let mut pids = adopted_children();
    pids.retain(|&pid| carries_token(pid, needle.as_bytes()));
    pids
}

/// Every live process on the machine whose environment carries `token`. Slower than
/// [`adopted_strays`]; used only once something is known to have leaked.
pub fn processes_with_token(token: &str) -> Vec<i32> {
    processes_with_env(GATE_TOKEN_VAR, token)
}

/// Every live process carrying a gate token, with the pid of the greenlight that owns it and
/// its sweep scope (the token is `<owner pid>-<scope>-<n>-<nanos>`).
pub fn gate_processes() -> Vec<(i32, i32, String)> {
    let prefix = format!("{GATE_TOKEN_VAR}=");
    let mut found = Vec::new();
    for pid in all_pids() {
        if stat_of(pid).is_none_or(|s| s.zombie) {
            continue;
        }
        let Ok(env) = fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let parsed = env
            .split(|&b| b == 0)
            .find_map(|var| var.strip_prefix(prefix.as_bytes()))
            .and_then(|token| {
                let mut parts = std::str::from_utf8(token).ok()?.split('-');
                let owner = parts.next()?.parse::<i32>().ok()?;
                Some((owner, parts.next()?.to_owned()))
            });
        if let Some((owner, scope)) = parsed {
            found.push((pid, owner, scope));
        }
    }
    found
}

/// Every live process on the machine whose environment holds exactly `var=value`.
pub fn processes_with_env(var: &str, value: &str) -> Vec<i32> {
    let needle = format!("{var}={value}");
    all_pids()
        .into_iter()
        .filter(|&pid| {
            stat_of(pid).is_some_and(|s| !s.zombie) && carries_token(pid, needle.as_bytes())
        })
        .collect()
}

fn carries_token(pid: i32, needle: &[u8]) -> bool {
    fs::read(format!("/proc/{pid}/environ"))
        .map(|env| env.split(|&b| b == 0).any(|var| var == needle))
        .unwrap_or(false)
}

/// Whether `pid` is known to be gone. Only "no such process" proves it: EPERM means it exists
/// under another user, and anything unclear reads as alive (the safe side).
pub fn is_dead(pid: i32) -> bool {
    let Some(pid) = self::pid(pid) else {
        return false;
    };
    matches!(rustix::process::test_kill_process(pid), Err(e) if e == rustix::io::Errno::SRCH)
}

/// The process group of `pid`, if it is still there.
pub fn pgrp_of(pid: i32) -> Option<i32> {
    stat_of(pid).map(|s| s.pgrp)
}

/// Describes a process for the leak report.
pub fn describe(pid: i32, gate_pgid: i32) -> LeftoverProcess {
    let command = fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .map(|raw| {
            raw.split(|&b| b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|c| !c.is_empty())
        .or_else(|| {
            fs::read_to_string(format!("/proc/{pid}/comm"))
                .ok()
                .map(|c| c.trim().to_owned())
        })
        .unwrap_or_else(|| "?".to_owned());
    let escaped = pgrp_of(pid).is_some_and(|g| g != gate_pgid);
    LeftoverProcess {
        pid,
        command,
        escaped,
    }
}

/// Converts a raw pid, rejecting 0 and negatives.
pub fn pid(raw: i32) -> Option<Pid> {
    Pid::from_raw(raw)
}
