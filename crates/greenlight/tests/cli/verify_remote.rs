//! `options.remote` through the real binary against a real BuildGrid on loopback (started by
//! `scripts/test`, its address in `GREENLIGHT_TEST_REAPI`) and real `greenlight worker`s: the
//! shared action cache (hit, miss, an env change missing, a failure replayed with its output,
//! `shared-read` never writing), `run: remote` gates with their output, a verify killed mid-gate
//! finding its still-running action again, an interrupted verify cancelling its remote gate,
//! and a cluster that cannot be reached leaving the verdict to the gates run here.
//!
//! Every test salts its commands and gives its gates and workers a `pool` of its own, so the
//! tests share one cluster without taking each other's results or leases.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::worker::{Worker, grid as reapi, unique_pool as unique};
use greenlight_testkit::{TempRepo, procs};

fn remote_yaml(endpoint: &str, pool: &str, cache: &str, gates: &str) -> String {
    format!(
        "version: 2\noptions:\n  cache: off\n  remote:\n    endpoint: {endpoint}\n    cache: {cache}\n    platform:\n      pool: {pool}\ngates:\n{gates}"
    )
}

fn repo_with(yaml: &str) -> TempRepo {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(yaml);
    repo.commit_all("verify.yaml");
    repo.write("work.txt", "uncommitted work\n");
    repo
}

/// A second worktree with the same files: another machine's checkout of the same commit.
fn twin(of: &TempRepo, yaml: &str) -> TempRepo {
    let other = repo_with(yaml);
    other.write("work.txt", of.read("work.txt").unwrap());
    other
}

fn gate_words(out: &greenlight_testkit::Run, id: &str) -> String {
    out.lines()
        .into_iter()
        .find(|l| l.starts_with(&format!("GATE {id} ")))
        .unwrap_or_else(|| panic!("no line for gate {id}:\n{}", out.render()))
        .to_owned()
}

#[test]
#[ignore = "needs BuildGrid: run scripts/test"]
fn a_result_published_by_one_checkout_replays_in_another_and_an_env_change_misses() {
    let endpoint = reapi();
    let salt = unique("hit");
    let gates = format!(
        "  - id: build\n    command: echo built {salt}\n    env: [GL_REMOTE_MODE]\n  - id: test\n    command: \"echo 'test failed: expected 2, got 3 ({salt})'; exit 3\"\n"
    );
    let yaml = remote_yaml(&endpoint, &salt, "shared", &gates);
    let first = repo_with(&yaml);
    let ran = first.greenlight(["verify"]);
    assert_eq!(ran.code, 20, "{}", ran.render());
    assert!(
        !gate_words(&ran, "build").contains("cached="),
        "{}",
        ran.render()
    );

    let other = twin(&first, &yaml);
    let replayed = other.greenlight(["verify", "--format", "json", "--explain"]);
    assert_eq!(replayed.code, 20, "{}", replayed.render());
    let doc = replayed.json();
    assert!(
        doc["gates"][0]["explain"]
            .as_str()
            .unwrap()
            .contains("action cache"),
        "--explain says where a replay came from: {doc:#}"
    );
    for gate in [&doc["gates"][0], &doc["gates"][1]] {
        assert_eq!(gate["cached"], true, "{doc:#}");
        assert_eq!(gate["remote"]["source"], "action-cache", "{doc:#}");
        assert_eq!(gate["remote"]["action"].as_str().unwrap().len(), 64);
    }
    assert_eq!(doc["gates"][1]["verdict"], "FAIL");
    assert_eq!(doc["gates"][1]["exit_codes"][0], 3);
    assert!(
        doc["gates"][1]["attempts"][0]["tail"]
            .as_str()
            .unwrap()
            .contains("expected 2, got 3"),
        "the failure's output replays: {doc:#}"
    );

    // The env the gate declares is in its action: another value is another action.
    let changed = other
        .cli(["verify", "--format", "json"])
        .env("GL_REMOTE_MODE", "strict")
        .run();
    let doc = changed.json();
    assert_eq!(doc["gates"][0]["cached"], false, "{doc:#}");
    assert_eq!(doc["gates"][1]["cached"], true, "{doc:#}");

    // A changed file is another input root: every gate misses.
    other.write("work.txt", "other work\n");
    let edited = other.greenlight(["verify", "--format", "json"]);
    let doc = edited.json();
    assert_eq!(doc["gates"][0]["cached"], false, "{doc:#}");
    assert_eq!(doc["gates"][1]["cached"], false, "{doc:#}");
}

#[test]
#[ignore = "needs BuildGrid: run scripts/test"]
fn shared_read_replays_but_never_publishes() {
    let endpoint = reapi();
    let salt = unique("read");
    let gates = format!("  - id: build\n    command: echo built {salt}\n");
    let read_only = remote_yaml(&endpoint, &salt, "shared-read", &gates);
    let repo = repo_with(&read_only);
    for _ in 0..2 {
        let out = repo.greenlight(["verify"]);
        assert_eq!(out.code, 0, "{}", out.render());
        assert!(
            !gate_words(&out, "build").contains("cached="),
            "{}",
            out.render()
        );
    }
    // A writer publishes; the reader then replays what it wrote.
    let writer = twin(&repo, &remote_yaml(&endpoint, &salt, "shared", &gates));
    assert_eq!(writer.greenlight(["verify"]).code, 0);
    let out = repo.greenlight(["verify"]);
    assert!(
        gate_words(&out, "build").contains("cached="),
        "{}",
        out.render()
    );
}

#[test]
fn an_unreachable_cluster_leaves_the_verdict_to_the_gates_run_here() {
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let gates = "  - id: build\n    command: echo built here\n  - id: remote\n    command: echo ran here\n    run: remote\n";
    let repo = repo_with(&remote_yaml(
        &format!("grpc://127.0.0.1:{port}"),
        "none",
        "shared",
        gates,
    ));
    let started = Instant::now();
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(gate_words(&out, "build").starts_with("GATE build PASS"));
    assert!(gate_words(&out, "remote").starts_with("GATE remote PASS"));
    assert!(!out.stdout.contains("remote="), "{}", out.render());
    assert!(
        out.stderr.contains(&format!("127.0.0.1:{port}")) && out.stderr.contains("gates run here"),
        "the warning names the cluster: {}",
        out.render()
    );
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "an unreachable cluster costs at most the connect timeout"
    );
}

#[test]
#[ignore = "needs BuildGrid: run scripts/test"]
fn a_remote_gate_runs_on_a_worker_and_its_output_is_digested_here() {
    let endpoint = reapi();
    let pool = unique("exec");
    let cache = tempfile::tempdir().unwrap();
    let _worker = Worker::start(&pool, 1, &cache.path().join("cache"), &pool);
    let gates = format!(
        "  - id: test\n    run: remote\n    command: \"echo 'running {pool}'; cat work.txt; echo 'FAILED tests/it.rs:3: expected 2, got 3' >&2; exit 2\"\n"
    );
    let repo = repo_with(&remote_yaml(&endpoint, &pool, "shared", &gates));
    let out = repo.greenlight(["verify", "--format", "json"]);
    assert_eq!(out.code, 20, "{}", out.render());
    let doc = out.json();
    let gate = &doc["gates"][0];
    assert_eq!(gate["verdict"], "FAIL", "{doc:#}");
    assert_eq!(gate["exit_codes"][0], 2);
    assert_eq!(gate["remote"]["source"], "executed", "{doc:#}");
    let tail = gate["attempts"][0]["tail"].as_str().unwrap();
    assert!(
        tail.contains("uncommitted work"),
        "the input root holds the worktree as it is: {tail}"
    );
    assert!(tail.contains("expected 2, got 3"), "{tail}");

    let text = repo.greenlight(["verify"]);
    let line = gate_words(&text, "test");
    assert!(
        line.contains("cached="),
        "the worker published it: {}",
        text.render()
    );
}

#[test]
#[ignore = "needs BuildGrid: run scripts/test"]
fn a_verify_killed_mid_gate_finds_its_running_action_again() {
    let endpoint = reapi();
    let pool = unique("reattach");
    let cache = tempfile::tempdir().unwrap();
    let _worker = Worker::start(&pool, 2, &cache.path().join("cache"), &pool);
    let marks = tempfile::tempdir().unwrap();
    let count = marks.path().join("runs");
    let gates = format!(
        "  - id: slow\n    run: remote\n    command: \"echo run >> {}; sleep 6; echo done {pool}\"\n",
        count.display()
    );
    let repo = repo_with(&remote_yaml(&endpoint, &pool, "shared", &gates));
    let mut first = repo
        .command(["verify"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !count.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(count.exists(), "the worker never started the gate");
    std::thread::sleep(Duration::from_secs(2));
    first.kill().unwrap(); // SIGKILL: nothing in-process can cancel the operation
    first.wait().unwrap();

    let started = Instant::now();
    let again = repo.greenlight(["verify", "--format", "json"]);
    assert_eq!(again.code, 0, "{}", again.render());
    // Running the gate again would take its whole 6 s; joining it, the 4 s it has left.
    assert!(
        started.elapsed() < Duration::from_millis(5500),
        "the second verify should join the running action, not start it again ({:?})",
        started.elapsed()
    );
    assert_eq!(
        std::fs::read_to_string(&count).unwrap().lines().count(),
        1,
        "the action ran once"
    );
}

#[test]
#[ignore = "needs BuildGrid: run scripts/test"]
fn an_interrupted_verify_cancels_its_remote_gate_and_the_worker_ends_it() {
    let endpoint = reapi();
    let pool = unique("cancel");
    let cache = tempfile::tempdir().unwrap();
    let _worker = Worker::start(&pool, 1, &cache.path().join("cache"), &pool);
    let marks = tempfile::tempdir().unwrap();
    let pid_file = marks.path().join("pid");
    let gates = format!(
        "  - id: slow\n    run: remote\n    command: \"sleep 60 & echo $! > {}; wait\"\n",
        pid_file.display()
    );
    let repo = repo_with(&remote_yaml(&endpoint, &pool, "shared", &gates));
    let child = repo
        .command(["verify"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let pid = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
        {
            break pid;
        }
        assert!(
            Instant::now() < deadline,
            "the worker never started the gate"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = greenlight_testkit::signal_and_wait(child, "-INT", Duration::from_secs(20));
    assert_eq!(out.code, 130, "{}", out.render());
    let deadline = Instant::now() + Duration::from_secs(15);
    while procs::alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !procs::alive(pid),
        "the cancelled gate's process {pid} is still running on the worker"
    );
}

#[test]
#[ignore = "needs BuildGrid: run scripts/test"]
fn the_stop_hook_blocks_on_a_failure_another_checkout_published_without_running_the_gate() {
    let endpoint = reapi();
    let salt = unique("hook");
    let marks = tempfile::tempdir().unwrap();
    let ran = marks.path().join("ran");
    let gates = format!(
        "  - id: unit\n    command: \"echo {salt} >> {}; echo 'assertion failed: 2 + 2 == 5'; exit 3\"\n",
        ran.display()
    );
    let yaml = remote_yaml(&endpoint, &salt, "shared", &gates);
    let writer = repo_with(&yaml);
    assert_eq!(writer.greenlight(["verify"]).code, 20);
    assert_eq!(std::fs::read_to_string(&ran).unwrap().lines().count(), 1);

    let agent = twin(&writer, &yaml);
    let payload = serde_json::json!({
        "session_id": salt,
        "cwd": agent.path().display().to_string(),
        "hook_event_name": "Stop",
        "stop_hook_active": false,
    });
    let state = agent.home().join("state.db");
    let out = agent
        .cli(["hook", "stop", "--state", state.to_str().unwrap()])
        .stdin(payload.to_string())
        .run();
    assert_eq!(out.code, 0, "{}", out.render());
    let answer: serde_json::Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!(answer["decision"], "block", "{answer}");
    let reason = answer["reason"].as_str().unwrap();
    assert!(reason.contains("assertion failed: 2 + 2 == 5"), "{reason}");
    assert_eq!(
        std::fs::read_to_string(&ran).unwrap().lines().count(),
        1,
        "the hook replayed the published failure instead of running the gate"
    );
}

#[test]
#[ignore = "needs BuildGrid: run scripts/test"]
fn a_remote_pass_after_a_failure_is_flaky_and_never_replayed_as_a_pass() {
    let endpoint = reapi();
    let pool = unique("flaky");
    let cache = tempfile::tempdir().unwrap();
    let _worker = Worker::start(&pool, 1, &cache.path().join("cache"), &pool);
    let counter = cache.path().join("runs");
    // Odd runs fail, even runs pass.
    let gates = format!(
        "  - id: flaky\n    run: remote\n    retryOnFail: 1\n    command: \"n=$(cat {c} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {c}; test $((n % 2)) -eq 0\"\n",
        c = counter.display()
    );
    let repo = repo_with(&remote_yaml(&endpoint, &pool, "shared", &gates));
    let first = repo.greenlight(["verify", "--format", "json"]);
    let doc = first.json();
    assert_eq!(doc["gates"][0]["verdict"], "FLAKY", "{doc:#}");
    assert_eq!(doc["gates"][0]["remote"]["source"], "executed", "{doc:#}");

    let again = repo.greenlight(["verify", "--format", "json"]);
    let doc = again.json();
    let gate = &doc["gates"][0];
    assert_ne!(
        gate["verdict"], "PASS",
        "the retry's pass was replayed: {doc:#}"
    );
    assert_eq!(gate["cached"], false, "{doc:#}");
    assert_eq!(
        std::fs::read_to_string(&counter).unwrap().trim(),
        "3",
        "the second verify ran its retry afresh (its first attempt replays the cached failure)"
    );
}

#[test]
#[ignore = "needs BuildGrid: run scripts/test"]
fn with_the_cluster_cache_off_a_remote_gate_runs_every_time_and_nothing_is_kept() {
    let endpoint = reapi();
    let pool = unique("off");
    let cache = tempfile::tempdir().unwrap();
    let _worker = Worker::start(&pool, 1, &cache.path().join("cache"), &pool);
    let runs = cache.path().join("runs");
    let gates = format!(
        "  - id: build\n    run: remote\n    command: \"echo run >> {}\"\n",
        runs.display()
    );
    let off = repo_with(&remote_yaml(&endpoint, &pool, "off", &gates));
    for _ in 0..2 {
        let doc = off.greenlight(["verify", "--format", "json"]).json();
        assert_eq!(doc["gates"][0]["cached"], false, "{doc:#}");
        assert_eq!(doc["gates"][0]["remote"]["source"], "executed", "{doc:#}");
    }
    assert_eq!(std::fs::read_to_string(&runs).unwrap().lines().count(), 2);
    // Nothing was kept for a reader of the same tree.
    let reader = twin(&off, &remote_yaml(&endpoint, &pool, "shared-read", &gates));
    let doc = reader.greenlight(["verify", "--format", "json"]).json();
    assert_eq!(doc["gates"][0]["remote"]["source"], "executed", "{doc:#}");
    assert_eq!(std::fs::read_to_string(&runs).unwrap().lines().count(), 3);
}

/// A loopback port nothing listens on: bound, then closed.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn the_endpoint_variable_points_every_file_elsewhere_or_turns_remote_off() {
    let (in_file, in_env) = (closed_port(), closed_port());
    let gates = "  - id: build\n    command: echo built here\n";
    let repo = repo_with(&remote_yaml(
        &format!("grpc://127.0.0.1:{in_file}"),
        "none",
        "shared",
        gates,
    ));
    let verify = |value: &str| {
        let out = repo
            .cli(["verify"])
            .env("GREENLIGHT_REMOTE_ENDPOINT", value)
            .run();
        assert_eq!(out.code, 0, "{}", out.render());
        out
    };

    let elsewhere = verify(&format!("http://127.0.0.1:{in_env}"));
    assert!(
        elsewhere.stderr.contains(&format!("127.0.0.1:{in_env}"))
            && !elsewhere.stderr.contains(&format!("127.0.0.1:{in_file}")),
        "the variable's cluster is the one tried: {}",
        elsewhere.render()
    );

    let off = verify("off");
    assert!(
        !off.stderr.contains("remote cluster"),
        "`off` tries no cluster: {}",
        off.render()
    );

    let bad = verify("ftp://127.0.0.1:1");
    assert!(
        bad.stderr.contains("GREENLIGHT_REMOTE_ENDPOINT is ignored")
            && bad.stderr.contains(&format!("127.0.0.1:{in_file}")),
        "a value that is no endpoint is named, and the file's cluster is used: {}",
        bad.render()
    );
}

/// MCP's verify is handed the same backend as the CLI's (the Stop hook's is held by
/// `the_stop_hook_blocks_on_a_failure_another_checkout_published_without_running_the_gate`: the
/// hook does not print a run's warnings).
#[test]
fn mcp_verify_reaches_the_cluster_the_file_names() {
    let port = closed_port();
    let gates = "  - id: build\n    command: echo built here\n";
    let repo = repo_with(&remote_yaml(
        &format!("grpc://127.0.0.1:{port}"),
        "none",
        "shared",
        gates,
    ));
    // The connection was tried (and failed), not skipped for want of a backend.
    let tried = format!("127.0.0.1:{port} cannot be reached");
    let state = repo.home().join("state.db");

    let input = [
        serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "printf", "version": "1"}}})
        .to_string(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "verify", "arguments": {}}})
        .to_string(),
    ];
    let mut command = repo.command(["mcp"]);
    command.env("GREENLIGHT_STATE", &state);
    let mcp = greenlight_testkit::Cli::from_command(command)
        .stdin(input.join("\n") + "\n")
        .within(Duration::from_secs(60))
        .run();
    assert_eq!(mcp.code, 0, "{}", mcp.render());
    let answer = mcp
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|m| m["id"] == 1)
        .unwrap_or_else(|| panic!("no answer to the verify call: {}", mcp.render()));
    assert!(
        answer.to_string().contains(&tried),
        "MCP's gates tried the cluster: {answer}"
    );
}
