//! An agent that exits leaving a `setsid` child on its stdout is answered when it exits, and the
//! child is ended by the run token, as a gate's would be. Before, the reply was thrown away
//! after a 2 s wait as `dispatch-dead (nothing on stdout)` and the child outlived the run.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::time::{Duration, Instant};

use greenlight_testkit::{Cli, procs};

#[test]
fn a_command_agent_leaving_a_setsid_child_on_stdout_is_answered_and_the_child_ended() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("child.pid");
    let script = format!(
        "setsid sleep 60 & echo $! > '{}'; cat >/dev/null; echo answered",
        pidfile.display()
    );
    let started = Instant::now();
    let out = Cli::new([
        "agent", "dispatch", "--family", "command", "--model", "local", "--bin", "/bin/sh",
        "--arg", "-c", "--arg", &script,
    ])
    .current_dir(dir.path())
    .stdin("the prompt")
    .run();
    let took = started.elapsed();
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let survived = procs::alive(pid);
    procs::end(pid);
    let stderr = &out.stderr;
    assert_eq!(out.code, 0, "{stderr}");
    assert_eq!(out.stdout, "answered\n");
    assert!(
        !survived,
        "the setsid child (pid {pid}) outlived the dispatch"
    );
    assert!(
        took < Duration::from_secs(2),
        "the reply waited {took:?} for a pipe the leftover held"
    );
}
