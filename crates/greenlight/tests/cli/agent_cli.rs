//! `greenlight agent probe|dispatch` through the real binary against the fake agent CLIs.

use greenlight_testkit::Cli;
use greenlight_testkit::fake_agent::{FakeAgent, FakeCli, Scenario};
use serde_json::Value;

fn bin(fake: &FakeAgent) -> String {
    fake.bin().to_string_lossy().into_owned()
}

#[test]
#[ignore = "needs python3: run scripts/test"]
fn dispatch_prints_the_answer_and_exits_0() {
    let fake = FakeAgent::builder(FakeCli::Claude, Scenario::Ok)
        .answer("hello back")
        .install()
        .expect("install");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Cli::new([
        "agent",
        "dispatch",
        "--family",
        "claude",
        "--model",
        "sonnet",
        "--bin",
        &bin(&fake),
    ])
    .current_dir(dir.path())
    .offer_stdin("hello")
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "hello back\n");
    assert_eq!(fake.invocations()[0].stdin, "hello");
}

#[test]
#[ignore = "needs python3: run scripts/test"]
fn dispatch_json_prints_the_dispatch_result() {
    let fake = FakeAgent::install(FakeCli::Codex, Scenario::Ok).expect("install");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Cli::new([
        "agent",
        "dispatch",
        "--family",
        "codex",
        "--model",
        "gpt-5",
        "--bin",
        &bin(&fake),
        "--json",
    ])
    .current_dir(dir.path())
    .offer_stdin("q")
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v = out.json();
    assert_eq!(v["outcome"], "ok");
    assert_eq!(v["text"], "OK");
    assert_eq!(v["family"], "codex");
    assert_eq!(v["model_used"], "gpt-5");
    assert_eq!(v["tokens_in"], 20);
    assert_eq!(v["tokens_out"], 6);
    assert_eq!(v["cache_read_tokens"], 8);
    assert_eq!(v["token_source"], "codex-events");
    assert_eq!(v["failure"], Value::Null);
}

#[test]
#[ignore = "needs python3: run scripts/test"]
fn a_codex_that_never_exits_times_out_with_exit_1() {
    let fake = FakeAgent::install(FakeCli::Codex, Scenario::ErrorForever).expect("install");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Cli::new([
        "agent",
        "dispatch",
        "--family",
        "codex",
        "--model",
        "gpt-5",
        "--bin",
        &bin(&fake),
        "--timeout",
        "1s",
        "--grace",
        "200ms",
        "--json",
    ])
    .current_dir(dir.path())
    .offer_stdin("q")
    .run();
    assert_eq!(out.code, 1);
    let v = out.json();
    assert_eq!(v["outcome"], "null");
    assert_eq!(v["failure"]["reason"], "dispatch-timeout");
    assert!(out.stderr.contains("dispatch-timeout"));
    let call = fake.invocations().pop().expect("invoked");
    assert!(!greenlight_testkit::fake_agent::pid_alive(
        call.extra_pids[0]
    ));
}

#[test]
#[ignore = "needs python3: run scripts/test"]
fn a_prompt_over_the_ceiling_is_refused_without_running_anything() {
    let fake = FakeAgent::install(FakeCli::Codex, Scenario::Ok).expect("install");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Cli::new([
        "agent",
        "dispatch",
        "--family",
        "codex",
        "--model",
        "gpt-5",
        "--bin",
        &bin(&fake),
        "--prompt-ceiling",
        "5",
    ])
    .current_dir(dir.path())
    .offer_stdin("too long")
    .run();
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("prompt-over-ceiling"), "{}", out.stderr);
    assert_eq!(out.stdout, "");
    assert!(fake.invocations().is_empty());
}

#[test]
#[ignore = "needs python3: run scripts/test"]
fn file_mode_passes_when_the_declared_write_lands_and_fails_when_it_does_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let writer = FakeAgent::builder(FakeCli::Claude, Scenario::Write)
        .write("docs/report.md")
        .install()
        .expect("install");
    let args = |fake: &FakeAgent| {
        vec![
            "agent".to_string(),
            "dispatch".into(),
            "--family".into(),
            "claude".into(),
            "--model".into(),
            "sonnet".into(),
            "--bin".into(),
            bin(fake),
            "--deliverable".into(),
            "file".into(),
            "--write".into(),
            "docs/report.md".into(),
            "--json".into(),
        ]
    };
    let a = args(&writer);
    let out = Cli::new(&a)
        .current_dir(dir.path())
        .offer_stdin("write the report")
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(dir.path().join("docs/report.md").exists());

    let idle = FakeAgent::install(FakeCli::Claude, Scenario::Ok).expect("install");
    let a = args(&idle);
    let out = Cli::new(&a)
        .current_dir(dir.path())
        .offer_stdin("write it again")
        .run();
    assert_eq!(out.code, 1);
    let v = out.json();
    assert_eq!(v["failure"]["reason"], "deliverable-not-landed");
    assert_eq!(v["text"], "OK", "the answer is kept for a person to read");
}

#[test]
#[ignore = "needs python3: run scripts/test"]
fn an_escaping_write_is_refused_at_preflight() {
    let fake = FakeAgent::install(FakeCli::Claude, Scenario::Ok).expect("install");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Cli::new([
        "agent",
        "dispatch",
        "--family",
        "claude",
        "--model",
        "sonnet",
        "--bin",
        &bin(&fake),
        "--deliverable",
        "file",
        "--write",
        "../escape.txt",
        "--json",
    ])
    .current_dir(dir.path())
    .offer_stdin("q")
    .run();
    assert_eq!(out.code, 1);
    assert_eq!(out.json()["failure"]["reason"], "path-escapes-root");
    assert_eq!(out.json()["outcome"], "error");
    assert!(fake.invocations().is_empty());
}

#[test]
#[ignore = "needs python3: run scripts/test"]
fn probe_prints_the_first_id_that_answers() {
    let fake = FakeAgent::builder(FakeCli::Claude, Scenario::Ok)
        .good_models(&["haiku"])
        .install()
        .expect("install");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Cli::new([
        "agent",
        "probe",
        "--family",
        "claude",
        "--bin",
        &bin(&fake),
        "opus",
        "haiku",
        "sonnet",
    ])
    .current_dir(dir.path())
    .offer_stdin("")
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "haiku\n");

    let out = Cli::new([
        "agent",
        "probe",
        "--family",
        "claude",
        "--bin",
        &bin(&fake),
        "--json",
        "opus",
    ])
    .current_dir(dir.path())
    .offer_stdin("")
    .run();
    assert_eq!(out.code, 1);
    let v = out.json();
    assert_eq!(v["id"], Value::Null);
    assert_eq!(v["failure"]["reason"], "probe-failed");
}

#[test]
fn the_command_family_runs_any_cli_through_an_argv_template() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Cli::new([
        "agent",
        "dispatch",
        "--family",
        "command",
        "--model",
        "local:7b",
        "--bin",
        "/bin/sh",
        "--arg",
        "-c",
        "--arg",
        "printf '%s says: ' \"$1\"; cat",
        "--arg",
        "sh",
        "--arg",
        "{model}",
    ])
    .current_dir(dir.path())
    .offer_stdin("from stdin")
    .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "local:7b says: from stdin\n");
}

#[test]
fn a_missing_binary_is_a_dead_dispatch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Cli::new([
        "agent",
        "dispatch",
        "--family",
        "codex",
        "--model",
        "gpt-5",
        "--bin",
        "/nonexistent/codex",
    ])
    .current_dir(dir.path())
    .offer_stdin("q")
    .run();
    assert_eq!(out.code, 1);
    let err = out.stderr;
    assert!(
        err.contains("dispatch-dead") && err.contains("/nonexistent/codex"),
        "{err}"
    );
}

#[test]
fn usage_errors_exit_2_and_run_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Cli::new(["agent", "dispatch", "--family", "gemini", "--model", "m"])
        .current_dir(dir.path())
        .offer_stdin("q")
        .run();
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("unknown agent family `gemini`"),
        "{}",
        out.stderr
    );

    let out = Cli::new(["agent", "dispatch", "--family", "claude", "--model", "m"])
        .current_dir(dir.path())
        .offer_stdin("  \n")
        .run();
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("stdin was empty"));

    let out = Cli::new(["agent", "dispatch", "--family", "command", "--model", "m"])
        .current_dir(dir.path())
        .offer_stdin("q")
        .run();
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("--bin PATH"));
}
