//! `greenlight mcp` driven by the official Rust SDK's own client (rmcp) over a child process:
//! the tool list, every structured answer checked against its advertised output schema, a
//! green and a red repository, ordered progress, a cancelled 60 s gate leaving no process, and
//! a 50 MB gate output paged through `evidence`.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use greenlight_testkit::TempRepo;
use greenlight_testkit::procs::{alive, wait_until};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientRequest, ProgressNotificationParam, Request,
    ServerResult, Tool,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Value, json};

/// Records every progress notification in arrival order.
#[derive(Clone, Default)]
struct Recorder {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

type Client = RunningService<RoleClient, Recorder>;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn connect(repo: &TempRepo, recorder: Recorder) -> Client {
    let mut command = tokio::process::Command::from(repo.command(["mcp"]));
    command.stderr(std::process::Stdio::inherit());
    let transport = TokioChildProcess::new(command).unwrap();
    recorder.serve(transport).await.unwrap()
}

fn call(name: &'static str, arguments: Value) -> ClientRequest {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object");
    };
    ClientRequest::CallToolRequest(Request::new(
        CallToolRequestParams::new(name).with_arguments(arguments),
    ))
}

async fn call_tool(client: &Client, name: &'static str, arguments: Value) -> CallToolResult {
    let handle = client
        .send_cancellable_request(call(name, arguments), PeerRequestOptions::no_options())
        .await
        .unwrap();
    match handle.await_response().await.unwrap() {
        ServerResult::CallToolResult(result) => result,
        other => panic!("{name}: not a tool result: {other:?}"),
    }
}

/// Checks a structured answer against the output schema `tools/list` advertised for the tool.
fn assert_matches_schema(tools: &[Tool], name: &str, result: &CallToolResult) -> Value {
    let tool = tools.iter().find(|t| t.name == name).unwrap();
    let schema = Value::Object(tool.output_schema.as_deref().unwrap().clone());
    let structured = result
        .structured_content
        .clone()
        .unwrap_or_else(|| panic!("{name}: no structured content: {result:?}"));
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&structured)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "{name}: the answer does not match its output schema: {errors:?}\n{structured:#}"
    );
    structured
}

fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

/// A real `cargo test` failure, captured from cargo by scripts/capture-fixtures.sh.
const CARGO_TEST_FAIL: &str =
    include_str!("../../../greenlight-digest/tests/fixtures/cargo-test/fail/output.txt");

const RED_AND_GREEN: &str = "version: 1\ngates:\n  - id: lint\n    command: echo linted\n  - id: unit\n    command: cat cargo-test.txt; exit 101\n";

#[test]
fn lists_nine_tools_and_verifies_a_green_and_a_red_repository() {
    let green = TempRepo::worktree_with_commit();
    green.verify_yaml("version: 1\ngates:\n  - id: lint\n    command: echo linted\n");
    let red = TempRepo::worktree_with_commit();
    red.verify_yaml(RED_AND_GREEN);
    red.write("cargo-test.txt", CARGO_TEST_FAIL);
    runtime().block_on(async {
        let client = connect(&green, Recorder::default()).await;
        let tools = client.list_all_tools().await.unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(
            names,
            [
                "verify",
                "digest",
                "evidence",
                "goal_status",
                "goal_log",
                "goal_pause",
                "goal_resume",
                "workflow_status",
                "workflow_list"
            ]
        );
        for tool in &tools {
            assert!(
                tool.output_schema.is_some(),
                "{} has no output schema",
                tool.name
            );
            let read_only = tool.annotations.as_ref().and_then(|a| a.read_only_hint);
            let expected = matches!(
                tool.name.as_ref(),
                "digest"
                    | "goal_status"
                    | "goal_log"
                    | "evidence"
                    | "workflow_status"
                    | "workflow_list"
            );
            assert_eq!(read_only, Some(expected), "{}", tool.name);
            // Optional arguments carry their own type: a `null` union is what some clients
            // (Codex) cannot read.
            let input = serde_json::to_string(&tool.input_schema).unwrap();
            assert!(!input.contains("\"null\""), "{}: {input}", tool.name);
        }

        let result = call_tool(&client, "verify", json!({})).await;
        assert_eq!(result.is_error, Some(false), "{result:?}");
        let answer = assert_matches_schema(&tools, "verify", &result);
        assert_eq!(answer["result"], "passed");
        assert_eq!(answer["exit_code"], 0);
        assert_eq!(answer["gates"][0]["verdict"], "PASS");
        assert!(
            text_of(&result).contains("RESULT passed"),
            "{}",
            text_of(&result)
        );

        let red_dir = red.path().to_str().unwrap();
        let result = call_tool(&client, "verify", json!({"cwd": red_dir})).await;
        assert_eq!(
            result.is_error,
            Some(false),
            "a red gate is an answer, not an error"
        );
        let answer = assert_matches_schema(&tools, "verify", &result);
        assert_eq!(answer["result"], "failed");
        assert_eq!(answer["exit_code"], 20);
        let unit = &answer["gates"][1];
        assert_eq!(unit["verdict"], "FAIL");
        assert_eq!(unit["exit_code"], 101);
        let digest = unit["digest_compact"]
            .as_str()
            .unwrap_or_else(|| panic!("no compact digest: {unit:#}"));
        assert!(digest.contains("tests::adds"), "{digest}");
        assert!(digest.contains("src/lib.rs:17"), "{digest}");

        // The same failure through `digest`, and the whole output through `evidence`.
        let run_id = answer["run_id"].as_str().unwrap().to_owned();
        assert!(run_id.starts_with("run-"), "{run_id}");
        let page = call_tool(
            &client,
            "evidence",
            json!({"run_id": run_id, "gate": "unit"}),
        )
        .await;
        let page = assert_matches_schema(&tools, "evidence", &page);
        let output = page["text"].as_str().unwrap().to_owned();
        assert_eq!(
            output, CARGO_TEST_FAIL,
            "evidence is the gate's whole output"
        );
        assert_eq!(page["next_offset"], Value::Null);
        let digested =
            call_tool(&client, "digest", json!({"text": output, "exit_code": 101})).await;
        let digested = assert_matches_schema(&tools, "digest", &digested);
        assert_eq!(digested["classification"], "recognised");
        assert_eq!(digested["failures"][0]["name"], "tests::adds");

        // A worktree without a config: verify could not run, and says why.
        let bare = tempfile::tempdir().unwrap();
        let result = call_tool(
            &client,
            "verify",
            json!({"cwd": bare.path().to_str().unwrap()}),
        )
        .await;
        assert_eq!(result.is_error, Some(true));
        assert!(
            text_of(&result).contains("no .greenlight/verify.yaml or .commandmate/verify.yaml in"),
            "{}",
            text_of(&result)
        );
        client.cancel().await.unwrap();
    });
}

#[test]
fn progress_arrives_in_order_before_the_answer() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: first\n    command: \"true\"\n  - id: second\n    command: sleep 0.3\n",
    );
    // rmcp's client hands each notification to the handler in a task of its own; on a
    // multi-thread runtime two of them can run out of order. One thread runs them as received.
    let one_thread = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    one_thread.block_on(async {
        let recorder = Recorder::default();
        let client = connect(&repo, recorder.clone()).await;
        let result = call_tool(&client, "verify", json!({})).await;
        assert_eq!(result.is_error, Some(false));
        let progress = recorder.progress.lock().unwrap().clone();
        let values: Vec<f64> = progress.iter().map(|p| p.progress).collect();
        assert!(
            values.windows(2).all(|w| w[1] > w[0]),
            "progress must strictly increase: {values:?}"
        );
        let messages: Vec<String> = progress
            .iter()
            .map(|p| p.message.clone().unwrap_or_default())
            .collect();
        let position = |needle: &str| {
            messages
                .iter()
                .position(|m| m.contains(needle))
                .unwrap_or_else(|| panic!("no progress `{needle}` in {messages:?}"))
        };
        let order = [
            position("gate 1/2 first: started"),
            position("gate 1/2 first: PASS"),
            position("gate 2/2 second: started"),
            position("gate 2/2 second: PASS"),
        ];
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{messages:?}");
        client.cancel().await.unwrap();
    });
}

#[test]
fn cancelling_verify_ends_a_sleeping_gate_and_its_children_and_the_server_goes_on() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: slow\n    command: \"sleep 60 & echo $! > pids; echo $$ >> pids; wait\"\n    timeoutSec: 120\n",
    );
    runtime().block_on(async {
        let client = connect(&repo, Recorder::default()).await;
        let handle = client
            .send_cancellable_request(call("verify", json!({})), PeerRequestOptions::no_options())
            .await
            .unwrap();
        let pids = tokio::task::spawn_blocking({
            let path = repo.path().join("pids");
            move || {
                wait_until(Duration::from_secs(20), "the gate wrote its pids", || {
                    let pids = greenlight_testkit::procs::pids_in(
                        &std::fs::read_to_string(&path).unwrap_or_default(),
                    );
                    (pids.len() == 2).then_some(pids)
                })
            }
        })
        .await
        .unwrap();
        assert!(pids.iter().all(|&p| alive(p)), "{pids:?}");
        let cancelled = Instant::now();
        handle.cancel(Some("test".into())).await.unwrap();
        let gone = tokio::task::spawn_blocking(move || {
            wait_until(
                Duration::from_secs(10),
                "the gate's processes ended",
                || pids.iter().all(|&p| !alive(p)).then_some(()),
            )
        })
        .await;
        assert!(
            gone.is_ok(),
            "a process of the cancelled gate is still running"
        );
        let took = cancelled.elapsed();
        assert!(took < Duration::from_secs(10), "took {took:?}");

        // The server still answers, and the next verify runs (the lock is free).
        repo.verify_yaml("version: 1\ngates:\n  - id: quick\n    command: \"true\"\n");
        let result = call_tool(&client, "verify", json!({})).await;
        assert_eq!(
            result.structured_content.as_ref().unwrap()["result"],
            "passed"
        );
        client.cancel().await.unwrap();
    });
}

#[test]
fn a_fifty_megabyte_gate_output_pages_through_evidence_exactly() {
    let repo = TempRepo::worktree_with_commit();
    // 50 MB of numbered lines, also written to a file the test compares with.
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: big\n    command: \"seq 1 6700000 | tee big.txt; exit 1\"\n    timeoutSec: 300\n",
    );
    runtime().block_on(async {
        let client = connect(&repo, Recorder::default()).await;
        let tools = client.list_all_tools().await.unwrap();
        let result = call_tool(&client, "verify", json!({})).await;
        let answer = assert_matches_schema(&tools, "verify", &result);
        assert_eq!(answer["result"], "failed");
        let run_id = answer["run_id"].as_str().unwrap().to_owned();
        let expected = std::fs::read(repo.path().join("big.txt")).unwrap();
        assert!(expected.len() > 50_000_000, "{}", expected.len());

        let started = Instant::now();
        let mut got = Vec::with_capacity(expected.len());
        let mut offset = 0u64;
        let mut pages = 0;
        loop {
            let page = call_tool(
                &client,
                "evidence",
                json!({"run_id": run_id, "gate": "big", "offset": offset, "limit": 1_048_576}),
            )
            .await;
            let page = assert_matches_schema(&tools, "evidence", &page);
            assert_eq!(page["offset"], offset);
            got.extend_from_slice(page["text"].as_str().unwrap().as_bytes());
            pages += 1;
            match page["next_offset"].as_u64() {
                Some(next) => offset = next,
                None => break,
            }
        }
        assert_eq!(got.len(), expected.len());
        assert!(
            got == expected,
            "the pages joined differ from the gate's output"
        );
        eprintln!(
            "evidence: {} bytes in {pages} pages in {:?}",
            got.len(),
            started.elapsed()
        );
        client.cancel().await.unwrap();
    });
}

#[test]
fn every_handshake_version_clients_send_is_answered_in_kind() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml("version: 1\ngates:\n  - id: lint\n    command: echo linted\n");
    // The classic handshake, at each revision current clients send.
    for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let input = format!(
            "{}\n{}\n{}\n",
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": version, "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        );
        let out = repo
            .cli(["mcp"])
            .stdin(input)
            .within(Duration::from_secs(30))
            .run();
        let answers: Vec<Value> = out
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let init = answers.iter().find(|a| a["id"] == 1).unwrap();
        assert_eq!(init["result"]["protocolVersion"], version, "{}", out.stdout);
        let list = answers.iter().find(|a| a["id"] == 2).unwrap();
        assert_eq!(list["result"]["tools"].as_array().unwrap().len(), 9);
    }
    // The newest revision the SDK knows: no handshake, each request carries its own version.
    runtime().block_on(async {
        let mut command = tokio::process::Command::from(repo.command(["mcp"]));
        command.stderr(std::process::Stdio::inherit());
        let transport = TokioChildProcess::new(command).unwrap();
        let newest = rmcp::model::ProtocolVersion::LATEST;
        let client = rmcp::service::ClientServiceExt::serve_with_lifecycle(
            Recorder::default(),
            transport,
            rmcp::service::ClientLifecycleMode::Discover {
                preferred_versions: vec![newest.clone()],
            },
        )
        .await
        .unwrap();
        assert_eq!(
            client.peer_info().map(|i| i.protocol_version.clone()),
            Some(newest)
        );
        let result = call_tool(&client, "verify", json!({})).await;
        assert_eq!(
            result.structured_content.as_ref().unwrap()["result"],
            "passed"
        );
        client.cancel().await.unwrap();
    });
}

#[test]
fn goal_tools_read_pause_and_resume_the_goal_of_a_worktree() {
    let repo = TempRepo::worktree_with_commit();
    let state = repo.home().join("state/greenlight/state.db");
    std::fs::create_dir_all(state.parent().unwrap()).unwrap();
    let worktree = repo.path().canonicalize().unwrap();
    let goal = greenlight_testkit::load::create_goal(&state, &worktree).0;
    runtime().block_on(async {
        let client = connect(&repo, Recorder::default()).await;
        let tools = client.list_all_tools().await.unwrap();

        let status = call_tool(&client, "goal_status", json!({})).await;
        let status = assert_matches_schema(&tools, "goal_status", &status);
        assert_eq!(status["goal"]["id"], goal);
        assert_eq!(status["goal"]["state"], "active");
        assert_eq!(status["gates"][0]["command"], "true");

        let log = call_tool(&client, "goal_log", json!({"id": goal, "limit": 1})).await;
        let log = assert_matches_schema(&tools, "goal_log", &log);
        assert_eq!(log["events"].as_array().unwrap().len(), 1);
        let after = log["next_after"]
            .as_i64()
            .expect("more events than one page");
        let rest = call_tool(&client, "goal_log", json!({"id": goal, "after": after})).await;
        let rest = assert_matches_schema(&tools, "goal_log", &rest);
        assert!(rest["events"][0]["seq"].as_i64().unwrap() > after);
        assert_eq!(rest["next_after"], Value::Null);

        let paused = call_tool(&client, "goal_pause", json!({"id": goal})).await;
        let paused = assert_matches_schema(&tools, "goal_pause", &paused);
        assert_eq!(
            (&paused["goal"]["state"], &paused["changed"]),
            (&json!("paused"), &json!(true))
        );
        let again = call_tool(&client, "goal_pause", json!({"id": goal})).await;
        assert_eq!(again.structured_content.unwrap()["changed"], false);
        let resumed = call_tool(&client, "goal_resume", json!({})).await;
        let resumed = assert_matches_schema(&tools, "goal_resume", &resumed);
        assert_eq!(resumed["goal"]["state"], "active");
        assert!(
            resumed["hint"]
                .as_str()
                .unwrap()
                .contains("greenlight goal resume"),
            "{resumed}"
        );

        // A goal that does not exist is a protocol error that says how to find one.
        let missing = client
            .send_cancellable_request(
                call("goal_status", json!({"id": 999})),
                PeerRequestOptions::no_options(),
            )
            .await
            .unwrap()
            .await_response()
            .await;
        let message = format!("{missing:?}");
        assert!(message.contains("no goal 999"), "{message}");
        client.cancel().await.unwrap();
    });
}

/// The workflow tools answer what `greenlight workflow status --json` and `list --json` print,
/// each matching its advertised schema (unreported figures null, never 0).
#[test]
fn workflow_tools_show_a_run_and_the_list_in_their_schemas() {
    use greenlight_store::greenlight_types::Family;
    use greenlight_store::{NewWorkflowDispatch, NewWorkflowRun, Store, WorkflowDispatchEnd};
    let repo = TempRepo::worktree_with_commit();
    let state = repo.home().join("state/greenlight/state.db");
    std::fs::create_dir_all(state.parent().unwrap()).unwrap();
    let mut store = Store::open(&state).unwrap();
    let run = store
        .write(|tx| {
            let run = tx.create_workflow_run(&NewWorkflowRun {
                name: "fix".into(),
                plan_path: "plan.yaml".into(),
                repository: repo.path().join(".git"),
                worktree: repo.path().to_path_buf(),
                base_commit: "abc".into(),
                plan_digest: "d".into(),
                args_hash: "h".into(),
                plan_json: "{}".into(),
                args_json: "{}".into(),
                ..NewWorkflowRun::default()
            })?;
            let (id, _) = tx.start_workflow_dispatch(&NewWorkflowDispatch {
                run,
                step: "fix".into(),
                item: Some("a".into()),
                attempt: 1,
                family: Family::Command,
                model: None,
                worktree: None,
            })?;
            tx.finish_workflow_dispatch(
                id,
                &WorkflowDispatchEnd {
                    outcome: "ok".into(),
                    ..WorkflowDispatchEnd::default()
                },
            )?;
            Ok::<_, greenlight_store::Error>(run)
        })
        .unwrap();
    runtime().block_on(async {
        let client = connect(&repo, Recorder::default()).await;
        let tools = client.list_all_tools().await.unwrap();
        let status = call_tool(&client, "workflow_status", json!({"id": run.0})).await;
        let status = assert_matches_schema(&tools, "workflow_status", &status);
        assert_eq!(status["run"]["id"], run.0);
        assert_eq!(status["run"]["status"], "running");
        assert_eq!(status["run"]["spent"]["units"], 1);
        assert_eq!(status["run"]["spent"]["tokens_in"], Value::Null);
        assert_eq!(status["steps"][0]["outcome"], "ok");
        let list = call_tool(&client, "workflow_list", json!({})).await;
        let list = assert_matches_schema(&tools, "workflow_list", &list);
        assert_eq!(list["runs"][0]["name"], "fix");
        let missing = client
            .send_cancellable_request(
                call("workflow_status", json!({"id": 999})),
                PeerRequestOptions::no_options(),
            )
            .await
            .unwrap()
            .await_response()
            .await;
        let message = format!("{missing:?}");
        assert!(message.contains("no workflow run 999"), "{message}");
        client.cancel().await.unwrap();
    });
}

#[test]
fn a_v2_verify_over_mcp_runs_needs_in_order_and_replays_cached_gates() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 2\ngates:\n  - id: build\n    command: exit 1\n  - id: test\n    command: \"true\"\n    needs: [build]\n  - id: lint\n    command: \"true\"\n",
    );
    runtime().block_on(async {
        let client = connect(&repo, Recorder::default()).await;
        let tools = client.list_all_tools().await.unwrap();
        let first = call_tool(&client, "verify", json!({})).await;
        let answer = assert_matches_schema(&tools, "verify", &first);
        assert_eq!(answer["result"], "failed");
        assert_eq!(answer["gates"][1]["verdict"], "SKIP");
        assert_eq!(answer["gates"][1]["skip_reason"], "needs:build");
        assert_eq!(answer["gates"][2]["cached"], false);
        let again = call_tool(&client, "verify", json!({})).await;
        let answer = assert_matches_schema(&tools, "verify", &again);
        assert_eq!(answer["gates"][0]["cached"], true, "{answer:#}");
        assert_eq!(answer["gates"][2]["cached"], true, "{answer:#}");
        assert!(
            text_of(&again).contains("GATE build FAIL exit=1 duration_ms="),
            "{}",
            text_of(&again)
        );
        assert!(
            text_of(&again).contains("cached=true"),
            "{}",
            text_of(&again)
        );
        assert!(
            text_of(&again).contains("GATE test SKIP exit=- duration_ms=0 reason=needs:build"),
            "{}",
            text_of(&again)
        );
        assert_eq!(answer["gates"][2]["explain"], Value::Null, "{answer:#}");

        // `explain` says which input moved, then that nothing did.
        repo.write("notes.txt", "changed\n");
        let explained = call_tool(&client, "verify", json!({"explain": true})).await;
        let answer = assert_matches_schema(&tools, "verify", &explained);
        let lint = answer["gates"][2]["explain"].as_str().unwrap_or_default();
        assert!(
            lint.starts_with("ran: ") && lint.contains("+notes.txt"),
            "{answer:#}"
        );
        let explained = call_tool(&client, "verify", json!({"explain": true})).await;
        let answer = assert_matches_schema(&tools, "verify", &explained);
        let lint = answer["gates"][2]["explain"].as_str().unwrap_or_default();
        assert!(lint.starts_with("replayed"), "{answer:#}");
        client.cancel().await.unwrap();
    });
}
