//! The MCP server over streamable HTTP at `/mcp` on `greenlight serve`: the handshake, a verify
//! with progress on the call's event stream, and the same Host and Origin checks as the rest
//! of the server.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use greenlight_testkit::TempRepo;
use greenlight_testkit::sse::{self, Response};
use serde_json::{Value, json};

/// Ends the server if the test fails before it was stopped.
struct EndOnDrop(i32);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        greenlight_testkit::procs::end(self.0);
    }
}

/// `greenlight serve` on a free loopback port in `repo`, with `extra` arguments; returns once it
/// printed its MCP address. The stderr pipe goes back to the child (a closed one would fail the
/// server's later writes).
fn serve(repo: &TempRepo, extra: &[&str]) -> (std::process::Child, EndOnDrop, SocketAddr) {
    let mut child = repo
        .command(["serve", "--listen", "127.0.0.1:0", "--state"])
        .arg(repo.home().join("state.db"))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let reaper = EndOnDrop(child.id() as i32);
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr = loop {
        line.clear();
        stderr.read_line(&mut line).unwrap();
        if let Some(rest) = line.strip_prefix("greenlight: MCP (streamable HTTP) on http://") {
            break rest.trim().trim_end_matches("/mcp").parse().unwrap();
        }
        assert!(
            !line.is_empty(),
            "the server ended before it printed its MCP address"
        );
    };
    child.stderr = Some(stderr.into_inner());
    (child, reaper, addr)
}

async fn post(addr: SocketAddr, body: &Value, headers: &[(&str, &str)]) -> Response {
    let mut all = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    all.extend_from_slice(headers);
    let body = serde_json::to_vec(body).unwrap();
    tokio::time::timeout(
        Duration::from_secs(60),
        sse::request_with_body(addr, "POST", "/mcp", &all, &body),
    )
    .await
    .unwrap()
    .unwrap()
}

/// The JSON-RPC messages of a response: its SSE events' data, or a JSON body.
async fn messages(response: &mut Response) -> Vec<Value> {
    let event_stream = response
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/event-stream"));
    if !event_stream {
        let body = response.body().await.unwrap();
        if body.is_empty() {
            return Vec::new();
        }
        return vec![serde_json::from_slice(&body).unwrap()];
    }
    let mut out = Vec::new();
    while let Some(event) = tokio::time::timeout(Duration::from_secs(60), response.next_event())
        .await
        .unwrap()
        .unwrap()
    {
        if event.data.trim().is_empty() {
            continue; // the priming event
        }
        let message: Value = serde_json::from_str(&event.data).unwrap();
        let done = message.get("id").is_some() && message.get("method").is_none();
        out.push(message);
        if done {
            break;
        }
    }
    out
}

#[test]
fn verify_over_http_streams_progress_then_the_answer_behind_the_host_check() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: lint\n    command: echo linted\n  - id: unit\n    command: echo broken; exit 4\n",
    );
    let (mut child, reaper, addr) = serve(&repo, &[]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}});

        // DNS rebinding and cross-site posts are refused before MCP sees them.
        let mut refused = post(addr, &initialize, &[("Host", "evil.example")]).await;
        assert_eq!(refused.status, 403);
        let _ = refused.body().await;
        let mut refused = post(addr, &initialize, &[("Origin", "http://evil.example")]).await;
        assert_eq!(refused.status, 403);
        let _ = refused.body().await;

        let mut response = post(addr, &initialize, &[]).await;
        assert_eq!(response.status, 200);
        let session = response.header("mcp-session-id").map(str::to_owned);
        let answer = messages(&mut response).await;
        let result = &answer.last().unwrap()["result"];
        assert_eq!(result["protocolVersion"], "2025-06-18");
        assert_eq!(result["serverInfo"]["name"], "greenlight");
        let mut headers = vec![("MCP-Protocol-Version", "2025-06-18")];
        if let Some(session) = session.as_deref() {
            headers.push(("Mcp-Session-Id", session));
        }
        let mut done = post(
            addr,
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            &headers,
        )
        .await;
        assert!(done.status == 202 || done.status == 200, "{}", done.status);
        let _ = done.body().await;

        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "verify", "arguments": {}, "_meta": {"progressToken": "t1"}}});
        let mut response = post(addr, &call, &headers).await;
        assert_eq!(response.status, 200);
        let answer = messages(&mut response).await;
        let (progress, result): (Vec<&Value>, Vec<&Value>) = answer
            .iter()
            .partition(|m| m["method"] == "notifications/progress");
        let messages: Vec<&str> = progress
            .iter()
            .map(|p| p["params"]["message"].as_str().unwrap())
            .collect();
        assert!(
            messages.iter().any(|m| m.contains("gate 2/2 unit: FAIL")),
            "{messages:?}"
        );
        let structured = &result[0]["result"]["structuredContent"];
        assert_eq!(structured["result"], "failed", "{answer:?}");
        assert_eq!(structured["gates"][1]["tail"], "broken\n");
    });
    drop(reaper);
    let _ = child.wait();
}

#[test]
fn with_a_token_file_mcp_needs_the_token_like_every_other_route() {
    let repo = TempRepo::worktree_with_commit();
    let token_file = repo.home().join("token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();
    let token_arg = token_file.to_str().unwrap();
    let (mut child, reaper, addr) = serve(&repo, &["--token-file", token_arg]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}});
        for wrong in [vec![], vec![("Authorization", "Bearer nope")]] {
            let mut refused = post(addr, &initialize, &wrong).await;
            assert_eq!(refused.status, 401, "{wrong:?}");
            let _ = refused.body().await;
        }
        let mut response = post(
            addr,
            &initialize,
            &[("Authorization", "Bearer s3cret-token")],
        )
        .await;
        assert_eq!(response.status, 200);
        let answer = messages(&mut response).await;
        assert_eq!(
            answer.last().unwrap()["result"]["protocolVersion"],
            "2025-11-25"
        );
    });
    drop(reaper);
    let _ = child.wait();
}

/// Each MCP-over-HTTP session costs the server memory (about 55 KB) until it is closed, and
/// nothing bounded how many a client could open: past 64 open sessions a new one is refused
/// with a 503 that says why, and a session closed (`DELETE`) frees its place.
#[test]
fn sessions_past_the_limit_are_refused_with_503_until_one_is_closed() {
    let repo = TempRepo::worktree_with_commit();
    let (mut child, reaper, addr) = serve(&repo, &[]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}});
        let mut sessions = Vec::new();
        for _ in 0..64 {
            let mut response = post(addr, &initialize, &[]).await;
            assert_eq!(response.status, 200);
            sessions.push(response.header("mcp-session-id").unwrap().to_owned());
            let _ = messages(&mut response).await;
        }
        let mut refused = post(addr, &initialize, &[]).await;
        let body = String::from_utf8_lossy(&refused.body().await.unwrap()).into_owned();
        assert_eq!(refused.status, 503, "{body}");
        assert!(
            body.contains("64 MCP sessions are open, the limit"),
            "{body}"
        );
        // A request of an open session is still served.
        let ping = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"});
        let mut pong = post(
            addr,
            &ping,
            &[
                ("Mcp-Session-Id", &sessions[3]),
                ("MCP-Protocol-Version", "2025-06-18"),
            ],
        )
        .await;
        assert_eq!(pong.status, 200);
        assert_eq!(messages(&mut pong).await.last().unwrap()["id"], 9);
        let origin = format!("http://{addr}");
        let mut closed = tokio::time::timeout(
            Duration::from_secs(10),
            sse::request(
                addr,
                "DELETE",
                "/mcp",
                &[("Mcp-Session-Id", &sessions[0]), ("Origin", &origin)],
            ),
        )
        .await
        .unwrap()
        .unwrap();
        assert!(closed.status < 300, "{}", closed.status);
        let _ = closed.body().await;
        let mut again = post(addr, &initialize, &[]).await;
        assert_eq!(again.status, 200);
        let _ = messages(&mut again).await;
    });
    drop(reaper);
    let _ = child.wait();
}
