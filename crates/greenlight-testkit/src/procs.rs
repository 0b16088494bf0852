//! Processes seen from a test by pid: whether one is alive, signalling it, waiting for the pids
//! a fixture script writes, and ending whatever a test finds still running.

use std::path::Path;
use std::time::{Duration, Instant};

/// How often the waits below look again.
const POLL: Duration = Duration::from_millis(20);

/// The fields of `/proc/<entry>/stat` after the command name, `entry` being a pid or `self`:
/// `[0]` the state, `[1]` the parent pid, `[2]` the process group, `[3]` the session. The name
/// in parentheses may hold spaces and parentheses, so the fields follow the last `)`.
pub fn stat_fields(entry: &str) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{entry}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// Whether `pid` exists and is not a zombie (a zombie has ended; only its reaping is pending).
pub fn alive(pid: i32) -> bool {
    stat_fields(&pid.to_string()).is_some_and(|fields| fields.first().is_some_and(|s| s != "Z"))
}

/// This machine's host name, as a lock owner record names it.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_owned()
}

/// Sends `signal` (as `kill` spells it: "-TERM", "-HUP", "-9") to `pid` and asserts it was
/// delivered.
pub fn signal(signal: &str, pid: u32) {
    let status = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal} {pid} failed");
}

/// Kills `pid` with SIGKILL if it is still alive, so a failing test leaves nothing behind.
pub fn end(pid: i32) {
    if alive(pid) {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
}

/// Asserts none of `pids` is alive; any survivor is killed first, then named with `what`.
pub fn assert_all_dead(pids: &[i32], what: &str) {
    let survivors: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    for &p in &survivors {
        end(p);
    }
    assert!(survivors.is_empty(), "{what}: {survivors:?}");
}

/// Polls `ready` until it returns a value, or panics saying `what` did not happen within `limit`.
pub fn wait_until<T>(limit: Duration, what: &str, mut ready: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = ready() {
            return value;
        }
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        std::thread::sleep(POLL);
    }
}

/// The whitespace-separated pids in `text`, skipping anything that is not a number (a line a
/// script is still writing).
pub fn pids_in(text: &str) -> Vec<i32> {
    text.split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Waits up to ten seconds for a script to write a pid to `path`, and returns it.
pub fn wait_for_pid(path: &Path) -> i32 {
    wait_until(
        Duration::from_secs(10),
        &format!("{} was never written", path.display()),
        || {
            std::fs::read_to_string(path)
                .ok()
                .and_then(|t| t.trim().parse().ok())
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child that runs until it is killed, and its pid.
    fn sleeper() -> (std::process::Child, i32) {
        let child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        (child, pid)
    }

    #[test]
    fn a_running_child_is_alive_and_a_reaped_one_is_not() {
        let (mut child, pid) = sleeper();
        assert!(alive(pid));
        signal("-KILL", child.id());
        child.wait().unwrap();
        assert!(!alive(pid));
    }

    #[test]
    fn a_zombie_is_not_alive() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        wait_until(Duration::from_secs(5), "true never exited", || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .filter(|s| s.contains(") Z"))
        });
        assert!(!alive(pid));
        child.wait().unwrap();
    }

    #[test]
    fn assert_all_dead_ends_a_survivor_before_failing() {
        let (mut child, pid) = sleeper();
        let failed = std::panic::catch_unwind(|| assert_all_dead(&[pid], "survived"));
        assert!(failed.is_err());
        child.wait().unwrap();
        assert!(!alive(pid));
    }

    #[test]
    fn pids_are_read_once_written_and_partial_lines_skipped() {
        assert_eq!(pids_in("12\n34\n5x"), vec![12, 34]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pid");
        std::fs::write(&path, "4242\n").unwrap();
        assert_eq!(wait_for_pid(&path), 4242);
    }

    #[test]
    fn wait_until_names_what_never_happened() {
        let err = std::panic::catch_unwind(|| {
            wait_until::<()>(
                Duration::from_millis(50),
                "the marker never appeared",
                || None,
            )
        })
        .unwrap_err();
        let text = err.downcast_ref::<String>().unwrap();
        assert!(text.contains("the marker never appeared within"), "{text}");
    }
}
