//! Each measured behaviour of the real CLIs, reproduced by a fake, through the public dispatcher.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use greenlight_agent::{
    AdapterOptions, Deliverable, DispatchRequest, DispatchResult, Family, Outcome, Produced,
    Producer, Reason, SteppingClock, TokenSource, cli_dispatcher, codex,
};
use greenlight_testkit::fake_agent::{FakeAgent, FakeCli, Scenario, group_members, pid_alive};

fn options(fake: &FakeAgent) -> AdapterOptions {
    AdapterOptions {
        bin: Some(fake.bin().to_path_buf()),
        grace: Duration::from_millis(300),
        ..AdapterOptions::default()
    }
}

fn request(family: Family, prompt: &str, cwd: &std::path::Path) -> DispatchRequest {
    DispatchRequest::new(family, "model-1", prompt, cwd, Duration::from_secs(30))
}

async fn dispatch(family: Family, fake: &FakeAgent, req: &DispatchRequest) -> DispatchResult {
    let d = cli_dispatcher(family, options(fake)).expect("claude and codex always build");
    let result = d.dispatch(req).await;
    // Whatever happened, an adapter only ever reports an adapter or containment reason.
    if let Some(failure) = &result.failure {
        assert!(
            failure.reason.may_be_produced_by(Producer::Adapter)
                || failure.reason.may_be_produced_by(Producer::Containment),
            "an adapter produced {}",
            failure.reason
        );
    }
    result
}

fn reason(result: &DispatchResult) -> Option<Reason> {
    result.failure.as_ref().map(|f| f.reason)
}

/// Spawns the fake with stdin left open and reports whether it exited within `wait`.
fn exits_with_open_stdin(fake: &FakeAgent, args: &[&str], wait: Duration) -> bool {
    let mut child = Command::new(fake.bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the fake starts");
    let stdin = child.stdin.take();
    let start = Instant::now();
    let mut exited = false;
    while start.elapsed() < wait {
        if child.try_wait().expect("try_wait works").is_some() {
            exited = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    drop(stdin);
    exited
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn claude_waits_on_an_open_stdin_and_the_adapter_never_leaves_it_open() {
    let fake = FakeAgent::install(FakeCli::Claude, Scenario::Ok).expect("install");
    assert!(
        !exits_with_open_stdin(
            &fake,
            &["-p", "--output-format", "json"],
            Duration::from_millis(1500)
        ),
        "the fake must reproduce the wait on an open stdin"
    );
    let cwd = tempfile::tempdir().expect("tempdir");
    let result = dispatch(
        Family::Claude,
        &fake,
        &request(Family::Claude, "hello claude", cwd.path()),
    )
    .await;
    assert_eq!(result.outcome, Outcome::Ok, "{result:?}");
    assert_eq!(result.text.as_deref(), Some("OK"));
    let calls = fake.invocations();
    let last = calls.last().expect("the adapter invoked the fake");
    assert_eq!(last.stdin, "hello claude");
    assert!(
        !last.argv.iter().any(|a| a == "hello claude"),
        "the prompt travels on stdin only"
    );
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn claude_is_error_with_subtype_success_and_exit_1_is_dead_but_keeps_its_counts() {
    let fake = FakeAgent::install(FakeCli::Claude, Scenario::IsError).expect("install");
    let cwd = tempfile::tempdir().expect("tempdir");
    let result = dispatch(
        Family::Claude,
        &fake,
        &request(Family::Claude, "q", cwd.path()),
    )
    .await;
    assert_eq!(result.outcome, Outcome::Null);
    assert_eq!(reason(&result), Some(Reason::DispatchDead));
    let detail = &result.failure.as_ref().expect("failure").detail;
    assert!(
        detail.contains("is_error=true") && detail.contains("subtype=success"),
        "{detail}"
    );
    assert_eq!(result.exit_code, Some(1));
    assert_eq!(result.text, None);
    assert_eq!((result.tokens_in, result.tokens_out), (Some(12), Some(5)));
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn claude_is_error_with_exit_0_is_dead() {
    let fake = FakeAgent::install(FakeCli::Claude, Scenario::IsErrorExit0).expect("install");
    let cwd = tempfile::tempdir().expect("tempdir");
    let result = dispatch(
        Family::Claude,
        &fake,
        &request(Family::Claude, "q", cwd.path()),
    )
    .await;
    assert_eq!(reason(&result), Some(Reason::DispatchDead));
    assert_eq!(result.exit_code, Some(0));
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn claude_banner_lines_before_the_envelope_are_ignored() {
    let fake = FakeAgent::builder(FakeCli::Claude, Scenario::Banner)
        .answer("the answer")
        .install()
        .expect("install");
    let cwd = tempfile::tempdir().expect("tempdir");
    let result = dispatch(
        Family::Claude,
        &fake,
        &request(Family::Claude, "q", cwd.path()),
    )
    .await;
    assert_eq!(result.outcome, Outcome::Ok, "{result:?}");
    assert_eq!(result.text.as_deref(), Some("the answer"));
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn claude_success_envelope_with_a_nonzero_exit_is_dead() {
    let fake = FakeAgent::install(FakeCli::Claude, Scenario::SuccessNonzero).expect("install");
    let cwd = tempfile::tempdir().expect("tempdir");
    let result = dispatch(
        Family::Claude,
        &fake,
        &request(Family::Claude, "q", cwd.path()),
    )
    .await;
    assert_eq!(result.outcome, Outcome::Null);
    assert_eq!(reason(&result), Some(Reason::DispatchDead));
    assert!(
        result
            .failure
            .as_ref()
            .expect("failure")
            .detail
            .contains("exited 1")
    );
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn claude_usage_keeps_cache_tokens_and_cost_separate() {
    let fake = FakeAgent::install(FakeCli::Claude, Scenario::Ok).expect("install");
    let cwd = tempfile::tempdir().expect("tempdir");
    let result = dispatch(
        Family::Claude,
        &fake,
        &request(Family::Claude, "q", cwd.path()),
    )
    .await;
    assert_eq!((result.tokens_in, result.tokens_out), (Some(12), Some(5)));
    assert_eq!(result.cache_read_tokens, Some(100));
    assert_eq!(result.cache_creation_tokens, Some(7));
    assert_eq!(result.cost_usd, Some(0.0123));
    assert_eq!(result.token_source, Some(TokenSource::ClaudeEnvelope));

    let bare = FakeAgent::install(FakeCli::Claude, Scenario::NoUsage).expect("install");
    let result = dispatch(
        Family::Claude,
        &bare,
        &request(Family::Claude, "q", cwd.path()),
    )
    .await;
    assert_eq!(result.outcome, Outcome::Ok);
    assert_eq!(
        (result.tokens_in, result.tokens_out, result.token_source),
        (None, None, None)
    );
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn claude_return_value_runs_isolated_and_file_mode_runs_in_the_cwd() {
    let fake = FakeAgent::install(FakeCli::Claude, Scenario::Ok).expect("install");
    let cwd = tempfile::tempdir().expect("tempdir");
    dispatch(
        Family::Claude,
        &fake,
        &request(Family::Claude, "q", cwd.path()),
    )
    .await;
    let mut file_req = request(Family::Claude, "q", cwd.path());
    file_req.deliverable = Deliverable::File;
    dispatch(Family::Claude, &fake, &file_req).await;

    let calls = fake.invocations();
    assert_eq!(calls.len(), 2);
    let (rv, file) = (&calls[0], &calls[1]);
    assert_ne!(rv.cwd, cwd.path().canonicalize().expect("canonical"));
    assert!(
        !rv.cwd.exists(),
        "the isolated directory is removed afterwards"
    );
    assert!(rv.argv.windows(2).any(|w| w == ["--tools", ""]));
    assert!(rv.argv.iter().any(|a| a == "--safe-mode"));
    assert_eq!(file.cwd, cwd.path().canonicalize().expect("canonical"));
    assert!(
        !file
            .argv
            .iter()
            .any(|a| a == "--safe-mode" || a == "--tools")
    );
    for flag in ["-p", "--strict-mcp-config", "--no-session-persistence"] {
        assert!(file.argv.iter().any(|a| a == flag) && rv.argv.iter().any(|a| a == flag));
    }
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn codex_blocks_on_an_open_stdin_and_the_adapter_closes_it() {
    let fake = FakeAgent::install(FakeCli::Codex, Scenario::Ok).expect("install");
    assert!(
        !exits_with_open_stdin(&fake, &["exec", "--json", "-"], Duration::from_millis(1500)),
        "the fake must reproduce codex blocking on an open stdin"
    );
    let cwd = tempfile::tempdir().expect("tempdir");
    let result = dispatch(
        Family::Codex,
        &fake,
        &request(Family::Codex, "hello codex", cwd.path()),
    )
    .await;
    assert_eq!(result.outcome, Outcome::Ok, "{result:?}");
    assert_eq!(
        result.text.as_deref(),
        Some("OK"),
        "the last agent_message is the answer"
    );
    let call = fake.invocations().pop().expect("invoked");
    assert_eq!(call.argv.last().map(String::as_str), Some("-"));
    assert_eq!(
        call.stdin,
        format!("{}\n\nhello codex", codex::SCOPING_LINE)
    );
    assert!(
        call.argv
            .windows(2)
            .any(|w| w == ["--sandbox", "read-only"])
    );
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn codex_file_mode_has_no_sandbox_and_no_scoping_line() {
    let fake = FakeAgent::install(FakeCli::Codex, Scenario::Ok).expect("install");
    let cwd = tempfile::tempdir().expect("tempdir");
    let mut req = request(Family::Codex, "edit things", cwd.path());
    req.deliverable = Deliverable::File;
    let result = dispatch(Family::Codex, &fake, &req).await;
    assert_eq!(result.outcome, Outcome::Ok);
    let call = fake.invocations().pop().expect("invoked");
    assert_eq!(call.stdin, "edit things");
    assert!(!call.argv.iter().any(|a| a == "--sandbox"));
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn codex_error_events_forever_hit_the_deadline_and_the_whole_group_dies() {
    let fake = FakeAgent::install(FakeCli::Codex, Scenario::ErrorForever).expect("install");
    let cwd = tempfile::tempdir().expect("tempdir");
    let mut req = request(Family::Codex, "q", cwd.path());
    req.timeout = Duration::from_millis(1500);
    let started = Instant::now();
    let result = dispatch(Family::Codex, &fake, &req).await;
    assert_eq!(result.outcome, Outcome::Null);
    assert_eq!(reason(&result), Some(Reason::DispatchTimeout), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let call = fake.invocations().pop().expect("invoked");
    assert_eq!(call.pid, call.pgid, "the agent leads its own process group");
    assert_eq!(call.extra_pids.len(), 1);
    for pid in std::iter::once(call.pid).chain(call.extra_pids.iter().copied()) {
        assert!(!pid_alive(pid), "pid {pid} survived the dispatch");
    }
    assert_eq!(group_members(call.pgid), Vec::<i32>::new());
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn codex_non_terminal_error_events_then_an_answer_is_ok() {
    let fake = FakeAgent::install(FakeCli::Codex, Scenario::ErrorThenOk).expect("install");
    let cwd = tempfile::tempdir().expect("tempdir");
    let result = dispatch(
        Family::Codex,
        &fake,
        &request(Family::Codex, "q", cwd.path()),
    )
    .await;
    assert_eq!(result.outcome, Outcome::Ok, "{result:?}");
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn codex_turn_failed_is_dead_with_its_message() {
    let fake = FakeAgent::install(FakeCli::Codex, Scenario::TurnFailed).expect("install");
    let cwd = tempfile::tempdir().expect("tempdir");
    let result = dispatch(
        Family::Codex,
        &fake,
        &request(Family::Codex, "q", cwd.path()),
    )
    .await;
    assert_eq!(reason(&result), Some(Reason::DispatchDead));
    assert!(
        result
            .failure
            .as_ref()
            .expect("failure")
            .detail
            .contains("stream disconnected"),
        "{result:?}"
    );
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn codex_usage_comes_from_turn_completed_and_is_null_when_absent() {
    let fake = FakeAgent::install(FakeCli::Codex, Scenario::Ok).expect("install");
    let cwd = tempfile::tempdir().expect("tempdir");
    let result = dispatch(
        Family::Codex,
        &fake,
        &request(Family::Codex, "q", cwd.path()),
    )
    .await;
    assert_eq!((result.tokens_in, result.tokens_out), (Some(20), Some(6)));
    assert_eq!(result.cache_read_tokens, Some(8));
    assert_eq!(result.cache_creation_tokens, None);
    assert_eq!(result.token_source, Some(TokenSource::CodexEvents));

    let bare = FakeAgent::install(FakeCli::Codex, Scenario::NoUsage).expect("install");
    let result = dispatch(
        Family::Codex,
        &bare,
        &request(Family::Codex, "q", cwd.path()),
    )
    .await;
    assert_eq!(result.outcome, Outcome::Ok);
    assert_eq!(
        (result.tokens_in, result.tokens_out, result.token_source),
        (None, None, None)
    );
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn a_mute_clean_exit_is_dead_for_both_families() {
    let cwd = tempfile::tempdir().expect("tempdir");
    for (cli, family) in [
        (FakeCli::Claude, Family::Claude),
        (FakeCli::Codex, Family::Codex),
    ] {
        let fake = FakeAgent::install(cli, Scenario::Mute).expect("install");
        let result = dispatch(family, &fake, &request(family, "q", cwd.path())).await;
        assert_eq!(result.outcome, Outcome::Null);
        assert_eq!(reason(&result), Some(Reason::DispatchDead));
        assert_eq!(result.exit_code, Some(0));
        assert!(
            result
                .failure
                .as_ref()
                .expect("failure")
                .detail
                .contains("mute")
        );
    }
}

#[tokio::test]
async fn a_missing_binary_is_dead_with_the_spawn_error() {
    let cwd = tempfile::tempdir().expect("tempdir");
    for family in [Family::Claude, Family::Codex, Family::Command] {
        let d = cli_dispatcher(
            family,
            AdapterOptions {
                bin: Some(cwd.path().join("no-such-agent")),
                ..AdapterOptions::default()
            },
        )
        .expect("builds");
        let result = d.dispatch(&request(family, "q", cwd.path())).await;
        assert_eq!(result.outcome, Outcome::Null);
        assert_eq!(reason(&result), Some(Reason::DispatchDead));
        let detail = &result.failure.as_ref().expect("failure").detail;
        assert!(
            detail.contains("no-such-agent") && detail.contains("cannot start"),
            "{detail}"
        );
        assert_eq!(result.exit_code, None);
    }
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn a_prompt_over_the_codex_ceiling_is_refused_loudly_and_nothing_runs() {
    let fake = FakeAgent::install(FakeCli::Codex, Scenario::Ok).expect("install");
    let cwd = tempfile::tempdir().expect("tempdir");
    let over = "é".repeat(codex::DEFAULT_PROMPT_CEILING + 1);
    let result = dispatch(
        Family::Codex,
        &fake,
        &request(Family::Codex, &over, cwd.path()),
    )
    .await;
    assert_eq!(result.outcome, Outcome::Error);
    assert_eq!(reason(&result), Some(Reason::PromptOverCeiling));
    assert!(
        result
            .failure
            .as_ref()
            .expect("failure")
            .detail
            .contains("24001 characters")
    );
    assert!(
        fake.invocations().is_empty(),
        "a refused prompt never reaches the CLI"
    );

    // Exactly at the ceiling (counted in characters, not bytes) goes through.
    let at = "é".repeat(codex::DEFAULT_PROMPT_CEILING);
    let result = dispatch(
        Family::Codex,
        &fake,
        &request(Family::Codex, &at, cwd.path()),
    )
    .await;
    assert_eq!(result.outcome, Outcome::Ok);

    // The ceiling is configurable, and applies to any family when set.
    let d = cli_dispatcher(
        Family::Claude,
        AdapterOptions {
            prompt_ceiling: Some(10),
            ..options(&fake)
        },
    )
    .expect("builds");
    let result = d
        .dispatch(&request(Family::Claude, "eleven char", cwd.path()))
        .await;
    assert_eq!(reason(&result), Some(Reason::PromptOverCeiling));
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn an_unsafe_model_id_is_refused_before_anything_runs() {
    let fake = FakeAgent::install(FakeCli::Claude, Scenario::Ok).expect("install");
    let cwd = tempfile::tempdir().expect("tempdir");
    for bad in [
        "--dangerously-skip-permissions",
        "",
        "a b",
        "x;rm",
        &"a".repeat(65),
    ] {
        let mut req = request(Family::Claude, "q", cwd.path());
        req.model = bad.to_string();
        let result = dispatch(Family::Claude, &fake, &req).await;
        assert_eq!(result.outcome, Outcome::Error);
        assert_eq!(reason(&result), Some(Reason::ModelIdInvalid), "{bad:?}");
    }
    assert!(fake.invocations().is_empty());
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn the_environment_is_scrubbed_of_nested_session_markers() {
    let fake = FakeAgent::install(FakeCli::Claude, Scenario::Ok).expect("install");
    let cwd = tempfile::tempdir().expect("tempdir");
    let mut base: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os().collect();
    for (k, v) in [
        ("CLAUDECODE", "1"),
        ("CODEX_SANDBOX", "seatbelt"),
        ("GIT_INDEX_FILE", "/x"),
        ("ANTHROPIC_API_KEY", "k"),
    ] {
        base.push((k.into(), v.into()));
    }
    let d = cli_dispatcher(
        Family::Claude,
        AdapterOptions {
            base_env: Some(base),
            ..options(&fake)
        },
    )
    .expect("builds");
    let result = d.dispatch(&request(Family::Claude, "q", cwd.path())).await;
    assert_eq!(result.outcome, Outcome::Ok, "{result:?}");
    let names = fake.invocations().pop().expect("invoked").env_names;
    for gone in ["CLAUDECODE", "CODEX_SANDBOX", "GIT_INDEX_FILE"] {
        assert!(
            !names.iter().any(|n| n == gone),
            "{gone} leaked into the agent"
        );
    }
    assert!(
        names.iter().any(|n| n == "ANTHROPIC_API_KEY"),
        "credentials pass through"
    );
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn wall_time_comes_from_the_injected_clock() {
    let fake = FakeAgent::install(FakeCli::Claude, Scenario::Ok).expect("install");
    let cwd = tempfile::tempdir().expect("tempdir");
    let d = cli_dispatcher(
        Family::Claude,
        AdapterOptions {
            clock: Arc::new(SteppingClock::new(Duration::from_millis(1000))),
            ..options(&fake)
        },
    )
    .expect("builds");
    let result = d.dispatch(&request(Family::Claude, "q", cwd.path())).await;
    assert_eq!(result.outcome, Outcome::Ok);
    // start (0), runner start (1s), runner end (2s), dispatch end (3s).
    assert_eq!(result.wall_ms, 3000);
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn probe_tries_candidates_in_order_and_records_the_one_that_answered() {
    let fake = FakeAgent::builder(FakeCli::Codex, Scenario::Ok)
        .good_models(&["second"])
        .install()
        .expect("install");
    let d = cli_dispatcher(Family::Codex, options(&fake)).expect("builds");
    let ids: Vec<String> = ["first", "second", "third"].map(String::from).to_vec();
    let probe = d.probe(&ids).await;
    assert_eq!(probe.id.as_deref(), Some("second"), "{probe:?}");
    assert!(probe.failure.is_none());
    let calls = fake.invocations();
    assert_eq!(calls.len(), 2, "stops at the first that answers");
    assert!(calls[0].stdin.ends_with(greenlight_agent::PROBE_PROMPT));

    let none: Vec<String> = vec!["x".into(), "y".into()];
    let probe = d.probe(&none).await;
    assert_eq!(probe.id, None);
    assert_eq!(
        probe.failure.as_ref().map(|f| f.reason),
        Some(Reason::ProbeFailed)
    );
    assert!(
        probe.detail.contains("x:") && probe.detail.contains("y:"),
        "{}",
        probe.detail
    );
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn probe_needs_a_word_bounded_ok() {
    let fake = FakeAgent::builder(FakeCli::Claude, Scenario::Ok)
        .answer("BROKEN")
        .install()
        .expect("install");
    let d = cli_dispatcher(Family::Claude, options(&fake)).expect("builds");
    let probe = d.probe(&["sonnet".to_string()]).await;
    assert_eq!(probe.id, None, "`BROKEN` contains OK but not as a word");
    assert_eq!(probe.failure.map(|f| f.reason), Some(Reason::ProbeFailed));
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn the_result_serialises_with_stable_field_names() {
    let fake = FakeAgent::install(FakeCli::Codex, Scenario::Ok).expect("install");
    let cwd = tempfile::tempdir().expect("tempdir");
    let result = dispatch(
        Family::Codex,
        &fake,
        &request(Family::Codex, "q", cwd.path()),
    )
    .await;
    let json = serde_json::to_value(&result).expect("serialises");
    let mut keys: Vec<_> = json
        .as_object()
        .expect("an object")
        .keys()
        .cloned()
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "cache_creation_tokens",
            "cache_read_tokens",
            "cost_usd",
            "exit_code",
            "failure",
            "family",
            "model_used",
            "outcome",
            "output_truncated",
            "text",
            "token_source",
            "tokens_in",
            "tokens_out",
            "wall_ms"
        ]
    );
    assert_eq!(json["outcome"], "ok");
    assert_eq!(json["family"], "codex");
    assert_eq!(json["token_source"], "codex-events");
    let back: DispatchResult = serde_json::from_value(json).expect("round-trips");
    assert_eq!(back, result);
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn the_fake_writes_only_what_it_is_told() {
    // Guards the landed-barrier tests below: the `ok` scenario must not write anything.
    let fake = FakeAgent::builder(FakeCli::Claude, Scenario::Ok)
        .write("out.txt")
        .install()
        .expect("install");
    let cwd = tempfile::tempdir().expect("tempdir");
    let mut req = request(Family::Claude, "q", cwd.path());
    req.deliverable = Deliverable::File;
    dispatch(Family::Claude, &fake, &req).await;
    assert!(!cwd.path().join("out.txt").exists());
}
