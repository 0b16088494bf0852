//! `goal run --agent openai` end to end: the real binary drives a scripted OpenAI-compatible
//! server on loopback through the demo project (read the failing test, patch the bug, gates
//! green), refuses writes outside the worktree while the goal goes on to green, and resumes a
//! paused goal against the server it stored.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use greenlight_testkit::openai_server::{Reply, Request, ScriptedServer, answer, call};
use serde_json::{Value, json};

use greenlight_store::Reads;
use greenlight_store::greenlight_stream::{FrameBody, ToolStatus};

use crate::goal_support::{Fixture, of_kind};

const CALC: &str = include_str!("../../demo/calc.sh");
const TEST: &str = include_str!("../../demo/test.sh");

/// The fix the scripted model sends: the demo's add() subtracts.
const FIX: &str = "--- a/calc.sh\n+++ b/calc.sh\n@@ -4,3 +4,3 @@\n add() {\n-    echo $(( $1 - $2 ))\n+    echo $(( $1 + $2 ))\n }\n";

/// The fixture's worktree with the demo project committed in it.
fn demo() -> Fixture {
    let fx = Fixture::new();
    fx.repo.write("calc.sh", CALC);
    fx.repo.write("test.sh", TEST);
    fx.repo
        .commit_all("the demo calculator and its failing test");
    fx
}

fn is_probe(req: &Request) -> bool {
    req.last_user_text() == "Reply with exactly: OK"
}

/// How many tool results the conversation already holds: where the scripted model is.
fn results_so_far(req: &Request) -> usize {
    req.messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .count()
}

fn run_openai(fx: &Fixture, server: &ScriptedServer, extra: &[&str]) -> greenlight_testkit::Run {
    let url = server.base_url();
    let mut args = vec![
        "run",
        "Make `sh test.sh` pass",
        "--agent",
        "openai",
        "--base-url",
        &url,
        "--model",
        "scripted-coder",
        "--gate",
        "sh test.sh",
        "--api-key-env",
        "GL_E2E_KEY",
    ];
    args.extend_from_slice(extra);
    fx.goal_env(
        &args,
        &[("GL_E2E_KEY", std::ffi::OsStr::new("sk-e2e-secret"))],
    )
}

fn tool_results(fx: &Fixture) -> Vec<Value> {
    of_kind(&fx.log(), "tool-call-ended")
        .iter()
        .map(|e| e["payload"].clone())
        .collect()
}

#[test]
fn the_model_reads_the_failing_test_patches_the_bug_and_the_gates_go_green() {
    let fx = demo();
    let server = ScriptedServer::with(|req| {
        if is_probe(req) {
            return Reply::stream(answer("OK", (5, 1)));
        }
        match results_so_far(req) {
            0 => Reply::stream(call(
                "call_read",
                "read_file",
                json!({"path": "test.sh"}),
                (900, 20),
            )),
            1 => Reply::byte_by_byte(call(
                "call_fix",
                "apply_patch",
                json!({"patch": FIX}),
                (1400, 90),
            )),
            _ => Reply::stream(answer("add() subtracted; it adds now.", (1500, 12))),
        }
    });
    let out = run_openai(&fx, &server, &[]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(
        fx.repo.read("calc.sh").unwrap(),
        CALC.replace("$(( $1 - $2 ))", "$(( $1 + $2 ))")
    );
    let status = fx.status();
    assert_eq!(status["goal"]["state"], "done");
    assert_eq!(status["goal"]["agent"]["family"], "openai");
    assert_eq!(status["goal"]["model_probed"], "scripted-coder");
    let ledger = status["dispatches"].as_array().unwrap();
    assert_eq!(ledger.len(), 1, "{ledger:?}");
    assert_eq!(ledger[0]["outcome"], "ok");
    assert_eq!(ledger[0]["reply"], "add() subtracted; it adds now.");
    assert_eq!(ledger[0]["tokens"]["input"], 3800);
    assert_eq!(ledger[0]["tokens"]["output"], 122);
    assert_eq!(ledger[0]["tokens"]["source"], "openai-usage");
    // Both calls recorded write-ahead, in order, and both ran.
    let started = of_kind(&fx.log(), "tool-call-started");
    let tools: Vec<&str> = started
        .iter()
        .map(|e| e["payload"]["tool"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["read_file", "apply_patch"]);
    let statuses: Vec<Value> = tool_results(&fx)
        .iter()
        .map(|p| p["status"].clone())
        .collect();
    assert_eq!(statuses, [json!("ok"), json!("ok")]);
    // The model saw the failing test's text, and the key went to the server as a bearer token.
    let requests = server.requests();
    let turn: Vec<&Request> = requests.iter().filter(|r| !is_probe(r)).collect();
    assert_eq!(turn.len(), 3);
    let read = turn[1].messages()[3]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(read.contains("check add 2 2 4"), "{read}");
    assert!(
        turn[0].messages()[1]["content"]
            .as_str()
            .unwrap()
            .contains("Make `sh test.sh` pass")
    );
    assert!(
        requests
            .iter()
            .all(|r| r.header("authorization") == Some("Bearer sk-e2e-secret"))
    );
    // The state file names the key's variable, never the key.
    let db = std::fs::read(fx.state()).unwrap();
    let wal = std::fs::read(fx.state().with_extension("db-wal")).unwrap_or_default();
    let text = String::from_utf8_lossy(&db) + String::from_utf8_lossy(&wal);
    assert!(text.contains("GL_E2E_KEY"));
    assert!(!text.contains("sk-e2e-secret"));
}

#[test]
fn writes_outside_the_worktree_are_refused_and_the_goal_still_goes_green() {
    let fx = demo();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), fx.repo.path().join("out")).unwrap();
    let absolute = outside.path().join("abs.txt");
    let absolute = absolute.to_str().unwrap().to_owned();
    let server = ScriptedServer::with(move |req| {
        if is_probe(req) {
            return Reply::stream(answer("OK", (1, 1)));
        }
        let step = |id: &str, name: &str, args: Value| Reply::stream(call(id, name, args, (10, 5)));
        match results_so_far(req) {
            0 => step(
                "c1",
                "write_file",
                json!({"path": "../escape.txt", "content": "escaped\n"}),
            ),
            1 => step(
                "c2",
                "write_file",
                json!({"path": absolute, "content": "escaped\n"}),
            ),
            2 => step(
                "c3",
                "apply_patch",
                json!({"patch": "--- /dev/null\n+++ b/out/linked.txt\n@@ -0,0 +1 @@\n+escaped\n"}),
            ),
            3 => step(
                "c4",
                "write_file",
                json!({"path": "out/direct.txt", "content": "escaped\n"}),
            ),
            4 => step("c5", "apply_patch", json!({"patch": FIX})),
            _ => Reply::stream(answer("Fixed, from inside the worktree.", (10, 5))),
        }
    });
    let out = run_openai(&fx, &server, &[]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(fx.status()["goal"]["state"], "done");
    let statuses: Vec<String> = tool_results(&fx)
        .iter()
        .map(|p| p["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(statuses, ["refused", "refused", "refused", "refused", "ok"]);
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        0,
        "nothing outside"
    );
    assert!(!fx.repo.path().parent().unwrap().join("escape.txt").exists());
    // Each refusal went back to the model as the call's result, saying why.
    let last = server.requests().into_iter().last().unwrap();
    let results: Vec<String> = last
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert!(results[0].contains("contains `..`"), "{}", results[0]);
    assert!(results[1].contains("is absolute"), "{}", results[1]);
    assert!(results[2].contains("outside the root"), "{}", results[2]);
    assert!(results[3].contains("outside the root"), "{}", results[3]);
    // The live stream carried each call as a tool-call frame: started, then its result, the
    // refused ones as errors.
    let store = greenlight_store::Store::open(&fx.state()).unwrap();
    let goal = fx.status()["goal"]["id"].as_i64().unwrap();
    let frames = store
        .frames_after(
            greenlight_store::greenlight_stream::StreamId::Goal(goal),
            0,
            10_000,
        )
        .unwrap();
    let calls: Vec<(String, ToolStatus)> = frames
        .into_iter()
        .filter_map(|f| match f.body {
            FrameBody::ToolCall { name, status, .. } => Some((name, status)),
            _ => None,
        })
        .collect();
    let ended: Vec<&(String, ToolStatus)> = calls
        .iter()
        .filter(|(_, s)| *s != ToolStatus::Started)
        .collect();
    assert_eq!(calls.len(), 10, "{calls:?}");
    assert_eq!(
        ended.iter().map(|(_, s)| *s).collect::<Vec<_>>(),
        [
            ToolStatus::Error,
            ToolStatus::Error,
            ToolStatus::Error,
            ToolStatus::Error,
            ToolStatus::Ok
        ]
    );
    assert_eq!(ended[4].0, "apply_patch");
}

#[test]
fn a_paused_openai_goal_resumes_against_the_server_it_stored() {
    let fx = demo();
    let server = ScriptedServer::with(|req| {
        if is_probe(req) {
            return Reply::stream(answer("OK", (1, 1)));
        }
        // First turn: claims success without a change. With evidence: the fix.
        if !req.messages()[1]["content"]
            .as_str()
            .unwrap_or("")
            .contains("The last check failed")
        {
            return Reply::stream(answer("Looks fine to me.", (1, 1)));
        }
        match results_so_far(req) {
            0 => Reply::stream(call("c", "apply_patch", json!({"patch": FIX}), (1, 1))),
            _ => Reply::stream(answer("Fixed for real.", (1, 1))),
        }
    });
    let out = run_openai(&fx, &server, &["--max-turns", "1"]);
    assert_eq!(out.code, 75, "{}", out.render());
    assert_eq!(
        fx.status()["goal"]["pause"]["reason"],
        "turn-budget-exhausted"
    );
    // No server settings on the command line: the stored ones are used.
    let out = fx.goal_env(
        &["resume"],
        &[("GL_E2E_KEY", std::ffi::OsStr::new("sk-e2e-secret"))],
    );
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(fx.status()["goal"]["state"], "done");
    let turn_requests: Vec<Request> = server
        .requests()
        .into_iter()
        .filter(|r| !is_probe(r))
        .collect();
    assert_eq!(turn_requests.len(), 3);
    assert!(
        turn_requests
            .iter()
            .all(|r| r.body["model"] == "scripted-coder")
    );
}

/// The model is probed before the goal exists: a server that does not serve it leaves no goal.
#[test]
fn a_server_that_never_answers_is_refused_at_its_probe_before_a_goal_exists() {
    let fx = demo();
    let server = ScriptedServer::with(|_| Reply::status(404, "model `scripted-coder` not found"));
    let out = run_openai(&fx, &server, &[]);
    assert_eq!(out.code, 1, "{}", out.render());
    assert!(
        out.stderr
            .contains("the openai agent's model `scripted-coder` does not answer")
            && out.stderr.contains("not found")
            && out.stderr.contains("no goal was created"),
        "{}",
        out.render()
    );
    assert_eq!(
        fx.goal(&["status", "--json"]).code,
        2,
        "a goal row was left"
    );
}

#[test]
fn openai_settings_are_checked_before_a_goal_is_created() {
    let fx = demo();
    let out = fx.goal(&[
        "run", "g", "--agent", "openai", "--model", "m", "--gate", "true",
    ]);
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(out.stderr.contains("--base-url"), "{}", out.render());
    let out = fx.goal(&[
        "run",
        "g",
        "--agent",
        "openai",
        "--model",
        "m",
        "--gate",
        "true",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--api-key-env",
        "sk-live-123",
    ]);
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(out.stderr.contains("never the key"), "{}", out.render());
    let out = fx.goal(&[
        "run",
        "g",
        "--agent",
        "claude",
        "--gate",
        "true",
        "--base-url",
        "http://h/v1",
    ]);
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(
        out.stderr.contains("for --agent openai"),
        "{}",
        out.render()
    );
    let out = fx.goal(&["status"]);
    assert_ne!(out.code, 0, "no goal was created: {}", out.render());
}
