//! What a resume carries over and what a run checks before its first turn: the agent's reply and
//! the judge's streaks survive a crash, the agent CLI and its model are checked, a fix made by
//! hand is seen before the agent gets stale evidence, and the reply is shown and stored.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use greenlight_testkit::fake_agent::{FakeAgent, FakeCli, Scenario};

use crate::goal_support::{Fixture, GATE, finish, of_kind};
use greenlight_testkit::procs;

const WAIT: Duration = Duration::from_secs(20);

/// The reply lived only in memory: a judge after `kill -9` and `goal resume` judged "".
#[test]
fn a_judge_after_a_crash_and_resume_judges_the_agents_real_reply() {
    let fx = Fixture::new();
    let agent = fx.script(
        "agent.sh",
        "if [ \"$2\" = judge ]; then\n J=$(( $(cat \"$S/judge.calls\" 2>/dev/null || echo 0) + 1 )); echo $J > \"$S/judge.calls\"\n cp \"$1\" \"$S/judge.prompt.$J\"\n if [ $J -eq 1 ]; then echo $$ > \"$S/judge.pid\"; sleep 30; fi\n echo 'GATE: PASS'\n exit 0\nfi\necho good > value.txt\necho 'REPLY-7f3: I fixed value.txt'",
    );
    let child = fx.spawn_run("fix the value", &agent, GATE, &["--judge", "judge"]);
    fx.wait_for_marker("judge.pid", WAIT);
    procs::signal("-KILL", child.id());
    finish(child);
    assert!(
        std::fs::read_to_string(fx.scratch().join("judge.prompt.1"))
            .unwrap()
            .contains("REPLY-7f3"),
        "the first judge saw the reply"
    );

    let out = fx.goal(&["resume"]);
    assert_eq!(out.code, 0, "{}", out.render());
    let second = std::fs::read_to_string(fx.scratch().join("judge.prompt.2")).unwrap();
    assert!(
        second.contains("REPLY-7f3: I fixed value.txt"),
        "the judge after the resume judged another reply: {second}"
    );
    assert_eq!(
        fx.calls("agent.sh"),
        3,
        "one agent turn and two judge calls"
    );
}

/// The judge's failure counters lived in memory: each resume reset them, so a judge that can
/// never run never reached its limit.
#[test]
fn the_judges_failure_streak_survives_a_resume() {
    let fx = Fixture::new();
    let agent = fx.script(
        "agent.sh",
        "if [ \"$2\" = judge ]; then echo x >> \"$S/judge.calls\"; echo 'judge is down' >&2; exit 1; fi\necho good > value.txt\necho fixed",
    );
    let out = fx.run_goal(
        "fix the value",
        &agent,
        GATE,
        &["--judge", "judge", "--max-turns", "3"],
    );
    assert_eq!(out.code, 75, "{}", out.render());
    assert_eq!(
        fx.status()["goal"]["pause"]["reason"],
        "turn-budget-exhausted"
    );
    let out = fx.goal(&["resume"]);
    assert_eq!(out.code, 75, "{}", out.render());
    let status = fx.status();
    assert_eq!(
        status["goal"]["pause"]["reason"], "judge-failed",
        "{status}"
    );
    let judged = std::fs::read_to_string(fx.scratch().join("judge.calls")).unwrap();
    assert_eq!(judged.lines().count(), 5, "3 before the resume, 2 after");
}

/// An agent CLI that is not installed burned all 20 turns in 0.1 s, then advised `goal resume`.
#[test]
fn an_agent_cli_that_cannot_start_pauses_the_goal_before_the_first_turn() {
    let fx = Fixture::new();
    let out = fx.goal(&[
        "run",
        "fix it",
        "--agent",
        "command:/nonexistent/agent {prompt_file}",
        "--gate",
        GATE,
    ]);
    assert_eq!(out.code, 75, "{}", out.render());
    let status = fx.status();
    assert_eq!(
        status["goal"]["pause"]["reason"], "probe-failed",
        "{status}"
    );
    let detail = status["goal"]["pause"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("the agent cannot start: `/nonexistent/agent` does not exist"),
        "{detail}"
    );
    assert_eq!(status["goal"]["turns_used"], 0);
    assert_eq!(status["dispatches"].as_array().unwrap().len(), 0);

    // claude, not on PATH.
    let fx = Fixture::new();
    let out = fx.goal_env(
        &["run", "fix it", "--agent", "claude", "--gate", GATE],
        &[("PATH", std::ffi::OsStr::new("/usr/bin:/bin"))],
    );
    assert_eq!(out.code, 75, "{}", out.render());
    let status = fx.status();
    assert_eq!(status["goal"]["pause"]["reason"], "probe-failed");
    assert!(
        status["goal"]["pause"]["detail"]
            .as_str()
            .unwrap()
            .contains("`claude` is not installed (not found on PATH)"),
        "{status}"
    );
    assert_eq!(status["goal"]["turns_used"], 0);
}

/// After the user fixed the code by hand, `goal resume` sent the agent the old failure.
#[test]
fn resume_after_a_fix_by_hand_runs_the_gates_first_and_sends_no_stale_evidence() {
    let fx = Fixture::new();
    let agent = fx.script("agent.sh", "echo 'I looked; it seems fine'");
    let out = fx.run_goal("fix it", &agent, GATE, &["--retries", "1"]);
    assert_eq!(out.code, 75, "{}", out.render());
    // The reply is shown and stored; a failure that spends the last attempt is not "for the
    // next turn" (there is none).
    assert!(
        out.stdout
            .contains("   agent says: I looked; it seems fine\n"),
        "{}",
        out.render()
    );
    assert!(
        !out.stdout.contains("evidence for the next turn"),
        "{}",
        out.render()
    );
    assert!(
        out.stdout.contains("its last attempt; what it reported:"),
        "{}",
        out.render()
    );
    assert_eq!(
        fx.status()["dispatches"][0]["reply"],
        "I looked; it seems fine"
    );

    fx.repo.write("value.txt", "good\n");
    let out = fx.goal(&["resume"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(
        out.stdout.contains("running the gates first"),
        "{}",
        out.render()
    );
    assert_eq!(
        fx.calls("agent.sh"),
        1,
        "the agent was dispatched again after the fix"
    );
}

/// A model that stops answering between the start of a goal and its resume is refused with a
/// reason, before any turn is spent on it.
#[test]
#[ignore = "needs python3: run scripts/test"]
fn the_model_is_probed_when_the_goal_starts_and_a_resume_refuses_one_that_no_longer_answers() {
    let fx = Fixture::new();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let with_fake = |fake: &FakeAgent| {
        let mut dirs = vec![fake.dir().to_path_buf()];
        dirs.extend(std::env::split_paths(&path));
        std::env::join_paths(dirs).unwrap()
    };
    let up = FakeAgent::builder(FakeCli::Claude, Scenario::Ok)
        .good_models(&["sonnet"])
        .install()
        .unwrap();
    let out = fx.goal_env(
        &[
            "run",
            "fix it",
            "--agent",
            "claude",
            "--model",
            "sonnet",
            "--gate",
            GATE,
            "--retries",
            "1",
        ],
        &[("PATH", &with_fake(&up))],
    );
    assert_eq!(out.code, 75, "{}", out.render());
    let status = fx.status();
    assert_eq!(status["goal"]["model_probed"], "sonnet", "{status}");
    assert_eq!(status["goal"]["pause"]["reason"], "retries-exhausted");
    assert_eq!(of_kind(&fx.log(), "model-probed").len(), 1);
    // The probe, then one turn.
    assert_eq!(up.invocations().len(), 2);

    let gone = FakeAgent::builder(FakeCli::Claude, Scenario::Ok)
        .good_models(&["opus"])
        .install()
        .unwrap();
    let out = fx.goal_env(&["resume"], &[("PATH", &with_fake(&gone))]);
    assert_eq!(out.code, 75, "{}", out.render());
    let status = fx.status();
    assert_eq!(
        status["goal"]["pause"]["reason"], "probe-failed",
        "{status}"
    );
    assert!(
        status["goal"]["pause"]["detail"]
            .as_str()
            .unwrap()
            .contains("the model `sonnet` answered when the goal started but does not answer now"),
        "{status}"
    );
    assert_eq!(gone.invocations().len(), 1, "only the probe ran");
}
