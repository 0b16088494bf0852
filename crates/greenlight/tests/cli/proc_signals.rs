//! A closed terminal (SIGHUP) ends a run like SIGTERM: the running gate's whole process group
//! is ended, its mutex lock released, and greenlight exits 143. Before, SIGHUP's default action
//! killed greenlight on the spot and left the gate and its lock behind.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::io::Write as _;
use std::process::{Child, Stdio};
use std::time::Duration;

use greenlight_testkit::{TempRepo, procs, signal_and_wait};

/// A mutex gate that records its shell's pid and its background sleep's pid, then waits.
const LONG_GATE: &str = "version: 1\ngates:\n  - id: long\n    command: sleep 600 & echo $! >> pids; echo $$ >> pids; wait\n    mutex: held\n";

/// Sends `signal` once the gate runs; returns greenlight's exit code, stdout and stderr, after
/// checking it stopped promptly, released the lock and left no gate process alive.
fn signal_during_the_gate(signal: &str, repo: &TempRepo, child: Child) -> (i32, String, String) {
    let pids = repo.wait_for_pids("pids", 2, Duration::from_secs(15));
    let lock = repo.lock_root().join("held.lock");
    assert!(lock.exists(), "the gate runs without its lock");
    let out = signal_and_wait(child, signal, Duration::from_secs(8));
    procs::assert_all_dead(&pids, &format!("the gate survived {signal}"));
    assert!(
        !lock.exists(),
        "the lock outlived the run ended by {signal}"
    );
    (out.code, out.stdout, out.stderr)
}

fn verify_ended_by(signal: &str) {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(LONG_GATE);
    let child = repo
        .command(["verify"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (code, stdout, stderr) = signal_during_the_gate(signal, &repo, child);
    assert_eq!(code, 143, "{signal}: {stdout}\n{stderr}");
    assert!(
        !stdout.contains("RESULT"),
        "no RESULT when interrupted: {stdout}"
    );
    assert!(
        stderr.contains("interrupted by SIGTERM"),
        "{signal}: {stderr}"
    );
}

#[test]
fn sighup_to_verify_ends_the_gate_group_releases_the_lock_and_exits_143() {
    verify_ended_by("-HUP");
}

/// Their default action kills the process on the spot, leaving the gate and its lock: each is
/// caught and ends the run like SIGTERM.
#[test]
fn sigquit_sigusr1_sigusr2_and_sigalrm_to_verify_end_it_like_sigterm() {
    for signal in ["-QUIT", "-USR1", "-USR2", "-ALRM"] {
        verify_ended_by(signal);
    }
}

#[test]
fn sighup_to_the_stop_hook_ends_the_gate_group_and_releases_the_lock() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(LONG_GATE);
    let state = repo.home().join("state.db");
    let payload = serde_json::json!({
        "session_id": "s",
        "cwd": repo.path().display().to_string(),
        "hook_event_name": "Stop",
        "stop_hook_active": false,
    });
    let mut child = repo
        .command(["hook", "stop", "--state", state.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.to_string().as_bytes())
        .unwrap();
    let (code, stdout, stderr) = signal_during_the_gate("-HUP", &repo, child);
    // The hook's contract: exit 0, and an interrupted run judges nothing, so it never blocks.
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(!stdout.contains("\"block\""), "{stdout}");
    assert!(stderr.contains("interrupted"), "{stderr}");
}
