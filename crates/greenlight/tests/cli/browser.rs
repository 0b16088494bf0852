//! The dashboard in headless Chromium against a real `greenlight serve` on loopback: the goal page
//! renders the goal, a frame committed to the state file shows within a second, a server that
//! dies and comes back is resumed with the rows still 1..N, and a cursor that fell into pruned
//! frames ends in the resync banner with the EventSource closed. Screenshots of the goal, goals
//! and run pages land in `target/test-artifacts/`.
//!
//! The browser is Debian's `chromium`, driven by `browser/driver.cjs` through playwright-core
//! (npm, installed into `.tools/npm` by `scripts/ci/install-playwright.sh`). Both are found or
//! the test fails naming the package: `GREENLIGHT_CHROMIUM` (default `/usr/bin/chromium`) and
//! `GREENLIGHT_NODE_MODULES` (default `.tools/npm/node_modules` under the workspace root).

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use greenlight_store::greenlight_stream::{
    ActivityKind, FrameBody, GateVerdict, RunKind, StreamId, ToolStatus, TurnTokens,
};
use greenlight_store::{AgentSpec, GoalId, NewGoal, Reads, Store};
use greenlight_testkit::greenlight_bin;
use serde_json::{Value, json};

/// The goal text: hostile on purpose, it must show as text and run nothing.
const GOAL_TEXT: &str =
    r#"Make `cargo test` pass <script>window.__pwned = 1</script> "quoted" & <b>bold</b>"#;

/// Every frame row's seq, in document order.
const SEQS: &str = "[...document.querySelectorAll('[data-seq]')].map((e) => Number(e.dataset.seq))";

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn artifacts() -> PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from)
        .join("test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Debian's Chromium, or the test fails naming the package.
fn chromium() -> PathBuf {
    let path = std::env::var_os("GREENLIGHT_CHROMIUM")
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    assert!(
        path.is_file(),
        "the browser test needs Chromium: {} is missing. Install Debian's `chromium` package \
         (apt-get install chromium; scripts/test does it), or set GREENLIGHT_CHROMIUM to a \
         Chromium binary",
        path.display()
    );
    path
}

/// Node with playwright-core, or the test fails naming the package.
fn node_modules() -> PathBuf {
    let dir = std::env::var_os("GREENLIGHT_NODE_MODULES").map_or_else(
        || workspace_root().join(".tools/npm/node_modules"),
        PathBuf::from,
    );
    assert!(
        dir.join("playwright-core/package.json").is_file(),
        "the browser test needs the npm package playwright-core in {}: run \
         scripts/ci/install-playwright.sh (scripts/test does it), or set \
         GREENLIGHT_NODE_MODULES to a node_modules holding it",
        dir.display()
    );
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.is_ok_and(|o| o.status.success()),
        "the browser test needs node on PATH: install Debian's `nodejs` package"
    );
    dir
}

/// Sends SIGKILL to the process group `pgid` (its children included) and reaps `child`.
fn kill_group(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stderr(Stdio::null())
        .status();
    let _ = child.wait();
}

/// Headless Chromium behind `driver.cjs`: one JSON command a line, one answer a line.
struct Browser {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Browser {
    fn launch() -> Browser {
        let chromium = chromium();
        let modules = node_modules();
        let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/browser/driver.cjs");
        let mut child = Command::new("node")
            .arg(&driver)
            .env("NODE_PATH", &modules)
            .env("GREENLIGHT_CHROMIUM", &chromium)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn()
            .expect("start node with the browser driver");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let ready: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if ready["ready"] != json!(true) {
            kill_group(&mut child);
            panic!(
                "the browser driver did not start Chromium ({}; its stderr is above): it needs \
                 Debian's `chromium` and the npm package playwright-core",
                line.trim()
            );
        }
        Browser {
            child,
            stdin,
            stdout,
            next: 0,
        }
    }

    /// Runs one command; `Err` carries the driver's error (a timeout, a script exception).
    fn call(&mut self, mut command: Value) -> Result<Value, String> {
        self.next += 1;
        command["id"] = json!(self.next);
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let answer: Value = serde_json::from_str(&line)
            .unwrap_or_else(|_| panic!("the browser driver answered {line:?} to {command}"));
        assert_eq!(answer["id"], json!(self.next), "{answer}");
        if answer["ok"] == json!(true) {
            Ok(answer["value"].clone())
        } else {
            Err(answer["error"].as_str().unwrap_or("?").to_owned())
        }
    }

    fn open(&mut self, url: &str) {
        let status = self.call(json!({"op": "open", "url": url})).unwrap();
        assert_eq!(status, json!(200), "GET {url}");
    }

    fn eval(&mut self, expr: &str) -> Value {
        self.call(json!({"op": "eval", "expr": expr}))
            .unwrap_or_else(|e| panic!("{expr}: {e}"))
    }

    /// Waits until `expr` is truthy in the page; panics with what the page shows otherwise.
    fn wait(&mut self, expr: &str, limit: Duration, what: &str) -> Value {
        let ms = u64::try_from(limit.as_millis()).unwrap();
        match self.call(json!({"op": "wait", "expr": expr, "timeout_ms": ms})) {
            Ok(v) => v,
            Err(e) => {
                let state = self.eval(
                    "JSON.stringify({pill: window.greenlight && window.greenlight.state, \
                     seqs: [...document.querySelectorAll('[data-seq]')].map((e) => +e.dataset.seq)})",
                );
                panic!("{what}: {e}; the page: {state}");
            }
        }
    }

    fn screenshot(&mut self, name: &str) -> PathBuf {
        // From the top, so the sticky header sits where it belongs in a full-page picture.
        self.eval("window.scrollTo(0, 0)");
        let path = artifacts().join(name);
        self.call(json!({"op": "screenshot", "path": path, "full_page": true}))
            .unwrap();
        assert!(path.is_file(), "no screenshot at {}", path.display());
        path
    }

    fn page_errors(&mut self) -> Value {
        self.call(json!({"op": "errors"})).unwrap()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.call(json!({"op": "close"}));
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Whatever is left of Chromium goes with the driver's process group.
        kill_group(&mut self.child);
    }
}

/// A real `greenlight serve` on a loopback port, in its own process group.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(port: u16, state: &Path, log: &Path) -> Server {
        let err = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let mut child = Command::new(greenlight_bin())
            .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--state"])
            .arg(state)
            .stdin(Stdio::null())
            .stdout(err.try_clone().unwrap())
            .stderr(err)
            .process_group(0)
            .spawn()
            .expect("start greenlight serve");
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline || matches!(child.try_wait(), Ok(Some(_))) {
                kill_group(&mut child);
                panic!(
                    "greenlight serve did not listen on 127.0.0.1:{port}; it said:\n{}",
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Server { child, port }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Dies at once (SIGKILL): every open stream drops without a goodbye.
    fn kill(mut self) {
        kill_group(&mut self.child);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        kill_group(&mut self.child);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One turn's frames: prompt, activity, a failing tool call, the end, a failing gate, the judge.
fn turn_frames(turn: u32) -> Vec<FrameBody> {
    let t = Some(turn);
    vec![
        FrameBody::TurnStarted {
            turn,
            prompt: format!(
                "Turn {turn}: make the tests pass.\n<evidence>gate 1 failed</evidence>"
            ),
            truncated: false,
        },
        FrameBody::Activity {
            turn,
            kind: ActivityKind::Text,
            text: "Reading the failing test <img src=x onerror=window.__pwned=2>".to_owned(),
        },
        FrameBody::ToolCall {
            turn,
            id: format!("call-{turn}"),
            name: "Bash".to_owned(),
            input: "cargo test -p parser 2>&1 | tail -20".to_owned(),
            status: ToolStatus::Started,
            output: None,
        },
        FrameBody::ToolCall {
            turn,
            id: format!("call-{turn}"),
            name: "Bash".to_owned(),
            input: "cargo test -p parser 2>&1 | tail -20".to_owned(),
            status: ToolStatus::Error,
            output: Some("error[E0308]: mismatched types\n --> src/lib.rs:12:5".to_owned()),
        },
        FrameBody::TurnEnded {
            turn,
            outcome: "ok".to_owned(),
            reason: None,
            reply: Some("I changed the return type of parse().".to_owned()),
            tokens: Some(TurnTokens {
                input: Some(12_345),
                output: Some(678),
                cost_usd: Some(0.0421),
                ..TurnTokens::default()
            }),
            wall_ms: Some(45_200),
        },
        FrameBody::GateStarted {
            gate: 1,
            of: 2,
            command: "cargo build".to_owned(),
            turn: t,
        },
        FrameBody::GateFinished {
            gate: 1,
            command: "cargo build".to_owned(),
            verdict: GateVerdict::Pass,
            exit_code: Some(0),
            duration_ms: Some(2_100),
            digest: None,
            replayed: false,
            turn: t,
        },
        FrameBody::GateStarted {
            gate: 2,
            of: 2,
            command: "cargo test -p parser".to_owned(),
            turn: t,
        },
        FrameBody::GateOutput {
            gate: 2,
            text: "running 14 tests\ntest parse_empty ... ok\ntest parse_nested ... FAILED\n"
                .to_owned(),
            dropped: 0,
        },
        FrameBody::GateFinished {
            gate: 2,
            command: "cargo test -p parser".to_owned(),
            verdict: GateVerdict::Fail,
            exit_code: Some(101),
            duration_ms: Some(3_400),
            digest: Some(
                "FAIL parse_nested (src/lib.rs:40)\n  assertion `left == right` failed\n  \
                 left: Some(1)\n right: None"
                    .to_owned(),
            ),
            replayed: false,
            turn: t,
        },
        FrameBody::JudgeVerdict {
            turn,
            passed: false,
            reply: "Not done: parse_nested still fails.".to_owned(),
        },
    ]
}

fn activity(turn: u32, text: &str) -> FrameBody {
    FrameBody::Activity {
        turn,
        kind: ActivityKind::Text,
        text: text.to_owned(),
    }
}

fn append(store: &mut Store, goal: GoalId, bodies: &[FrameBody]) -> u64 {
    store
        .write(|tx| {
            let mut last = 0;
            for body in bodies {
                last = tx.append_frame(StreamId::Goal(goal.0), body)?.seq;
            }
            Ok::<_, greenlight_store::Error>(last)
        })
        .unwrap()
}

fn new_goal(store: &mut Store, worktree: &Path, text: &str) -> GoalId {
    store
        .write(|tx| {
            tx.create_goal(&NewGoal {
                worktree: worktree.to_owned(),
                text: text.to_owned(),
                agent: AgentSpec {
                    family: greenlight_store::Family::Claude,
                    model: None,
                    argv_template: None,
                    endpoint: None,
                },
                judge: None,
                max_turns: 10,
                retries: 3,
                gate_timeout_sec: 600,
                gates: vec!["cargo build".into(), "cargo test -p parser".into()],
            })
        })
        .unwrap()
}

/// The goal page's gate count: its text and its badge's classes.
const GATES_CELL: &str = "[document.getElementById('goal-gates').textContent, \
     document.querySelector('#goal-gates span').className]";

/// Records one result per gate of `goal`, in order, as the goal loop records them.
fn record_gate_results(store: &mut Store, goal: GoalId, verdicts: &[GateVerdict]) {
    let gates = store.gates(goal).unwrap();
    store
        .write(|tx| {
            for (gate, verdict) in gates.iter().zip(verdicts) {
                tx.record_gate_run(&greenlight_store::NewGateRun {
                    goal,
                    gate: gate.id,
                    // Outside a turn (the frames of turn 1 come later): as a resume's first
                    // gate phase records them.
                    turn: None,
                    verdict: *verdict,
                    exit_code: Some(i32::from(*verdict != GateVerdict::Pass)),
                    duration_ms: 900,
                    workspace_key: None,
                    replayed: false,
                    digest: None,
                    evidence: None,
                })?;
            }
            Ok::<_, greenlight_store::Error>(())
        })
        .unwrap();
}

fn assert_contiguous(seqs: &Value, from: u64, to: u64) {
    let got: Vec<u64> = seqs
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let want: Vec<u64> = (from..=to).collect();
    assert_eq!(got, want, "rows must be {from}..={to}, each once, in order");
}

#[test]
#[ignore = "needs chromium and playwright-core: run scripts/test"]
fn the_goal_page_streams_resumes_and_resyncs_in_chromium() {
    let mut browser = Browser::launch();
    let dir = tempfile::tempdir().unwrap();
    let worktree = dir.path().join("wt");
    std::fs::create_dir(&worktree).unwrap();
    let state = dir.path().join("state.db");
    let log = dir.path().join("serve.log");
    let mut store = Store::open(&state).unwrap();
    let goal = new_goal(&mut store, &worktree, GOAL_TEXT);
    // The gates as turn 1 leaves them: `cargo build` green, the tests red.
    record_gate_results(&mut store, goal, &[GateVerdict::Pass, GateVerdict::Fail]);
    let mut head = append(&mut store, goal, &turn_frames(1));
    head = head.max(append(&mut store, goal, &turn_frames(2)[..3]));
    // 1 is the goal-state frame the store writes when the goal is created.
    assert_eq!(head, 15);

    let port = free_port();
    let server = Server::start(port, &state, &log);
    let page = server.url(&format!("/goals/{}", goal.0));

    // The page renders the goal (as text: the script in it never ran) and streams every frame.
    browser.open(&page);
    browser.wait(
        "document.querySelectorAll('[data-seq]').length === 15 && window.greenlight.state === 'live'",
        Duration::from_secs(10),
        "the first 15 frames and a live pill",
    );
    assert_eq!(
        browser.eval("document.getElementById('goal-text').textContent"),
        json!(GOAL_TEXT)
    );
    // The goal's gates as they stand, not the verdict of whichever gate ran last.
    assert_eq!(
        browser.eval(GATES_CELL),
        json!(["1/2 green", "badge b-fail"])
    );
    assert_eq!(
        browser.eval("[window.__pwned === undefined, document.querySelectorAll('main script, main img').length]"),
        json!([true, 0])
    );
    // The failing gate is open with its digest; the passing one is folded.
    assert_eq!(
        browser.eval(
            "[...document.querySelectorAll('.k-gate-started')].map((g) => \
             [g.dataset.verdict, g.classList.contains('collapsed')])"
        ),
        json!([["pass", true], ["fail", false]])
    );

    // Follow keeps the newest row in view, and turns itself off when the reader scrolls up.
    browser.wait(
        "document.getElementById('follow').checked && window.scrollY > 0 && \
         window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 48",
        Duration::from_secs(2),
        "follow scrolled to the newest row",
    );
    browser.eval("window.scrollBy(0, -300)");
    browser.wait(
        "!document.getElementById('follow').checked",
        Duration::from_secs(2),
        "follow off after scrolling up",
    );
    browser.eval("document.getElementById('follow').click()");

    // A frame committed to the state file shows within a second.
    let committed = Instant::now();
    let seq = append(&mut store, goal, &[activity(2, "a new line, live")]);
    browser.wait(
        &format!("document.getElementById('seq-{seq}') !== null"),
        Duration::from_secs(1),
        "a committed frame within 1 s",
    );
    let shown = committed.elapsed();
    assert!(shown < Duration::from_secs(1), "{shown:?}");
    let mut figures = format!("commit to row in Chromium: {} ms\n", shown.as_millis());

    // The server dies; frames are committed while it is down; it comes back on the same port.
    // The page resumes from its cursor: every row once, none missing.
    server.kill();
    let rest = turn_frames(2)[3..].to_vec();
    let head = append(&mut store, goal, &rest);
    assert_eq!(head, 24);
    browser.wait(
        "window.greenlight.state === 'reconnecting'",
        Duration::from_secs(5),
        "the pill says reconnecting while the server is down",
    );
    let server = Server::start(port, &state, &log);
    let restarted = Instant::now();
    browser.wait(
        "document.querySelectorAll('[data-seq]').length >= 24 && window.greenlight.state === 'live'",
        Duration::from_secs(15),
        "the resumed stream",
    );
    let seqs = browser.eval(SEQS);
    assert_contiguous(&seqs, 1, 24);
    figures += &format!(
        "server back to rows resumed: {} ms\n",
        restarted.elapsed().as_millis()
    );
    assert!(browser.eval("window.greenlight.opens").as_u64().unwrap() >= 2);
    let goal_png = browser.screenshot("dashboard-goal.png");

    // The errors-only filter leaves failing gates, failed tool calls and nothing that passed.
    browser.eval("document.getElementById('errors-only').click()");
    let visible = browser.eval(
        "[...document.querySelectorAll('.row')].filter((r) => r.offsetParent !== null && \
         r.classList.contains('is-error')).length > 0 && \
         [...document.querySelectorAll('.row')].filter((r) => r.offsetParent !== null && \
         !r.classList.contains('is-error') && !r.classList.contains('has-error')).length === 0",
    );
    assert_eq!(visible, json!(true), "errors only shows errors only");
    browser.eval("document.getElementById('errors-only').click()");

    // A permalink opens the page at its row, marked, with follow off.
    // (From another page: a goto that changes only the fragment would not load anything.)
    browser
        .call(json!({"op": "open", "url": "about:blank"}))
        .unwrap();
    browser.open(&format!("{page}#seq-5"));
    browser.wait(
        "document.querySelectorAll('[data-seq]').length === 24 && window.greenlight.state === 'live'",
        Duration::from_secs(10),
        "the page again, from a permalink",
    );
    assert_eq!(
        browser.eval(
            "[[...document.querySelectorAll('.row.target')].map((r) => r.id), \
             document.getElementById('follow').checked]"
        ),
        json!([["seq-5"], false])
    );

    // The server dies again; while it is down the page's cursor (24) falls into frames pruned
    // away, and the goal pauses. On resume the server answers SEQUENCE_GAP: the banner shows,
    // the EventSource is closed for good, and the header is reloaded from the snapshot.
    server.kill();
    let more: Vec<FrameBody> = (0..6)
        .map(|i| activity(2, &format!("after the gap {i}")))
        .collect();
    let head = append(&mut store, goal, &more);
    store
        .write(|tx| {
            tx.prune_frames(StreamId::Goal(goal.0), head - 1)?;
            tx.pause_goal(goal, "gate-retries", Some("gate 2 failed 3 times"))
        })
        .unwrap();
    let server = Server::start(port, &state, &log);
    browser.wait(
        "window.greenlight.state === 'resync' && !document.getElementById('banner').hidden",
        Duration::from_secs(15),
        "the resync banner after a gap",
    );
    browser.wait(
        "document.querySelector('#goal-state .badge').textContent === 'paused'",
        Duration::from_secs(5),
        "the header reloaded from the snapshot",
    );
    // Redrawn by the script from the snapshot, the count reads the same.
    assert_eq!(
        browser.eval(GATES_CELL),
        json!(["1/2 green", "badge b-fail"])
    );
    assert_eq!(
        browser.eval("window.greenlight.source.readyState"),
        json!(2),
        "the EventSource ends closed"
    );
    // Still closed a moment later: nothing reconnected behind the banner.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        browser.eval("[window.greenlight.source.readyState, window.greenlight.state]"),
        json!([2, "resync"])
    );
    assert_contiguous(&browser.eval(SEQS), 1, 24);
    browser.screenshot("dashboard-goal-resync.png");

    // The goals page lists the goal and the run, and a new goal appears live.
    let run = store
        .write(|tx| {
            let run = tx.begin_run(RunKind::Verify, &worktree, &["cargo build".to_owned()])?;
            tx.append_frame(
                run.stream(),
                &FrameBody::GateStarted {
                    gate: 1,
                    of: 1,
                    command: "cargo build".to_owned(),
                    turn: None,
                },
            )?;
            tx.append_frame(
                run.stream(),
                &FrameBody::GateFinished {
                    gate: 1,
                    command: "cargo build".to_owned(),
                    verdict: GateVerdict::Pass,
                    exit_code: Some(0),
                    duration_ms: Some(900),
                    digest: None,
                    replayed: false,
                    turn: None,
                },
            )?;
            tx.finish_run(run, "passed", 0, 950)?;
            Ok::<_, greenlight_store::Error>(run)
        })
        .unwrap();
    browser.open(&server.url("/"));
    browser.wait(
        &format!("document.querySelector('#goals tr[data-goal=\"{}\"]') !== null && window.greenlight.state === 'live'", goal.0),
        Duration::from_secs(5),
        "the goal on the goals page",
    );
    let other = dir.path().join("wt2");
    std::fs::create_dir(&other).unwrap();
    let second = new_goal(
        &mut store,
        &other,
        "Second goal, added while the page is open",
    );
    browser.wait(
        &format!(
            "document.querySelector('#goals tr[data-goal=\"{}\"]') !== null",
            second.0
        ),
        Duration::from_secs(5),
        "a new goal shows live on the goals page",
    );
    // Each goal's gates counted: the first has one of two green, the new one has run none.
    assert_eq!(
        browser.eval(&format!(
            "[{}, {}].map((id) => document.querySelector(`#goals tr[data-goal=\"${{id}}\"] td:nth-child(5)`).textContent)",
            goal.0, second.0
        )),
        json!(["1/2 green", "0/2 green"])
    );
    assert_eq!(
        browser.eval(&format!(
            "document.querySelector('#runs tr[data-run=\"{}\"] .badge').textContent",
            run.0
        )),
        json!("passed")
    );
    let goals_png = browser.screenshot("dashboard-goals.png");

    // The run page shows the run's own stream.
    browser.open(&server.url(&format!("/runs/{}", run.0)));
    browser.wait(
        "document.querySelectorAll('[data-seq]').length === 4",
        Duration::from_secs(5),
        "the run's four frames",
    );
    assert_contiguous(&browser.eval(SEQS), 1, 4);
    browser.screenshot("dashboard-run.png");

    assert_eq!(
        browser.page_errors(),
        json!([]),
        "uncaught exceptions in the page"
    );
    drop(server);
    std::fs::write(artifacts().join("dashboard-browser.txt"), figures).unwrap();
    for png in [goal_png, goals_png] {
        assert!(
            std::fs::metadata(&png).unwrap().len() > 10_000,
            "{} looks empty",
            png.display()
        );
    }
}

/// The plan of the workflow page's test: one agent step, a fan-out of three, its join and its
/// landing, as the plan's canonical JSON holds them.
const WORKFLOW_PLAN: &str = r#"{"name":"fix-modules","steps":[
    {"id":"survey","kind":"agent"},
    {"id":"fix","kind":"fanout","needs":["survey"],"items":["parser","store","cli"]},
    {"id":"fixed","kind":"join","for":"fix","policy":"all-activated"},
    {"id":"ship","kind":"land","needs":["fixed"],"for":"fix"}]}"#;

/// Dispatches step `step` (member `item`) of `run`; returns the ledger row.
fn wf_dispatch(
    store: &mut Store,
    run: greenlight_store::WorkflowRunId,
    step: &str,
    item: Option<&str>,
) -> greenlight_store::WorkflowDispatchId {
    store
        .write(|tx| {
            tx.start_workflow_dispatch(&greenlight_store::NewWorkflowDispatch {
                run,
                step: step.into(),
                item: item.map(str::to_owned),
                attempt: 1,
                family: greenlight_store::Family::Command,
                model: None,
                worktree: None,
            })
        })
        .unwrap()
        .0
}

fn wf_settle(store: &mut Store, id: greenlight_store::WorkflowDispatchId, reason: Option<&str>) {
    store
        .write(|tx| {
            tx.finish_workflow_dispatch(
                id,
                &greenlight_store::WorkflowDispatchEnd {
                    outcome: if reason.is_some() { "failed" } else { "ok" }.into(),
                    reason: reason.map(str::to_owned),
                    wall_ms: Some(40),
                    ..greenlight_store::WorkflowDispatchEnd::default()
                },
            )
        })
        .unwrap();
}

/// The state of graph node `step`/`item` on the page.
fn node_state(step: &str, item: &str) -> String {
    format!(
        "(document.querySelector('#wf-graph [data-step=\"{step}\"][data-item=\"{item}\"]') || \
         {{dataset: {{}}}}).dataset.state"
    )
}

#[test]
#[ignore = "needs chromium and playwright-core: run scripts/test"]
fn the_workflow_page_draws_the_plan_and_each_members_state_live_and_resumes_in_chromium() {
    let mut browser = Browser::launch();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.db");
    let log = dir.path().join("serve.log");
    let mut store = Store::open(&state).unwrap();
    let name = "fix <script>window.__pwned = 3</script> & co";
    let run = store
        .write(|tx| {
            tx.create_workflow_run(&greenlight_store::NewWorkflowRun {
                name: name.into(),
                plan_path: "plan.yaml".into(),
                repository: dir.path().join(".git"),
                worktree: dir.path().to_path_buf(),
                base_commit: "abc".into(),
                plan_digest: "d".into(),
                args_hash: "h".into(),
                plan_json: WORKFLOW_PLAN.into(),
                args_json: "{}".into(),
                budget: greenlight_store::WorkflowBudget {
                    units: Some(8),
                    ..greenlight_store::WorkflowBudget::default()
                },
                ..greenlight_store::NewWorkflowRun::default()
            })
        })
        .unwrap();
    let survey = wf_dispatch(&mut store, run, "survey", None);
    wf_settle(&mut store, survey, None);
    let parser = wf_dispatch(&mut store, run, "fix", Some("parser"));
    let store_member = wf_dispatch(&mut store, run, "fix", Some("store"));
    // 1 run-started, then 2 frames for survey and one per member dispatched.
    let head = store.frame_bounds(run.stream()).unwrap().1;
    assert_eq!(head, 5);

    let port = free_port();
    let server = Server::start(port, &state, &log);
    // From the goals page to the list of workflow runs, and from there to the run.
    browser.open(&server.url("/"));
    assert_eq!(
        browser.eval("document.getElementById('workflows-link').getAttribute('href')"),
        json!("/workflows")
    );
    browser.open(&server.url("/workflows"));
    assert_eq!(
        browser.eval(
            "[...document.querySelectorAll('#workflows tbody tr')].map((r) => \
             [r.dataset.workflow, r.querySelector('a').getAttribute('href'), \
             r.children[2].textContent, r.children[3].textContent])"
        ),
        json!([["1", "/workflows/1", "running", "3/8"]])
    );
    assert_eq!(browser.eval("window.__pwned === undefined"), json!(true));
    browser.open(&server.url(&format!("/workflows/{}", run.0)));
    browser.wait(
        "document.querySelectorAll('[data-seq]').length === 5 && window.greenlight.state === 'live'",
        Duration::from_secs(10),
        "the first 5 frames and a live pill",
    );
    // The plan as a graph: every step, and each fan-out's and land's members under it.
    let graph = browser.eval(
        "[...document.querySelectorAll('#wf-graph .wf-node')].map((n) => \
         n.dataset.step + (n.dataset.item ? '/' + n.dataset.item : '') + ':' + n.dataset.state)",
    );
    assert_eq!(
        graph,
        json!([
            "survey:passed",
            "fix:running",
            "fix/parser:running",
            "fix/store:running",
            "fix/cli:pending",
            "fixed:pending",
            "ship:pending",
            "ship/parser:pending",
            "ship/store:pending",
            "ship/cli:pending"
        ])
    );
    assert_eq!(
        browser.eval("document.getElementById('wf-name').textContent"),
        json!(name),
        "the name is text: its script never ran"
    );
    assert_eq!(browser.eval("window.__pwned === undefined"), json!(true));
    assert_eq!(
        browser.eval("document.getElementById('wf-units').textContent"),
        json!("3/8")
    );

    // A member settling is shown within a second: one passed, one caught by the barrier.
    let committed = Instant::now();
    wf_settle(&mut store, parser, None);
    wf_settle(&mut store, store_member, Some("deliverable-not-landed"));
    browser.wait(
        &format!(
            "{} === 'passed' && {} === 'failed'",
            node_state("fix", "parser"),
            node_state("fix", "store")
        ),
        Duration::from_secs(5),
        "the settled members",
    );
    let shown = committed.elapsed();
    assert!(shown < Duration::from_secs(2), "{shown:?}");
    assert_eq!(
        browser.eval(
            "document.querySelector('#wf-graph [data-step=\"fix\"][data-item=\"store\"] \
             .wf-detail').textContent"
        ),
        json!("deliverable-not-landed")
    );

    // The server dies; a member is dispatched and a landing recorded while it is down; it comes
    // back on the same port and the page resumes from its cursor, every row once.
    server.kill();
    wf_dispatch(&mut store, run, "fix", Some("cli"));
    store
        .write(|tx| {
            tx.append_workflow_event(
                run,
                r#"{"kind":"landed"}"#,
                Some(&FrameBody::WorkflowLanded {
                    run: run.0,
                    step: "ship".into(),
                    item: Some("parser".into()),
                    branch: "wf-1/parser".into(),
                    outcome: "landed".into(),
                    commit: Some("def".into()),
                }),
            )
        })
        .unwrap();
    let head = store.frame_bounds(run.stream()).unwrap().1;
    assert_eq!(head, 9);
    browser.wait(
        "window.greenlight.state === 'reconnecting'",
        Duration::from_secs(5),
        "the pill says reconnecting while the server is down",
    );
    let server = Server::start(port, &state, &log);
    browser.wait(
        &format!(
            "document.querySelectorAll('[data-seq]').length >= 9 && \
             window.greenlight.state === 'live' && {} === 'running' && {} === 'landed'",
            node_state("fix", "cli"),
            node_state("ship", "parser")
        ),
        Duration::from_secs(15),
        "the resumed stream and graph",
    );
    assert_contiguous(&browser.eval(SEQS), 1, 9);
    assert!(browser.eval("window.greenlight.opens").as_u64().unwrap() >= 2);
    let png = browser.screenshot("dashboard-workflow.png");
    assert!(
        std::fs::metadata(&png).unwrap().len() > 10_000,
        "{} looks empty",
        png.display()
    );
    assert_eq!(
        browser.page_errors(),
        json!([]),
        "uncaught exceptions in the page"
    );
    drop(server);
}
