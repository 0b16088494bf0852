//! The bounds on `/mcp` sessions, on a real loopback server with short limits: a session
//! nobody uses is closed after the idle limit, and one whose call is still running is not.

use std::net::SocketAddr;
use std::time::Duration;

use greenlight_mcp::http::{Limits, router};
use greenlight_mcp::{McpServer, Options};
use greenlight_testkit::TempRepo;
use greenlight_testkit::sse::{self, Response};
use serde_json::{Value, json};

const LIMIT: Duration = Duration::from_secs(30);

async fn post(addr: SocketAddr, body: &Value, session: Option<&str>) -> Response {
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2025-06-18"),
    ];
    if let Some(session) = session {
        headers.push(("Mcp-Session-Id", session));
    }
    let body = serde_json::to_vec(body).expect("json");
    tokio::time::timeout(
        LIMIT,
        sse::request_with_body(addr, "POST", "/mcp", &headers, &body),
    )
    .await
    .expect("an answer in time")
    .expect("a response")
}

/// The answer (the message with an id) in a response's events.
async fn answer(response: &mut Response) -> Value {
    loop {
        let event = tokio::time::timeout(LIMIT, response.next_event())
            .await
            .expect("an event in time")
            .expect("read")
            .expect("the answer before the end");
        if event.data.trim().is_empty() {
            continue;
        }
        let message: Value = serde_json::from_str(&event.data).expect("json");
        if message.get("id").is_some() && message.get("method").is_none() {
            return message;
        }
    }
}

/// A new session: `initialize` and `notifications/initialized`; returns its id.
async fn open_session(addr: SocketAddr) -> String {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}});
    let mut response = post(addr, &initialize, None).await;
    assert_eq!(response.status, 200);
    let session = response
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    answer(&mut response).await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let mut done = post(addr, &initialized, Some(&session)).await;
    assert!(done.status < 300, "{}", done.status);
    let _ = done.body().await;
    session
}

#[test]
fn an_idle_session_is_closed_and_one_with_a_call_running_is_not() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml("version: 1\ngates:\n  - id: slow\n    command: sleep 2; echo slept\n");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let (_stop, signals) = tokio::sync::watch::channel(None);
        let server = McpServer::new(
            Options {
                cwd: repo.path().to_path_buf(),
                state: Some(repo.home().join("state.db")),
                remote: None,
                env: greenlight_run::RunEnv::from_vars(greenlight_proc::ProcessEnv::from_vars(
                    std::env::vars_os(),
                )),
            },
            signals,
        );
        let limits = Limits {
            sessions: 8,
            idle: Duration::from_millis(300),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            axum::serve(listener, router(server, limits))
                .await
                .expect("serve")
        });

        let idle = open_session(addr).await;
        let busy = open_session(addr).await;
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "verify", "arguments": {}}});
        let mut running = post(addr, &call, Some(&busy)).await;
        assert_eq!(running.status, 200);
        // The call runs 2 s, far past the idle limit: it is answered all the same.
        let verified = answer(&mut running).await;
        assert_eq!(
            verified["result"]["structuredContent"]["result"], "passed",
            "{verified}"
        );
        drop(running);

        // The session that did nothing was closed meanwhile: the server no longer knows it.
        let ping = json!({"jsonrpc": "2.0", "id": 3, "method": "ping"});
        let mut gone = post(addr, &ping, Some(&idle)).await;
        let body = String::from_utf8_lossy(&gone.body().await.expect("body")).into_owned();
        assert_eq!(gone.status, 404, "{body}");
        // The busy one was used until its answer ended: still open right after it.
        let mut pong = post(addr, &ping, Some(&busy)).await;
        assert_eq!(pong.status, 200);
        assert_eq!(answer(&mut pong).await["id"], 3);
    });
}
