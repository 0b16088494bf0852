//! Who is recording an open run, and the one judgement made from it: is that process gone?
//!
//! A run row names its owner by what identifies a process on one machine at one moment: its
//! pid, its start time (so a reused pid is a different process), its pid namespace (a pid means
//! something only inside it) and its host (hostname and boot id). The rule: a process is judged
//! gone only from inside its own host, boot and pid namespace, through a `/proc` that shows that
//! namespace; anything foreign or unclear counts as alive, so a live run is never closed.
//!
//! Why not a lease: a heartbeat would make every recording process write the file every few
//! seconds for as long as its longest gate runs, and a stalled disk or a suspended laptop would
//! expire live runs; the owner's identity needs no writes and no clock.

use std::fs;

/// The process that writes a run, as recorded in `runs.owner_*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOwner {
    /// Its pid, as its own pid namespace numbers it.
    pub pid: i64,
    /// Its start time (`/proc/<pid>/stat` field 22, clock ticks since boot).
    pub start: i64,
    /// Its pid namespace (the `/proc/self/ns/pid` link, e.g. `pid:[4026531836]`).
    pub pid_ns: String,
    /// Its host: the hostname and the kernel's boot id (`host boot-id`).
    pub host: String,
}

/// What a look at an owner found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// Running (or, for another host, boot or namespace: assumed running).
    Alive,
    /// Known to be gone: no such process, a zombie, or its pid now belongs to another process.
    Gone,
}

fn read_trimmed(path: &str) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

fn host() -> Option<String> {
    Some(format!(
        "{} {}",
        read_trimmed("/proc/sys/kernel/hostname")?,
        read_trimmed("/proc/sys/kernel/random/boot_id")?
    ))
}

fn pid_ns() -> Option<String> {
    Some(
        fs::read_link("/proc/self/ns/pid")
            .ok()?
            .to_string_lossy()
            .into_owned(),
    )
}

/// `(state, start time)` from a `/proc/<pid>/stat` line. The command name is in parentheses
/// and may hold spaces or parentheses itself, so fields are counted from the last `)`.
fn state_and_start(stat: &str) -> Option<(char, i64)> {
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // Field 3 is the state; the start time is field 22, 19 fields further.
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

/// Whether this process's `/proc` shows its own pid namespace: `/proc/self` names our pid as
/// we know it. Under `unshare --pid` without a new `/proc`, it names the parent namespace's pid,
/// and every pid looked up there would be somebody else's.
fn proc_is_ours() -> bool {
    fs::read_link("/proc/self")
        .ok()
        .and_then(|p| p.to_str().and_then(|s| s.parse::<u32>().ok()))
        == Some(std::process::id())
}

impl RunOwner {
    /// The owner held in four columns of `row` from `first` on, in the order every owned table
    /// keeps them: `owner_pid, owner_start, owner_pidns, owner_host`.
    pub(crate) fn from_row(row: &crate::db::Row, first: usize) -> crate::db::DbResult<RunOwner> {
        Ok(RunOwner {
            pid: row.get(first)?,
            start: row.get(first + 1)?,
            pid_ns: row.get(first + 2)?,
            host: row.get(first + 3)?,
        })
    }

    /// This process, or `None` when `/proc` cannot say who it is (the run is then recorded
    /// without an owner and never judged gone).
    pub fn current() -> Option<RunOwner> {
        let stat = fs::read_to_string("/proc/self/stat").ok()?;
        let (_, start) = state_and_start(&stat)?;
        Some(RunOwner {
            pid: i64::from(std::process::id()),
            start,
            pid_ns: pid_ns()?,
            host: host()?,
        })
    }

    /// Whether the owner is known to be gone, judged from this process. Another host or boot,
    /// another pid namespace, or a `/proc` that does not show ours: alive, always.
    pub fn liveness(&self) -> Liveness {
        let ours = host().is_some_and(|h| h == self.host)
            && pid_ns().is_some_and(|ns| ns == self.pid_ns)
            && proc_is_ours();
        if !ours || self.pid <= 0 {
            return Liveness::Alive;
        }
        match fs::read_to_string(format!("/proc/{}/stat", self.pid)) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Liveness::Gone,
            Err(_) => Liveness::Alive,
            Ok(stat) => match state_and_start(&stat) {
                // A zombie has ended and holds nothing; `X` is one being removed.
                Some(('Z' | 'X', _)) => Liveness::Gone,
                Some((_, start)) if start != self.start => Liveness::Gone,
                _ => Liveness::Alive,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_time_is_read_past_a_command_name_with_parentheses_and_spaces() {
        let line = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10";
        assert_eq!(state_and_start(line), Some(('S', 98765)));
        assert_eq!(state_and_start("42 (x) Z 1"), None);
    }

    #[test]
    fn this_process_is_alive_and_a_reused_pid_or_a_foreign_namespace_is_judged_right() {
        let me = RunOwner::current().expect("/proc describes this process");
        assert_eq!(me.liveness(), Liveness::Alive);
        // Same pid, another start time: the pid was reused, the owner is gone.
        let reused = RunOwner {
            start: me.start + 1,
            ..me.clone()
        };
        assert_eq!(reused.liveness(), Liveness::Gone);
        // A finished child's pid (reaped: no such process) is gone.
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let pid = i64::from(child.id());
        child.wait().expect("wait");
        let dead = RunOwner { pid, ..me.clone() };
        assert_eq!(dead.liveness(), Liveness::Gone);
        // The same dead pid in another pid namespace, or on another host, is never judged.
        let elsewhere = RunOwner {
            pid_ns: "pid:[1]".into(),
            ..dead.clone()
        };
        assert_eq!(elsewhere.liveness(), Liveness::Alive);
        let other_host = RunOwner {
            host: "elsewhere 0".into(),
            ..dead
        };
        assert_eq!(other_host.liveness(), Liveness::Alive);
    }
}
