//! `greenlight agent dispatch|probe --family openai` against a scripted server on loopback, and
//! `greenlight agent replay FILE` on the decoder's golden turns, through the real binary.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::path::PathBuf;

use greenlight_testkit::Cli;
use greenlight_testkit::openai_server::{Reply, ScriptedServer, answer, call};
use serde_json::{Value, json};

fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../greenlight-openai/fixtures/golden-turns")
        .join(name)
}

#[test]
fn a_file_dispatch_runs_the_tool_loop_in_the_cwd_and_prints_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "old\n").unwrap();
    let server = ScriptedServer::start(vec![
        Reply::stream(call(
            "c1",
            "write_file",
            json!({"path": "notes.txt", "content": "new\n"}),
            (10, 2),
        )),
        Reply::stream(answer("Rewrote notes.txt.", (20, 3))),
    ]);
    let out = Cli::new([
        "agent",
        "dispatch",
        "--family",
        "openai",
        "--base-url",
        &server.base_url(),
        "--model",
        "qwen2.5-coder:7b",
        "--tool-format",
        "native",
        "--deliverable",
        "file",
        "--write",
        "notes.txt",
        "--json",
    ])
    .current_dir(dir.path())
    .offer_stdin("rewrite notes.txt")
    .run();
    assert_eq!(out.code, 0, "{}", out.render());
    let result: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(result["outcome"], "ok");
    assert_eq!(result["family"], "openai");
    assert_eq!(result["text"], "Rewrote notes.txt.");
    assert_eq!(result["tokens_in"], 30);
    assert_eq!(result["token_source"], "openai-usage");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
        "new\n"
    );
    assert_eq!(server.requests()[0].body["model"], "qwen2.5-coder:7b");
}

#[test]
fn a_return_value_dispatch_offers_no_tools_and_a_failure_exits_1_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start(vec![
        Reply::stream(answer("Paris", (3, 1))),
        Reply::status(400, "context length exceeded"),
    ]);
    let dispatch = || {
        Cli::new([
            "agent",
            "dispatch",
            "--family",
            "openai",
            "--base-url",
            &server.base_url(),
            "--model",
            "m",
        ])
        .current_dir(dir.path())
        .offer_stdin("capital of France?")
        .run()
    };
    let out = dispatch();
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(out.stdout, "Paris\n");
    assert!(server.requests()[0].body.get("tools").is_none());
    let out = dispatch();
    assert_eq!(out.code, 1, "{}", out.render());
    assert!(out.stderr.contains("dispatch-dead"), "{}", out.render());
    assert!(
        out.stderr.contains("context length exceeded"),
        "{}",
        out.render()
    );
}

#[test]
fn a_probe_prints_the_id_that_answered() {
    let server = ScriptedServer::with(|req| {
        if req.body["model"] == "b" {
            Reply::stream(answer("OK", (1, 1)))
        } else {
            Reply::status(404, "no such model")
        }
    });
    let out = Cli::new([
        "agent",
        "probe",
        "--family",
        "openai",
        "--base-url",
        &server.base_url(),
        "a",
        "b",
    ])
    .run();
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(out.stdout, "b\n");
}

#[test]
fn openai_flags_are_checked_before_anything_runs() {
    let out = Cli::new(["agent", "probe", "--family", "openai", "m"]).run();
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(out.stderr.contains("--base-url"), "{}", out.render());
    let out = Cli::new([
        "agent",
        "probe",
        "--family",
        "openai",
        "--base-url",
        "http://h/v1",
        "--tool-format",
        "json",
        "m",
    ])
    .run();
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(
        out.stderr.contains("native, tags or auto"),
        "{}",
        out.render()
    );
    let out = Cli::new([
        "agent",
        "probe",
        "--family",
        "claude",
        "--base-url",
        "http://h/v1",
        "sonnet",
    ])
    .run();
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(
        out.stderr.contains("for --family openai"),
        "{}",
        out.render()
    );
}

#[test]
fn replay_matches_a_golden_turn_and_prints_the_diff_of_one_that_does_not() {
    let out = Cli::new([
        "agent",
        "replay",
        golden("hermes-tags.json").to_str().unwrap(),
    ])
    .run();
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr.contains("the 6 expected events"),
        "{}",
        out.render()
    );

    let dir = tempfile::tempdir().unwrap();
    let changed = dir.path().join("changed.json");
    let text = std::fs::read_to_string(golden("hermes-tags.json")).unwrap();
    std::fs::write(
        &changed,
        text.replace("\"name\":\"read_file\"", "\"name\":\"write_file\""),
    )
    .unwrap();
    let out = Cli::new(["agent", "replay", changed.to_str().unwrap()]).run();
    assert_eq!(out.code, 1, "{}", out.render());
    assert!(out.stdout.contains("-{\"tool_call\""), "{}", out.render());
    assert!(out.stdout.contains("write_file"), "{}", out.render());
    assert!(out.stdout.contains("+{\"tool_call\""), "{}", out.render());

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"format\": \"tags\",\n \"chunks\": 3}").unwrap();
    let out = Cli::new(["agent", "replay", bad.to_str().unwrap()]).run();
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(out.stderr.contains("bad.json:"), "{}", out.render());
    let out = Cli::new(["agent", "replay", "/nonexistent/turn.json"]).run();
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(out.stderr.contains("cannot read"), "{}", out.render());
}

/// The peak resident set of process `pid` so far (`VmHWM`), in KiB; `None` once it is gone.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// A server that streamed 300 MB of content gave a 314 MB `text` and a 628 MB peak (only the
/// deadline stopped it). A reply is capped like a CLI agent's output (8 MiB): past it the
/// dispatch ends with `dispatch-budget-exhausted`, and nothing past the cap is kept.
#[test]
fn a_reply_past_8_mib_ends_the_dispatch_with_its_reason_and_memory_stays_bounded() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start(vec![Reply::flood(100 << 20)]);
    let stderr_file = dir.path().join("stderr");
    let mut child = Command::new(greenlight_testkit::greenlight_bin())
        .args([
            "agent",
            "dispatch",
            "--family",
            "openai",
            "--base-url",
            &server.base_url(),
            "--model",
            "m",
            "--timeout",
            "120",
        ])
        .current_dir(dir.path())
        .env("GREENLIGHT_STATE", dir.path().join("state.db"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_file).unwrap())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"say everything")
        .unwrap();
    let started = std::time::Instant::now();
    let mut peak = 0;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if let Some(now) = peak_rss_kib(child.id()) {
            peak = peak.max(now);
        }
        if started.elapsed() > std::time::Duration::from_secs(120) {
            greenlight_testkit::procs::end(child.id() as i32);
            panic!("the dispatch is still reading after 120 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    let stderr = std::fs::read_to_string(&stderr_file).unwrap();
    eprintln!(
        "a 100 MiB reply: peak RSS {peak} KiB, {:?}",
        started.elapsed()
    );
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("dispatch-budget-exhausted")
            && stderr.contains("8 MiB")
            && stderr.contains("the model's reply"),
        "{stderr}"
    );
    assert!(stderr.len() < 64 << 10, "{} bytes of stderr", stderr.len());
    assert!(peak < 80 * 1024, "peak RSS {peak} KiB");
}
