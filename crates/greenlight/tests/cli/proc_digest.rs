//! `greenlight digest -- CMD` runs the command like a gate: it returns when the command exits
//! even if a background child still holds the output pipe, and that child is killed and named
//! on stderr; `--timeout` and greenlight's own ending signals end the command's whole group.
//! Before, `digest -- sh -c 'sleep 60 & echo hi'` waited the full minute and left the sleep.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use greenlight_testkit::{Cli, greenlight_bin, procs};

#[test]
fn a_background_child_holding_the_pipe_neither_blocks_nor_outlives_digest() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("sleep.pid");
    let script = format!("sleep 60 & echo $! > '{}'; echo hi", pidfile.display());
    let started = Instant::now();
    let out = Cli::new(["digest", "--", "sh", "-c", &script]).run();
    let took = started.elapsed();
    let sleep = procs::wait_for_pid(&pidfile);
    let still_alive = procs::alive(sleep);
    procs::end(sleep);
    assert!(took < Duration::from_secs(5), "digest took {took:?}");
    assert!(!still_alive, "the sleep (pid {sleep}) outlived digest");
    let stderr = &out.stderr;
    assert_eq!(out.code, 0, "{stderr}");
    assert!(
        stderr.contains(&format!("pid {sleep} sleep 60")),
        "the leftover is named: {stderr}"
    );
    assert!(out.stdout.contains("hi"));
}

#[test]
fn timeout_ends_the_whole_group_and_exits_124() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("sleep.pid");
    let script = format!(
        "(trap '' TERM; sleep 60) & echo $! > '{}'; echo started; sleep 60",
        pidfile.display()
    );
    let started = Instant::now();
    let out = Cli::new(["digest", "--timeout", "500ms", "--", "sh", "-c", &script])
        .env("GREENLIGHT_KILL_GRACE_MS", "300")
        .run();
    let took = started.elapsed();
    let sleep = procs::wait_for_pid(&pidfile);
    let still_alive = procs::alive(sleep);
    procs::end(sleep);
    let stderr = &out.stderr;
    assert_eq!(out.code, 124, "{stderr}");
    assert!(took < Duration::from_secs(5), "digest took {took:?}");
    assert!(!still_alive, "the SIGTERM-proof child outlived the timeout");
    assert!(stderr.contains("ran out of its --timeout"), "{stderr}");
    assert!(
        out.stdout.contains("killed"),
        "a timed-out run is never a clean one"
    );
}

#[test]
fn a_signal_to_digest_ends_the_commands_group() {
    for (signal, code) in [("-TERM", 143), ("-HUP", 143), ("-INT", 130)] {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("sleep.pid");
        let script = format!("sleep 60 & echo $! > '{}'; wait", pidfile.display());
        let child = Command::new(greenlight_bin())
            .args(["digest", "--", "sh", "-c", &script])
            .env("GREENLIGHT_KILL_GRACE_MS", "300")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let sleep = procs::wait_for_pid(&pidfile);
        procs::signal(signal, child.id());
        let out = child.wait_with_output().unwrap();
        let still_alive = procs::alive(sleep);
        procs::end(sleep);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{signal}: {stderr}");
        assert!(
            !still_alive,
            "{signal}: the command's sleep outlived digest"
        );
        assert!(stderr.contains("interrupted by"), "{signal}: {stderr}");
    }
}

#[test]
fn a_bad_timeout_is_refused_naming_the_value() {
    for (value, says) in [
        ("soon", "`soon` is not a duration"),
        ("99999999999h", "`99999999999h` is too long a duration"),
    ] {
        let out = Cli::new(["digest", "--timeout", value, "--", "true"]).run();
        let stderr = &out.stderr;
        assert_eq!(out.code, 2, "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}
