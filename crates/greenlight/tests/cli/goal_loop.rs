//! The goal loop through the real binary, with scripted agents in real temp worktrees: green on
//! the first turn, red then fixed, never fixed, turn budget, unchanged workspace, and resume
//! resetting turns but not gate attempts.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use crate::goal_support::{Fixture, GATE, kinds, of_kind};
use serde_json::{Value, json};

const FIX: &str = "echo good > value.txt\necho 'fixed value.txt'";

#[test]
fn a_goal_green_on_the_first_turn_is_done_after_one_dispatch() {
    let fx = Fixture::new();
    let agent = fx.script("agent.sh", FIX);
    let out = fx.run_goal("fix the value", &agent, GATE, &[]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(
        out.stdout.contains("gate 1 PASS exit=0  $ sh check.sh"),
        "{}",
        out.render()
    );
    assert!(
        out.stdout.contains("done: every gate is green"),
        "{}",
        out.render()
    );
    assert_eq!(fx.calls("agent.sh"), 1);

    let first = fx.prompt("agent.sh", 1);
    assert!(first.starts_with("Goal:\nfix the value\n"), "{first}");
    assert!(first.contains("1. $ sh check.sh"), "{first}");
    assert!(!first.contains("The last check failed"), "{first}");

    let status = fx.status();
    assert_eq!(status["goal"]["state"], "done");
    assert_eq!(
        status["goal"]["gate_timeout_sec"], 300,
        "the default limit with --gate"
    );
    assert_eq!(status["goal"]["turns_used"], 1);
    assert_eq!(status["gates"][0]["attempts"], 0);
    assert_eq!(status["gates"][0]["last"]["verdict"], "pass");
    let ledger = status["dispatches"].as_array().unwrap();
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0]["outcome"], "ok");
    assert_eq!(ledger[0]["family"], "command");
    assert_eq!(ledger[0]["model"], "default");
    assert_eq!(
        ledger[0]["tokens"]["input"],
        serde_json::Value::Null,
        "not reported → null"
    );

    assert_eq!(
        kinds(&fx.log()),
        [
            "goal-created",
            "gate-added",
            "turn-started",
            "prompt",
            "dispatch-started",
            "dispatch-ended",
            "gate-run",
            "turn-ended",
            "goal-done"
        ]
    );
}

#[test]
fn red_then_fixed_feeds_the_evidence_back_and_finishes_on_the_second_turn() {
    let fx = Fixture::new();
    let agent = fx.script(
        "agent.sh",
        "if [ $N -ge 2 ]; then echo good > value.txt; echo fixed; else echo notes > notes.txt; echo 'all done!'; fi",
    );
    let out = fx.run_goal("fix the value", &agent, GATE, &[]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(fx.calls("agent.sh"), 2);

    let second = fx.prompt("agent.sh", 2);
    assert!(second.starts_with("Goal:\nfix the value\n"), "{second}");
    let evidence = second
        .split_once("The last check failed:\n\n")
        .unwrap_or_else(|| panic!("no evidence in {second}"))
        .1;
    assert!(
        evidence.starts_with("Gate 1 of 1 failed (attempt 1/3).\n$ sh check.sh\nexit code: 1\n"),
        "{evidence}"
    );
    assert!(
        evidence.contains("expected value good, got bad"),
        "{evidence}"
    );
    assert!(evidence.contains("Output (complete):"), "{evidence}");

    let status = fx.status();
    assert_eq!(status["goal"]["state"], "done");
    assert_eq!(status["goal"]["turns_used"], 2);
    assert_eq!(status["gates"][0]["attempts"], 0, "a pass resets the count");
    let runs: Vec<_> = of_kind(&fx.log(), "gate-run")
        .iter()
        .map(|e| {
            (
                e["payload"]["verdict"].clone(),
                e["payload"]["attempt"].clone(),
                e["turn"].clone(),
            )
        })
        .collect();
    assert_eq!(
        runs,
        [
            ("fail".into(), 1.into(), 1.into()),
            ("pass".into(), 0.into(), 2.into())
        ]
    );
}

#[test]
fn a_gate_never_fixed_pauses_the_goal_after_the_retry_bound_with_the_reason() {
    let fx = Fixture::new();
    // Changes something every turn (so the gate re-runs), never the value.
    let agent = fx.script("agent.sh", "echo $N > notes.txt\necho 'tried'");
    let out = fx.run_goal("fix the value", &agent, GATE, &["--retries", "3"]);
    assert_eq!(out.code, 75, "{}", out.render());
    assert!(
        out.stdout.contains(
            "paused (retries-exhausted): gate 1 (`sh check.sh`) failed 3 time(s) in a row"
        ),
        "{}",
        out.render()
    );
    assert!(
        out.stdout.contains("greenlight goal gate remove 1"),
        "{}",
        out.render()
    );
    assert_eq!(fx.calls("agent.sh"), 3);
    assert!(fx.prompt("agent.sh", 3).contains("(attempt 2/3)"));

    let status = fx.status();
    assert_eq!(status["goal"]["state"], "paused");
    assert_eq!(status["goal"]["pause"]["reason"], "retries-exhausted");
    assert_eq!(status["gates"][0]["attempts"], 3);
    let runs = of_kind(&fx.log(), "gate-run");
    assert_eq!(runs.len(), 3);
    assert!(runs.iter().all(|r| r["payload"]["replayed"] == false));

    let text = fx.goal(&["status"]);
    assert!(
        text.stdout.contains("paused: retries-exhausted"),
        "{}",
        text.render()
    );
    assert!(text.stdout.contains("attempts 3/3"), "{}", text.render());
}

#[test]
fn the_turn_budget_pauses_the_goal_and_resume_grants_new_turns_but_keeps_attempts() {
    let fx = Fixture::new();
    let agent = fx.script("agent.sh", "echo $N > notes.txt\necho 'tried'");
    let out = fx.run_goal(
        "fix the value",
        &agent,
        GATE,
        &["--max-turns", "2", "--retries", "10"],
    );
    assert_eq!(out.code, 75, "{}", out.render());
    assert!(
        out.stdout
            .contains("paused (turn-budget-exhausted): used all 2 turns"),
        "{}",
        out.render()
    );
    let status = fx.status();
    assert_eq!(status["goal"]["pause"]["reason"], "turn-budget-exhausted");
    assert_eq!(status["goal"]["turns_used"], 2);
    assert_eq!(status["gates"][0]["attempts"], 2);
    assert_eq!(fx.calls("agent.sh"), 2);

    let out = fx.goal(&["resume"]);
    assert_eq!(out.code, 75, "{}", out.render());
    assert!(
        out.stdout
            .contains("turn budget 2 again; gate attempts kept"),
        "{}",
        out.render()
    );
    let status = fx.status();
    assert_eq!(status["goal"]["pause"]["reason"], "turn-budget-exhausted");
    assert_eq!(
        status["goal"]["turns_used"], 2,
        "resume reset the turn count"
    );
    assert_eq!(
        status["gates"][0]["attempts"], 4,
        "resume kept the attempts"
    );
    assert_eq!(fx.calls("agent.sh"), 4);
    assert!(fx.prompt("agent.sh", 4).contains("(attempt 3/10)"));
    // Turn numbers keep counting across the resume.
    let turns: Vec<_> = of_kind(&fx.log(), "turn-started")
        .iter()
        .map(|e| e["turn"].clone())
        .collect();
    assert_eq!(turns, [1, 2, 3, 4]);
}

#[test]
fn an_unchanged_workspace_is_not_regated_the_attempt_advances_and_the_prompt_says_so() {
    let fx = Fixture::new();
    let agent = fx.script("agent.sh", "echo 'I looked, it is fine'");
    // The gate counts its own runs in the scratch dir (outside the worktree, so not in the key).
    let gate = format!(
        "echo run >> '{}/gate.runs'; sh check.sh",
        fx.scratch().display()
    );
    let out = fx.run_goal("fix the value", &agent, &gate, &["--retries", "3"]);
    assert_eq!(out.code, 75, "{}", out.render());
    assert!(
        out.stdout
            .contains("(not re-run: nothing changed since it failed)"),
        "{}",
        out.render()
    );
    // Turn 2 replays turn 1's failure; after one replay the gate runs for real again (the key
    // cannot see git-ignored files the gate may read), so it ran twice in three turns.
    let gate_runs = std::fs::read_to_string(fx.scratch().join("gate.runs")).unwrap();
    assert_eq!(
        gate_runs.lines().count(),
        2,
        "an unchanged workspace is replayed once, then the gate runs again"
    );
    assert_eq!(fx.calls("agent.sh"), 3);

    let third = fx.prompt("agent.sh", 3);
    assert!(
        third.contains("Gate 1 of 1 failed (attempt 2/3)."),
        "{third}"
    );
    assert!(
        third.contains("Nothing in the worktree changed since this gate last failed"),
        "{third}"
    );
    assert!(
        third.contains("You must change something before you end your turn."),
        "{third}"
    );
    assert!(
        third.contains("expected value good, got bad"),
        "the original failure is quoted: {third}"
    );
    // The notice is not nested into itself on a second unchanged turn.
    assert_eq!(
        third.matches("Nothing in the worktree changed").count(),
        1,
        "{third}"
    );

    let runs = of_kind(&fx.log(), "gate-run");
    let replayed: Vec<_> = runs
        .iter()
        .map(|r| r["payload"]["replayed"].clone())
        .collect();
    assert_eq!(replayed, [false, true, false]);
    let attempts: Vec<_> = runs
        .iter()
        .map(|r| r["payload"]["attempt"].clone())
        .collect();
    assert_eq!(attempts, [1, 2, 3]);
    let keys: Vec<_> = runs
        .iter()
        .map(|r| r["payload"]["workspace_key"].clone())
        .collect();
    assert!(
        keys[0].is_string() && keys.iter().all(|k| *k == keys[0]),
        "{keys:?}"
    );
    assert_eq!(fx.status()["goal"]["pause"]["reason"], "retries-exhausted");

    // In history the replay is no measurement: a cached row with no attempt, no duration and
    // no reading, left out of the figures (two runs measured, both raw failures).
    let state = fx.state();
    let history = fx
        .repo
        .greenlight([
            "history",
            "--gate",
            &gate,
            "--json",
            "--state",
            state.to_str().unwrap(),
        ])
        .json();
    let rows: Vec<_> = history["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["turn"].clone(),
                r["cached"].clone(),
                r["attempts"].clone(),
                r["duration_ms"].is_null(),
                r["digest"]["evidence"].clone(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (json!(3), json!(false), json!(1), false, json!("raw")),
            (json!(2), json!(true), json!(0), true, Value::Null),
            (json!(1), json!(false), json!(1), false, json!("raw")),
        ],
        "{history}"
    );
    assert_eq!(history["stats"]["samples"], 2, "{history}");
    assert_eq!(
        history["stats"]["evidence"],
        json!({ "exact": 0, "partial": 0, "raw": 2 })
    );
}

/// hermes removed its unchanged-workspace skip after it replayed a stale failure: its
/// fingerprint was the `git status` output, which does not change when a modified file is
/// modified again. The key here is content; this is the case that broke it.
#[test]
fn hermes_stale_replay_a_content_only_change_with_identical_git_status_reruns_the_gate() {
    let fx = Fixture::new();
    let status_file = fx.scratch().join("porcelain");
    let agent = fx.script(
        "agent.sh",
        &format!(
            "if [ $N -ge 2 ]; then echo good > value.txt; else echo baad > value.txt; fi\ngit status --porcelain >> '{}'\necho '---' >> '{}'\necho changed",
            status_file.display(),
            status_file.display()
        ),
    );
    let out = fx.run_goal("fix the value", &agent, GATE, &[]);
    assert_eq!(out.code, 0, "{}", out.render());
    let porcelain = std::fs::read_to_string(&status_file).unwrap();
    let turns: Vec<&str> = porcelain.split("---\n").filter(|s| !s.is_empty()).collect();
    assert_eq!(turns.len(), 2);
    assert_eq!(
        turns[0], turns[1],
        "the fixture must keep `git status` identical"
    );
    assert_eq!(turns[0], " M value.txt\n");
    let seen = fx.gate_verdicts_and_replays();
    assert_eq!(
        seen,
        [("fail".into(), false.into()), ("pass".into(), false.into())]
    );
}

#[test]
fn a_content_only_change_to_an_untracked_file_reruns_the_gate() {
    let fx = Fixture::new();
    let agent = fx.script(
        "agent.sh",
        "if [ $N -ge 2 ]; then echo good > extra.txt; else echo bad1 > extra.txt; fi\necho changed",
    );
    let gate = "grep -qx good extra.txt";
    let out = fx.run_goal("fill extra.txt", &agent, gate, &[]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(fx.calls("agent.sh"), 2);
    let replayed: Vec<_> = of_kind(&fx.log(), "gate-run")
        .iter()
        .map(|r| r["payload"]["replayed"].clone())
        .collect();
    assert_eq!(replayed, [false, false]);
}

#[test]
fn gates_run_in_order_and_the_first_failure_ends_the_phase() {
    let fx = Fixture::new();
    let agent = fx.script(
        "agent.sh",
        "if [ $N -ge 2 ]; then echo good > value.txt; fi\necho $N > notes.txt\necho ok",
    );
    let third = format!("echo ran >> '{}/third.runs'", fx.scratch().display());
    let out = fx.goal(&[
        "run",
        "fix",
        "--agent",
        &fx.agent(&agent),
        "--gate",
        "true",
        "--gate",
        GATE,
        "--gate",
        &third,
    ]);
    assert_eq!(out.code, 0, "{}", out.render());
    let runs = std::fs::read_to_string(fx.scratch().join("third.runs")).unwrap();
    assert_eq!(runs.lines().count(), 1, "gate 3 ran after gate 2 failed");
    assert!(
        fx.prompt("agent.sh", 2)
            .contains("Gate 2 of 3 failed (attempt 1/3).\n$ sh check.sh\n")
    );
}

#[test]
fn one_active_goal_per_worktree_and_a_cleared_goal_frees_it() {
    let fx = Fixture::new();
    let agent = fx.script("agent.sh", "echo $N > notes.txt; echo tried");
    let args = [
        "run",
        "fix",
        "--agent",
        &fx.agent(&agent),
        "--gate",
        GATE,
        "--retries",
        "1",
    ];
    assert_eq!(fx.goal(&args).code, 75);
    let second = fx.goal(&args);
    assert_eq!(second.code, 2, "{}", second.render());
    let cleared = fx.goal(&["clear"]);
    assert_eq!(cleared.code, 0, "{}", cleared.render());
    assert_eq!(fx.status()["goal"]["state"], "cleared");
    assert_eq!(fx.goal(&args).code, 75);
}

#[test]
fn gate_commands_add_list_and_remove_gates_of_a_paused_goal() {
    let fx = Fixture::new();
    let agent = fx.script("agent.sh", "echo $N > notes.txt; echo tried");
    let out = fx.run_goal("fix", &agent, GATE, &["--retries", "1"]);
    assert_eq!(out.code, 75, "{}", out.render());
    let added = fx.goal(&["gate", "add", "true"]);
    assert_eq!(
        added.stdout,
        "1. sh check.sh\n2. true\n",
        "{}",
        added.render()
    );
    let removed = fx.goal(&["gate", "remove", "1"]);
    assert_eq!(removed.stdout, "1. true\n", "{}", removed.render());
    let out = fx.goal(&["resume"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(fx.status()["goal"]["state"], "done");
    let bad = fx.goal(&["gate", "remove", "7"]);
    assert_eq!(bad.code, 2, "{}", bad.render());
}

#[test]
fn without_gate_flags_the_gates_of_the_worktrees_verify_yaml_are_used() {
    let fx = Fixture::new();
    fx.repo.write(
        ".commandmate/verify.yaml",
        "version: 1\ngates:\n  - id: check\n    command: sh check.sh\n    timeoutSec: 1800\n  - id: lint\n    command: test -s value.txt\n",
    );
    let agent = fx.script("agent.sh", FIX);
    let out = fx.goal(&["run", "fix the value", "--agent", &fx.agent(&agent)]);
    assert_eq!(out.code, 0, "{}", out.render());
    let status = fx.status();
    assert_eq!(gate_commands(&status), ["sh check.sh", "test -s value.txt"]);
    // One limit for all of a goal's gates: the largest declared, so no gate is cut short.
    assert_eq!(status["goal"]["gate_timeout_sec"], 1800);
    assert!(
        fx.prompt("agent.sh", 1)
            .contains("1. $ sh check.sh\n2. $ test -s value.txt\n")
    );
}

/// greenlight's own `.greenlight/verify.yaml` is the goal's gates, before CommandMate's file.
#[test]
fn without_gate_flags_the_gates_of_greenlight_s_own_config_home_come_first() {
    let fx = Fixture::new();
    fx.repo.write(
        ".commandmate/verify.yaml",
        "version: 1\ngates:\n  - id: theirs\n    command: exit 9\n",
    );
    fx.repo.greenlight_yaml(
        "version: 2\ngates:\n  - id: check\n    command: sh check.sh\n  - id: lint\n    command: test -s value.txt\n    needs: [check]\n",
    );
    let agent = fx.script("agent.sh", FIX);
    let out = fx.goal(&["run", "fix the value", "--agent", &fx.agent(&agent)]);
    assert_eq!(out.code, 0, "{}", out.render());
    let status = fx.status();
    assert_eq!(gate_commands(&status), ["sh check.sh", "test -s value.txt"]);
}

#[test]
fn without_gate_flags_or_a_verify_yaml_the_goal_is_refused() {
    let fx = Fixture::new();
    let agent = fx.script("agent.sh", FIX);
    let out = fx.goal(&["run", "fix the value", "--agent", &fx.agent(&agent)]);
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(
        out.stderr
            .contains("no gates: pass --gate CMD, or declare gates in .greenlight/verify.yaml"),
        "{}",
        out.render()
    );
    assert_eq!(
        fx.calls("agent.sh"),
        0,
        "no agent may run without a gate to judge it"
    );
}

/// The unchanged-workspace key cannot see git-ignored files: an agent that fixed `build/ok`
/// (ignored) had its failure replayed forever and the goal paused although the gate passed.
#[test]
fn an_ignored_file_the_agent_fixes_is_seen_after_at_most_one_replay() {
    let fx = Fixture::new();
    fx.repo.write(".gitignore", "build/\n");
    fx.repo.commit_all("ignore build output");
    let agent = fx.script(
        "agent.sh",
        "if [ $N -eq 2 ]; then mkdir -p build && touch build/ok; echo 'built it'; else echo 'looked'; fi",
    );
    let gate = "test -f build/ok || { echo 'build/ok is missing'; exit 1; }";
    let out = fx.run_goal("build it", &agent, gate, &["--retries", "3"]);
    assert_eq!(out.code, 0, "{}", out.render());
    let seen = fx.gate_verdicts_and_replays();
    assert_eq!(
        seen,
        [
            (json!("fail"), json!(false)),
            (json!("fail"), json!(true)),
            (json!("pass"), json!(false)),
        ]
    );
}

#[test]
fn a_goal_run_is_one_contiguous_stream_of_frames_from_active_to_done() {
    use greenlight_store::greenlight_stream::FrameBody;
    use greenlight_store::{Reads as _, Store};

    let fx = Fixture::new();
    let agent = fx.script(
        "agent.sh",
        "if [ -f ../tried ]; then echo good > value.txt; echo 'fixed value.txt'; else touch ../tried; echo 'looked around'; fi",
    );
    let out = fx.run_goal("fix the value", &agent, GATE, &[]);
    assert_eq!(out.code, 0, "{}", out.render());
    let store = Store::open(&fx.state()).unwrap();
    let goal = fx.status()["goal"]["id"].as_i64().unwrap();
    let frames = store
        .frames_after(
            greenlight_store::greenlight_stream::StreamId::Goal(goal),
            0,
            1000,
        )
        .unwrap();
    let seqs: Vec<u64> = frames.iter().map(|f| f.seq).collect();
    assert_eq!(seqs, (1..=frames.len() as u64).collect::<Vec<_>>());
    let milestones: Vec<&str> = frames
        .iter()
        .map(|f| f.body.kind())
        .filter(|k| !matches!(*k, "activity" | "tool-call" | "gate-output"))
        .collect();
    assert_eq!(
        milestones,
        [
            "goal-state",
            "turn-started",
            "turn-ended",
            "gate-started",
            "gate-finished",
            "turn-started",
            "turn-ended",
            "gate-started",
            "gate-finished",
            "goal-state"
        ]
    );
    let replies: Vec<Option<&str>> = frames
        .iter()
        .filter_map(|f| match &f.body {
            FrameBody::TurnEnded { reply, .. } => Some(reply.as_deref().map(str::trim)),
            _ => None,
        })
        .collect();
    assert_eq!(replies, [Some("looked around"), Some("fixed value.txt")]);
}

/// Runs a `{prompt_file}` goal with `TMPDIR` set to `tmp` and checks that the machine failure
/// pauses the goal at once, names the cause, never starts the agent and charges no turn.
fn a_machine_failure_pauses_at_once(tmp: &std::path::Path, cause: &str) {
    let fx = Fixture::new();
    let agent = fx.script("agent.sh", FIX);
    let agent_arg = fx.agent(&agent);
    let out = fx.goal_env(
        &[
            "run",
            "fix the value",
            "--agent",
            &agent_arg,
            "--gate",
            GATE,
        ],
        &[("TMPDIR", tmp.as_os_str())],
    );
    assert_eq!(out.code, 75, "{}", out.render());
    assert_eq!(fx.calls("agent.sh"), 0, "the agent never ran");
    let status = fx.status();
    assert_eq!(status["goal"]["state"], "paused");
    assert_eq!(status["goal"]["pause"]["reason"], "machine-failure");
    let detail = status["goal"]["pause"]["detail"].as_str().unwrap();
    assert!(detail.contains(cause), "{detail}");
    assert!(detail.contains(&tmp.display().to_string()), "{detail}");
    assert_eq!(status["goal"]["turns_used"], 0, "no turn is charged");
    let ledger = status["dispatches"].as_array().unwrap();
    assert_eq!(ledger.len(), 1, "{ledger:?}");
    assert_eq!(ledger[0]["reason"], "machine-failure");
    assert!(
        out.stderr.contains("machine-failure") || out.stdout.contains("machine-failure"),
        "{}",
        out.render()
    );
    // Once the machine is fixed, resume goes on with a whole budget.
    let out = fx.goal(&["resume"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(fx.status()["goal"]["turns_used"], 1);
}

/// A temp dir where the prompt file cannot be created (here: `TMPDIR` names a regular file,
/// so creating the prompt directory fails with ENOTDIR) used to fail every turn as
/// `dispatch-dead`: 20 turns in a fraction of a second, then `turn-budget-exhausted`.
#[test]
fn an_unusable_temp_dir_pauses_the_goal_at_once_and_charges_no_turn() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_dir = dir.path().join("tmpfile");
    std::fs::write(&not_a_dir, "").unwrap();
    a_machine_failure_pauses_at_once(&not_a_dir, "Not a directory");
}

/// The same with a full temp dir (ENOSPC): a tiny tmpfs, filled.
#[test]
#[ignore = "needs root: mounts a tiny tmpfs"]
fn a_full_temp_dir_pauses_the_goal_at_once_and_charges_no_turn() {
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("full");
    std::fs::create_dir(&mount).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&mount)
        .status()
        .unwrap();
    assert!(mounted.success(), "mount needs root");
    struct Unmount<'a>(&'a std::path::Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(&mount);
    // Fill it: writes fail with ENOSPC once it is full.
    let mut filler = std::fs::File::create(mount.join("filler")).unwrap();
    let chunk = vec![0u8; 4096];
    while std::io::Write::write_all(&mut filler, &chunk).is_ok() {}
    drop(filler);
    a_machine_failure_pauses_at_once(&mount, "No space left on device");
}

/// `greenlight history` shows the goal loop's gate runs: after a goal that went red then green,
/// the gate's last result is the goal's pass (not the failing verify before it), and its rows
/// name the goal and turn, with how the goal's own run of the gate was read.
#[test]
fn history_shows_the_goals_gate_runs_and_their_last_pass() {
    let fx = Fixture::new();
    fx.repo.verify_yaml(&format!(
        "version: 1\ngates:\n  - id: test\n    command: {GATE}\n"
    ));
    fx.repo.commit_all("the gate");
    let state = fx.state();
    let state = state.to_str().unwrap();
    let verify = fx
        .repo
        .cli(["verify", "--skip-work-evidence", "--state", state])
        .env_remove("GREENLIGHT_NO_RECORD")
        .run();
    assert_eq!(verify.code, 20, "{}", verify.render());
    let before = fx
        .repo
        .greenlight(["history", "--json", "--state", state])
        .json();
    assert_eq!(before["gates"][0]["last_verdict"], "fail", "{before}");

    let agent = fx.script(
        "agent.sh",
        "if [ $N -ge 2 ]; then echo good > value.txt; echo fixed; else echo 'looked around'; fi",
    );
    let agent = fx.agent(&agent);
    let out = fx.goal(&["run", "fix the value", "--agent", &agent]);
    assert_eq!(out.code, 0, "{}", out.render());

    let doc = fx
        .repo
        .greenlight(["history", "--json", "--state", state])
        .json();
    let gates = doc["gates"].as_array().unwrap();
    assert_eq!(
        gates.len(),
        1,
        "the goal's runs are the verify gate's: {doc}"
    );
    let test = &gates[0];
    assert_eq!(
        (&test["gate"], &test["last_verdict"], &test["samples"]),
        (&json!("test"), &json!("pass"), &json!(3)),
        "{doc}"
    );
    assert_eq!(test["failure_rate"].as_f64().unwrap(), 2.0 / 3.0);
    // `expected value good, got bad` is no known tool's output: raw, from verify and the goal.
    assert_eq!(
        test["evidence"],
        json!({ "exact": 0, "partial": 0, "raw": 2 })
    );

    let rows = fx
        .repo
        .greenlight(["history", "--gate", "test", "--json", "--state", state])
        .json();
    let sources: Vec<(Value, Value, Value, Value)> = rows["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["run"].clone(),
                r["goal"].clone(),
                r["turn"].clone(),
                r["verdict"].clone(),
            )
        })
        .collect();
    let run = before["runs"][0]["id"].clone();
    assert_eq!(
        sources,
        [
            (Value::Null, json!(1), json!(2), json!("pass")),
            (Value::Null, json!(1), json!(1), json!("fail")),
            (run, Value::Null, Value::Null, json!("fail")),
        ]
    );
    assert_eq!(rows["rows"][1]["digest"]["evidence"], "raw");

    let text = fx.repo.greenlight(["history", "--state", state]);
    let last = text
        .lines()
        .iter()
        .find(|l| l.starts_with("test "))
        .unwrap_or_else(|| panic!("{}", text.stdout))
        .to_string();
    assert!(last.contains(" pass "), "{last}");
    let one = fx
        .repo
        .greenlight(["history", "--gate", "test", "--state", state]);
    assert!(
        one.lines()[3].starts_with("goal 1 turn 2  "),
        "{}",
        one.stdout
    );
}

/// The goal's gate commands, in order, as `goal status --json` lists them.
fn gate_commands(status: &Value) -> Vec<&str> {
    status["gates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["command"].as_str().unwrap())
        .collect()
}
