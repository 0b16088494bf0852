//! A closed terminal (SIGHUP) ends a run like SIGTERM: the running gate's whole process group
//! is ended, its mutex lock released, and greenlight exits 143. Before, SIGHUP's default action
//! killed greenlight on the spot and left the gate and its lock behind.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::io::Write as _;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use greenlight_testkit::TempRepo;

/// A mutex gate that records its shell's pid and its background sleep's pid, then waits.
const LONG_GATE: &str = "version: 1\ngates:\n  - id: long\n    command: sleep 600 & echo $! >> pids; echo $$ >> pids; wait\n    mutex: held\n";

/// Alive means present in /proc and not a zombie.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

/// Waits until the gate has written both pids, and returns them.
fn gate_pids(repo: &TempRepo) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let text = repo.read("pids").unwrap_or_default();
        let pids: Vec<i32> = text
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if pids.len() >= 2 {
            return pids;
        }
        assert!(Instant::now() < deadline, "the gate never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn send(signal: &str, child: &Child) {
    let status = std::process::Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Sends `signal` once the gate runs; returns greenlight's exit code, stdout and stderr, after
/// checking it stopped promptly, released the lock and left no gate process alive.
fn signal_during_the_gate(signal: &str, repo: &TempRepo, child: Child) -> (i32, String, String) {
    let pids = gate_pids(repo);
    let lock = repo.lock_root().join("held.lock");
    assert!(lock.exists(), "the gate runs without its lock");
    send(signal, &child);
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "greenlight took {:?} to stop",
        started.elapsed()
    );
    let survivors: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    for &p in &survivors {
        let _ = std::process::Command::new("kill")
            .args(["-9", &p.to_string()])
            .status();
    }
    assert!(
        survivors.is_empty(),
        "the gate survived SIGHUP: {survivors:?}"
    );
    assert!(!lock.exists(), "the lock outlived the hung-up run");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
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
