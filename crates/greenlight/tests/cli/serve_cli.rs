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
pub(crate) struct EndOnDrop(pub(crate) i32);

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

/// `greenlight serve` on a free loopback port for the state file `state`; returns once it
/// printed its address. The stderr pipe goes back to the child (a closed one would fail the
/// server's later writes).
pub(crate) fn serve(state: &std::path::Path) -> (std::process::Child, EndOnDrop, SocketAddr) {
    let mut child = Command::new(greenlight_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--state"])
        .arg(state)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let reaper = EndOnDrop(child.id() as i32);
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = served_addr(&line);
    child.stderr = Some(stderr.into_inner());
    (child, reaper, addr)
}

/// The resident set of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmRSS in /proc/{pid}/status"))
}

/// GETs `path` and returns its status and body.
async fn get_body(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut response = sse::request(addr, "GET", path, &[]).await.unwrap();
    let body = response.body().await.unwrap();
    (response.status, String::from_utf8_lossy(&body).into_owned())
}

/// Each watcher of a stream that does not exist used to get a 4096-slot live channel that
/// nothing dropped: 3,000 such GETs (an `<img>` on any web page can send them) took the server
/// from 17 MB to 511 MB. A missing stream is a 404 and costs nothing held.
#[test]
fn thousands_of_gets_of_missing_streams_are_404_and_leave_the_servers_memory_flat() {
    let dir = tempfile::tempdir().unwrap();
    let (child, _reaper, addr) = serve(&dir.path().join("state.db"));
    let pid = child.id();
    runtime().block_on(async {
        let (status, body) = get_body(addr, "/api/goals/7/stream").await;
        assert_eq!(status, 404, "{body}");
        assert!(body.contains("no goal 7 in this state file"), "{body}");
        let (status, body) = get_body(addr, "/api/runs/8/stream").await;
        assert_eq!(status, 404, "{body}");
        assert!(body.contains("no run 8 in this state file"), "{body}");
        let before = rss_kib(pid);
        let started = std::time::Instant::now();
        for batch in 0..60u64 {
            let mut gets = Vec::new();
            for i in 0..50u64 {
                let id = 1000 + batch * 50 + i;
                let kind = if id % 2 == 0 { "goals" } else { "runs" };
                gets.push(tokio::spawn(get_body(
                    addr,
                    format!("/api/{kind}/{id}/stream").leak(),
                )));
            }
            for get in gets {
                let (status, body) = get.await.unwrap();
                assert_eq!(status, 404, "{body}");
            }
        }
        let grown = rss_kib(pid).saturating_sub(before);
        eprintln!("3,000 GETs of missing streams: the server's RSS grew {grown} KiB");
        assert!(
            grown < 8 * 1024,
            "3,000 GETs of missing streams grew the server by {grown} KiB"
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{:?}",
            started.elapsed()
        );
    });
}

/// A connection that never finishes its request head used to be held for ever: 150 half-open
/// connections were all still open after 35 s. Each is dropped within a few seconds now,
/// whether it sent nothing or half a head, and the server keeps answering.
#[test]
fn half_open_connections_are_dropped_within_seconds() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let (_child, _reaper, addr) = serve(&dir.path().join("state.db"));
    runtime().block_on(async {
        let mut live = sse::request(addr, "GET", "/api/live", &[]).await.unwrap();
        live.next_event().await.unwrap().unwrap();
        let started = std::time::Instant::now();
        let mut held = Vec::new();
        for i in 0..40 {
            let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
            if i % 2 == 1 {
                socket
                    .write_all(b"GET /api/goals HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                    .await
                    .unwrap();
            }
            held.push(socket);
        }
        for (i, mut socket) in held.into_iter().enumerate() {
            // Whatever the server says before it closes (nothing, or a 408), it closes.
            let mut said = Vec::new();
            let read =
                tokio::time::timeout(Duration::from_secs(15), socket.read_to_end(&mut said)).await;
            assert!(
                read.is_ok(),
                "connection {i} is still held after {:?}",
                started.elapsed()
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{:?}",
            started.elapsed()
        );
        let (status, body) = get_body(addr, "/api/goals").await;
        assert_eq!((status, body.as_str()), (200, "[]"));
    });
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
    let (child, _guard, addr) = serve(&state);
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

/// Goals 1..=60 in one transaction, each in a worktree of its own under `dir`: odd ones done,
/// and 1..=10 last changed more than a week ago (so 1, 3, 5, 7 and 9 are archived).
fn sixty_goals(dir: &std::path::Path, state: &std::path::Path) {
    use greenlight_store::{SystemClock, WallClock};
    let mut store = Store::open(state).unwrap();
    store
        .write(|tx| {
            for i in 1..=60 {
                let worktree = dir.join(format!("wt{i}"));
                std::fs::create_dir_all(&worktree).unwrap();
                let goal = tx.create_goal(&greenlight_testkit::load::command_goal(
                    worktree,
                    &format!("goal {i}"),
                ))?;
                if i % 2 == 1 {
                    tx.complete_goal(goal)?;
                }
            }
            Ok::<_, greenlight_store::Error>(())
        })
        .unwrap();
    let week_ago = SystemClock.now_ms() - greenlight_store::ARCHIVE_AFTER_MS - 60_000;
    rusqlite::Connection::open(state)
        .unwrap()
        .execute(
            "UPDATE goals SET updated_at = ?1 WHERE id <= 10",
            [week_ago],
        )
        .unwrap();
}

fn goal_ids(list: &serde_json::Value) -> Vec<i64> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|g| g["id"].as_i64().unwrap())
        .collect()
}

/// `/api/goals` and the dashboard sent every goal ever created, and `/api/live` sent the whole
/// list again after every commit (≈5k goals: 28.8 MB to one tab in 10 s). The list is paged
/// newest first with a `Link` to the next page, archived goals stay out of it but are reachable,
/// and after a commit `/api/live` sends only the goal that changed.
#[test]
fn serve_pages_the_goal_list_and_live_sends_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.db");
    sixty_goals(dir.path(), &state);
    let (child, _guard, addr) = serve(&state);
    runtime().block_on(async {
        let mut first = sse::request(addr, "GET", "/api/goals", &[]).await.unwrap();
        assert_eq!(first.status, 200);
        let link = first.header("link").unwrap().to_owned();
        assert_eq!(link, "</api/goals?before=11&limit=50>; rel=\"next\"");
        let page: serde_json::Value = serde_json::from_slice(&first.body().await.unwrap()).unwrap();
        assert_eq!(goal_ids(&page), (11..=60).rev().collect::<Vec<_>>());

        let mut second = sse::request(addr, "GET", "/api/goals?before=11&limit=50", &[])
            .await
            .unwrap();
        assert_eq!(second.header("link"), None);
        let page: serde_json::Value =
            serde_json::from_slice(&second.body().await.unwrap()).unwrap();
        assert_eq!(goal_ids(&page), [10, 8, 6, 4, 2]);

        let all = get_json(addr, "/api/goals?archived=true&limit=500").await;
        assert_eq!(goal_ids(&all), (1..=60).rev().collect::<Vec<_>>());
        let archived = get_json(addr, "/api/goals/3").await;
        assert_eq!(archived["goal"]["state"], "done");
        let small = get_json(addr, "/api/goals?limit=2").await;
        assert_eq!(goal_ids(&small), [60, 59]);

        let mut html = sse::request(addr, "GET", "/", &[]).await.unwrap();
        let html = String::from_utf8(html.body().await.unwrap()).unwrap();
        assert_eq!(html.matches("<tr data-goal=").count(), 50);
        assert!(html.contains("href=\"/?before=11&amp;limit=50\""), "{html}");

        let mut live = sse::request(addr, "GET", "/api/live", &[]).await.unwrap();
        let hello = live.next_event().await.unwrap().unwrap();
        assert_eq!(hello.event.as_deref(), Some("goals"));
        let hello: serde_json::Value = serde_json::from_str(&hello.data).unwrap();
        assert_eq!(goal_ids(&hello["goals"]).len(), 50);
        assert_eq!(hello["next"], 11);

        Store::open(&state)
            .unwrap()
            .write(|tx| tx.pause_goal(greenlight_store::GoalId(58), "paused-by-user", None))
            .unwrap();
        let next = tokio::time::timeout(Duration::from_secs(10), live.next_event())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(next.event.as_deref(), Some("changes"), "{next:?}");
        let changed: serde_json::Value = serde_json::from_str(&next.data).unwrap();
        assert_eq!(goal_ids(&changed["goals"]), [58], "{changed}");
        assert_eq!(changed["goals"][0]["state"], "paused");
        assert_eq!(changed["runs"], serde_json::json!([]));
    });
    let out = signal_and_wait(child, "-TERM", Duration::from_secs(10));
    assert_eq!(out.code, 0, "{}", out.render());
}
