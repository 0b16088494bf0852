//! An agent that exits leaving a `setsid` child on its stdout is answered when it exits, and the
//! child is ended by the run token, as a gate's would be. Before, the reply was thrown away
//! after a 2 s wait as `dispatch-dead (nothing on stdout)` and the child outlived the run.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use greenlight_testkit::greenlight_bin;

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

#[test]
fn a_command_agent_leaving_a_setsid_child_on_stdout_is_answered_and_the_child_ended() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("child.pid");
    let script = format!(
        "setsid sleep 60 & echo $! > '{}'; cat >/dev/null; echo answered",
        pidfile.display()
    );
    let started = Instant::now();
    let mut child = Command::new(greenlight_bin())
        .args([
            "agent", "dispatch", "--family", "command", "--model", "local", "--bin", "/bin/sh",
            "--arg", "-c", "--arg", &script,
        ])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"the prompt")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let took = started.elapsed();
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let survived = alive(pid);
    if survived {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "answered\n");
    assert!(
        !survived,
        "the setsid child (pid {pid}) outlived the dispatch"
    );
    assert!(
        took < Duration::from_secs(2),
        "the reply waited {took:?} for a pipe the leftover held"
    );
}
