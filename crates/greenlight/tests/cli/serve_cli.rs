//! `greenlight serve` and `goal run --serve` through the real binary: it answers on the
//! address it prints, streams, refuses a public address without a token, and on SIGTERM ends
//! its streams and exits 0.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use greenlight_store::Store;
use greenlight_testkit::{Cli, greenlight_bin, signal_and_wait, sse};

use crate::goal_support::{Fixture, GATE};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The address in a `serving on http://ADDR/` line.
fn served_addr(line: &str) -> SocketAddr {
    let start = line
        .find("http://")
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        + 7;
    let rest = &line[start..];
    rest[..rest.find('/').unwrap()].parse().unwrap()
}

/// Ends the server if the test fails before it was stopped.
struct EndOnDrop(i32);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        greenlight_testkit::procs::end(self.0);
    }
}

#[test]
fn serve_answers_on_the_address_it_prints_and_stops_on_sigterm_with_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.db");
    let mut child = Command::new(greenlight_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--state"])
        .arg(&state)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let _reaper = EndOnDrop(child.id() as i32);
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(
        line.starts_with("greenlight: serving on http://127.0.0.1:"),
        "{line}"
    );
    let addr = served_addr(&line);
    runtime().block_on(async {
        let mut goals = sse::request(addr, "GET", "/api/goals", &[]).await.unwrap();
        assert_eq!(goals.status, 200);
        assert_eq!(goals.body().await.unwrap(), b"[]");
        let mut live = sse::request(addr, "GET", "/api/live", &[]).await.unwrap();
        let first = live.next_event().await.unwrap().unwrap();
        assert_eq!(first.event.as_deref(), Some("goals"));
        child.stderr = Some(stderr.into_inner());
        let out = signal_and_wait(child, "-TERM", Duration::from_secs(10));
        assert_eq!(out.code, 0, "{}", out.render());
        assert!(out.stderr.contains("server stopped"), "{}", out.render());
        let end = tokio::time::timeout(Duration::from_secs(5), live.next_event()).await;
        assert!(
            matches!(end, Ok(Ok(None))),
            "the stream ends with the server: {end:?}"
        );
    });
}

#[test]
fn serve_refuses_a_public_address_without_a_token_and_a_bad_token_file() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.db");
    let state = state.to_str().unwrap();
    let out = Cli::new(["serve", "--listen", "0.0.0.0:0", "--state", state]).run();
    assert_eq!(out.code, 1, "{}", out.render());
    assert!(
        out.stderr.contains("without a token") && out.stderr.contains("--token-file"),
        "{}",
        out.render()
    );
    let token = dir.path().join("token");
    std::fs::write(&token, "\n").unwrap();
    let out = Cli::new([
        "serve",
        "--listen",
        "0.0.0.0:0",
        "--state",
        state,
        "--token-file",
        token.to_str().unwrap(),
    ])
    .run();
    assert_eq!(out.code, 1, "{}", out.render());
    assert!(
        out.stderr.contains("token file") && out.stderr.contains("empty"),
        "{}",
        out.render()
    );
}

#[test]
fn goal_run_serve_prints_the_url_of_its_server_on_stderr() {
    let fx = Fixture::new();
    let agent = fx.script("agent.sh", "echo good > value.txt\necho fixed");
    let out = fx.run_goal("fix the value", &agent, GATE, &["--serve=127.0.0.1:0"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(
        out.stderr
            .contains("greenlight: serving the dashboard on http://127.0.0.1:"),
        "{}",
        out.render()
    );
    assert!(
        out.stdout.contains("done: every gate is green"),
        "{}",
        out.render()
    );
}

/// `greenlight serve --state STATE` on a free loopback port: the child, its address, and a
/// guard that ends it if the test fails first.
fn serve(state: &std::path::Path) -> (std::process::Child, SocketAddr, EndOnDrop) {
    let mut child = Command::new(greenlight_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--state"])
        .arg(state)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let guard = EndOnDrop(child.id() as i32);
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    child.stderr = Some(stderr.into_inner());
    (child, served_addr(&line), guard)
}

async fn get_json(addr: SocketAddr, path: &str) -> serde_json::Value {
    let mut response = sse::request(addr, "GET", path, &[]).await.unwrap();
    assert_eq!(response.status, 200, "{path}");
    serde_json::from_slice(&response.body().await.unwrap()).unwrap()
}

/// A verify killed with SIGKILL was shown running forever (`result: null`, `ended_at: null`,
/// the clock counting) by the API and the dashboard: serve notices its process is gone and
/// closes it as interrupted, with the frame that ends its stream, by itself.
#[test]
fn serve_shows_a_verify_killed_with_sigkill_as_interrupted_in_the_api_and_the_page() {
    let repo = greenlight_testkit::TempRepo::worktree_with_commit();
    let state = repo.home().join("runs.db");
    // Serve first: it must notice the kill by itself, without another greenlight running.
    Store::open(&state).unwrap();
    let (child, addr, _guard) = serve(&state);
    let killed = crate::run_record::verify_killed_mid_gate(&repo, &state);
    runtime().block_on(async {
        let id = killed.0;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let run = loop {
            let run = get_json(addr, &format!("/api/runs/{id}")).await;
            if !run["result"].is_null() || tokio::time::Instant::now() > deadline {
                break run;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(run["result"], "interrupted", "{run}");
        assert!(run["ended_at"].is_i64(), "{run}");
        assert_eq!(run["exit_code"], serde_json::Value::Null, "{run}");
        let list = get_json(addr, "/api/runs").await;
        assert_eq!(list[0]["result"], "interrupted", "{list}");
        let events = get_json(addr, &format!("/api/runs/{id}/events")).await;
        let last = events["frames"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["body"]["type"], "run-finished", "{events}");
        assert_eq!(last["body"]["result"], "interrupted", "{events}");
        let mut page = sse::request(addr, "GET", &format!("/runs/{id}"), &[])
            .await
            .unwrap();
        let html = String::from_utf8(page.body().await.unwrap()).unwrap();
        assert!(html.contains(">interrupted</span>"), "{html}");
        assert!(!html.contains(">running</span>"), "{html}");
    });
    let out = signal_and_wait(child, "-TERM", Duration::from_secs(10));
    assert_eq!(out.code, 0, "{}", out.render());
}
