//! The openai family against a real HTTP server on loopback (the testkit's scripted server):
//! the agent loop with real tools on a temp worktree, hostile chunking, retries, cuts, hangs,
//! refusals, violations, bounds and the write-ahead ledger.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use greenlight_agent::ledger::{LedgerEntry, MemoryLedger, ToolStatus};
use greenlight_agent::{
    Activity, ActivitySink, AdapterOptions, Deliverable, DispatchRequest, DispatchResult,
    Dispatcher, Family, Outcome, Reason, TokenSource,
};
use greenlight_openai::adapter::{Endpoint, OpenAi};
use greenlight_openai::client::RetryPolicy;
use greenlight_openai::tools::{FakeTools, ToolReply};
use greenlight_openai::turn::ToolFormat;
use greenlight_testkit::openai_server::{
    Body, Reply, ScriptedServer, StreamEnd, answer, call, unused_addr,
};
use serde_json::{Value, json};

#[derive(Default)]
struct Collect(Mutex<Vec<Activity>>);

impl ActivitySink for Collect {
    fn activity(&self, activity: Activity) {
        self.0.lock().unwrap().push(activity);
    }
}

impl Collect {
    fn tools(&self) -> Vec<(String, bool)> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter_map(|a| match a {
                Activity::ToolFinished { name, failed, .. } => Some((name.clone(), *failed)),
                _ => None,
            })
            .collect()
    }
    fn text(&self) -> String {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter_map(|a| match a {
                Activity::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }
}

fn endpoint(base_url: &str, format: ToolFormat) -> Endpoint {
    let mut ep = Endpoint::new(base_url);
    ep.tool_format = format;
    ep.retry = RetryPolicy {
        max_attempts: 4,
        base_delay: Duration::from_millis(50),
        max_delay: Duration::from_millis(200),
        max_retry_after: Duration::from_secs(5),
    };
    ep
}

fn openai(ep: Endpoint, env: &[(&str, &str)]) -> OpenAi {
    OpenAi::new(
        AdapterOptions {
            base_env: Some(
                env.iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
            ),
            grace: Duration::from_millis(200),
            ..AdapterOptions::default()
        },
        ep,
    )
    .unwrap()
}

fn worktree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("calc.sh"),
        "add() {\n    echo $(( $1 - $2 ))\n}\n",
    )
    .unwrap();
    dir
}

fn file_request(root: &std::path::Path, timeout: Duration) -> DispatchRequest {
    let mut req = DispatchRequest::new(Family::OpenAi, "scripted", "fix add()", root, timeout);
    req.deliverable = Deliverable::File;
    req
}

async fn dispatch(d: &OpenAi, req: &DispatchRequest) -> (DispatchResult, Collect, MemoryLedger) {
    let sink = Collect::default();
    let ledger = MemoryLedger::new();
    let result = d.dispatch_recorded(req, &sink, &ledger).await;
    (result, sink, ledger)
}

const FIX: &str = "--- a/calc.sh\n+++ b/calc.sh\n@@ -1,3 +1,3 @@\n add() {\n-    echo $(( $1 - $2 ))\n+    echo $(( $1 + $2 ))\n }\n";

#[tokio::test]
async fn a_text_answer_is_the_reply_with_its_usage_and_the_request_is_well_formed() {
    let server = ScriptedServer::start(vec![Reply::stream(answer(
        "All good.\nGATE: PASS",
        (12, 5),
    ))]);
    let d = openai(endpoint(&server.base_url(), ToolFormat::Auto), &[]);
    let dir = worktree();
    let (result, sink, _) = dispatch(&d, &file_request(dir.path(), Duration::from_secs(20))).await;
    assert_eq!(result.outcome, Outcome::Ok, "{result:?}");
    assert_eq!(result.text.as_deref(), Some("All good.\nGATE: PASS"));
    assert_eq!((result.tokens_in, result.tokens_out), (Some(12), Some(5)));
    assert_eq!(result.token_source, Some(TokenSource::OpenaiUsage));
    assert_eq!(result.family, Family::OpenAi);
    assert_eq!(sink.text(), "All good.\nGATE: PASS");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(r.body["model"], "scripted");
    assert_eq!(r.body["stream"], true);
    assert_eq!(r.body["stream_options"]["include_usage"], true);
    let names: Vec<&str> = r.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "read_file",
            "list_dir",
            "search",
            "write_file",
            "apply_patch",
            "run"
        ]
    );
    assert_eq!(r.messages()[0]["role"], "system");
    assert_eq!(
        r.messages()[1],
        json!({"role": "user", "content": "fix add()"})
    );
    assert_eq!(r.header("authorization"), None, "no key set, none sent");
}

#[tokio::test]
async fn a_native_loop_reads_patches_and_answers_with_every_call_recorded_write_ahead() {
    let server = ScriptedServer::start(vec![
        Reply::stream(call(
            "call_a",
            "read_file",
            json!({"path": "calc.sh"}),
            (100, 10),
        )),
        Reply::stream(call(
            "call_b",
            "apply_patch",
            json!({"patch": FIX}),
            (200, 40),
        )),
        Reply::stream(answer("Fixed add().", (300, 5))),
    ]);
    let d = openai(endpoint(&server.base_url(), ToolFormat::Native), &[]);
    let dir = worktree();
    let (result, sink, ledger) =
        dispatch(&d, &file_request(dir.path(), Duration::from_secs(20))).await;
    assert_eq!(result.outcome, Outcome::Ok, "{result:?}");
    assert_eq!(result.text.as_deref(), Some("Fixed add()."));
    assert_eq!((result.tokens_in, result.tokens_out), (Some(600), Some(55)));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("calc.sh")).unwrap(),
        "add() {\n    echo $(( $1 + $2 ))\n}\n"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    // The second request carries the assistant's call and the tool's result, by id.
    let m = requests[1].messages();
    assert_eq!(m[2]["role"], "assistant");
    assert_eq!(m[2]["tool_calls"][0]["id"], "call_a");
    assert_eq!(m[3]["role"], "tool");
    assert_eq!(m[3]["tool_call_id"], "call_a");
    let result: Value = serde_json::from_str(m[3]["content"].as_str().unwrap()).unwrap();
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("echo $(( $1 - $2 ))")
    );
    assert_eq!(result["total_lines"], 3);
    let m = requests[2].messages();
    assert_eq!(m[5]["tool_call_id"], "call_b");
    assert!(m[5]["content"].as_str().unwrap().contains("\"modified\""));
    // Intent before effect, result after, in order.
    let entries = ledger.entries();
    assert_eq!(entries.len(), 4);
    match (&entries[0], &entries[1], &entries[2], &entries[3]) {
        (
            LedgerEntry::Before(a),
            LedgerEntry::After(a_end),
            LedgerEntry::Before(b),
            LedgerEntry::After(b_end),
        ) => {
            assert_eq!((a.seq, a.step, a.tool.as_str()), (1, 1, "read_file"));
            assert_eq!(a_end.status, ToolStatus::Ok);
            assert_eq!((b.seq, b.step, b.tool.as_str()), (2, 2, "apply_patch"));
            assert!(b.arguments.contains("+    echo $(( $1 + $2 ))"));
            assert_eq!(b_end.status, ToolStatus::Ok);
        }
        other => panic!("unexpected ledger: {other:?}"),
    }
    assert_eq!(
        sink.tools(),
        [
            ("read_file".to_owned(), false),
            ("apply_patch".to_owned(), false)
        ]
    );
}

/// The same reply, one byte per write, with the text cut inside multi-byte characters and the
/// tool call's JSON cut everywhere: the same result as in one piece.
#[tokio::test]
async fn one_byte_per_write_gives_the_same_result_as_one_piece() {
    let text = "Réglé: add() additionne ✓ 日本語";
    let tool = call("call_x", "read_file", json!({"path": "calc.sh"}), (1, 1));
    let server = ScriptedServer::start(vec![
        Reply::byte_by_byte(tool),
        Reply::byte_by_byte(answer(text, (2, 2))),
    ]);
    let d = openai(endpoint(&server.base_url(), ToolFormat::Native), &[]);
    let dir = worktree();
    let (result, sink, ledger) =
        dispatch(&d, &file_request(dir.path(), Duration::from_secs(30))).await;
    assert_eq!(result.outcome, Outcome::Ok, "{result:?}");
    assert_eq!(result.text.as_deref(), Some(text));
    assert_eq!(sink.text(), text);
    assert_eq!(ledger.ends().len(), 1);
    assert_eq!(ledger.ends()[0].status, ToolStatus::Ok);
}

#[tokio::test]
async fn splits_inside_utf8_sequences_and_inside_tags_give_the_same_tags_call() {
    let content = "Je lis le fichier — <tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"calc.sh\"}}</tool_call>";
    let body = Body::new()
        .role()
        .content(content)
        .finish("stop")
        .usage(3, 4)
        .done();
    let at_tag = body.find("<tool_call>").unwrap() + 4;
    let at_dash = body.find('—').unwrap() + 1; // inside the three bytes of the dash
    let at_json = body.find("read_file").unwrap() + 3;
    let server = ScriptedServer::start(vec![
        Reply::split_at(body, &[at_dash, at_tag, at_json]),
        Reply::stream(answer("Lu.", (1, 1))),
    ]);
    let d = openai(endpoint(&server.base_url(), ToolFormat::Tags), &[]);
    let dir = worktree();
    let (result, _, ledger) =
        dispatch(&d, &file_request(dir.path(), Duration::from_secs(20))).await;
    assert_eq!(result.outcome, Outcome::Ok, "{result:?}");
    let ends = ledger.ends();
    assert_eq!(ends.len(), 1, "{:?}", ledger.entries());
    assert_eq!(ends[0].status, ToolStatus::Ok);
    // Tags format: no `tools` field; the result goes back in a user message.
    let requests = server.requests();
    assert!(requests[0].body.get("tools").is_none());
    assert!(
        requests[0].messages()[0]["content"]
            .as_str()
            .unwrap()
            .contains("<tool_call>")
    );
    let back = requests[1].last_user_text();
    assert!(back.starts_with("<tool_response>\n{"), "{back}");
    assert!(back.contains("echo $(( $1 - $2 ))"), "{back}");
}

/// Calls written into the text get ids greenlight makes up, which start again with every
/// request; each call of the conversation keeps an id of its own.
#[tokio::test]
async fn made_up_call_ids_stay_unique_across_requests() {
    let tag = |path: &str| {
        let content = format!(
            "<tool_call>{{\"name\": \"read_file\", \"arguments\": {{\"path\": \"{path}\"}}}}</tool_call>"
        );
        Body::new().role().content(&content).finish("stop").done()
    };
    let server = ScriptedServer::start(vec![
        Reply::stream(tag("calc.sh")),
        Reply::stream(tag("calc.sh")),
        Reply::stream(answer("done", (1, 1))),
    ]);
    let d = openai(endpoint(&server.base_url(), ToolFormat::Auto), &[]);
    let dir = worktree();
    let (result, _, _) = dispatch(&d, &file_request(dir.path(), Duration::from_secs(20))).await;
    assert!(result.is_ok(), "{result:?}");
    let messages = server.requests()[2].messages();
    let ids: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["call_1", "call_1_2"]);
    assert_eq!(messages[4]["tool_calls"][0]["id"], "call_1_2");
}

#[tokio::test]
async fn a_429_with_retry_after_is_waited_out_then_the_answer_comes() {
    let server = ScriptedServer::start(vec![
        Reply::too_many_requests("1"),
        Reply::stream(answer("ok", (1, 1))),
    ]);
    let d = openai(endpoint(&server.base_url(), ToolFormat::Auto), &[]);
    let dir = worktree();
    let started = Instant::now();
    let sink = Collect::default();
    let result = d
        .dispatch_observed(&file_request(dir.path(), Duration::from_secs(20)), &sink)
        .await;
    assert_eq!(result.outcome, Outcome::Ok, "{result:?}");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After honoured"
    );
    assert_eq!(server.requests().len(), 2);
    let said = sink.0.lock().unwrap().clone();
    assert!(
        said.iter().any(|a| matches!(a, Activity::Output(l) if l.contains("429") && l.contains("attempt 2 of 4"))),
        "{said:?}"
    );
}

#[tokio::test]
async fn a_retry_after_longer_than_greenlight_waits_fails_at_once() {
    let server = ScriptedServer::start(vec![Reply::too_many_requests("3600")]);
    let d = openai(endpoint(&server.base_url(), ToolFormat::Auto), &[]);
    let dir = worktree();
    let started = Instant::now();
    let result = d
        .dispatch(&file_request(dir.path(), Duration::from_secs(20)))
        .await;
    let failure = result.failure.unwrap();
    assert_eq!(failure.reason, Reason::DispatchDead);
    assert!(
        failure.detail.contains("asked to wait 3600 s"),
        "{}",
        failure.detail
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn server_errors_are_retried_with_backoff_within_bounded_attempts() {
    let server = ScriptedServer::start(vec![
        Reply::status(500, "boom"),
        Reply::status(503, "loading model"),
        Reply::stream(answer("up now", (1, 1))),
    ]);
    let d = openai(endpoint(&server.base_url(), ToolFormat::Auto), &[]);
    let dir = worktree();
    let result = d
        .dispatch(&file_request(dir.path(), Duration::from_secs(20)))
        .await;
    assert_eq!(result.text.as_deref(), Some("up now"), "{result:?}");
    assert_eq!(server.requests().len(), 3);

    let server = ScriptedServer::with(|_| Reply::status(500, "always down"));
    let d = openai(endpoint(&server.base_url(), ToolFormat::Auto), &[]);
    let result = d
        .dispatch(&file_request(dir.path(), Duration::from_secs(20)))
        .await;
    let failure = result.failure.unwrap();
    assert_eq!(failure.reason, Reason::DispatchDead);
    assert!(failure.detail.contains("4 attempts"), "{}", failure.detail);
    assert!(failure.detail.contains("always down"), "{}", failure.detail);
    assert_eq!(server.requests().len(), 4, "bounded attempts");
}

#[tokio::test]
async fn a_client_error_is_not_retried_and_a_401_names_the_key_variable() {
    let server = ScriptedServer::start(vec![Reply::status(401, "bad key")]);
    let mut ep = endpoint(&server.base_url(), ToolFormat::Auto);
    ep.api_key_env = "MY_LLM_KEY".into();
    let d = openai(ep, &[("MY_LLM_KEY", "sk-test-123")]);
    let dir = worktree();
    let result = d
        .dispatch(&file_request(dir.path(), Duration::from_secs(20)))
        .await;
    let failure = result.failure.unwrap();
    assert_eq!(failure.reason, Reason::DispatchDead);
    assert!(failure.detail.contains("401"), "{}", failure.detail);
    assert!(failure.detail.contains("$MY_LLM_KEY"), "{}", failure.detail);
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "not retried");
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-test-123")
    );
}

#[tokio::test]
async fn a_stream_cut_mid_way_is_asked_again_and_no_tool_runs_twice() {
    let full = call(
        "call_w",
        "write_file",
        json!({"path": "new.txt", "content": "once\n"}),
        (5, 5),
    );
    let server = ScriptedServer::start(vec![
        Reply::cut(full.clone(), full.len() / 2),
        Reply::stream(full),
        Reply::stream(answer("wrote it", (1, 1))),
    ]);
    let d = openai(endpoint(&server.base_url(), ToolFormat::Native), &[]);
    let dir = worktree();
    let (result, _, ledger) =
        dispatch(&d, &file_request(dir.path(), Duration::from_secs(20))).await;
    assert_eq!(result.text.as_deref(), Some("wrote it"), "{result:?}");
    assert_eq!(server.requests().len(), 3);
    assert_eq!(ledger.ends().len(), 1, "the cut reply's call never ran");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("new.txt")).unwrap(),
        "once\n"
    );
}

#[tokio::test]
async fn a_hanging_server_ends_at_the_deadline() {
    let server = ScriptedServer::start(vec![Reply::Hang]);
    let d = openai(endpoint(&server.base_url(), ToolFormat::Auto), &[]);
    let dir = worktree();
    let started = Instant::now();
    let result = d
        .dispatch(&file_request(dir.path(), Duration::from_millis(800)))
        .await;
    assert_eq!(result.outcome, Outcome::Null);
    assert_eq!(result.failure.unwrap().reason, Reason::DispatchTimeout);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_secs(5),
        "{took:?}"
    );
}

#[tokio::test]
async fn a_server_silent_past_the_idle_timeout_is_asked_again() {
    let body = answer("second time lucky", (1, 1));
    let server = ScriptedServer::start(vec![
        Reply::Hang,
        Reply::stall(body.clone(), body.len() / 3),
        Reply::stream(body),
    ]);
    let mut ep = endpoint(&server.base_url(), ToolFormat::Auto);
    ep.idle_timeout = Duration::from_millis(300);
    let d = openai(ep, &[]);
    let dir = worktree();
    let sink = Collect::default();
    let result = d
        .dispatch_observed(&file_request(dir.path(), Duration::from_secs(20)), &sink)
        .await;
    assert_eq!(
        result.text.as_deref(),
        Some("second time lucky"),
        "{result:?}"
    );
    assert_eq!(server.requests().len(), 3);
    let said = sink.0.lock().unwrap().clone();
    assert!(
        said.iter()
            .any(|a| matches!(a, Activity::Output(l) if l.contains("sent no response for 0.3 s"))),
        "{said:?}"
    );
    assert!(
        said.iter()
            .any(|a| matches!(a, Activity::Output(l) if l.contains("sent nothing for"))),
        "{said:?}"
    );
}

#[tokio::test]
async fn a_stream_that_stalls_mid_reply_ends_at_the_deadline_with_the_partial_text_seen() {
    let body = answer("partial answer that never ends", (1, 1));
    let server = ScriptedServer::start(vec![Reply::stall(body.clone(), body.len() / 2)]);
    let d = openai(endpoint(&server.base_url(), ToolFormat::Auto), &[]);
    let dir = worktree();
    let sink = Collect::default();
    let result = d
        .dispatch_observed(&file_request(dir.path(), Duration::from_millis(800)), &sink)
        .await;
    assert_eq!(result.failure.unwrap().reason, Reason::DispatchTimeout);
    assert!(!sink.text().is_empty(), "what arrived was shown live");
}

#[tokio::test]
async fn a_refused_connection_at_the_start_is_retried_until_the_server_is_up() {
    let addr = unused_addr();
    let mut ep = endpoint(&format!("http://{addr}/v1"), ToolFormat::Auto);
    ep.retry.max_attempts = 10;
    ep.retry.max_delay = Duration::from_millis(100);
    let d = openai(ep, &[]);
    let late = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        ScriptedServer::start_at(addr, vec![Reply::stream(answer("late but here", (1, 1)))])
    });
    let dir = worktree();
    let result = d
        .dispatch(&file_request(dir.path(), Duration::from_secs(20)))
        .await;
    let server = late.join().unwrap();
    assert_eq!(result.text.as_deref(), Some("late but here"), "{result:?}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn nothing_listening_fails_dead_after_the_attempts_naming_the_url() {
    let addr = unused_addr();
    let d = openai(
        endpoint(&format!("http://{addr}/v1"), ToolFormat::Auto),
        &[],
    );
    let dir = worktree();
    let result = d
        .dispatch(&file_request(dir.path(), Duration::from_secs(20)))
        .await;
    let failure = result.failure.unwrap();
    assert_eq!(failure.reason, Reason::DispatchDead);
    assert!(
        failure.detail.contains(&addr.to_string()),
        "{}",
        failure.detail
    );
}

#[tokio::test]
async fn writes_outside_the_worktree_are_refused_to_the_model_and_the_turn_goes_on() {
    let outside = tempfile::tempdir().unwrap();
    let dir = worktree();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
    let absolute = outside.path().join("abs.txt");
    let server = ScriptedServer::start(vec![
        Reply::stream(call(
            "c1",
            "write_file",
            json!({"path": "../escape.txt", "content": "x"}),
            (1, 1),
        )),
        Reply::stream(call(
            "c2",
            "write_file",
            json!({"path": absolute.to_str().unwrap(), "content": "x"}),
            (1, 1),
        )),
        Reply::stream(call(
            "c3",
            "write_file",
            json!({"path": "out/linked.txt", "content": "x"}),
            (1, 1),
        )),
        Reply::stream(call(
            "c4",
            "apply_patch",
            json!({"patch": "--- /dev/null\n+++ b/out/p.txt\n@@ -0,0 +1 @@\n+x\n"}),
            (1, 1),
        )),
        Reply::stream(answer("I stayed inside.", (1, 1))),
    ]);
    let d = openai(endpoint(&server.base_url(), ToolFormat::Native), &[]);
    let (result, sink, ledger) =
        dispatch(&d, &file_request(dir.path(), Duration::from_secs(20))).await;
    assert_eq!(
        result.text.as_deref(),
        Some("I stayed inside."),
        "{result:?}"
    );
    let statuses: Vec<ToolStatus> = ledger.ends().iter().map(|e| e.status).collect();
    assert_eq!(statuses, [ToolStatus::Refused; 4]);
    assert!(
        ledger.ends()[0].result.contains("contains `..`"),
        "{:?}",
        ledger.ends()[0]
    );
    assert!(ledger.ends()[1].result.contains("is absolute"));
    assert!(ledger.ends()[2].result.contains("outside the root"));
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        0,
        "nothing written outside"
    );
    assert!(!dir.path().parent().unwrap().join("escape.txt").exists());
    assert!(sink.tools().iter().all(|(_, failed)| *failed));
    // The model was told, in the tool result, why.
    let m = server.requests()[1].messages();
    assert!(
        m[3]["content"].as_str().unwrap().contains("refused"),
        "{}",
        m[3]
    );
}

#[tokio::test]
async fn an_unreadable_call_is_fed_back_to_the_model_and_recorded() {
    let broken = Body::new()
        .role()
        .tool_call(0, "call_bad", "read_file", &json!("placeholder"), 1)
        .finish("tool_calls")
        .done()
        .replace(
            "\"arguments\":\"\\\"placeholder\\\"\"",
            "\"arguments\":\"{not json\"",
        );
    let server = ScriptedServer::start(vec![
        Reply::stream(broken),
        Reply::stream(answer("sorry, done", (1, 1))),
    ]);
    let d = openai(endpoint(&server.base_url(), ToolFormat::Native), &[]);
    let dir = worktree();
    let (result, _, ledger) =
        dispatch(&d, &file_request(dir.path(), Duration::from_secs(20))).await;
    assert_eq!(result.text.as_deref(), Some("sorry, done"), "{result:?}");
    let ends = ledger.ends();
    assert_eq!(ends.len(), 1, "{:?}", ledger.entries());
    assert_eq!(ends[0].status, ToolStatus::Violation);
    let told = server.requests()[1].last_user_text();
    assert!(told.contains("could not be read"), "{told}");
    assert!(told.contains("{not json"), "{told}");
}

#[tokio::test]
async fn the_step_bound_ends_a_dispatch_whose_model_never_stops_calling_tools() {
    let server = ScriptedServer::with(|_| Reply::stream(call("c", "list_dir", json!({}), (10, 1))));
    let mut ep = endpoint(&server.base_url(), ToolFormat::Native);
    ep.limits.max_steps = 3;
    let d = openai(ep, &[]);
    let dir = worktree();
    let (result, _, ledger) =
        dispatch(&d, &file_request(dir.path(), Duration::from_secs(20))).await;
    let failure = result.failure.unwrap();
    assert_eq!(failure.reason, Reason::DispatchBudgetExhausted);
    assert!(failure.detail.contains("3 requests"), "{}", failure.detail);
    assert_eq!(server.requests().len(), 3);
    assert_eq!(ledger.ends().len(), 3);
    assert_eq!(
        result.tokens_in,
        Some(30),
        "spent tokens are reported on failure too"
    );
}

#[tokio::test]
async fn the_token_bound_ends_the_dispatch_from_reported_usage() {
    let server =
        ScriptedServer::with(|_| Reply::stream(call("c", "list_dir", json!({}), (600, 100))));
    let mut ep = endpoint(&server.base_url(), ToolFormat::Native);
    ep.limits.max_tokens = Some(1000);
    let d = openai(ep, &[]);
    let dir = worktree();
    let result = d
        .dispatch(&file_request(dir.path(), Duration::from_secs(20)))
        .await;
    let failure = result.failure.unwrap();
    assert_eq!(failure.reason, Reason::DispatchBudgetExhausted);
    assert!(failure.detail.contains("1400 tokens"), "{}", failure.detail);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_long_result_is_cut_with_a_note_saying_how_much_and_how_to_see_more() {
    let dir = worktree();
    std::fs::write(dir.path().join("log.txt"), "x".repeat(5000)).unwrap();
    let server = ScriptedServer::start(vec![
        Reply::stream(call("c", "run", json!({"command": "cat log.txt"}), (1, 1))),
        Reply::stream(answer("seen", (1, 1))),
    ]);
    let mut ep = endpoint(&server.base_url(), ToolFormat::Native);
    ep.limits.max_result_bytes = 1000;
    let d = openai(ep, &[]);
    let (result, _, ledger) =
        dispatch(&d, &file_request(dir.path(), Duration::from_secs(20))).await;
    assert!(result.is_ok(), "{result:?}");
    let sent = server.requests()[1].messages()[3]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        sent.contains("[greenlight: this result was cut: the first 1000 of"),
        "{sent}"
    );
    assert!(sent.contains("| tail -n 50"), "{sent}");
    assert_eq!(
        ledger.ends()[0].result,
        sent,
        "the ledger holds what the model was sent"
    );
}

#[tokio::test]
async fn a_host_result_of_the_wrong_shape_is_not_shown_to_the_model() {
    let server = ScriptedServer::start(vec![
        Reply::stream(call("c", "read_file", json!({"path": "a"}), (1, 1))),
        Reply::stream(answer("ok", (1, 1))),
    ]);
    let fake = FakeTools::new().with("read_file", |_| ToolReply::Ok(json!({"secret": "leak"})));
    let fake = Arc::new(fake);
    let d = openai(endpoint(&server.base_url(), ToolFormat::Native), &[]).with_tools(fake.clone());
    let dir = worktree();
    let (result, _, ledger) =
        dispatch(&d, &file_request(dir.path(), Duration::from_secs(20))).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(fake.calls().len(), 1);
    assert_eq!(ledger.ends()[0].status, ToolStatus::Error);
    let sent = server.requests()[1].messages()[3]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(sent.contains("malformed result"), "{sent}");
    assert!(!sent.contains("leak"), "{sent}");
}

#[tokio::test]
async fn a_tool_still_running_at_the_deadline_ends_the_dispatch_as_a_timeout() {
    let server = ScriptedServer::start(vec![Reply::stream(call(
        "c",
        "read_file",
        json!({"path": "a"}),
        (1, 1),
    ))]);
    let fake = FakeTools::new()
        .with("read_file", |_| ToolReply::Failed("never".into()))
        .delayed(Duration::from_secs(30));
    let d =
        openai(endpoint(&server.base_url(), ToolFormat::Native), &[]).with_tools(Arc::new(fake));
    let dir = worktree();
    let started = Instant::now();
    let (result, _, ledger) =
        dispatch(&d, &file_request(dir.path(), Duration::from_millis(700))).await;
    assert_eq!(result.failure.unwrap().reason, Reason::DispatchTimeout);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(ledger.ends()[0].status, ToolStatus::Error);
}

#[tokio::test]
async fn a_ledger_that_cannot_record_stops_the_dispatch_before_the_effect() {
    let server = ScriptedServer::start(vec![Reply::stream(call(
        "c",
        "write_file",
        json!({"path": "never.txt", "content": "x"}),
        (1, 1),
    ))]);
    let d = openai(endpoint(&server.base_url(), ToolFormat::Native), &[]);
    let dir = worktree();
    let ledger = MemoryLedger::failing_from(1);
    let result = d
        .dispatch_recorded(
            &file_request(dir.path(), Duration::from_secs(20)),
            &greenlight_agent::NoActivity,
            &ledger,
        )
        .await;
    let failure = result.failure.unwrap();
    assert_eq!(failure.reason, Reason::DispatchDead);
    assert!(failure.detail.contains("ledger"), "{}", failure.detail);
    assert!(!dir.path().join("never.txt").exists());
}

#[tokio::test]
async fn run_works_in_the_worktree_hides_the_key_and_ends_a_command_at_its_limit() {
    let dir = worktree();
    let server = ScriptedServer::start(vec![
        Reply::stream(call(
            "c1",
            "run",
            json!({"command": "pwd; echo key=${OPENAI_API_KEY:-unset}"}),
            (1, 1),
        )),
        Reply::stream(call(
            "c2",
            "run",
            json!({"command": "sleep 30", "timeout_sec": 1}),
            (1, 1),
        )),
        Reply::stream(answer("ran", (1, 1))),
    ]);
    let d = openai(
        endpoint(&server.base_url(), ToolFormat::Native),
        &[
            ("OPENAI_API_KEY", "sk-secret"),
            ("PATH", &std::env::var("PATH").unwrap()),
        ],
    );
    let started = Instant::now();
    let (result, _, ledger) =
        dispatch(&d, &file_request(dir.path(), Duration::from_secs(20))).await;
    assert!(result.is_ok(), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let first: Value = serde_json::from_str(&ledger.ends()[0].result).unwrap();
    let real = dir.path().canonicalize().unwrap();
    assert!(
        first["output"]
            .as_str()
            .unwrap()
            .contains(real.to_str().unwrap()),
        "{first}"
    );
    assert!(
        first["output"].as_str().unwrap().contains("key=unset"),
        "{first}"
    );
    assert_eq!(first["exit_code"], 0);
    let second: Value = serde_json::from_str(&ledger.ends()[1].result).unwrap();
    assert_eq!(second["timed_out"], true, "{second}");
}

#[tokio::test]
async fn a_server_error_in_the_stream_fails_the_dispatch_with_its_message() {
    let body = Body::new()
        .role()
        .content("thinking…")
        .error("out of memory")
        .done();
    let server = ScriptedServer::start(vec![Reply::Stream {
        pieces: vec![body.into_bytes()],
        pause: Duration::ZERO,
        end: StreamEnd::Complete,
    }]);
    let d = openai(endpoint(&server.base_url(), ToolFormat::Auto), &[]);
    let dir = worktree();
    let result = d
        .dispatch(&file_request(dir.path(), Duration::from_secs(20)))
        .await;
    let failure = result.failure.unwrap();
    assert_eq!(failure.reason, Reason::DispatchDead);
    assert!(
        failure.detail.contains("out of memory"),
        "{}",
        failure.detail
    );
}

#[tokio::test]
async fn a_probe_asks_without_tools_and_records_the_id_that_answers() {
    let server = ScriptedServer::with(|req| {
        if req.body["model"] == "good" {
            Reply::stream(answer("OK", (1, 1)))
        } else {
            Reply::status(404, "model not found")
        }
    });
    let d = openai(endpoint(&server.base_url(), ToolFormat::Auto), &[]);
    let outcome = d.probe(&["missing".to_owned(), "good".to_owned()]).await;
    assert_eq!(outcome.id.as_deref(), Some("good"), "{outcome:?}");
    assert!(
        outcome.detail.contains("missing: dispatch-dead"),
        "{}",
        outcome.detail
    );
    let requests = server.requests();
    assert!(requests.iter().all(|r| r.body.get("tools").is_none()));
    assert_eq!(requests[1].last_user_text(), "Reply with exactly: OK");
}

#[tokio::test]
async fn bad_settings_are_refused_before_any_request() {
    // An openai dispatcher cannot be built without a server: `OpenAi::new` takes one, and the
    // code that chooses a family refuses a missing one with this error.
    let err = greenlight_openai::Error::EndpointMissing;
    assert!(err.to_string().contains("--base-url"), "{err}");
    let err = OpenAi::new(AdapterOptions::default(), Endpoint::new("localhost:8080")).unwrap_err();
    assert!(
        err.to_string()
            .contains("must start with http:// or https://"),
        "{err}"
    );
    let server = ScriptedServer::start(vec![]);
    let d = openai(endpoint(&server.base_url(), ToolFormat::Auto), &[]);
    let dir = worktree();
    let mut req = file_request(dir.path(), Duration::from_secs(5));
    req.model = "two words".into();
    let result = d.dispatch(&req).await;
    assert_eq!(result.outcome, Outcome::Error);
    assert_eq!(result.failure.unwrap().reason, Reason::ModelIdInvalid);
    assert!(server.requests().is_empty());
}
