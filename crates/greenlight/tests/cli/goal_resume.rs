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

/// `goal run` without `--agent` chose claude and, claude missing, left a paused goal behind:
/// the agent is checked before the goal exists, and the error says what was looked for and
/// the flags that choose another agent.
#[test]
fn an_agent_that_cannot_start_is_refused_before_a_goal_exists() {
    let fx = Fixture::new();
    let out = fx.goal_env(
        &["run", "fix it", "--gate", GATE],
        &[("PATH", std::ffi::OsStr::new("/usr/bin:/bin"))],
    );
    assert_eq!(out.code, 1, "{}", out.render());
    assert!(out.stdout.is_empty(), "{}", out.render());
    assert_eq!(
        out.stderr,
        "greenlight: --agent claude: the claude agent cannot start: `claude` is not installed (not found on PATH); no goal was created. Fix that, or choose another agent: `--agent codex --model ID`, `--agent openai --base-url URL --model ID`, or `--agent 'command:PROGRAM {prompt_file}'`\n",
        "{}",
        out.render()
    );
    let status = fx.goal(&["status", "--json"]);
    assert_eq!(status.code, 2, "a goal row was left: {}", status.render());
    assert!(status.stderr.contains("no goal"), "{}", status.render());

    let out = fx.goal(&[
        "run",
        "fix it",
        "--agent",
        "command:/nonexistent/agent {prompt_file}",
        "--gate",
        GATE,
    ]);
    assert_eq!(out.code, 1, "{}", out.render());
    assert!(
        out.stderr
            .contains("the command agent cannot start: `/nonexistent/agent` does not exist; no goal was created"),
        "{}",
        out.render()
    );
    assert_eq!(fx.goal(&["status", "--json"]).code, 2);
}

/// Ctrl-C while the new agent's model is probed stops `goal run` as an interrupt (130, the
/// probe's process group ended), not as an agent that failed its check, and leaves no goal.
#[test]
#[ignore = "needs python3: run scripts/test"]
fn ctrl_c_during_the_model_probe_exits_130_and_leaves_no_goal() {
    let fx = Fixture::new();
    let fake = FakeAgent::builder(FakeCli::Claude, Scenario::Hang)
        .install()
        .unwrap();
    let mut dirs = vec![fake.dir().to_path_buf()];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let child = fx
        .goal_command(&["run", "fix it", "--gate", GATE])
        .env("PATH", std::env::join_paths(dirs).unwrap())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while fake.invocations().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the probe never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let probe = fake.invocations()[0].pid;
    procs::signal("-INT", child.id());
    let out = finish(child);
    assert_eq!(out.code, 130, "{}", out.render());
    assert_eq!(
        out.stderr,
        "greenlight: interrupted by SIGINT while probing the claude agent's model `sonnet`; no goal was created\n",
        "{}",
        out.render()
    );
    procs::assert_all_dead(&[probe], "the probe outlived the interrupt");
    assert_eq!(
        fx.goal(&["status", "--json"]).code,
        2,
        "a goal row was left"
    );
}

/// An agent that was there when the goal started and is gone at its resume pauses the goal
/// before a turn, and the pause names the command that gives the goal another agent.
#[test]
fn an_agent_gone_at_resume_pauses_the_goal_and_names_resume_agent() {
    let fx = Fixture::new();
    let agent = fx.script("agent.sh", "echo 'looked'");
    let out = fx.run_goal("fix it", &agent, GATE, &["--retries", "1"]);
    assert_eq!(out.code, 75, "{}", out.render());
    std::fs::remove_file(&agent).unwrap();
    let out = fx.goal(&["resume"]);
    assert_eq!(out.code, 75, "{}", out.render());
    let status = fx.status();
    assert_eq!(
        status["goal"]["pause"]["reason"], "probe-failed",
        "{status}"
    );
    let detail = status["goal"]["pause"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("does not exist; install it, then `greenlight goal resume`, or give the goal another agent: `greenlight goal resume` with `--agent codex --model ID`"),
        "{detail}"
    );
    assert_eq!(fx.calls("agent.sh"), 1, "no turn was spent");
}

/// The probe-failed hint said to choose another agent and `goal resume`, which took no
/// `--agent`: now `resume --agent` checks the new agent, stores it, logs the change and runs it.
#[test]
fn resume_agent_gives_a_paused_goal_another_agent_and_logs_the_change() {
    let fx = Fixture::new();
    let first = fx.script("first.sh", "echo 'looked'");
    let out = fx.run_goal("fix it", &first, GATE, &["--retries", "1"]);
    assert_eq!(out.code, 75, "{}", out.render());

    // A new agent that cannot start is refused and the goal keeps the old one.
    let out = fx.goal(&["resume", "--agent", "command:./missing.sh {prompt_file}"]);
    assert_eq!(out.code, 1, "{}", out.render());
    assert!(
        out.stderr
            .contains("`./missing.sh` does not exist; goal 1 keeps its agent command"),
        "{}",
        out.render()
    );
    assert_eq!(of_kind(&fx.log(), "agent-changed").len(), 0);
    assert_eq!(fx.status()["goal"]["state"], "paused");

    // `--model` alone is a usage error naming the flag it goes with.
    let out = fx.goal(&["resume", "--model", "opus"]);
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(out.stderr.contains("pass --agent too"), "{}", out.render());

    let second = fx.script("second.sh", "echo good > value.txt; echo 'fixed it'");
    let spec = format!("command:{} {{prompt_file}}", second.display());
    let out = fx.goal(&["resume", "--agent", &spec]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(
        out.stdout
            .starts_with(&format!("greenlight: goal 1's agent is now command:{} {{prompt_file}} (was command:{} {{prompt_file}} {{model}})\n", second.display(), first.display())),
        "{}",
        out.render()
    );
    assert_eq!((fx.calls("first.sh"), fx.calls("second.sh")), (1, 1));
    let changed = of_kind(&fx.log(), "agent-changed");
    assert_eq!(changed.len(), 1, "{changed:?}");
    let payload = &changed[0]["payload"];
    assert_eq!(
        payload["to"]["argv_template"][0],
        second.display().to_string(),
        "{payload}"
    );
    assert_eq!(
        payload["from"]["argv_template"][0],
        first.display().to_string(),
        "{payload}"
    );
    assert_eq!(
        fx.status()["goal"]["agent"]["argv_template"][0],
        second.display().to_string()
    );
}

/// `resume --agent claude` probes the new agent's model before storing it, and the run that
/// follows does not probe it a second time.
#[test]
#[ignore = "needs python3: run scripts/test"]
fn resume_agent_probes_the_new_model_before_storing_it() {
    let fx = Fixture::new();
    let first = fx.script("first.sh", "echo 'looked'");
    let out = fx.run_goal("fix it", &first, GATE, &["--retries", "1"]);
    assert_eq!(out.code, 75, "{}", out.render());
    let path = std::env::var_os("PATH").unwrap_or_default();
    let fake = FakeAgent::builder(FakeCli::Claude, Scenario::Ok)
        .good_models(&["opus"])
        .install()
        .unwrap();
    let mut dirs = vec![fake.dir().to_path_buf()];
    dirs.extend(std::env::split_paths(&path));
    let with_fake = std::env::join_paths(dirs).unwrap();

    let out = fx.goal_env(
        &["resume", "--agent", "claude", "--model", "sonnet"],
        &[("PATH", &with_fake)],
    );
    assert_eq!(out.code, 1, "{}", out.render());
    assert!(
        out.stderr
            .contains("the claude agent's model `sonnet` does not answer"),
        "{}",
        out.render()
    );
    assert_eq!(fake.invocations().len(), 1, "the probe ran");
    assert_eq!(fx.status()["goal"]["agent"]["family"], "command");

    let out = fx.goal_env(
        &["resume", "--agent", "claude", "--model", "opus"],
        &[("PATH", &with_fake)],
    );
    assert!(
        out.stdout
            .contains("greenlight: goal 1's agent is now claude opus (was command:"),
        "{}",
        out.render()
    );
    let status = fx.status();
    assert_eq!(status["goal"]["agent"]["family"], "claude", "{status}");
    assert_eq!(status["goal"]["model_probed"], "opus", "{status}");
    assert_eq!(of_kind(&fx.log(), "agent-changed").len(), 1);
    // Two probes (the refused model, the accepted one), then the turns; no third probe: the
    // run that follows does not probe again.
    let turns = status["dispatches"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["family"] == "claude")
        .count();
    assert_eq!(fake.invocations().len(), 2 + turns, "{}", out.render());
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

/// A reply of several lines printed its second line at the left margin, outside its turn.
#[test]
fn a_multi_line_reply_is_indented_under_its_turn() {
    let fx = Fixture::new();
    let agent = fx.script(
        "agent.sh",
        "echo good > value.txt; printf 'Fixed the value.\\n\\n- value.txt now says good\\n- check.sh passes\\n'",
    );
    let out = fx.run_goal("fix it", &agent, GATE, &[]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(
        out.stdout.contains(
            "── turn 1: agent working\n   agent says: Fixed the value.\n\n               - value.txt now says good\n               - check.sh passes\n   agent finished in "
        ),
        "{}",
        out.render()
    );
}
