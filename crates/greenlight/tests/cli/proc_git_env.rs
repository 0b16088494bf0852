//! An inherited `GIT_DIR`, `GIT_WORK_TREE` or `GIT_INDEX_FILE` pointing at another repository
//! (as inside a git hook) changes nothing: verify, goal, the Stop hook and init judge the
//! worktree they were given, exactly as with the variable unset. Before, work-evidence and the
//! primary-checkout check asked git about the other repository and a failing gate came out
//! `RESULT skipped` (22).

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::path::PathBuf;

use greenlight_testkit::{Cli, Run, TempRepo};

use crate::goal_support::{Fixture, GATE};

/// Each redirecting variable, pointing into `other`.
fn redirections(other: &TempRepo) -> Vec<(&'static str, PathBuf)> {
    let git_dir = other.path().join(".git");
    vec![
        ("GIT_DIR", git_dir.clone()),
        ("GIT_WORK_TREE", other.path().to_path_buf()),
        ("GIT_INDEX_FILE", git_dir.join("index")),
    ]
}

#[test]
fn verify_on_a_failing_gate_fails_whatever_git_variables_point_elsewhere() {
    let other = TempRepo::primary();
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml("version: 1\ngates:\n  - id: unit\n    command: echo broken; exit 3\n");
    let Run {
        code,
        stdout: unset,
        ..
    } = Cli::from_command(repo.command(["verify"])).stdin("").run();
    assert_eq!(code, 20, "{unset}");
    assert!(unset.contains("GATE unit FAIL exit=3"), "{unset}");
    assert!(unset.ends_with("RESULT failed\n"), "{unset}");
    for (var, value) in redirections(&other) {
        let mut cmd = repo.command(["verify"]);
        cmd.env(var, &value);
        let Run {
            code,
            stdout,
            stderr,
            ..
        } = Cli::from_command(cmd).stdin("").run();
        assert_eq!(code, 20, "{var}: {stdout}{stderr}");
        // The same work-evidence counts and the same verdicts, duration aside.
        let strip = |s: &str| s.replace(|c: char| c.is_ascii_digit(), "");
        assert_eq!(strip(&stdout), strip(&unset), "{var}");
    }
}

/// The other repository holds the worktree's files, committed at its base: seen through it,
/// the worktree has no work, and the hook would let a red stop through as "nothing to judge".
#[test]
fn the_stop_hook_blocks_a_red_worktree_whatever_git_variables_point_elsewhere() {
    const RED: &str = "version: 1\ngates:\n  - id: unit\n    command: echo broken; exit 3\n";
    let other = TempRepo::primary();
    other.write("src/work.txt", "work\n");
    other.verify_yaml(RED);
    other.commit_all("the worktree's files, as a base");
    other.git(&["update-ref", "refs/remotes/origin/main", "HEAD"]);
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(RED);
    repo.commit_all("the gates");
    let state = repo.home().join("state.db");
    for (i, (var, value)) in redirections(&other).into_iter().enumerate() {
        let payload = serde_json::json!({
            "session_id": format!("s{i}"),
            "cwd": repo.path().display().to_string(),
            "hook_event_name": "Stop",
            "stop_hook_active": false,
        });
        let mut cmd = repo.command(["hook", "stop", "--state", state.to_str().unwrap()]);
        cmd.env(var, &value);
        let Run {
            code,
            stdout,
            stderr,
            ..
        } = Cli::from_command(cmd).stdin(payload.to_string()).run();
        assert_eq!(code, 0, "{var}: {stderr}");
        let answer: serde_json::Value = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("{var}: no JSON answer ({e}): {stdout:?} {stderr}"));
        assert_eq!(answer["decision"], "block", "{var}: {answer}");
        assert!(
            answer["reason"].as_str().unwrap().contains("broken"),
            "{var}: {answer}"
        );
    }
}

/// The gate asks git about the worktree: it passes only when git sees the agent's edit as a
/// modification of a tracked file, which is what it is in the worktree and in no other
/// repository or index.
#[test]
fn goal_run_with_a_command_agent_is_done_whatever_git_variables_point_elsewhere() {
    let other = TempRepo::primary();
    for (var, value) in redirections(&other) {
        let fx = Fixture::new();
        let agent = fx.script("agent.sh", "echo good > value.txt\necho fixed");
        let gate = format!("{GATE} && git status --porcelain | grep -q '^ M value.txt'");
        let state = fx.state();
        let mut cmd = fx.repo.command([
            "goal",
            "run",
            "fix the value",
            "--agent",
            &fx.agent(&agent),
            "--gate",
            &gate,
            "--state",
            state.to_str().unwrap(),
        ]);
        cmd.env(var, &value);
        let Run {
            code,
            stdout,
            stderr,
            ..
        } = Cli::from_command(cmd).stdin("").run();
        assert_eq!(code, 0, "{var}: {stdout}{stderr}");
        assert!(
            stdout.contains("done: every gate is green"),
            "{var}: {stdout}"
        );
        assert_eq!(fx.calls("agent.sh"), 1, "{var}");
    }
}

#[test]
fn init_runs_its_first_verify_on_the_worktree_whatever_git_variables_point_elsewhere() {
    let other = TempRepo::primary();
    for (var, value) in redirections(&other) {
        let repo = TempRepo::worktree_with_commit();
        repo.write("Makefile", "test:\n\t@echo broken; exit 3\n");
        let dir = repo.path().to_str().unwrap().to_owned();
        let mut cmd = repo.command(["init", "--cwd", &dir, "--write"]);
        cmd.env(var, &value);
        let Run {
            code,
            stdout,
            stderr,
            ..
        } = Cli::from_command(cmd).stdin("").run();
        let config = repo.read(".greenlight/verify.yaml").unwrap_or_default();
        assert!(
            config.contains("make test"),
            "{var}: {config}{stdout}{stderr}"
        );
        assert_eq!(code, 0, "{var}: {stdout}{stderr}");
        assert!(
            stdout.contains(
                "first run: exit 20 (written, but 1 gate is suspect: test fails on the untouched \
                 tree)"
            ),
            "{var}: {stdout}"
        );
    }
}
