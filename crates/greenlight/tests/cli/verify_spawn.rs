//! Gates whose command cannot be started: refused at config time when the file itself makes
//! the command unstartable (a NUL byte, a command longer than the kernel takes), and at run
//! time one gate's FAIL with the reason, never a run that ends early and drops the verdicts
//! already reached, and never a Stop hook that lets a red agent stop.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::io::Write as _;
use std::process::Stdio;

use greenlight_testkit::TempRepo;
use serde_json::{Value, json};

/// Gate `a` fails, gate `b` moves the worktree away, so gate `c` cannot be started in it.
const MOVES_ITS_WORKTREE: &str = "version: 1\ngates:\n  - id: a\n    command: echo broken; exit 3\n  - id: b\n    command: mv \"$PWD\" \"$PWD.moved\"\n  - id: c\n    command: \"true\"\n";

#[test]
fn a_nul_byte_or_an_oversized_command_is_refused_at_config_time_with_its_line() {
    let repo = TempRepo::worktree_with_commit();
    let long = "x".repeat(131_072);
    repo.verify_yaml(&format!(
        "version: 1\ngates:\n  - id: a\n    command: echo a\x00b\n  - id: b\n    command: {long}\n  - id: c\n    command: \"true\"\n    timeoutSec: 0\n"
    ));
    let out = repo.greenlight(["verify"]);
    insta::assert_snapshot!(out.render(), @r"
    exit: 2
    --- stdout
    --- stderr
    [REPO]/.commandmate/verify.yaml:4: `command` holds a NUL byte (byte 7 of the value), which no command line can carry; remove it
    [REPO]/.commandmate/verify.yaml:6: `command` is 131072 bytes long; the operating system starts no command longer than 131071 bytes. Move it into a script and run that
    [REPO]/.commandmate/verify.yaml:9: timeoutSec must be 1..7200 (seconds), found `0`
    greenlight: 3 problem(s) in the config; no gate ran
    ");

    // One byte less is the longest command the kernel still starts: it runs.
    let longest = format!(": {}", "x".repeat(131_071 - 2));
    repo.verify_yaml(&format!(
        "version: 1\ngates:\n  - id: a\n    command: {longest}\n"
    ));
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 0, "{}", out.render());
}

#[test]
fn a_gate_that_cannot_start_is_its_own_fail_and_the_other_verdicts_stand() {
    let repo = TempRepo::worktree_with_commit();
    let config = repo.home().join("verify.yaml");
    std::fs::write(&config, MOVES_ITS_WORKTREE).unwrap();
    let junit = repo.home().join("junit.xml");
    let out = repo.greenlight([
        "verify",
        "--config",
        config.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    let moved = repo.path().with_extension("moved");
    // Put the worktree back, so the JSON run below starts from the same place.
    std::fs::rename(&moved, repo.path()).unwrap();
    insta::assert_snapshot!(out.render(), @r"
    exit: 20
    --- stdout
    GATE work-evidence PASS commits=1 uncommitted=0
    GATE a FAIL exit=3 duration=0s
    GATE b PASS exit=0 duration=0s
    GATE c FAIL exit=126 duration=0s
    RESULT failed
    --- stderr
    --- gate a (FAIL exit=3): all 7 bytes ---
    broken
    --- end gate a ---
    --- gate c (FAIL exit=126): its command could not be started ---
    greenlight: cannot start gate `c`: cannot start `/bin/sh -c true` in `[REPO]`: No such file or directory (os error 2)
    --- end gate c ---
    3 gates: 2 red, 1 green in [S]s
    ");
    let xml = std::fs::read_to_string(&junit).unwrap();
    let report = quick_junit::Report::deserialize_from_str(&xml).unwrap();
    let names: Vec<&str> = report.test_suites[0]
        .test_cases
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["work-evidence", "a", "b", "c"], "{xml}");
    assert!(xml.contains("cannot start gate `c`"), "{xml}");

    let out = repo.greenlight([
        "verify",
        "--config",
        config.to_str().unwrap(),
        "--format",
        "json",
    ]);
    std::fs::rename(&moved, repo.path()).unwrap();
    assert_eq!(out.code, 20, "{}", out.render());
    let doc: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(doc["result"], "failed");
    let verdicts: Vec<&Value> = doc["gates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| &g["verdict"])
        .collect();
    assert_eq!(verdicts, ["FAIL", "PASS", "FAIL"]);
    let c = &doc["gates"][2];
    assert_eq!(c["passed"], false);
    assert_eq!(c["exit_codes"], json!([126]));
    let why = c["attempts"][0]["start_error"].as_str().unwrap();
    assert!(
        why.starts_with("cannot start gate `c`: cannot start `/bin/sh -c true` in "),
        "{why}"
    );
    assert_eq!(doc["gates"][0]["attempts"][0]["start_error"], Value::Null);
}

/// A lock root that is not a directory: the mutex gate cannot start, earlier FAILs stand.
fn unusable_lock_root(repo: &TempRepo) -> std::path::PathBuf {
    let file = repo.home().join("not-a-dir");
    std::fs::write(&file, "").unwrap();
    file.join("locks")
}

const MUTEX_AFTER_A_FAILURE: &str = "version: 1\ngates:\n  - id: unit\n    command: echo 'assertion failed: 2 + 2 == 5' >&2; exit 3\n  - id: e2e\n    command: \"true\"\n    mutex: e2e-port\n";

#[test]
fn a_mutex_lock_that_cannot_be_made_fails_that_gate_and_keeps_the_run() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(MUTEX_AFTER_A_FAILURE);
    let out = repo
        .command(["verify"])
        .env("CM_VERIFY_LOCK_ROOT", unusable_lock_root(&repo))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(20), "{stdout}{stderr}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "GATE work-evidence PASS commits=1 uncommitted=1",
            "GATE unit FAIL exit=3 duration=0s",
            "GATE e2e FAIL exit=126 duration=0s",
            "RESULT failed"
        ],
        "{stderr}"
    );
    assert!(
        stderr.contains("set CM_VERIFY_LOCK_ROOT to a writable directory"),
        "{stderr}"
    );
}

#[test]
fn the_stop_hook_blocks_when_a_gate_cannot_start() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(MUTEX_AFTER_A_FAILURE);
    let state = repo.home().join("state.db");
    let mut child = repo
        .command(["hook", "stop", "--state", state.to_str().unwrap()])
        .env("CM_VERIFY_LOCK_ROOT", unusable_lock_root(&repo))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let payload = json!({
        "session_id": "s-spawn",
        "transcript_path": "/home/u/.claude/projects/p/s-spawn.jsonl",
        "cwd": repo.path().display().to_string(),
        "permission_mode": "default",
        "hook_event_name": "Stop",
        "stop_hook_active": false,
        "last_assistant_message": "Done."
    });
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let answer: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!("the hook must answer with a block ({e}): stdout {stdout:?}, stderr {stderr}")
    });
    assert_eq!(answer["decision"], "block", "{answer}");
    let reason = answer["reason"].as_str().unwrap();
    assert!(
        reason.contains("unit") && reason.contains("e2e"),
        "{reason}"
    );
}
