//! The judge (PASS, FAIL, an answer outside the grammar) and dispatch failures (timeout, dead,
//! refused) through the real binary, with scripted agents in real temp worktrees.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::time::Duration;

use crate::goal_support::{Fixture, GATE, of_kind};
use greenlight_testkit::procs;

/// An agent that fixes the value on its first turn, and a judge (the same script, called with
/// model `judge`) that answers with line `$J` of `answers` on its J-th call.
fn agent_and_judge(fx: &Fixture, answers: &[&str]) -> std::path::PathBuf {
    let mut cases = String::new();
    for (i, answer) in answers.iter().enumerate() {
        cases.push_str(&format!("  {}) printf '%b\\n' '{answer}' ;;\n", i + 1));
    }
    fx.script(
        "agent.sh",
        &format!(
            "if [ \"$2\" = judge ]; then\n J=$(( $(cat \"$S/judge.calls\" 2>/dev/null || echo 0) + 1 )); echo $J > \"$S/judge.calls\"\n cp \"$1\" \"$S/judge.prompt.$J\"\n case $J in\n{cases}  *) printf '%b\\n' '{}' ;;\n esac\n exit 0\nfi\necho good > value.txt\necho \"turn $N: value fixed\"",
            answers.last().unwrap()
        ),
    )
}

fn run_with_judge(
    fx: &Fixture,
    agent: &std::path::Path,
    extra: &[&str],
) -> greenlight_testkit::Run {
    let mut args = vec!["run", "fix the value", "--agent"];
    let agent = fx.agent(agent);
    args.push(&agent);
    args.extend(["--gate", GATE, "--judge", "judge"]);
    args.extend_from_slice(extra);
    fx.goal(&args)
}

#[test]
fn a_judge_answering_pass_finishes_the_goal() {
    let fx = Fixture::new();
    let agent = agent_and_judge(&fx, &["The value is fixed.\\nGATE: PASS"]);
    let out = run_with_judge(&fx, &agent, &[]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(out.stdout.contains("judge: PASS"), "{}", out.render());
    assert_eq!(fx.calls("judge"), 1);
    let question = std::fs::read_to_string(fx.scratch().join("judge.prompt.1")).unwrap();
    assert!(question.contains("Goal:\nfix the value\n"), "{question}");
    assert!(
        question.contains("turn 1: value fixed"),
        "the agent's reply is quoted: {question}"
    );
    assert!(question.contains("`GATE: PASS`"), "{question}");
    let events = fx.log();
    let verdicts = of_kind(&events, "judge-verdict");
    assert_eq!(verdicts.len(), 1);
    assert_eq!(verdicts[0]["payload"]["verdict"], "pass");
    let status = fx.status();
    assert_eq!(status["goal"]["state"], "done");
    // The judge is a dispatch like any other: it has its own ledger row.
    let ledger = status["dispatches"].as_array().unwrap();
    let steps: Vec<(&str, &str)> = ledger
        .iter()
        .map(|d| (d["step"].as_str().unwrap(), d["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(steps, [("agent", "ok"), ("judge", "ok")], "{ledger:?}");
}

#[test]
fn a_judge_answering_fail_sends_its_reply_back_and_the_next_pass_finishes() {
    let fx = Fixture::new();
    let agent = agent_and_judge(
        &fx,
        &[
            "The README was not updated.\\nGATE: FAIL",
            "Now it is.\\nGATE: PASS",
        ],
    );
    let out = run_with_judge(&fx, &agent, &[]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(out.stdout.contains("judge: FAIL"), "{}", out.render());
    assert_eq!(
        fx.calls("agent.sh"),
        4,
        "two agent turns and two judge calls"
    );
    // The agent's second prompt (call 3 of the script) carries the judge's reply.
    let prompt = fx.prompt("agent.sh", 3);
    assert!(
        prompt.contains("Every gate passed, but the judge did not accept the goal as met (it answered GATE: FAIL)"),
        "{prompt}"
    );
    assert!(prompt.contains("The README was not updated."), "{prompt}");
    assert!(
        !prompt.lines().any(|l| l.trim() == "GATE: FAIL"),
        "the quoted verdict line must be defanged: {prompt}"
    );
    let verdicts: Vec<_> = of_kind(&fx.log(), "judge-verdict")
        .iter()
        .map(|e| e["payload"]["verdict"].clone())
        .collect();
    assert_eq!(verdicts, ["fail", "pass"]);
}

#[test]
fn a_judge_answering_outside_the_grammar_counts_as_fail_and_pauses_after_three() {
    let fx = Fixture::new();
    let agent = agent_and_judge(&fx, &["I think it is probably fine"]);
    let out = run_with_judge(&fx, &agent, &["--max-turns", "10"]);
    assert_eq!(out.code, 75, "{}", out.render());
    assert!(
        out.stdout.contains("paused (judge-unparseable)"),
        "{}",
        out.render()
    );
    assert_eq!(fx.calls("judge"), 3);
    let prompt = fx.prompt("agent.sh", 3);
    assert!(
        prompt.contains("its answer did not end in a verdict line"),
        "{prompt}"
    );
    assert!(prompt.contains("I think it is probably fine"), "{prompt}");
    let status = fx.status();
    assert_eq!(status["goal"]["pause"]["reason"], "judge-unparseable");
    assert_eq!(status["goal"]["turns_used"], 3);
}

#[test]
fn a_dispatch_timeout_is_recorded_with_its_reason_the_agent_is_ended_and_the_turn_retried() {
    let fx = Fixture::new();
    let agent = fx.script(
        "agent.sh",
        "if [ $N -eq 1 ]; then echo $$ > \"$S/agent.pid\"; sleep 30; fi\necho good > value.txt\necho fixed",
    );
    let started = std::time::Instant::now();
    let out = fx.run_goal("fix the value", &agent, GATE, &["--agent-timeout", "1s"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert!(out.stdout.contains("agent failed in"), "{}", out.render());
    assert!(out.stdout.contains("dispatch-timeout"), "{}", out.render());
    assert!(
        !procs::alive(fx.pid_in("agent.pid")),
        "the timed-out agent outlived its turn"
    );

    let status = fx.status();
    let ledger = status["dispatches"].as_array().unwrap();
    assert_eq!(ledger.len(), 2, "{ledger:?}");
    assert_eq!(ledger[0]["turn"], 1);
    assert_eq!(ledger[0]["outcome"], "null");
    assert_eq!(ledger[0]["reason"], "dispatch-timeout");
    assert!(ledger[0]["wall_ms"].as_u64().unwrap() >= 1000);
    assert_eq!(ledger[1]["turn"], 2);
    assert_eq!(ledger[1]["outcome"], "ok");
    assert_eq!(ledger[1]["reason"], serde_json::Value::Null);
    assert_eq!(
        status["goal"]["turns_used"], 2,
        "a timed-out dispatch spends its turn"
    );
    let ended: Vec<_> = of_kind(&fx.log(), "turn-ended")
        .iter()
        .map(|e| e["payload"]["outcome"].clone())
        .collect();
    assert_eq!(ended, ["dispatch-timeout", "done"]);
}

#[test]
fn an_agent_that_always_times_out_spends_the_turn_budget_and_pauses() {
    let fx = Fixture::new();
    let agent = fx.script("agent.sh", "sleep 30");
    let out = fx.run_goal(
        "fix",
        &agent,
        GATE,
        &["--agent-timeout", "500ms", "--max-turns", "2"],
    );
    assert_eq!(out.code, 75, "{}", out.render());
    let status = fx.status();
    assert_eq!(status["goal"]["pause"]["reason"], "turn-budget-exhausted");
    let reasons: Vec<_> = status["dispatches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["reason"].clone())
        .collect();
    assert_eq!(reasons, ["dispatch-timeout", "dispatch-timeout"]);
    assert!(
        of_kind(&fx.log(), "gate-run").is_empty(),
        "no gate runs after a failed dispatch"
    );
}

#[test]
fn a_dead_agent_is_retried_within_the_turn_budget() {
    let fx = Fixture::new();
    let agent = fx.script(
        "agent.sh",
        "if [ $N -eq 1 ]; then echo 'crashed' >&2; exit 3; fi\necho good > value.txt\necho fixed",
    );
    let out = fx.run_goal("fix", &agent, GATE, &[]);
    assert_eq!(out.code, 0, "{}", out.render());
    let status = fx.status();
    let ledger = status["dispatches"].as_array().unwrap();
    assert_eq!(ledger.len(), 2);
    assert_eq!(ledger[0]["reason"], "dispatch-dead");
    assert_eq!(ledger[1]["outcome"], "ok");
}

#[test]
fn a_refused_dispatch_pauses_the_goal_with_its_reason() {
    let fx = Fixture::new();
    let agent = fx.script("agent.sh", "echo good > value.txt; echo fixed");
    let out = fx.run_goal("fix", &agent, GATE, &["--model=-rf"]);
    assert_eq!(out.code, 75, "{}", out.render());
    assert_eq!(fx.calls("agent.sh"), 0, "a refused dispatch starts nothing");
    let status = fx.status();
    assert_eq!(status["goal"]["pause"]["reason"], "model-id-invalid");
    assert!(
        status["goal"]["pause"]["detail"]
            .as_str()
            .unwrap()
            .contains("greenlight goal resume"),
        "{status}"
    );
    assert_eq!(status["dispatches"][0]["outcome"], "error");
    assert_eq!(status["dispatches"][0]["reason"], "model-id-invalid");
}
