//! Writing to stdout never panics: a reader that went away (EPIPE) ends the command cleanly
//! with 141, and ends a running verify or goal as SIGTERM would; any other write error (a full
//! device) is exit 1 with a message naming stdout.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use greenlight_testkit::TempRepo;
use greenlight_testkit::{Run, procs};

use crate::goal_support::{Fixture, finish};

/// Runs `cmd` with stdout a pipe whose reader is closed before greenlight starts, so its first
/// write fails with EPIPE however fast it is (closing the reader after the spawn raced a quick
/// command's whole output into the pipe's buffer on a loaded machine).
fn with_closed_stdout(mut cmd: Command) -> (i32, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let child = cmd
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The parent's copy of the writer went into the command and is closed with it.
    let Run { code, stderr, .. } = finish(child);
    (code, stderr)
}

/// Runs `cmd` with stdout sent to /dev/full, where every write fails with ENOSPC.
fn with_full_stdout(mut cmd: Command) -> (i32, String) {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = cmd
        .stdin(Stdio::null())
        .stdout(full)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_clean_epipe(what: &str, (code, stderr): (i32, String)) {
    assert!(!stderr.contains("panicked"), "{what} panicked: {stderr}");
    assert_eq!(code, 141, "{what}: {stderr}");
}

fn assert_names_stdout(what: &str, (code, stderr): (i32, String)) {
    assert!(!stderr.contains("panicked"), "{what} panicked: {stderr}");
    assert_eq!(code, 1, "{what}: {stderr}");
    assert!(
        stderr.contains("cannot write to stdout (No space left on device"),
        "{what}: {stderr}"
    );
}

/// A goal with a few events, finished, for the read-only goal commands.
fn finished_goal() -> Fixture {
    let fx = Fixture::new();
    let agent = fx.script("agent", "echo good > value.txt\necho fixed");
    let out = fx.run_goal("fix the value", &agent, crate::goal_support::GATE, &[]);
    assert_eq!(out.code, 0, "{}", out.render());
    fx
}

fn goal_command(fx: &Fixture, args: &[&str]) -> Command {
    let state = fx.state();
    let mut all = vec!["goal"];
    all.extend_from_slice(args);
    all.extend(["--state", state.to_str().unwrap()]);
    fx.repo.command(all)
}

#[test]
fn goal_status_and_log_into_a_closed_pipe_end_cleanly() {
    let fx = finished_goal();
    for args in [
        &["status"][..],
        &["status", "--json"],
        &["log"],
        &["log", "--json"],
    ] {
        assert_clean_epipe(
            &format!("goal {args:?}"),
            with_closed_stdout(goal_command(&fx, args)),
        );
    }
}

#[test]
fn goal_status_json_to_a_full_device_is_exit_1_naming_stdout() {
    let fx = finished_goal();
    for args in [&["status", "--json"][..], &["log"]] {
        assert_names_stdout(
            &format!("goal {args:?}"),
            with_full_stdout(goal_command(&fx, args)),
        );
    }
}

#[test]
fn goal_run_whose_stdout_closes_pauses_like_sigterm_and_ends_the_agent() {
    let fx = Fixture::new();
    let agent = fx.script(
        "agent",
        "echo $$ > \"$S/agent.pid\"\nsleep 2\necho good > value.txt\necho fixed",
    );
    let mut child = fx
        .run_command("fix the value", &agent, crate::goal_support::GATE, &[])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read the first line, as `| head -n1` would, then go away.
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("greenlight: goal 1 for"), "{first}");
    let Run { code, stderr, .. } = finish(child);
    assert_clean_epipe("goal run", (code, stderr.clone()));

    let status = fx.status();
    assert_eq!(status["goal"]["state"], "paused", "{status}");
    assert_eq!(
        status["goal"]["pause"]["reason"], "paused-by-user",
        "{status}"
    );
    let pid_file = fx.scratch().join("agent.pid");
    if pid_file.exists() {
        assert!(
            !procs::alive(procs::wait_for_pid(&pid_file)),
            "the agent outlived `goal run`"
        );
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn demo_into_a_closed_pipe_ends_cleanly() {
    let repo = TempRepo::worktree();
    let mut cmd = repo.command(["demo"]);
    cmd.env("XDG_STATE_HOME", repo.home().join("state"));
    assert_clean_epipe("demo", with_closed_stdout(cmd));
}

#[test]
fn verify_whose_stdout_closes_ends_its_running_gate_and_exits_141() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: quick\n    command: \"true\"\n  - id: slow\n    command: sleep 30\n    mutex: slow-lock\n",
    );
    let started = Instant::now();
    let result = with_closed_stdout(repo.command(["verify"]));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "verify went on running gates nobody reads: {:?}",
        started.elapsed()
    );
    assert!(
        result.1.contains("interrupted by a closed stdout"),
        "{}",
        result.1
    );
    assert_clean_epipe("verify", result);
    assert!(
        !repo.lock_root().join("slow-lock.lock").exists(),
        "the mutex lock outlived the run"
    );

    repo.verify_yaml("version: 1\ngates:\n  - id: quick\n    command: \"true\"\n");
    assert_names_stdout(
        "verify --format json",
        with_full_stdout(repo.command(["verify", "--format", "json"])),
    );
}

#[test]
fn digest_init_and_agent_into_a_closed_pipe_or_a_full_device_never_panic() {
    let repo = TempRepo::worktree_with_commit();
    let input = repo.home().join("out.txt");
    std::fs::write(&input, "running 1 test\ntest a ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\n").unwrap();
    let digest = || repo.command(["digest", input.to_str().unwrap()]);
    assert_clean_epipe("digest", with_closed_stdout(digest()));
    assert_names_stdout("digest", with_full_stdout(digest()));

    repo.write("Makefile", "test:\n\ttrue\n");
    assert_clean_epipe("init", with_closed_stdout(repo.command(["init"])));
    assert_names_stdout("init", with_full_stdout(repo.command(["init"])));

    // A probe of a "runtime" that answers OK prints the model id on stdout.
    let agent = || {
        repo.command([
            "agent", "probe", "--family", "command", "--bin", "echo", "--arg", "OK", "m",
        ])
    };
    assert_clean_epipe("agent probe", with_closed_stdout(agent()));
    assert_names_stdout("agent probe", with_full_stdout(agent()));
}

#[test]
fn help_and_version_to_a_full_device_are_exit_1_naming_stdout() {
    let repo = TempRepo::worktree();
    for args in [&["--version"][..], &["--help"], &["verify", "--help"]] {
        assert_names_stdout(
            &format!("greenlight {args:?}"),
            with_full_stdout(repo.command(args.iter().copied())),
        );
    }
    let out = repo.greenlight(["--version"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(
        out.stdout,
        format!("greenlight {}\n", env!("CARGO_PKG_VERSION"))
    );
}
