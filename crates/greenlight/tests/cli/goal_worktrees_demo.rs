//! Two worktrees running goals at once against one state file, a worktree that disappears
//! mid-goal, and `greenlight demo`, through the real binary.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::time::{Duration, Instant};

use crate::goal_support::{Fixture, GATE, finish, of_kind};
use serde_json::Value;

#[test]
fn two_worktrees_run_their_goals_at_once_against_one_state_file() {
    let fx = Fixture::new();
    let second = fx.repo.path().parent().unwrap().join("wt2");
    fx.repo.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "work2",
        second.to_str().unwrap(),
    ]);
    // Each agent's first turn waits until the other's has started: the two runs overlap.
    let agent = |me: &str, other: &str| {
        fx.script(
            &format!("agent-{me}.sh"),
            &format!(
                "if [ $N -eq 1 ]; then touch \"$S/{me}.started\"; i=0; while [ ! -f \"$S/{other}.started\" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; echo {me} > notes.txt; echo 'not yet'; exit 0; fi\necho good > value.txt\necho fixed {me}"
            ),
        )
    };
    let (a, b) = (agent("a", "b"), agent("b", "a"));
    let second_dir = second.to_str().unwrap();
    let run_a = fx.spawn_run("goal A", &a, GATE, &[]);
    let run_b = fx.spawn_run("goal B", &b, GATE, &["--cwd", second_dir]);
    let run_a = finish(run_a);
    let (code_a, out_a, err_a) = (run_a.code, run_a.stdout, run_a.stderr);
    let run_b = finish(run_b);
    let (code_b, out_b, err_b) = (run_b.code, run_b.stdout, run_b.stderr);
    assert_eq!(code_a, 0, "{out_a}{err_a}");
    assert_eq!(code_b, 0, "{out_b}{err_b}");
    assert_eq!((fx.calls("agent-a.sh"), fx.calls("agent-b.sh")), (2, 2));

    let status_a = fx.status();
    let out = fx.goal(&["status", "--json", "--cwd", second_dir]);
    let status_b: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(status_a["goal"]["text"], "goal A");
    assert_eq!(status_b["goal"]["text"], "goal B");
    assert_ne!(status_a["goal"]["id"], status_b["goal"]["id"]);
    for status in [&status_a, &status_b] {
        assert_eq!(status["goal"]["state"], "done");
        let ledger = status["dispatches"].as_array().unwrap();
        assert_eq!(ledger.len(), 2);
        assert!(ledger.iter().all(|d| d["goal"] == status["goal"]["id"]));
    }
    // Each log holds its own goal's events only, and the two share one seq space without a
    // repeat.
    let log_a = fx.log();
    let out = fx.goal(&["log", "--json", "--cwd", second_dir]);
    let log_b: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(log_a.iter().all(|e| e["goal"] == status_a["goal"]["id"]));
    assert!(log_b.iter().all(|e| e["goal"] == status_b["goal"]["id"]));
    let mut seqs: Vec<i64> = log_a
        .iter()
        .chain(&log_b)
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    seqs.sort_unstable();
    let want: Vec<i64> = (1..=seqs.len() as i64).collect();
    assert_eq!(seqs, want);
    assert_eq!(of_kind(&log_a, "gate-run").len(), 2);
    assert_eq!(of_kind(&log_b, "gate-run").len(), 2);
}

#[test]
fn a_worktree_that_disappears_pauses_the_goal_without_charging_an_attempt() {
    let fx = Fixture::new();
    let gone = fx.repo.path().parent().unwrap().join("wt-gone");
    fx.repo.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "gone",
        gone.to_str().unwrap(),
    ]);
    let agent = fx.script("agent.sh", "rm -rf \"$PWD\"\necho removed it");
    let out = fx.run_goal("fix", &agent, GATE, &["--cwd", gone.to_str().unwrap()]);
    assert_eq!(out.code, 75, "{}", out.render());
    assert!(
        out.stdout.contains("paused (worktree-missing)"),
        "{}",
        out.render()
    );
    let out = fx.goal(&["status", "--json", "--cwd", gone.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.render());
    let status: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(status["goal"]["pause"]["reason"], "worktree-missing");
    assert_eq!(status["gates"][0]["attempts"], 0, "no attempt charged");

    // Restored (here by hand, without git: the key is unknown, so the gate simply runs), the
    // goal resumes with the gate phase the turn still owes, not with another dispatch.
    std::fs::create_dir_all(&gone).unwrap();
    std::fs::write(gone.join("value.txt"), "good\n").unwrap();
    std::fs::copy(fx.repo.path().join("check.sh"), gone.join("check.sh")).unwrap();
    let out = fx.goal(&["resume", "--cwd", gone.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(fx.calls("agent.sh"), 1);
}

#[test]
fn the_demo_goes_red_then_green_offline_in_seconds() {
    let fx = Fixture::new();
    let started = Instant::now();
    let out = fx.repo.greenlight(["demo"]);
    let took = started.elapsed();
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(took < Duration::from_secs(10), "the demo took {took:?}");
    let fail = out
        .stdout
        .find("gate 1 FAIL exit=1")
        .unwrap_or_else(|| panic!("{}", out.render()));
    let evidence = out.stdout.find("evidence for the next turn:").unwrap();
    let pass = out.stdout.find("gate 1 PASS exit=0").unwrap();
    assert!(fail < evidence && evidence < pass, "{}", out.render());
    assert!(
        out.stdout.contains("Gate 1 of 1 failed (attempt 1/3)."),
        "{}",
        out.render()
    );
    assert!(
        out.stdout.contains("done: every gate is green"),
        "{}",
        out.render()
    );
    // Nothing was written in the directory it was started from.
    assert!(fx.repo.git(&["status", "--porcelain"]).is_empty());
}
