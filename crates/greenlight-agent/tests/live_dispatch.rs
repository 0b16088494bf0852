//! Live activity through real child processes: in order, while the child still runs, with the
//! dispatch result exactly what it is without a sink.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use greenlight_agent::{
    Activity, ActivitySink, AdapterOptions, Deliverable, DispatchRequest, DispatchResult, Family,
    Outcome, Reason, SteppingClock, cli_dispatcher,
};
use greenlight_testkit::fake_agent::{FakeAgent, FakeCli, Scenario};

/// Records each piece of activity with when it arrived.
#[derive(Default)]
struct Recorder(Mutex<Vec<(Instant, Activity)>>);

impl ActivitySink for Recorder {
    fn activity(&self, activity: Activity) {
        self.0
            .lock()
            .expect("not poisoned")
            .push((Instant::now(), activity));
    }
}

impl Recorder {
    fn items(&self) -> Vec<Activity> {
        self.0
            .lock()
            .expect("not poisoned")
            .iter()
            .map(|(_, a)| a.clone())
            .collect()
    }
    fn first_at(&self) -> Instant {
        self.0
            .lock()
            .expect("not poisoned")
            .first()
            .expect("some activity")
            .0
    }
}

/// A fresh stepping clock per dispatch, so wall time is identical between two runs that read
/// the clock the same number of times.
fn options(bin: &Path, args: &[&str]) -> AdapterOptions {
    AdapterOptions {
        bin: Some(bin.to_path_buf()),
        command_args: args.iter().map(|s| s.to_string()).collect(),
        grace: Duration::from_millis(300),
        clock: Arc::new(SteppingClock::new(Duration::from_millis(7))),
        ..AdapterOptions::default()
    }
}

/// Dispatches twice, without and with a sink; asserts the results are identical and returns
/// the one observed with its activity.
async fn both_ways(
    family: Family,
    bin: &Path,
    args: &[&str],
    req: &DispatchRequest,
) -> (DispatchResult, Vec<Activity>) {
    let plain = cli_dispatcher(family, options(bin, args))
        .expect("builds")
        .dispatch(req)
        .await;
    let recorder = Recorder::default();
    let observed = cli_dispatcher(family, options(bin, args))
        .expect("builds")
        .dispatch_observed(req, &recorder)
        .await;
    assert_eq!(observed, plain, "a sink must not change the result");
    (observed, recorder.items())
}

fn file_request(family: Family, dir: &Path) -> DispatchRequest {
    let mut req = DispatchRequest::new(family, "model-1", "fix it", dir, Duration::from_secs(30));
    req.deliverable = Deliverable::File;
    req
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn claude_stream_json_activity_arrives_in_order_and_the_envelope_decides_as_before() {
    let fake = FakeAgent::builder(FakeCli::Claude, Scenario::Ok)
        .answer("All gates pass.")
        .install()
        .expect("install");
    let dir = tempfile::tempdir().expect("tmp");
    let (result, activity) = both_ways(
        Family::Claude,
        fake.bin(),
        &[],
        &file_request(Family::Claude, dir.path()),
    )
    .await;
    assert_eq!(result.outcome, Outcome::Ok, "{result:?}");
    assert_eq!(result.text.as_deref(), Some("All gates pass."));
    assert_eq!(
        (
            result.tokens_in,
            result.tokens_out,
            result.cache_read_tokens
        ),
        (Some(12), Some(5), Some(100))
    );
    assert_eq!(result.cost_usd, Some(0.0123));
    assert_eq!(
        activity,
        [
            Activity::Thinking("The user wants a short answer.".into()),
            Activity::Text("Let me look at the files first.".into()),
            Activity::ToolStarted {
                id: "toolu_01".into(),
                name: "Bash".into(),
                input: r#"{"command":"ls","description":"List files"}"#.into()
            },
            Activity::ToolFinished {
                id: "toolu_01".into(),
                name: "Bash".into(),
                failed: false,
                output: "README.md\nsrc".into()
            },
            Activity::Text("All gates pass.".into()),
        ]
    );
    let argv = &fake.invocations()[0].argv;
    assert!(
        argv.windows(2)
            .any(|w| w[0] == "--output-format" && w[1] == "stream-json")
            && argv.iter().any(|a| a == "--verbose"),
        "{argv:?}"
    );
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn a_failed_claude_stream_keeps_its_counts_and_reason_and_still_shows_its_text() {
    let fake = FakeAgent::install(FakeCli::Claude, Scenario::IsError).expect("install");
    let dir = tempfile::tempdir().expect("tmp");
    let req = DispatchRequest::new(
        Family::Claude,
        "m",
        "q",
        dir.path(),
        Duration::from_secs(30),
    );
    let (result, activity) = both_ways(Family::Claude, fake.bin(), &[], &req).await;
    let failure = result.failure.as_ref().expect("failed");
    assert_eq!(failure.reason, Reason::DispatchDead);
    assert!(
        failure.detail.contains("is_error=true"),
        "{}",
        failure.detail
    );
    assert_eq!(result.tokens_in, Some(12));
    assert_eq!(
        activity,
        [Activity::Text("API Error: 401 invalid credentials".into())]
    );
}

/// The real CLI's own output, replayed: a logged-out claude prints an init event, its error as
/// assistant text, and an `is_error` envelope, exit 1.
#[tokio::test]
async fn the_real_claude_capture_replayed_is_dead_with_its_message() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/claude-2.1.197-stream-json-not-logged-in.jsonl");
    let dir = tempfile::tempdir().expect("tmp");
    let bin = dir.path().join("claude");
    std::fs::write(
        &bin,
        format!(
            "#!/bin/sh\ncat >/dev/null\ncat '{}'\nexit 1\n",
            fixture.display()
        ),
    )
    .expect("write");
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let req = DispatchRequest::new(
        Family::Claude,
        "sonnet",
        "q",
        dir.path(),
        Duration::from_secs(30),
    );
    let (result, activity) = both_ways(Family::Claude, &bin, &[], &req).await;
    let failure = result.failure.as_ref().expect("failed");
    assert_eq!(failure.reason, Reason::DispatchDead);
    assert!(
        failure.detail.contains("Not logged in · Please run /login"),
        "{}",
        failure.detail
    );
    assert_eq!((result.tokens_in, result.tokens_out), (Some(0), Some(0)));
    assert_eq!(
        activity,
        [Activity::Text("Not logged in · Please run /login".into())]
    );
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn codex_item_events_arrive_in_order_and_the_last_message_is_the_answer() {
    let fake = FakeAgent::builder(FakeCli::Codex, Scenario::Write)
        .write("out.txt")
        .answer("Wrote it.")
        .install()
        .expect("install");
    let dir = tempfile::tempdir().expect("tmp");
    let (result, activity) = both_ways(
        Family::Codex,
        fake.bin(),
        &[],
        &file_request(Family::Codex, dir.path()),
    )
    .await;
    assert_eq!(result.text.as_deref(), Some("Wrote it."), "{result:?}");
    assert_eq!(
        (
            result.tokens_in,
            result.tokens_out,
            result.cache_read_tokens
        ),
        (Some(20), Some(6), Some(8))
    );
    assert_eq!(
        activity,
        [
            Activity::Thinking("thinking".into()),
            Activity::Text("draft".into()),
            Activity::ToolStarted {
                id: "item_2".into(),
                name: "command".into(),
                input: "bash -lc ls".into()
            },
            Activity::ToolFinished {
                id: "item_2".into(),
                name: "command".into(),
                failed: false,
                output: "README.md\nsrc\n".into()
            },
            Activity::ToolStarted {
                id: "item_3".into(),
                name: "file_change".into(),
                input: "add out.txt".into()
            },
            Activity::ToolFinished {
                id: "item_3".into(),
                name: "file_change".into(),
                failed: false,
                output: "completed".into()
            },
            Activity::Text("Wrote it.".into()),
        ]
    );
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn codex_turn_failed_shows_live_and_stays_dead() {
    let fake = FakeAgent::install(FakeCli::Codex, Scenario::TurnFailed).expect("install");
    let dir = tempfile::tempdir().expect("tmp");
    let req = DispatchRequest::new(Family::Codex, "m", "q", dir.path(), Duration::from_secs(30));
    let (result, activity) = both_ways(Family::Codex, fake.bin(), &[], &req).await;
    assert_eq!(
        result.failure.as_ref().map(|f| f.reason),
        Some(Reason::DispatchDead)
    );
    assert_eq!(
        activity,
        [
            Activity::Output("error: Reconnecting... 5/5".into()),
            Activity::Output("turn failed: stream disconnected before completion".into()),
        ]
    );
}

#[tokio::test]
async fn command_stdout_lines_arrive_in_order_with_bad_bytes_replaced() {
    let dir = tempfile::tempdir().expect("tmp");
    let args = [
        "-c",
        r"printf 'first\r\nbad \377 byte\n'; cat; printf '\nlast'",
        "agent",
    ];
    let req = DispatchRequest::new(
        Family::Command,
        "m",
        "from stdin",
        dir.path(),
        Duration::from_secs(30),
    );
    let (result, activity) = both_ways(Family::Command, Path::new("/bin/sh"), &args, &req).await;
    assert_eq!(
        result.text.as_deref(),
        Some("first\r\nbad \u{fffd} byte\nfrom stdin\nlast")
    );
    assert_eq!(
        activity,
        [
            Activity::Output("first".into()),
            Activity::Output("bad \u{fffd} byte".into()),
            Activity::Output("from stdin".into()),
            Activity::Output("last".into()),
        ]
    );
}

/// The first piece of activity reaches the sink while the child is still working, not when it
/// exits: the child pauses a second after it and the sink must have it well before the end.
async fn first_activity_arrives_before_exit(family: Family, bin: &Path, args: &[&str]) {
    let dir = tempfile::tempdir().expect("tmp");
    let req = DispatchRequest::new(family, "m", "q", dir.path(), Duration::from_secs(30));
    let recorder = Recorder::default();
    let d = cli_dispatcher(family, options(bin, args)).expect("builds");
    let result = d.dispatch_observed(&req, &recorder).await;
    let returned = Instant::now();
    assert!(result.is_ok(), "{result:?}");
    let lead = returned.duration_since(recorder.first_at());
    assert!(
        lead >= Duration::from_millis(700),
        "{family}: the first activity arrived only {lead:?} before the dispatch returned"
    );
    assert!(recorder.items().len() >= 2);
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn claude_activity_is_live() {
    let fake = FakeAgent::install(FakeCli::Claude, Scenario::Slow).expect("install");
    first_activity_arrives_before_exit(Family::Claude, fake.bin(), &[]).await;
}

#[tokio::test]
#[ignore = "needs python3: run scripts/test"]
async fn codex_activity_is_live() {
    let fake = FakeAgent::install(FakeCli::Codex, Scenario::Slow).expect("install");
    first_activity_arrives_before_exit(Family::Codex, fake.bin(), &[]).await;
}

#[tokio::test]
async fn command_activity_is_live() {
    first_activity_arrives_before_exit(
        Family::Command,
        Path::new("/bin/sh"),
        &["-c", "echo working; sleep 1; echo done", "agent"],
    )
    .await;
}

/// A stream far longer than the capture keeps its result: the envelope is the last line and the
/// capture is the tail. Every event before it still reaches the sink.
#[tokio::test]
async fn a_claude_stream_longer_than_the_capture_still_ends_in_its_envelope() {
    let dir = tempfile::tempdir().expect("tmp");
    let bin = dir.path().join("claude");
    let event = r#"{"type":"assistant","message":{"content":[{"type":"text","text":"step %d of a long session, padded to make the stream long"}]}}\n"#;
    let envelope = r#"{"type":"result","subtype":"success","is_error":false,"result":"done","usage":{"input_tokens":9,"output_tokens":4}}"#;
    std::fs::write(
        &bin,
        format!(
            "#!/bin/sh\ncat >/dev/null\ni=0\nwhile [ $i -lt 2000 ]; do printf '{event}' $i; i=$((i+1)); done\necho '{envelope}'\n"
        ),
    )
    .expect("write");
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let mut opts = options(&bin, &[]);
    opts.capture_limit = 4096;
    let req = DispatchRequest::new(
        Family::Claude,
        "sonnet",
        "q",
        dir.path(),
        Duration::from_secs(30),
    );
    let recorder = Recorder::default();
    let result = cli_dispatcher(Family::Claude, opts)
        .expect("builds")
        .dispatch_observed(&req, &recorder)
        .await;
    assert_eq!(result.text.as_deref(), Some("done"), "{result:?}");
    assert_eq!((result.tokens_in, result.tokens_out), (Some(9), Some(4)));
    assert!(result.output_truncated, "the capture was cut to its tail");
    let items = recorder.items();
    assert_eq!(items.len(), 2000);
    assert_eq!(
        items[1999],
        Activity::Text("step 1999 of a long session, padded to make the stream long".into())
    );
}
