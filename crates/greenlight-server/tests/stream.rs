//! `greenlight serve` through a real server on loopback and a real SSE client: the four resume
//! outcomes, live frames committed by another process, the guard, the JSON API, the load test.
//!
//! Frames from "another process" are written by this test binary run again as a child with
//! `GREENLIGHT_TEST_WRITER` set (see [`writer_process`]): a separate process writing through the
//! store into the same file, as a goal runner does.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use greenlight_server::{Config, Server};
use greenlight_store::greenlight_stream::{RunKind, StreamId};
use greenlight_store::{GoalId, Reads, Store};
use greenlight_testkit::load::{self, Plan};
use greenlight_testkit::sse::{self, Event, Item};

const WRITER_VAR: &str = "GREENLIGHT_TEST_WRITER";
const LIMIT: Duration = Duration::from_secs(10);

struct Fixture {
    dir: tempfile::TempDir,
    state: PathBuf,
    goal: GoalId,
}

impl Fixture {
    /// A state file with one goal holding its `goal-state` frame (seq 1, written by the store
    /// when the goal is created) and then `frames` activity frames.
    fn new(frames: u64) -> Fixture {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = dir.path().join("state.db");
        let goal = load::create_goal(&state, dir.path());
        let fixture = Fixture { dir, state, goal };
        fixture.append(frames);
        fixture
    }

    fn append(&self, frames: u64) {
        let mut store = Store::open(&self.state).expect("open");
        for i in 0..frames {
            store
                .write(|tx| tx.append_frame(StreamId::Goal(self.goal.0), &load::stamped_frame(i)))
                .expect("append");
        }
    }

    fn second_goal(&self) -> GoalId {
        let other = self.dir.path().join("other");
        std::fs::create_dir_all(&other).expect("mkdir");
        load::create_goal(&self.state, &other)
    }

    fn serve(&self) -> Server {
        greenlight_server::start(Config::new(
            "127.0.0.1:0".parse().expect("addr"),
            self.state.clone(),
        ))
        .expect("server starts")
    }

    fn cursor(&self, seq: u64) -> String {
        format!("{}:{seq}", self.goal.0)
    }

    fn stream_path(&self) -> String {
        format!("/api/goals/{}/stream", self.goal.0)
    }

    /// Spawns this test binary as a writer of `frames` frames at `rate`/s into the goal.
    fn spawn_writer(&self, frames: u64, rate: u64) -> Child {
        spawn_writer(&self.state, self.goal, frames, rate)
    }
}

fn spawn_writer(state: &Path, goal: GoalId, frames: u64, rate: u64) -> Child {
    let exe = std::env::current_exe().expect("test binary");
    let spec = format!("{}\t{}\t{frames}\t{rate}", state.display(), goal.0);
    std::os::unix::process::CommandExt::process_group(
        Command::new(exe)
            .args(["writer_process", "--exact", "--quiet", "--test-threads=1"])
            .env(WRITER_VAR, spec)
            .stdout(std::process::Stdio::null()),
        0,
    )
    .spawn()
    .expect("spawn the writer process")
}

/// Not a test of its own: the body of the writer child the tests spawn (it returns at once
/// when run as a test). Writes through the store, one committed transaction per frame.
#[test]
fn writer_process() {
    let Some(spec) = std::env::var_os(WRITER_VAR) else {
        return;
    };
    let spec = spec.to_string_lossy().into_owned();
    let parts: Vec<&str> = spec.split('\t').collect();
    let [state, goal, frames, rate] = parts[..] else {
        panic!("{WRITER_VAR} must be state\\tgoal\\tframes\\trate, got {spec:?}");
    };
    load::write_frames(
        Path::new(state),
        GoalId(goal.parse().expect("goal id")),
        frames.parse().expect("frames"),
        rate.parse().expect("rate"),
    );
}

fn wait_writer(mut child: Child) {
    let status = child.wait().expect("wait for the writer");
    assert!(status.success(), "the writer process failed: {status}");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

async fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> sse::Response {
    tokio::time::timeout(LIMIT, sse::request(addr, "GET", path, headers))
        .await
        .expect("answer in time")
        .expect("request")
}

async fn next_event(response: &mut sse::Response) -> Option<Event> {
    tokio::time::timeout(LIMIT, response.next_event())
        .await
        .expect("an event (or the end) in time")
        .expect("read the stream")
}

async fn json(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, serde_json::Value) {
    let mut response = tokio::time::timeout(LIMIT, sse::request(addr, method, path, headers))
        .await
        .expect("answer in time")
        .expect("request");
    let body = tokio::time::timeout(LIMIT, response.body())
        .await
        .expect("body in time")
        .expect("body");
    let value = serde_json::from_slice(&body).unwrap_or_else(|e| {
        panic!(
            "{method} {path}: not JSON ({e}): {}",
            String::from_utf8_lossy(&body)
        )
    });
    (response.status, value)
}

/// Reads events into `seqs` until the one with seq `last`.
async fn read_up_to(response: &mut sse::Response, goal: GoalId, last: u64, seqs: &mut Vec<u64>) {
    while seqs.last() != Some(&last) {
        let event = next_event(response).await.expect("a frame before the end");
        seqs.push(seq_of(&event, goal));
    }
}

fn seq_of(event: &Event, goal: GoalId) -> u64 {
    let id = event
        .id
        .as_deref()
        .unwrap_or_else(|| panic!("event without id: {event:?}"));
    let (stream, seq) = id.split_once(':').expect("stream:seq");
    assert_eq!(stream, goal.0.to_string(), "{id}");
    seq.parse().expect("seq")
}

#[test]
fn a_dropped_watcher_resumes_after_frame_5_and_gets_every_later_frame_once() {
    let f = Fixture::new(9);
    let server = f.serve();
    runtime().block_on(async {
        let mut first = get(server.addr(), &f.stream_path(), &[]).await;
        assert_eq!(first.status, 200);
        assert_eq!(first.header("content-type"), Some("text/event-stream"));
        assert_eq!(
            first.header("cache-control"),
            Some("no-cache, no-transform")
        );
        assert_eq!(first.header("x-accel-buffering"), Some("no"));
        assert_eq!(first.header("content-encoding"), None);
        let retry = tokio::time::timeout(LIMIT, first.next_item())
            .await
            .expect("in time")
            .expect("read");
        assert_eq!(retry, Some(Item::Retry(2000)), "retry comes first");
        for want in 1..=5 {
            let event = next_event(&mut first).await.expect("frame");
            assert_eq!(seq_of(&event, f.goal), want);
            let frame: serde_json::Value = serde_json::from_str(&event.data).expect("frame JSON");
            let kind = if want == 1 { "goal-state" } else { "activity" };
            assert_eq!(frame["body"]["type"], kind);
            assert_eq!(frame["seq"], want);
        }
        drop(first);

        let cursor = f.cursor(5);
        let mut resumed = get(
            server.addr(),
            &f.stream_path(),
            &[("Last-Event-ID", &cursor)],
        )
        .await;
        assert_eq!(resumed.status, 200);
        // More frames are committed while the watcher is attached.
        let writer = f.spawn_writer(5, 100);
        let mut seen = Vec::new();
        while seen.len() < 10 {
            seen.push(seq_of(
                &next_event(&mut resumed).await.expect("frame"),
                f.goal,
            ));
        }
        wait_writer(writer);
        assert_eq!(seen, (6..=15).collect::<Vec<_>>());
        // Nothing more: no duplicate of the hand-over arrives.
        let extra = tokio::time::timeout(Duration::from_millis(300), resumed.next_event()).await;
        assert!(extra.is_err(), "an extra event arrived: {extra:?}");
    });
}

#[test]
fn a_cursor_past_the_head_or_malformed_gets_the_gap_frame_and_the_end() {
    let f = Fixture::new(40);
    let server = f.serve();
    runtime().block_on(async {
        let past = f.cursor(99);
        for (cursor, why) in [(past.as_str(), "past the head"), ("garbage", "malformed")] {
            let mut response = get(
                server.addr(),
                &f.stream_path(),
                &[("Last-Event-ID", cursor)],
            )
            .await;
            assert_eq!(response.status, 200, "{why}");
            let gap = next_event(&mut response).await.expect("the gap frame");
            assert_eq!(gap.id, None, "{why}: the gap carries no id");
            assert_eq!(gap.event.as_deref(), Some("error"));
            assert!(
                gap.data.contains("SEQUENCE_GAP") && gap.data.contains("RESYNC_REQUIRED"),
                "{}",
                gap.data
            );
            assert_eq!(
                next_event(&mut response).await,
                None,
                "{why}: the body ends after the gap"
            );
        }
        // The query parameter is read when there is no header.
        let path = format!("{}?last_event_id={}", f.stream_path(), f.cursor(99));
        let mut response = get(server.addr(), &path, &[]).await;
        let gap = next_event(&mut response).await.expect("gap");
        assert!(gap.data.contains("SEQUENCE_GAP"));
        // ...and the header wins over it.
        let path = format!("{}?last_event_id=garbage", f.stream_path());
        let cursor = f.cursor(39);
        let mut response = get(server.addr(), &path, &[("Last-Event-ID", &cursor)]).await;
        assert_eq!(
            seq_of(&next_event(&mut response).await.expect("frame"), f.goal),
            40
        );
    });
}

#[test]
fn another_goals_cursor_is_refused_with_409_and_an_empty_body() {
    let f = Fixture::new(3);
    let other = f.second_goal();
    let server = f.serve();
    runtime().block_on(async {
        let cursor = format!("{}:2", other.0);
        let mut response = get(
            server.addr(),
            &f.stream_path(),
            &[("Last-Event-ID", &cursor)],
        )
        .await;
        assert_eq!(response.status, 409);
        let body = tokio::time::timeout(LIMIT, response.body())
            .await
            .expect("in time")
            .expect("body");
        assert!(body.is_empty(), "{:?}", String::from_utf8_lossy(&body));
        let mut run_cursor = get(
            server.addr(),
            &f.stream_path(),
            &[("Last-Event-ID", "run-1:1")],
        )
        .await;
        assert_eq!(run_cursor.status, 409);
        assert!(run_cursor.body().await.expect("body").is_empty());
    });
}

#[test]
fn the_same_cursor_twice_gives_the_same_frames() {
    let f = Fixture::new(40);
    let server = f.serve();
    runtime().block_on(async {
        let cursor = f.cursor(3);
        let mut runs = Vec::new();
        for _ in 0..2 {
            let mut response = get(
                server.addr(),
                &f.stream_path(),
                &[("Last-Event-ID", &cursor)],
            )
            .await;
            let mut events = Vec::new();
            while events.len() < 37 {
                events.push(next_event(&mut response).await.expect("frame"));
            }
            runs.push(events);
        }
        assert_eq!(seq_of(&runs[0][0], f.goal), 4);
        assert_eq!(seq_of(&runs[0][36], f.goal), 40);
        assert_eq!(runs[0], runs[1]);
        // A bare decimal is a seq of the URL's goal.
        let mut bare = get(server.addr(), &f.stream_path(), &[("Last-Event-ID", "38")]).await;
        assert_eq!(
            seq_of(&next_event(&mut bare).await.expect("frame"), f.goal),
            39
        );
    });
}

#[test]
fn frames_committed_by_another_process_arrive_live_within_100_ms() {
    let f = Fixture::new(0);
    let server = f.serve();
    runtime().block_on(async {
        let mut response = get(server.addr(), &f.stream_path(), &[]).await;
        assert_eq!(response.status, 200);
        let created = next_event(&mut response).await.expect("the goal's first frame");
        assert_eq!(seq_of(&created, f.goal), 1);
        let writer = f.spawn_writer(50, 50);
        let mut late = Vec::new();
        for want in 2..=51 {
            let event = next_event(&mut response).await.expect("live frame");
            let now = load::now_us();
            assert_eq!(seq_of(&event, f.goal), want);
            let stamp: u64 = event.data.split("t=").nth(1).and_then(|s| s.split(' ').next()).and_then(|s| s.parse().ok()).expect("stamp");
            late.push(now.saturating_sub(stamp));
        }
        wait_writer(writer);
        late.sort_unstable();
        let p90 = late[late.len() * 9 / 10];
        assert!(p90 < 100_000, "90% of frames should arrive within 100 ms of their commit; p90 was {p90} µs (all: {late:?})");
    });
}

#[test]
fn a_run_stream_starts_with_run_started() {
    let f = Fixture::new(0);
    let run = Store::open(&f.state)
        .expect("open")
        .write(|tx| tx.begin_run(RunKind::Verify, f.dir.path(), &["true".into()]))
        .expect("run");
    let server = f.serve();
    runtime().block_on(async {
        let mut response = get(server.addr(), &format!("/api/runs/{}/stream", run.0), &[]).await;
        let event = next_event(&mut response).await.expect("frame");
        assert_eq!(event.id, Some(format!("run-{}:1", run.0)));
        assert!(event.data.contains("\"run-started\""), "{}", event.data);
        let (status, body) = json(server.addr(), "GET", &format!("/api/runs/{}", run.0), &[]).await;
        assert_eq!(status, 200);
        assert_eq!(body["kind"], "verify");
        let (_, runs) = json(server.addr(), "GET", "/api/runs", &[]).await;
        assert_eq!(runs.as_array().map(Vec::len), Some(1));
        let (_, page) = json(
            server.addr(),
            "GET",
            &format!("/api/runs/{}/events", run.0),
            &[],
        )
        .await;
        assert_eq!(page["head"], 1);
    });
}

#[test]
fn a_workflow_stream_starts_with_run_started_and_its_snapshot_and_list_answer() {
    let f = Fixture::new(0);
    let run = Store::open(&f.state)
        .expect("open")
        .write(|tx| {
            tx.create_workflow_run(&greenlight_store::NewWorkflowRun {
                name: "fix".into(),
                plan_json: r#"{"steps":[{"id":"a","kind":"agent"}]}"#.into(),
                args_json: "{}".into(),
                ..greenlight_store::NewWorkflowRun::default()
            })
        })
        .expect("run");
    let server = f.serve();
    runtime().block_on(async {
        let path = format!("/api/workflows/{}/stream", run.0);
        let mut response = get(server.addr(), &path, &[]).await;
        let event = next_event(&mut response).await.expect("frame");
        assert_eq!(event.id, Some(format!("wf-{}:1", run.0)));
        assert!(
            event.data.contains("\"workflow-run-started\""),
            "{}",
            event.data
        );
        let (status, body) = json(
            server.addr(),
            "GET",
            &format!("/api/workflows/{}", run.0),
            &[],
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(
            (&body["status"], &body["head"]),
            (&serde_json::json!("running"), &serde_json::json!(1))
        );
        assert_eq!(body["nodes"][0]["step"], "a");
        assert_eq!(body["nodes"][0]["state"], "pending");
        let (_, list) = json(server.addr(), "GET", "/api/workflows", &[]).await;
        assert_eq!(list[0]["id"], run.0);
        // A goal's cursor is not this stream's.
        let refused = get(
            server.addr(),
            &format!("/api/workflows/{}/stream", run.0),
            &[("Last-Event-ID", "1:1")],
        )
        .await;
        assert_eq!(refused.status, 409);
        for missing in [
            "/api/workflows/9",
            "/api/workflows/9/stream",
            "/api/workflows/9/events",
            "/workflows/9",
            "/api/workflows/run-1",
        ] {
            let (status, body) = json(server.addr(), "GET", missing, &[]).await;
            assert_eq!(status, 404, "{missing}: {body}");
        }
    });
}

#[test]
fn unknown_goals_runs_and_paths_are_404_with_a_json_error() {
    let f = Fixture::new(1);
    let server = f.serve();
    runtime().block_on(async {
        for path in [
            "/api/goals/999",
            "/api/goals/999/stream",
            "/api/goals/999/events",
            "/api/goals/abc",
            "/api/goals/0/stream",
            "/api/runs/5",
            "/api/runs/5/stream",
            "/goals/999",
            "/nope",
        ] {
            let (status, body) = json(server.addr(), "GET", path, &[]).await;
            assert_eq!(status, 404, "{path}: {body}");
            assert_eq!(body["error"], "not-found", "{path}");
            assert!(
                body["detail"].as_str().is_some_and(|d| !d.is_empty()),
                "{path}: {body}"
            );
        }
    });
}

#[test]
fn the_json_api_lists_snapshots_and_pages_frames() {
    let f = Fixture::new(19);
    let server = f.serve();
    runtime().block_on(async {
        let (status, goals) = json(server.addr(), "GET", "/api/goals", &[]).await;
        assert_eq!(status, 200);
        assert_eq!(goals[0]["id"], f.goal.0);
        assert_eq!(goals[0]["head"], 20);
        assert_eq!(goals[0]["state"], "active");
        let (_, snapshot) = json(
            server.addr(),
            "GET",
            &format!("/api/goals/{}", f.goal.0),
            &[],
        )
        .await;
        assert_eq!(snapshot["goal"]["text"], "stream load");
        assert_eq!(snapshot["gates"][0]["command"], "true");
        let path = format!("/api/goals/{}/events?after=5&limit=10", f.goal.0);
        let (_, page) = json(server.addr(), "GET", &path, &[]).await;
        assert_eq!(page["head"], 20);
        let seqs: Vec<u64> = page["frames"]
            .as_array()
            .expect("frames")
            .iter()
            .map(|f| f["seq"].as_u64().expect("seq"))
            .collect();
        assert_eq!(seqs, (6..=15).collect::<Vec<_>>());
    });
}

#[test]
fn pause_and_resume_need_a_same_origin_request_without_a_token() {
    let f = Fixture::new(0);
    let server = f.serve();
    let origin = format!("http://{}", server.addr());
    let pause = format!("/api/goals/{}/pause", f.goal.0);
    let resume = format!("/api/goals/{}/resume", f.goal.0);
    runtime().block_on(async {
        let (status, body) = json(server.addr(), "POST", &pause, &[]).await;
        assert_eq!(status, 403, "no origin: {body}");
        let (status, _) = json(
            server.addr(),
            "POST",
            &pause,
            &[("Origin", "http://evil.example")],
        )
        .await;
        assert_eq!(status, 403, "a cross-site form post");
        let (status, _) = json(
            server.addr(),
            "POST",
            &pause,
            &[("Sec-Fetch-Site", "cross-site")],
        )
        .await;
        assert_eq!(status, 403);
        // A JSON body is what a browser cannot send cross-site without a preflight; with a
        // foreign Origin or a cross-site fetch it is refused all the same.
        for refused in [
            [
                ("Content-Type", "application/json"),
                ("Origin", "http://evil.example"),
            ],
            [
                ("Content-Type", "application/json"),
                ("Sec-Fetch-Site", "cross-site"),
            ],
            [("Content-Type", "text/plain"), ("X-Not-Origin", "x")],
        ] {
            let (status, _) = json(server.addr(), "POST", &pause, &refused).await;
            assert_eq!(status, 403, "{refused:?}");
        }
        let state = |f: &Fixture| {
            Store::open(&f.state)
                .expect("open")
                .goal(f.goal)
                .expect("read")
                .expect("goal")
                .state
                .as_str()
        };
        assert_eq!(state(&f), "active", "nothing refused may change the goal");

        let (status, body) = json(server.addr(), "POST", &pause, &[("Origin", &origin)]).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["goal"]["state"], "paused");
        assert_eq!(body["goal"]["pause_reason"], "paused-by-user");
        assert_eq!(state(&f), "paused");

        let (status, body) = json(
            server.addr(),
            "POST",
            &resume,
            &[("Sec-Fetch-Site", "same-origin")],
        )
        .await;
        assert_eq!(status, 202, "{body}");
        assert_eq!(body["goal"]["state"], "active");
        assert!(
            body["hint"]
                .as_str()
                .is_some_and(|h| h.contains("greenlight goal resume")),
            "{body}"
        );
        // A script's (or an MCP client's) JSON post needs no Origin.
        let (status, body) = json(
            server.addr(),
            "POST",
            &pause,
            &[("Content-Type", "application/json; charset=utf-8")],
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["goal"]["state"], "paused");
        let (status, _) = json(
            server.addr(),
            "POST",
            &resume,
            &[("Content-Type", "application/json")],
        )
        .await;
        assert_eq!(status, 202);
        assert_eq!(state(&f), "active");
    });
}

/// The dashboard's pause and resume follow the one rule every front end shares: a done or
/// cleared goal is neither paused nor resumed. It is refused with 409 in the same words as MCP
/// and the command line, and the database keeps the goal, its events and its frames as they were.
#[test]
fn a_done_or_cleared_goal_is_refused_409_by_pause_and_resume_and_left_unchanged() {
    let f = Fixture::new(0);
    let cleared = f.second_goal();
    let mut store = Store::open(&f.state).expect("open");
    store.write(|tx| tx.complete_goal(f.goal)).expect("done");
    store.write(|tx| tx.clear_goal(cleared)).expect("cleared");
    let stored = |store: &Store, goal: GoalId| {
        let row = store.goal(goal).expect("read").expect("goal");
        let events = store.events_after(Some(goal), 0, 1000).expect("events");
        let frames = store.frame_bounds(StreamId::Goal(goal.0)).expect("frames");
        (row, events.len(), frames)
    };
    let server = f.serve();
    runtime().block_on(async {
        for (goal, state) in [(f.goal, "done"), (cleared, "cleared")] {
            let before = stored(&store, goal);
            for (action, rule) in [
                ("pause", "only an active goal can be paused"),
                ("resume", "only a paused goal can be resumed"),
            ] {
                let path = format!("/api/goals/{}/{action}", goal.0);
                let (status, body) = json(
                    server.addr(),
                    "POST",
                    &path,
                    &[("Content-Type", "application/json")],
                )
                .await;
                assert_eq!(status, 409, "{action} a {state} goal: {body}");
                assert_eq!(body["error"], "conflict");
                assert_eq!(
                    body["detail"],
                    format!("goal {} is {state}; {rule}", goal.0),
                    "{action} a {state} goal"
                );
            }
            assert_eq!(
                stored(&store, goal),
                before,
                "a refused {state} goal is not written"
            );
        }
        let (status, body) = json(
            server.addr(),
            "POST",
            "/api/goals/999/pause",
            &[("Content-Type", "application/json")],
        )
        .await;
        assert_eq!(status, 404, "{body}");
        assert_eq!(body["detail"], "no goal 999 in this state file");
    });
}

#[test]
fn the_host_header_is_checked_against_dns_rebinding() {
    let f = Fixture::new(0);
    let server = f.serve();
    runtime().block_on(async {
        let (status, body) = json(
            server.addr(),
            "GET",
            "/api/goals",
            &[("Host", "evil.example:7357")],
        )
        .await;
        assert_eq!(status, 403);
        assert!(
            body["detail"]
                .as_str()
                .is_some_and(|d| d.contains("--allow-host evil.example")),
            "{body}"
        );
        let (status, _) = json(
            server.addr(),
            "GET",
            "/api/goals",
            &[("Host", "localhost:1")],
        )
        .await;
        assert_eq!(status, 200);
        let (status, _) = json(
            server.addr(),
            "GET",
            "/api/goals",
            &[("Origin", "http://localhost.evil.example")],
        )
        .await;
        assert_eq!(status, 403);
    });
    let allowed = greenlight_server::start(Config {
        allow_hosts: vec!["greenlight.internal".into()],
        ..Config::new("127.0.0.1:0".parse().expect("addr"), f.state.clone())
    })
    .expect("start");
    runtime().block_on(async {
        let (status, _) = json(
            allowed.addr(),
            "GET",
            "/api/goals",
            &[("Host", "greenlight.internal")],
        )
        .await;
        assert_eq!(status, 200);
    });
}

#[test]
fn with_a_token_every_request_needs_it() {
    let f = Fixture::new(2);
    let refused = greenlight_server::start(Config::new(
        "0.0.0.0:0".parse().expect("addr"),
        f.state.clone(),
    ))
    .expect_err("a public address without a token is refused");
    assert!(refused.to_string().contains("--token-file"), "{refused}");
    let server = greenlight_server::start(Config {
        token: Some("s3cret".into()),
        ..Config::new("127.0.0.1:0".parse().expect("addr"), f.state.clone())
    })
    .expect("start");
    runtime().block_on(async {
        let (status, _) = json(server.addr(), "GET", "/api/goals", &[]).await;
        assert_eq!(status, 401);
        let (status, _) = json(
            server.addr(),
            "GET",
            "/api/goals",
            &[("Authorization", "Bearer wrong")],
        )
        .await;
        assert_eq!(status, 401);
        let (status, _) = json(
            server.addr(),
            "GET",
            "/api/goals",
            &[("Authorization", "Bearer s3cret")],
        )
        .await;
        assert_eq!(status, 200);
        let stream = f.stream_path();
        let mut response = get(server.addr(), &stream, &[]).await;
        assert_eq!(response.status, 401, "streams are guarded too");
        drop(response.body().await);
        let (status, _) = json(server.addr(), "GET", "/login?token=nope", &[]).await;
        assert_eq!(status, 401);
        let mut login = get(server.addr(), "/login?token=s3cret", &[]).await;
        assert_eq!(login.status, 303);
        assert_eq!(login.header("location"), Some("/"));
        let cookie = login.header("set-cookie").expect("cookie").to_owned();
        assert!(
            cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
            "{cookie}"
        );
        drop(login.body().await);
        let pair = cookie.split(';').next().expect("pair").to_owned();
        let mut response = get(server.addr(), &stream, &[("Cookie", &pair)]).await;
        assert_eq!(response.status, 200);
        assert_eq!(
            seq_of(&next_event(&mut response).await.expect("frame"), f.goal),
            1
        );
        let pause = format!("/api/goals/{}/pause", f.goal.0);
        let (status, _) = json(
            server.addr(),
            "POST",
            &pause,
            &[("Authorization", "Bearer s3cret")],
        )
        .await;
        assert_eq!(status, 200, "the token is enough for a state change");
    });
}

#[test]
fn pages_assets_and_the_live_summary() {
    let f = Fixture::new(0);
    let server = f.serve();
    runtime().block_on(async {
        for (path, kind) in [
            ("/", "text/html; charset=utf-8"),
            (&*format!("/goals/{}", f.goal.0), "text/html; charset=utf-8"),
            ("/assets/app.js", "text/javascript; charset=utf-8"),
            ("/assets/style.css", "text/css; charset=utf-8"),
        ] {
            let mut response = get(server.addr(), path, &[]).await;
            assert_eq!(response.status, 200, "{path}");
            assert_eq!(response.header("content-type"), Some(kind), "{path}");
            drop(response.body().await);
        }
        let mut live = get(server.addr(), "/api/live", &[]).await;
        assert_eq!(live.header("content-type"), Some("text/event-stream"));
        let first = next_event(&mut live).await.expect("summary on connect");
        assert_eq!(first.event.as_deref(), Some("goals"));
        let data: serde_json::Value = serde_json::from_str(&first.data).expect("json");
        assert_eq!(data["goals"][0]["head"], 1);
        f.append(2);
        let next = next_event(&mut live).await.expect("summary after a commit");
        let data: serde_json::Value = serde_json::from_str(&next.data).expect("json");
        assert_eq!(data["goals"][0]["head"], 3);
    });
}

#[test]
fn stopping_the_server_ends_open_streams() {
    let f = Fixture::new(0);
    let server = f.serve();
    runtime().block_on(async {
        let mut response = get(server.addr(), &f.stream_path(), &[]).await;
        next_event(&mut response).await.expect("frame");
        let started = Instant::now();
        let stopping = std::thread::spawn(move || server.stop());
        assert_eq!(next_event(&mut response).await, None, "the stream ends");
        stopping.join().expect("join").expect("a clean stop");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    });
}

#[test]
fn load_100_subscribers_by_1000_frames_every_10th_dropped_and_resumed() {
    let f = Fixture::new(0);
    let server = f.serve();
    let plan = Plan {
        addr: server.addr(),
        source: load::Source::Greenlight,
        goal: f.goal.0,
        subscribers: 100,
        frames: 1000,
        drop_every: 10,
        deadline: Duration::from_secs(60),
    };
    let mut writer = None;
    let report = runtime().block_on(load::run(plan, || writer = Some(f.spawn_writer(1000, 200))));
    wait_writer(writer.expect("the writer started"));
    let summary = format!(
        "delivered {} gaps {} duplicates {} incomplete {} reconnects {} p50 {:.1} ms p99 {:.1} ms max {:.1} ms; problems: {:?}",
        report.delivered,
        report.gaps,
        report.duplicates,
        report.incomplete,
        report.reconnects,
        report.quantile_ms(0.5),
        report.quantile_ms(0.99),
        report.quantile_ms(1.0),
        report.problems
    );
    assert_eq!(
        (report.gaps, report.duplicates, report.incomplete),
        (0, 0, 0),
        "{summary}"
    );
    assert_eq!(
        report.delivered,
        100 * (1000 + load::GOAL_FRAMES_BEFORE_WRITER),
        "{summary}"
    );
    assert_eq!(report.reconnects, 10, "{summary}");
}

/// Waits until the server holds `want` (a dropped client is noticed when its socket closes).
fn wait_held(server: &Server, want: greenlight_server::Held) {
    wait_until(server, &format!("not {want:?}"), |held| held == want);
}

/// Waits until what the server holds satisfies `ok`; fails saying `why` and what it holds.
fn wait_until(server: &Server, why: &str, ok: impl Fn(greenlight_server::Held) -> bool) {
    let started = Instant::now();
    while !ok(server.held()) {
        assert!(
            started.elapsed() < LIMIT,
            "{why}: the server holds {:?}",
            server.held()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn held(watchers: usize, live_streams: usize) -> greenlight_server::Held {
    greenlight_server::Held {
        watchers,
        live_streams,
        behind: 0,
    }
}

/// A stream's live channel used to stay until a frame of its stream was next committed, and
/// one was made for streams that do not exist: now it goes with its last watcher, and a
/// missing stream is a 404 that holds nothing.
#[test]
fn a_streams_live_channel_goes_with_its_last_watcher_and_a_missing_stream_holds_nothing() {
    let f = Fixture::new(2);
    let server = f.serve();
    runtime().block_on(async {
        for path in ["/api/goals/999/stream", "/api/runs/998/stream"] {
            let (status, body) = json(server.addr(), "GET", path, &[]).await;
            assert_eq!(status, 404, "{path}: {body}");
            assert_eq!(server.held(), held(0, 0), "{path}");
        }
        let mut first = get(server.addr(), &f.stream_path(), &[]).await;
        let mut second = get(server.addr(), &f.stream_path(), &[]).await;
        assert_eq!(
            next_event(&mut first).await.map(|e| seq_of(&e, f.goal)),
            Some(1)
        );
        assert_eq!(
            next_event(&mut second).await.map(|e| seq_of(&e, f.goal)),
            Some(1)
        );
        // Live once each has read the file (the count of those behind settles).
        wait_held(&server, held(2, 1));
        drop(first);
        wait_held(&server, held(1, 1));
        // The one left still gets live frames.
        f.append(1);
        let mut seqs = Vec::new();
        read_up_to(&mut second, f.goal, 4, &mut seqs).await;
        assert_eq!(seqs, [2, 3, 4]);
        drop(second);
        wait_held(&server, held(0, 0));
    });
}

/// What a client can make the server hold is bounded: past the limit a new stream is a 503
/// that says why, and a place freed is taken again.
#[test]
fn watchers_and_streams_past_the_limits_are_refused_with_503_until_one_leaves() {
    let f = Fixture::new(0);
    let other = f.second_goal();
    let server = greenlight_server::start(Config {
        limits: greenlight_server::Limits {
            watchers: 3,
            live_streams: 1,
            ..greenlight_server::Limits::default()
        },
        ..Config::new("127.0.0.1:0".parse().expect("addr"), f.state.clone())
    })
    .expect("server starts");
    let other_path = format!("/api/goals/{}/stream", other.0);
    runtime().block_on(async {
        let mut open = Vec::new();
        for _ in 0..3 {
            let mut watcher = get(server.addr(), &f.stream_path(), &[]).await;
            assert_eq!(watcher.status, 200);
            next_event(&mut watcher).await.expect("frame");
            open.push(watcher);
        }
        let (status, body) = json(server.addr(), "GET", &f.stream_path(), &[]).await;
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["error"], "unavailable");
        assert!(
            body["detail"]
                .as_str()
                .is_some_and(|d| d.contains("already serves 3 streams, its limit")),
            "{body}"
        );
        open.pop();
        wait_held(&server, held(2, 1));
        let (status, body) = json(server.addr(), "GET", &other_path, &[]).await;
        assert_eq!(status, 503, "{body}");
        assert!(
            body["detail"]
                .as_str()
                .is_some_and(|d| d.contains("already streams 1 different goals and runs live")),
            "{body}"
        );
        let now = server.held();
        assert_eq!(
            (now.watchers, now.live_streams),
            (2, 1),
            "a refused watcher holds nothing"
        );
        open.clear();
        wait_held(&server, held(0, 0));
        let mut watcher = get(server.addr(), &other_path, &[]).await;
        assert_eq!(watcher.status, 200);
        next_event(&mut watcher).await.expect("frame");
        wait_held(&server, held(1, 1));
    });
}

/// `frames` activity frames of `size` bytes of text each, appended to the fixture's goal.
fn append_large(f: &Fixture, frames: u64, size: usize) {
    use greenlight_store::greenlight_stream::{ActivityKind, FrameBody};
    let mut store = Store::open(&f.state).expect("open");
    for i in 0..frames {
        let text = format!("n={i} {}", "x".repeat(size));
        let body = FrameBody::Activity {
            turn: 1,
            kind: ActivityKind::Output,
            text,
        };
        store
            .write(|tx| tx.append_frame(StreamId::Goal(f.goal.0), &body))
            .expect("append");
    }
}

/// Waits until the server says `behind` watchers are behind.
fn wait_behind(server: &Server, behind: usize, why: &str) {
    wait_until(server, why, |held| held.behind == behind);
}

/// The poller writes each frame straight to a caught-up watcher's socket; a client that stops
/// reading fills its socket, falls behind, and is caught up by its own task once it reads
/// again: every frame once, in order, and then live again.
#[test]
fn a_watcher_that_stops_reading_falls_behind_and_catches_up_with_every_frame_once() {
    let f = Fixture::new(0);
    let server = f.serve();
    runtime().block_on(async {
        let mut watcher = get(server.addr(), &f.stream_path(), &[]).await;
        assert_eq!(watcher.header("connection"), Some("close"));
        let first = next_event(&mut watcher)
            .await
            .expect("the goal-state frame");
        assert_eq!(seq_of(&first, f.goal), 1);
        wait_behind(&server, 0, "the watcher is live once it read the file");
        // About 6 MB while the client reads nothing: more than both sockets' buffers hold.
        append_large(&f, 400, 16 * 1024);
        wait_behind(&server, 1, "a watcher that reads nothing must fall behind");
        let mut seqs = Vec::new();
        read_up_to(&mut watcher, f.goal, 401, &mut seqs).await;
        assert_eq!(
            seqs,
            (2..=401).collect::<Vec<_>>(),
            "every frame once, in order"
        );
        wait_behind(&server, 0, "caught up, the watcher is live again");
        f.append(1);
        let live = next_event(&mut watcher).await.expect("a live frame");
        assert_eq!(seq_of(&live, f.goal), 402);
        assert_eq!(server.held(), held(1, 1));
    });
}

/// A watcher more writes behind than the live feed queues is ended (the body ends cleanly
/// after the frames it was sent) and resumes by cursor from the file: nothing lost, nothing
/// twice, and the server held a bounded queue meanwhile.
#[test]
fn a_watcher_too_far_behind_is_ended_and_resumes_by_cursor_without_a_gap() {
    let f = Fixture::new(0);
    let server = f.serve();
    let frames = greenlight_server::LIVE_CAPACITY as u64 + 1000;
    runtime().block_on(async {
        let mut watcher = get(server.addr(), &f.stream_path(), &[]).await;
        assert_eq!(seq_of(&next_event(&mut watcher).await.expect("frame 1"), f.goal), 1);
        wait_behind(&server, 0, "the watcher is live once it read the file");
        // About 40 MB: more than both sockets' buffers hold, however far they grow.
        append_large(&f, frames, 8 * 1024);
        let mut seqs = vec![1];
        while let Some(event) = next_event(&mut watcher).await {
            seqs.push(seq_of(&event, f.goal));
        }
        let last = *seqs.last().expect("frames");
        assert!(
            last < frames + 1,
            "the watcher was never ended, though {frames} frames were published while it read nothing"
        );
        let cursor = f.cursor(last);
        let mut resumed = get(server.addr(), &f.stream_path(), &[("Last-Event-ID", &cursor)]).await;
        read_up_to(&mut resumed, f.goal, frames + 1, &mut seqs).await;
        assert_eq!(seqs, (1..=frames + 1).collect::<Vec<_>>(), "every frame once, in order");
        drop(resumed);
        wait_held(&server, held(0, 0));
    });
}

/// A client that stops reading and never closes does not hold its place for ever: once its
/// socket has taken nothing for the stalled-write limit, the stream is ended and the place is
/// free; a client reading as it should in the same while is not touched.
#[test]
fn a_client_that_stops_reading_is_cut_off_after_the_stalled_write_limit() {
    let f = Fixture::new(0);
    let stall = Duration::from_secs(1);
    let server = greenlight_server::start(Config {
        limits: greenlight_server::Limits {
            stalled_write: stall,
            ..greenlight_server::Limits::default()
        },
        ..Config::new("127.0.0.1:0".parse().expect("addr"), f.state.clone())
    })
    .expect("server starts");
    runtime().block_on(async {
        let mut stuck = get(server.addr(), &f.stream_path(), &[]).await;
        let mut reader = get(server.addr(), &f.stream_path(), &[]).await;
        for watcher in [&mut stuck, &mut reader] {
            assert_eq!(
                seq_of(&next_event(watcher).await.expect("frame 1"), f.goal),
                1
            );
        }
        wait_held(&server, held(2, 1));
        append_large(&f, 400, 16 * 1024);
        // The reader takes all of it; the stuck one takes nothing.
        let mut seqs = vec![1];
        read_up_to(&mut reader, f.goal, 401, &mut seqs).await;
        let started = Instant::now();
        wait_held(&server, held(1, 1));
        assert!(
            started.elapsed() < stall * 5,
            "cut off {:?} after the reader was done",
            started.elapsed()
        );
        // The reader is still served live.
        f.append(1);
        let live = next_event(&mut reader).await.expect("a live frame");
        assert_eq!(seq_of(&live, f.goal), 402);
        drop(stuck);
    });
}

/// The connection front answers a stream request itself: a `HEAD` gets the stream's head and
/// no body, HTTP/1.0 (which has no chunks) the stream with a body that ends at the close, and
/// the guard applies as to every route; every other request is hyper's, one per connection.
#[test]
fn the_front_answers_head_and_http_1_0_stream_requests_and_closes_every_connection() {
    let f = Fixture::new(1);
    let server = f.serve();
    let addr = server.addr();
    runtime().block_on(async {
        let path = f.stream_path();
        let head = raw(addr, format!("HEAD {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n")).await;
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(head.contains("content-type: text/event-stream\r\n"), "{head}");
        assert!(head.ends_with("connection: close\r\n\r\n"), "no body after the head: {head}");
        let mut old = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
        tokio::io::AsyncWriteExt::write_all(&mut old, request.as_bytes())
            .await
            .expect("send");
        // The goal-state frame and the one activity frame, replayed.
        let first = format!("id: {}\n", f.cursor(2));
        let mut text = read_until(&mut old, &first).await;
        // The rest of frame 2 (its data line and blank line) ends the replay.
        while !text.ends_with("\n\n") {
            text += &read_until(&mut old, "\n").await;
        }
        assert!(text.starts_with("HTTP/1.0 200 OK\r\n"), "{text}");
        assert!(!text.contains("transfer-encoding"), "{text}");
        assert!(text.contains("\r\n\r\nretry: 2000\n\n"), "no chunk framing: {text}");
        f.append(1);
        // The live frame as it is, with no chunk's size line before it.
        let live = format!("id: {}\n", f.cursor(3));
        let text = read_until(&mut old, &live).await;
        assert!(text.starts_with(&live), "{text}");
        drop(old);
        let foreign = raw(addr, format!("GET {path} HTTP/1.1\r\nHost: evil.example\r\n\r\n")).await;
        assert!(foreign.starts_with("HTTP/1.1 403 "), "{foreign}");
        let missing = raw(addr, format!("GET /api/goals/999/stream HTTP/1.1\r\nHost: {addr}\r\n\r\n")).await;
        assert!(missing.starts_with("HTTP/1.1 404 "), "{missing}");
        assert!(missing.contains("no goal 999"), "{missing}");
        // A head the front cannot read (too long, too many headers) is refused, never streamed
        // and never sent to the stream handler another way.
        let long = raw(
            addr,
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nX-Long: {}\r\n\r\n", "a".repeat(70 * 1024)),
        )
        .await;
        assert!(long.starts_with("HTTP/1.1 431 "), "{}", &long[..long.len().min(300)]);
        let many: String = (0..101).map(|i| format!("X-{i}: v\r\n")).collect();
        let crowded = raw(addr, format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{many}\r\n")).await;
        assert!(crowded.starts_with("HTTP/1.1 431 "), "{crowded}");
        // A head that arrives in pieces, its end split across them, is read whole.
        let mut pieces = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        let split = request.len() - 3;
        for piece in [&request[..5], &request[5..split], &request[split..split + 2], &request[split + 2..]] {
            tokio::io::AsyncWriteExt::write_all(&mut pieces, piece.as_bytes())
                .await
                .expect("send");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let text = read_until(&mut pieces, "retry: 2000").await;
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        drop(pieces);
        // Up to hyper's own bound of headers, the front reads a stream request and streams it.
        let some: String = (0..90).map(|i| format!("X-{i}: v\r\n")).collect();
        let mut wide = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{some}\r\n");
        tokio::io::AsyncWriteExt::write_all(&mut wide, request.as_bytes())
            .await
            .expect("send");
        let text = read_until(&mut wide, "retry: 2000").await;
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        drop(wide);
        // Two requests on one connection: hyper answers the first and closes.
        let two = raw(addr, format!(
            "GET /api/goals HTTP/1.1\r\nHost: {addr}\r\n\r\nGET /api/goals HTTP/1.1\r\nHost: {addr}\r\n\r\n"
        ))
        .await;
        assert_eq!(two.matches("HTTP/1.1 200 OK").count(), 1, "{two}");
        assert!(two.contains("connection: close\r\n"), "{two}");
    });
    wait_held(&server, held(0, 0));
}

/// Reads from `tcp` until what it read contains `needle`; returns all of it.
async fn read_until(tcp: &mut tokio::net::TcpStream, needle: &str) -> String {
    use tokio::io::AsyncReadExt;
    let mut read = Vec::new();
    while !String::from_utf8_lossy(&read).contains(needle) {
        let n = tokio::time::timeout(LIMIT, tcp.read_buf(&mut read))
            .await
            .unwrap_or_else(|_| panic!("no {needle:?} in time: {}", String::from_utf8_lossy(&read)))
            .expect("read");
        assert!(
            n > 0,
            "closed before {needle:?}: {}",
            String::from_utf8_lossy(&read)
        );
    }
    String::from_utf8_lossy(&read).into_owned()
}

/// Sends `request` as it is and reads the answer until the server closes the connection.
async fn raw(addr: SocketAddr, request: String) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    tcp.write_all(request.as_bytes()).await.expect("send");
    let mut answer = Vec::new();
    tokio::time::timeout(LIMIT, tcp.read_to_end(&mut answer))
        .await
        .expect("the server closes the connection")
        .expect("read");
    String::from_utf8_lossy(&answer).into_owned()
}
