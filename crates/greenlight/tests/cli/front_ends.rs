//! The front ends held to the one use-case layer: the same verify of a real temp repository
//! (one passing gate, one failing) through `greenlight verify --format json`, the MCP `verify`
//! tool and the Stop hook gives the same gates, the same verdicts and the same evidence text;
//! the same goal through `greenlight goal` and the MCP goal tools gives the same status
//! document and the same refusals.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use greenlight_testkit::TempRepo;
use serde_json::{Value, json};

use crate::mcp_stdio::{Server, call};

/// A failing gate whose output no digest recognises, so every front end shows its tail; the
/// lines before the last make the tail long enough to be worth cutting the same way.
const GATES: &str = "version: 1\ngates:\n  - id: lint\n    command: echo linted\n  - id: unit\n    command: printf 'ran 3 checks\\nassertion failed: 2 + 2 == 5\\n' >&2; exit 3\n";

/// `(id, verdict)` of every gate, in the order given.
fn verdicts(gates: &[Value]) -> Vec<(String, String)> {
    gates
        .iter()
        .map(|g| {
            (
                g["id"].as_str().unwrap().to_owned(),
                g["verdict"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn one_verify_gives_the_same_gates_verdicts_and_evidence_through_cli_mcp_and_the_stop_hook() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(GATES);
    let state = repo.home().join("state.db");
    let state = state.to_str().unwrap();

    // The command line, as JSON.
    let cli = repo
        .cli([
            "verify",
            "--skip-work-evidence",
            "--format",
            "json",
            "--state",
            state,
        ])
        .run();
    assert_eq!(cli.code, 20, "stderr: {}", cli.stderr);
    let doc: Value = serde_json::from_str(&cli.stdout).unwrap();
    assert_eq!(doc["result"], "failed", "{doc}");
    let cli_gates = doc["gates"].as_array().unwrap();
    let expected = vec![
        ("lint".to_owned(), "PASS".to_owned()),
        ("unit".to_owned(), "FAIL".to_owned()),
    ];
    assert_eq!(verdicts(cli_gates), expected);
    let cli_tail = cli_gates[1]["attempts"][0]["tail"].as_str().unwrap();
    assert!(
        cli_tail.contains("assertion failed: 2 + 2 == 5"),
        "{cli_tail:?}"
    );

    // The MCP tool, over stdio.
    let mut server = Server::start(&repo);
    server.initialize();
    server.send(&call(1, "verify", &json!({"skip_work_evidence": true})));
    let answer = server.answer();
    let mcp = &answer["result"]["structuredContent"];
    assert_eq!(mcp["result"], "failed", "{answer}");
    assert_eq!(mcp["exit_code"], 20, "{answer}");
    let mcp_gates = mcp["gates"].as_array().unwrap();
    assert_eq!(verdicts(mcp_gates), expected);
    assert_eq!(
        mcp_gates[0]["tail"],
        Value::Null,
        "a passing gate has no evidence"
    );
    assert_eq!(mcp_gates[1]["digest_compact"], Value::Null, "{answer}");
    assert_eq!(mcp_gates[1]["tail"].as_str(), Some(cli_tail), "{answer}");
    drop(server);

    // The Stop hook: its notes on stderr carry the gate lines, its block reason the evidence.
    let payload = json!({
        "session_id": "front-ends",
        "cwd": repo.path().display().to_string(),
        "hook_event_name": "Stop",
        "stop_hook_active": false,
    });
    let hook = repo
        .cli(["hook", "stop", "--state", state])
        .stdin(payload.to_string().as_bytes())
        .run();
    assert_eq!(hook.code, 0, "stderr: {}", hook.stderr);
    let gate_lines: Vec<(String, String)> = hook
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("GATE "))
        .filter(|l| !l.starts_with("work-evidence"))
        .map(|l| {
            let mut words = l.split(' ');
            (
                words.next().unwrap().to_owned(),
                words.next().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(gate_lines, expected, "stderr: {}", hook.stderr);
    let answer: Value = serde_json::from_str(hook.stdout.trim_end()).unwrap();
    assert_eq!(answer["decision"], "block", "{answer}");
    let reason = answer["reason"].as_str().unwrap();
    let evidence = format!(
        "gate unit: FAIL exit=3\ncommand: {}\nlast {} of {} bytes of output:\n{cli_tail}",
        cli_gates[1]["command"].as_str().unwrap(),
        cli_tail.len(),
        cli_gates[1]["attempts"][0]["output_bytes"],
    );
    assert!(reason.contains(&evidence), "{reason}\nwanted:\n{evidence}");
    assert!(!reason.contains("gate lint"), "{reason}");
}

/// A gate whose output no digest recognises and is longer than verify's tail, so the agent's
/// evidence is a tail cut to its budget: the part of the rule that can drift.
const NOISY: &str = "v=$(cat value.txt)\n[ \"$v\" = good ] && exit 0\ni=0\nwhile [ $i -lt 300 ]; do echo \"step $i of the check wrote this line to the log\"; i=$((i+1)); done\necho \"expected value good, got $v\"\nexit 1\n";

/// The goal loop shows a failed gate to its agent by the rule the Stop hook and the MCP answer
/// use: the prompt's evidence is `greenlight_run::evidence` applied, within the goal's budget,
/// to the attempt `greenlight verify` reports for the same gate on the same worktree.
#[test]
fn the_goal_prompt_shows_a_failed_gate_as_greenlight_run_evidence_of_verifys_report() {
    use greenlight_gate::{Attempt, AttemptStatus};
    use greenlight_run::evidence::{self, Output};

    let fx = crate::goal_support::Fixture::new();
    fx.repo.write("noisy.sh", NOISY);
    fx.repo
        .verify_yaml("version: 1\ngates:\n  - id: noisy\n    command: sh noisy.sh\n");
    fx.repo.commit_all("a check whose log no digest reads");
    let state = fx.state();

    let cli = fx
        .repo
        .cli([
            "verify",
            "--skip-work-evidence",
            "--format",
            "json",
            "--state",
            state.to_str().unwrap(),
        ])
        .run();
    assert_eq!(cli.code, 20, "stderr: {}", cli.stderr);
    let doc: Value = serde_json::from_str(&cli.stdout).unwrap();
    let reported = &doc["gates"][0]["attempts"][0];
    let attempt = Attempt {
        exit_code: reported["exit_code"]
            .as_i64()
            .and_then(|c| i32::try_from(c).ok()),
        tail: reported["tail"].as_str().unwrap().to_owned(),
        output_bytes: reported["output_bytes"].as_u64().unwrap(),
        digest: serde_json::from_value(reported["digest"].clone()).ok(),
        ..Attempt::blank(AttemptStatus::Fail)
    };
    let shown = evidence::attempt_output(&attempt, greenlight_goal::prompt::EVIDENCE_BUDGET);
    let Output::Tail { text: tail, .. } = shown else {
        panic!("the fixture's output must be shown as a tail: {shown:?}\n{doc}")
    };
    assert!(
        (tail.len() as u64) < attempt.output_bytes,
        "the fixture must be longer than the budget"
    );

    // The agent changes nothing on its first turn and fixes the value on its second.
    let agent = fx.script(
        "agent.sh",
        "if [ $N -ge 2 ]; then echo good > value.txt; fi; echo done",
    );
    let agent = fx.agent(&agent);
    let run = fx.goal(&["run", "fix the value", "--agent", &agent]);
    assert_eq!(run.code, 0, "{}", run.render());
    let second = fx.prompt("agent.sh", 2);
    let expected = format!(
        "Gate 1 of 1 failed (attempt 1/3).\n$ sh noisy.sh\nexit code: 1\nOutput (the last {} of {} bytes; the start was cut):\n```\n{}\n```\n",
        tail.len(),
        attempt.output_bytes,
        tail.strip_suffix('\n').unwrap_or(&tail),
    );
    assert!(
        second.contains(&expected),
        "{second}\nwanted the evidence:\n{expected}"
    );
}

/// The goal of a worktree read and steered through the command line and the MCP tools: one
/// status document, and one rule in the same words for a goal that is done (it can be neither
/// paused nor resumed, and the command line used to call it "no active or paused goal").
#[test]
fn goal_status_and_a_refused_pause_or_resume_read_the_same_through_cli_and_mcp() {
    let repo = TempRepo::worktree_with_commit();
    let state = repo.home().join("state.db");
    let worktree = repo.path().canonicalize().unwrap();
    let goal = greenlight_testkit::load::create_goal(&state, &worktree);
    let state_arg = state.to_str().unwrap();
    let mut server = Server::start(&repo);
    server.initialize();

    let cli = repo
        .cli(["goal", "status", "--json", "--state", state_arg])
        .run();
    assert_eq!(cli.code, 0, "stderr: {}", cli.stderr);
    let cli_doc: Value = serde_json::from_str(&cli.stdout).unwrap();
    server.send(&call(1, "goal_status", &json!({})));
    let answer = server.answer();
    assert_eq!(
        cli_doc, answer["result"]["structuredContent"],
        "one document: {answer}"
    );
    assert_eq!(cli_doc["goal"]["id"], goal.0);

    let mut store = greenlight_store::Store::open(&state).unwrap();
    store.write(|tx| tx.complete_goal(goal)).unwrap();
    drop(store);
    for (id, (action, tool)) in [("pause", "goal_pause"), ("resume", "goal_resume")]
        .into_iter()
        .enumerate()
    {
        let rule = if action == "pause" {
            "only an active goal can be paused"
        } else {
            "only a paused goal can be resumed"
        };
        let refusal = format!("goal {} is done; {rule}", goal.0);
        let cli = repo.cli(["goal", action, "--state", state_arg]).run();
        assert_eq!(
            (cli.code, cli.stdout.as_str(), cli.stderr.as_str()),
            (2, "", &*format!("greenlight: {refusal}\n")),
            "goal {action}"
        );
        server.send(&call(2 + id as u64, tool, &json!({})));
        let answer = server.answer();
        assert_eq!(answer["error"]["message"], refusal.as_str(), "{answer}");
    }
    server.send(&call(9, "goal_status", &json!({})));
    let answer = server.answer();
    assert_eq!(
        answer["result"]["structuredContent"]["goal"]["state"], "done",
        "refused, so unchanged: {answer}"
    );
}
