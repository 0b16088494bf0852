//! The command adapter through real processes (`sh`, `cat`), and the child runner's bounds.

use std::time::Duration;

use greenlight_agent::runner::{ChildSpec, StdinSource, run_child};
use greenlight_agent::{
    AdapterOptions, DispatchRequest, Error, Family, MonotonicClock, Outcome, Reason, cli_dispatcher,
};

fn sh(script: &str) -> AdapterOptions {
    AdapterOptions {
        bin: Some("/bin/sh".into()),
        command_args: vec!["-c".into(), script.into(), "agent".into()],
        grace: Duration::from_millis(200),
        ..AdapterOptions::default()
    }
}

fn req(prompt: &str) -> DispatchRequest {
    DispatchRequest::new(
        Family::Command,
        "llama3:8b",
        prompt,
        ".",
        Duration::from_secs(20),
    )
}

#[tokio::test]
async fn without_a_placeholder_the_prompt_goes_on_stdin_and_stdout_is_the_answer() {
    let d = cli_dispatcher(Family::Command, sh("tr a-z A-Z")).expect("builds");
    let result = d.dispatch(&req("hello there")).await;
    assert_eq!(result.outcome, Outcome::Ok, "{result:?}");
    assert_eq!(result.text.as_deref(), Some("HELLO THERE"));
    assert_eq!(
        (result.tokens_in, result.tokens_out),
        (None, None),
        "never estimated"
    );
}

#[tokio::test]
async fn placeholders_become_single_argv_elements() {
    let mut options = sh(r#"printf '%s|%s|%s' "$1" "$2" "$(cat "$3")""#);
    options
        .command_args
        .extend(["{model}".into(), "{prompt}".into(), "{prompt_file}".into()]);
    let d = cli_dispatcher(Family::Command, options).expect("builds");
    let result = d.dispatch(&req("two words; $(not run)")).await;
    assert_eq!(
        result.text.as_deref(),
        Some("llama3:8b|two words; $(not run)|two words; $(not run)")
    );
}

#[tokio::test]
async fn a_placeholder_prompt_leaves_stdin_closed_not_open() {
    let mut options = sh(r#"cat; printf 'done %s' "$1""#);
    options.command_args.push("{prompt}".into());
    let d = cli_dispatcher(Family::Command, options).expect("builds");
    let result = d.dispatch(&req("p")).await;
    assert_eq!(
        result.text.as_deref(),
        Some("done p"),
        "cat saw end-of-file at once"
    );
}

#[tokio::test]
async fn empty_stdout_and_nonzero_exits_are_dead() {
    let d = cli_dispatcher(Family::Command, sh("cat >/dev/null")).expect("builds");
    let result = d.dispatch(&req("p")).await;
    assert_eq!(result.failure.map(|f| f.reason), Some(Reason::DispatchDead));

    let d =
        cli_dispatcher(Family::Command, sh("echo partial; echo boom >&2; exit 4")).expect("builds");
    let result = d.dispatch(&req("p")).await;
    assert_eq!(result.exit_code, Some(4));
    let failure = result.failure.expect("failed");
    assert_eq!(failure.reason, Reason::DispatchDead);
    assert!(
        failure.detail.contains("exited 4") && failure.detail.contains("boom"),
        "{}",
        failure.detail
    );
}

#[tokio::test]
async fn a_command_killed_by_a_signal_before_the_deadline_is_dead() {
    let d = cli_dispatcher(Family::Command, sh("kill -9 $$")).expect("builds");
    let result = d.dispatch(&req("p")).await;
    let failure = result.failure.expect("failed");
    assert_eq!(failure.reason, Reason::DispatchDead);
    assert!(failure.detail.contains("signal 9"), "{}", failure.detail);
}

#[tokio::test]
async fn a_timeout_kills_background_children_that_ignore_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pidfile = dir.path().join("bg.pid");
    let script = format!(
        "(trap '' TERM; sleep 300) & echo $! > '{}'; trap '' TERM; sleep 300",
        pidfile.display()
    );
    let d = cli_dispatcher(Family::Command, sh(&script)).expect("builds");
    let mut request = req("p");
    request.timeout = Duration::from_millis(500);
    let result = d.dispatch(&request).await;
    assert_eq!(
        result.failure.map(|f| f.reason),
        Some(Reason::DispatchTimeout)
    );
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .expect("pidfile")
        .trim()
        .parse()
        .expect("a pid");
    assert!(
        !greenlight_testkit::fake_agent::pid_alive(pid),
        "the background child survived"
    );
}

#[tokio::test]
async fn leftovers_of_a_clean_exit_are_ended_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pidfile = dir.path().join("bg.pid");
    let script = format!(
        "sleep 300 >/dev/null 2>&1 & echo $! > '{}'; echo answered",
        pidfile.display()
    );
    let d = cli_dispatcher(Family::Command, sh(&script)).expect("builds");
    let result = d.dispatch(&req("p")).await;
    assert_eq!(result.text.as_deref(), Some("answered"));
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .expect("pidfile")
        .trim()
        .parse()
        .expect("a pid");
    assert!(
        !greenlight_testkit::fake_agent::pid_alive(pid),
        "a leftover outlived the dispatch"
    );
}

/// The reply is read when the agent exits even though a `setsid` child still holds stdout, and
/// that child is ended by the run token (before, the reply was discarded after the drain wait
/// as "nothing on stdout" and the child outlived the dispatch).
#[tokio::test]
async fn an_agent_leaving_a_setsid_child_on_stdout_is_answered_and_the_child_ended() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pidfile = dir.path().join("bg.pid");
    let script = format!(
        "setsid sleep 300 & echo $! > '{}'; echo answered",
        pidfile.display()
    );
    let d = cli_dispatcher(Family::Command, sh(&script)).expect("builds");
    let started = std::time::Instant::now();
    let result = d.dispatch(&req("p")).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "waited for the leftover"
    );
    assert_eq!(result.outcome, Outcome::Ok, "{result:?}");
    assert_eq!(result.text.as_deref(), Some("answered"));
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .expect("pidfile")
        .trim()
        .parse()
        .expect("a pid");
    let mut dead = false;
    for _ in 0..100 {
        dead = !greenlight_testkit::fake_agent::pid_alive(pid);
        if dead {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(dead, "the setsid child outlived the dispatch");
}

#[test]
fn the_command_family_needs_a_binary() {
    assert!(matches!(
        cli_dispatcher(Family::Command, AdapterOptions::default()),
        Err(Error::CommandBinMissing)
    ));
}

#[tokio::test]
async fn capture_keeps_the_tail_and_flags_truncation() {
    let mut spec = ChildSpec::new("/bin/sh", ".", Duration::from_secs(20));
    spec.args = vec!["-c".into(), "seq 1 100000".into()];
    spec.capture_limit = 1000;
    let run = run_child(&spec, &MonotonicClock::new()).await;
    assert!(run.stdout_truncated);
    assert_eq!(run.stdout.len(), 1000);
    assert!(run.stdout_text().ends_with("99999\n100000\n"));
    assert!(!run.stderr_truncated);
}

#[tokio::test]
async fn invalid_utf8_is_replaced_not_dropped() {
    let mut spec = ChildSpec::new("/bin/sh", ".", Duration::from_secs(20));
    spec.args = vec!["-c".into(), r"printf 'a\377b'".into()];
    let run = run_child(&spec, &MonotonicClock::new()).await;
    assert_eq!(run.stdout_text(), "a\u{fffd}b");
}

#[tokio::test]
async fn a_large_prompt_on_stdin_arrives_whole() {
    let mut spec = ChildSpec::new("/bin/sh", ".", Duration::from_secs(20));
    spec.args = vec!["-c".into(), "wc -c".into()];
    spec.stdin = StdinSource::Text("x".repeat(1_000_000));
    let run = run_child(&spec, &MonotonicClock::new()).await;
    assert_eq!(run.stdout_text().trim(), "1000000");
}
