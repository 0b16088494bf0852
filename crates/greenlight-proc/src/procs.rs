//! What `/proc` says about the processes a child left behind: group members, adopted strays,
//! processes carrying a token, and a short description of each for the leak report.
//!
//! Read-only: this module never signals anything; the runner decides what to kill.

use std::fs;

use rustix::process::Pid;

/// The environment variable that marks every process a child starts, so that one which escapes
/// its process group (with `setsid` or a double fork) is still recognised as the child's.
pub const TOKEN_VAR: &str = "GREENLIGHT_RUN_TOKEN";

/// One process found still alive after the child that started it ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LeftoverProcess {
    /// Its pid at the time it was found.
    pub pid: i32,
    /// Its command line, arguments joined by spaces (its short name when the line is empty).
    pub command: String,
    /// Whether it had left the child's process group (setsid, double fork).
    pub escaped: bool,
}

/// Pids and process groups parsed from `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy)]
struct Stat {
    pid: i32,
    pgrp: i32,
    session: i32,
    zombie: bool,
}

fn stat_of(pid: i32) -> Option<Stat> {
    parse_stat(pid, &fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Parses one `/proc/<pid>/stat` line. The command name is in parentheses and may itself hold
/// spaces or parentheses, so the fields are counted from the last `)`. A dead task (`Z`, or
/// `X` while it is being removed) counts as a zombie: it can no longer run or hold anything.
fn parse_stat(pid: i32, text: &str) -> Option<Stat> {
    let rest = text.get(text.rfind(')')? + 1..)?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    Some(Stat {
        pid,
        pgrp,
        session,
        zombie: matches!(state, "Z" | "X"),
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

/// Children of this process (any thread), zombies included.
fn children() -> Vec<i32> {
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
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// Live children of this process (any thread) that were adopted because we are a child
/// subreaper: every child except the helpers this process started itself — the git calls of
/// [`crate::git::run`] (the recorder's, the workspace listing's) and every child [`crate::run`]
/// is still running (a workflow runs one step's agent while another step's gates are swept).
/// The gate or agent being swept after has ended, so whatever else is our child came from a
/// child that ended.
pub fn adopted_children() -> Vec<i32> {
    let helpers = own_helpers();
    let mut pids = live_children();
    pids.retain(|pid| !helpers.contains(pid));
    pids
}

/// Every live child of this process (any thread), our own helpers included.
pub(crate) fn live_children() -> Vec<i32> {
    let mut pids = children();
    pids.retain(|&pid| stat_of(pid).is_some_and(|s| !s.zombie));
    pids
}

/// The pids of the helpers this process is running itself, held while a list of adopted
/// children is made so a helper is never mistaken for one of them.
static OWN_HELPERS: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

fn own_helpers() -> std::sync::MutexGuard<'static, Vec<i32>> {
    OWN_HELPERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts `cmd` as a helper of this process (see [`adopted_children`]): it is never counted as
/// adopted until the returned guard is dropped, once it has been waited for. The spawn happens
/// under the list's lock, so no sweep can see the child before it is listed.
pub(crate) fn spawn_helper(
    cmd: &mut std::process::Command,
) -> std::io::Result<(std::process::Child, HelperGuard)> {
    let mut helpers = own_helpers();
    let child = cmd.spawn()?;
    let pid = child.id() as i32;
    helpers.push(pid);
    Ok((child, HelperGuard(pid)))
}

/// Spawns a child that a runner of this process manages to its end (an agent, a gate) and lists
/// it as a helper until the returned guard is dropped, so another thread's sweep of adopted
/// children never takes a child still being run here for an escapee. The spawn happens under
/// the list's lock, like [`spawn_helper`]'s.
pub(crate) fn spawn_listed<C>(
    spawn: impl FnOnce() -> std::io::Result<C>,
    pid_of: impl FnOnce(&C) -> Option<u32>,
) -> std::io::Result<(C, Option<HelperGuard>)> {
    let mut helpers = own_helpers();
    let child = spawn()?;
    let guard = pid_of(&child)
        .and_then(|pid| i32::try_from(pid).ok())
        .map(|pid| {
            helpers.push(pid);
            HelperGuard(pid)
        });
    Ok((child, guard))
}

/// Keeps a helper's pid out of [`adopted_children`] while it lives.
pub(crate) struct HelperGuard(i32);

impl Drop for HelperGuard {
    fn drop(&mut self) {
        own_helpers().retain(|&p| p != self.0);
    }
}

/// Zombie children of this process in another session than ours: descendants that left with
/// `setsid`, were adopted because we are a child subreaper, and then ended. Nothing here starts
/// a child in a session of its own, so none of them is a child that something here waits for.
pub fn adopted_zombies_of_other_sessions() -> Vec<i32> {
    let Some(ours) = own_session() else {
        return Vec::new();
    };
    zombies_of_other_sessions(ours, children().into_iter().filter_map(stat_of))
}

/// Our session id as `/proc` shows it. In a container whose init started us, the session
/// leader lives outside our pid namespace and the id reads 0 (`getsid(2)` returns 0 too, which
/// is why this reads `/proc` rather than calling it); children that stayed in our session read
/// 0 alike, and one that called `setsid` reads its own, visible, pid.
fn own_session() -> Option<i32> {
    parse_stat(0, &fs::read_to_string("/proc/self/stat").ok()?).map(|s| s.session)
}

fn zombies_of_other_sessions(ours: i32, children: impl Iterator<Item = Stat>) -> Vec<i32> {
    children
        .filter(|s| s.zombie && s.session != ours)
        .map(|s| s.pid)
        .collect()
}

/// Children of this process (any thread) whose environment carries `token`: a child's
/// descendants that escaped its group and were adopted because we are a child subreaper.
pub fn adopted_strays(token: &str) -> Vec<i32> {
    let needle = format!("{TOKEN_VAR}={token}");
    let mut pids = adopted_children();
    pids.retain(|&pid| carries_token(pid, needle.as_bytes()));
    pids
}

/// Every live process on the machine whose environment carries `token`. Slower than
/// [`adopted_strays`]; used only once something is known to have leaked.
pub fn processes_with_token(token: &str) -> Vec<i32> {
    processes_with_env(TOKEN_VAR, token)
}

/// The greenlight run a token names: its owner's pid, the pid namespace that pid means
/// something in, and the sweep scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenOwner {
    /// The owner's pid, as its own pid namespace numbers it.
    pub pid: i32,
    /// The owner's pid namespace ([`pid_namespace`]); `None` when the token did not say
    /// (written by an older greenlight, or where `/proc/self/ns/pid` could not be read).
    pub pid_ns: Option<u64>,
    /// Which runs may end each other's orphans.
    pub scope: String,
}

/// Reads a token: `<owner pid>.<pid namespace>-<scope>-<n>-<nanos>`, or the older
/// `<owner pid>-<scope>-<n>-<nanos>`. The namespace is joined to the pid with a dot so that an
/// older greenlight, which parses the pid alone, reads no owner at all and never sweeps a run
/// whose namespace it cannot judge.
pub fn parse_token(token: &str) -> Option<TokenOwner> {
    let mut parts = token.split('-');
    let owner = parts.next()?;
    let (pid, pid_ns) = match owner.split_once('.') {
        Some((pid, ns)) => (pid, Some(ns.parse().ok()?)),
        None => (owner, None),
    };
    Some(TokenOwner {
        pid: pid.parse().ok()?,
        pid_ns,
        scope: parts.next()?.to_owned(),
    })
}

/// Every live process carrying a run token, with the run its token names.
pub fn token_processes() -> Vec<(i32, TokenOwner)> {
    let prefix = format!("{TOKEN_VAR}=");
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
            .and_then(|token| parse_token(std::str::from_utf8(token).ok()?));
        if let Some(owner) = parsed {
            found.push((pid, owner));
        }
    }
    found
}

/// The token `pid` carries, if any.
pub fn token_of(pid: i32) -> Option<TokenOwner> {
    let env = fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{TOKEN_VAR}=");
    env.split(|&b| b == 0)
        .find_map(|var| var.strip_prefix(prefix.as_bytes()))
        .and_then(|token| parse_token(std::str::from_utf8(token).ok()?))
}

/// Whether the run a token names lives in our pid namespace, so that its owner's pid can be
/// judged here. A token without a namespace (an older greenlight's) is judged by the namespace
/// of the process carrying it (`carrier`): a gate lives where its runner started it, unless it
/// made a namespace of its own, and then it is left alone (the safe side). Anything unreadable
/// is foreign.
pub fn owner_is_in_our_namespace(owner: &TokenOwner, carrier: i32) -> bool {
    let Some(ours) = pid_namespace() else {
        return false;
    };
    match owner.pid_ns {
        Some(theirs) => theirs == ours,
        None => namespace_of(carrier) == Some(ours),
    }
}

/// This process's pid namespace: the inode of `/proc/self/ns/pid`, which every process of one
/// namespace shares and no other namespace of this kernel has while it lives. A pid means
/// something only within its namespace, so greenlight records this beside every pid another
/// greenlight may judge (lock records, run tokens). `None` when it cannot be read.
pub fn pid_namespace() -> Option<u64> {
    static OURS: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *OURS.get_or_init(|| namespace_of_entry("self"))
}

fn namespace_of(pid: i32) -> Option<u64> {
    namespace_of_entry(&pid.to_string())
}

/// Reads `pid:[4026531836]` from `/proc/<entry>/ns/pid`.
fn namespace_of_entry(entry: &str) -> Option<u64> {
    let link = fs::read_link(format!("/proc/{entry}/ns/pid")).ok()?;
    let text = link.to_str()?;
    text.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
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

/// Whether `pid` is known to be gone: no such process, or a zombie (it has ended and holds
/// nothing; only its parent's wait is missing, and its pid cannot be reused until then). EPERM
/// means it exists under another user, and anything unclear reads as alive (the safe side).
pub fn is_dead(pid: i32) -> bool {
    let Some(checked) = self::pid(pid) else {
        return false;
    };
    match rustix::process::test_kill_process(checked) {
        Err(e) if e == rustix::io::Errno::SRCH => true,
        _ => stat_of(pid).is_some_and(|s| s.zombie),
    }
}

/// The process group of `pid`, if it is still there.
pub fn pgrp_of(pid: i32) -> Option<i32> {
    stat_of(pid).map(|s| s.pgrp)
}

/// Describes a process for the leak report; `escaped` when it is outside `pgid`.
pub fn describe(pid: i32, pgid: i32) -> LeftoverProcess {
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
    let escaped = pgrp_of(pid).is_some_and(|g| g != pgid);
    LeftoverProcess {
        pid,
        command,
        escaped,
    }
}

/// Converts a raw pid, rejecting 0 and negatives.
pub fn pid(raw: i32) -> Option<Pid> {
    // `Pid::from_raw` asserts on a negative value; a pid that came from `/proc` or a token file
    // can be anything.
    if raw <= 0 { None } else { Pid::from_raw(raw) }
}

/// Converts a raw process-group id that may be signalled, rejecting 0, negatives and 1: signalling
/// group 1 is `kill(-1, …)`, every process the caller may signal, which no caller ever means.
pub fn group_pid(raw: i32) -> Option<Pid> {
    if raw <= 1 { None } else { pid(raw) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt as _;
    use std::process::{Command, Stdio};

    #[test]
    fn group_one_and_below_are_never_a_group_to_signal() {
        // kill(-1) would reach every process of the user: a corrupt pid file or a /proc read
        // naming group 1 must end in no signal at all.
        for raw in [i32::MIN, -1, 0, 1] {
            assert_eq!(group_pid(raw), None, "{raw}");
        }
        assert_eq!(
            group_pid(2).map(Pid::as_raw_nonzero),
            pid(2).map(Pid::as_raw_nonzero)
        );
    }

    #[test]
    fn a_command_name_with_spaces_and_parentheses_still_parses() {
        let line = "4242 (a) b (c)) S 1 777 777 0 -1 4194560 0 0";
        let stat = parse_stat(4242, line).expect("parses");
        assert_eq!(
            (stat.pid, stat.pgrp, stat.session, stat.zombie),
            (4242, 777, 777, false)
        );
        let dead = parse_stat(1, "1 (x) Z 0 9 9").expect("parses");
        assert!(dead.zombie);
        assert!(parse_stat(1, "garbage").is_none());
        assert!(parse_stat(1, "1 (x)").is_none());
    }

    #[test]
    fn a_spawned_group_is_listed_described_and_found_by_its_token() {
        let token = format!("procs-test-{}", std::process::id());
        let mut child = Command::new("/bin/sh")
            .args(["-c", "sleep 30 & wait"])
            .env(TOKEN_VAR, &token)
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("spawns sh");
        let leader = i32::try_from(child.id()).expect("pid fits");
        // The sleep needs a moment to exist.
        let mut members = Vec::new();
        for _ in 0..200 {
            members = group_members(leader);
            if members.len() == 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(members.len(), 2, "the shell and its sleep: {members:?}");
        assert!(members.contains(&leader));
        assert_eq!(pgrp_of(leader), Some(leader));
        let mut marked = processes_with_token(&token);
        marked.sort_unstable();
        assert_eq!(marked, members, "both inherit the token");
        let described = describe(leader, leader);
        assert!(described.command.starts_with("/bin/sh -c"), "{described:?}");
        assert!(!described.escaped);
        assert!(describe(leader, leader + 1).escaped);
        assert!(!is_dead(leader));
        for pid in &members {
            let _ = rustix::process::kill_process(
                self::pid(*pid).expect("positive"),
                rustix::process::Signal::KILL,
            );
        }
        let _ = child.wait();
        assert!(is_dead(leader), "reaped and gone");
        // The orphaned sleep is reaped by init; SIGKILL lands asynchronously.
        let mut left = group_members(leader);
        for _ in 0..200 {
            if left.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            left = group_members(leader);
        }
        assert_eq!(
            left,
            Vec::<i32>::new(),
            "zombies and the dead are not members"
        );
    }

    #[test]
    fn a_zombie_is_dead_before_its_parent_reaps_it() {
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", "exit 0"])
            .spawn()
            .expect("sh runs");
        let zombie = child.id() as i32;
        let mut seen_zombie = false;
        for _ in 0..500 {
            if stat_of(zombie).is_some_and(|s| s.zombie) {
                seen_zombie = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(seen_zombie, "the unreaped child became a zombie");
        // kill(pid, 0) still succeeds on a zombie; it is dead all the same.
        assert!(rustix::process::test_kill_process(pid(zombie).expect("positive")).is_ok());
        assert!(is_dead(zombie), "a zombie holds nothing");
        let _ = child.wait();
        assert!(is_dead(zombie), "reaped and gone");
        assert!(!is_dead(std::process::id() as i32), "this test is alive");
    }

    #[test]
    #[allow(clippy::zombie_processes)] // the zombie is the subject; reap_adopted_zombies waits
    fn only_zombies_of_another_session_are_reaped_as_adopted() {
        // `setsid true`: a child in a session of its own that ends, as an escaped descendant
        // adopted by a subreaper does; `sh -c 'exit 0'`: an ended child of our own session.
        let other = Command::new("setsid")
            .arg("true")
            .spawn()
            .expect("setsid runs");
        let mut own = Command::new("/bin/sh")
            .args(["-c", "exit 0"])
            .spawn()
            .expect("sh runs");
        let (other, own_pid) = (other.id() as i32, own.id() as i32);
        let gone = |pid: i32| !std::path::Path::new(&format!("/proc/{pid}")).exists();
        for _ in 0..500 {
            // A run on another test thread may reap it first, which is the same reaping.
            let listed = adopted_zombies_of_other_sessions();
            if (listed.contains(&other) || gone(other))
                && stat_of(own_pid).is_some_and(|s| s.zombie)
            {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(
            !adopted_zombies_of_other_sessions().contains(&own_pid),
            "a zombie of our own session is some waiter's"
        );
        crate::kill::reap_adopted_zombies();
        assert!(gone(other), "the other session's zombie is reaped");
        assert!(
            stat_of(own_pid).is_some_and(|s| s.zombie),
            "our own session's zombie is left to its waiter"
        );
        assert!(own.wait().is_ok_and(|status| status.success()));
    }

    /// In a container our session's leader is outside the pid namespace: our session and our
    /// own-session children read 0, a `setsid` child reads its pid. Before, `getsid` returning 0
    /// panicked every run there.
    #[test]
    fn a_session_read_as_zero_outside_our_namespace_still_tells_the_escapees_apart() {
        let stat = |pid, session, zombie| Stat {
            pid,
            pgrp: pid,
            session,
            zombie,
        };
        let children = [
            stat(10, 0, true),
            stat(11, 11, true),
            stat(12, 12, false),
            stat(13, 0, false),
        ];
        assert_eq!(zombies_of_other_sessions(0, children.into_iter()), [11]);
        assert_eq!(
            zombies_of_other_sessions(7, children.into_iter()),
            [10, 11],
            "outside a namespace a session of 0 is nobody's"
        );
        assert!(own_session().is_some(), "/proc/self/stat has a session");
    }

    #[test]
    fn tokens_are_read_with_and_without_their_namespace() {
        let owner = |pid, pid_ns, scope: &str| TokenOwner {
            pid,
            pid_ns,
            scope: scope.to_owned(),
        };
        assert_eq!(
            parse_token("42.4026531836-abc-0-1f"),
            Some(owner(42, Some(4_026_531_836), "abc"))
        );
        assert_eq!(parse_token("42-abc-0-1f"), Some(owner(42, None, "abc")));
        assert_eq!(
            parse_token("42.x-abc-0-1f"),
            None,
            "a namespace that is no number"
        );
        assert_eq!(parse_token("garbage"), None);
        let ours = pid_namespace().expect("/proc/self/ns/pid is readable");
        let me = std::process::id() as i32;
        assert!(owner_is_in_our_namespace(&owner(1, Some(ours), "s"), me));
        assert!(!owner_is_in_our_namespace(
            &owner(1, Some(ours + 1), "s"),
            me
        ));
        assert!(
            owner_is_in_our_namespace(&owner(1, None, "s"), me),
            "an older token is judged by its carrier's namespace"
        );
        assert!(
            !owner_is_in_our_namespace(&owner(1, None, "s"), -1),
            "an unreadable carrier is foreign"
        );
    }

    #[test]
    fn zero_and_negative_pids_are_never_dead_or_valid() {
        assert!(pid(0).is_none() && pid(-5).is_none());
        assert!(!is_dead(0), "unclear reads as alive");
    }
}
