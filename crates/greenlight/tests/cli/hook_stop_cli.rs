//! `greenlight hook stop` through the real binary, fed the exact payloads Claude Code and Codex
//! send (Stop and SubagentStop, `stop_hook_active` true and false), in real temp repositories:
//! green, red, broken-config and missing-config worktrees, the block cap, its reset by a green
//! run, and malformed stdin.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::path::{Path, PathBuf};

use greenlight_testkit::{Cli, Run, TempRepo};
use serde_json::{Value, json};

const GREEN: &str = "version: 1\ngates:\n  - id: unit\n    command: echo all good\n";
const RED: &str = "version: 1\ngates:\n  - id: lint\n    command: \"true\"\n  - id: unit\n    command: echo 'assertion failed: 2 + 2 == 5' >&2; exit 3\n";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Agent {
    Claude,
    Codex,
}

/// A payload shaped exactly like the agent's (field names and types as each agent sends them).
fn payload(agent: Agent, event: &str, active: bool, session: &str, cwd: &Path) -> Value {
    let cwd = cwd.display().to_string();
    match agent {
        Agent::Claude => {
            let mut p = json!({
                "session_id": session,
                "transcript_path": format!("/home/u/.claude/projects/p/{session}.jsonl"),
                "cwd": cwd,
                "permission_mode": "default",
                "hook_event_name": event,
                "stop_hook_active": active,
                "last_assistant_message": "I fixed the tests; everything passes now."
            });
            if event == "SubagentStop" {
                p["agent_id"] = json!("a1b2c3");
                p["agent_type"] = json!("general-purpose");
                p["agent_transcript_path"] = json!("/home/u/.claude/projects/p/sub.jsonl");
            }
            p
        }
        Agent::Codex => json!({
            "session_id": session,
            "turn_id": "turn-7",
            "transcript_path": null,
            "cwd": cwd,
            "hook_event_name": event,
            "model": "gpt-5-codex",
            "stop_hook_active": active,
            "last_assistant_message": "Done."
        }),
    }
}

fn every_shape() -> Vec<(Agent, &'static str, bool)> {
    let mut all = Vec::new();
    for agent in [Agent::Claude, Agent::Codex] {
        for event in ["Stop", "SubagentStop"] {
            for active in [false, true] {
                all.push((agent, event, active));
            }
        }
    }
    all
}

struct HookRun {
    code: i32,
    /// The one JSON object on stdout, if any.
    answer: Option<Value>,
    stdout: String,
    stderr: String,
}

fn state(repo: &TempRepo) -> PathBuf {
    repo.home().join("state.db")
}

/// Runs the hook from the repo with `stdin` and checks the stdout contract: nothing, or exactly
/// one JSON object on one line.
fn hook_raw(repo: &TempRepo, stdin: &[u8], extra: &[&str]) -> HookRun {
    let state = state(repo);
    let mut args = vec!["hook", "stop"];
    if !extra.contains(&"--state") {
        args.extend(["--state", state.to_str().unwrap()]);
    }
    args.extend_from_slice(extra);
    let Run {
        code,
        stdout,
        stderr,
        ..
    } = repo.cli(args).stdin(stdin).run();
    let answer = if stdout.is_empty() {
        None
    } else {
        assert!(
            stdout.ends_with('\n') && stdout.matches('\n').count() == 1,
            "stdout must be one JSON line, got {stdout:?}"
        );
        let value: Value = serde_json::from_str(stdout.trim_end())
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {stdout:?}"));
        assert!(value.is_object(), "{value}");
        Some(value)
    };
    HookRun {
        code,
        answer,
        stdout,
        stderr,
    }
}

fn hook(repo: &TempRepo, p: &Value, extra: &[&str]) -> HookRun {
    hook_raw(repo, p.to_string().as_bytes(), extra)
}

fn assert_blocks(run: &HookRun) -> String {
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let answer = run.answer.as_ref().expect("a block prints a JSON object");
    assert_eq!(answer["decision"], "block", "{answer}");
    answer["reason"].as_str().unwrap().to_owned()
}

fn assert_allows_silently(run: &HookRun) {
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    assert_eq!(run.answer, None, "stdout: {}", run.stdout);
}

fn assert_allows_saying(run: &HookRun) -> String {
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    let answer = run
        .answer
        .as_ref()
        .expect("an allow with a message prints JSON");
    assert!(answer.get("decision").is_none(), "{answer}");
    let message = answer["systemMessage"].as_str().unwrap().to_owned();
    assert!(
        run.stderr.contains(&message),
        "stderr must say it too: {}",
        run.stderr
    );
    message
}

#[test]
fn green_gates_allow_every_agent_and_event_silently() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(GREEN);
    for (i, (agent, event, active)) in every_shape().into_iter().enumerate() {
        let p = payload(agent, event, active, &format!("s{i}"), repo.path());
        let run = hook(&repo, &p, &[]);
        assert_allows_silently(&run);
        assert!(
            run.stderr.contains("GATE unit PASS"),
            "{agent:?} {event} {active}: {}",
            run.stderr
        );
    }
}

#[test]
fn red_gates_block_every_agent_and_event_with_the_evidence() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(RED);
    for (i, (agent, event, active)) in every_shape().into_iter().enumerate() {
        let p = payload(agent, event, active, &format!("s{i}"), repo.path());
        let reason = assert_blocks(&hook(&repo, &p, &[]));
        assert!(reason.contains("gate unit: FAIL exit=3"), "{reason}");
        assert!(
            reason.contains("command: echo 'assertion failed"),
            "{reason}"
        );
        assert!(reason.contains("assertion failed: 2 + 2 == 5"), "{reason}");
        assert!(
            !reason.contains("gate lint"),
            "a passing gate is not evidence: {reason}"
        );
        assert!(
            reason.contains("block 1 of at most 5"),
            "{agent:?} {event} {active}: every shape has its own session: {reason}"
        );
    }
}

#[test]
fn the_block_reason_reads_as_an_instruction() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(RED);
    let p = payload(Agent::Claude, "Stop", false, "s", repo.path());
    let reason = assert_blocks(&hook(&repo, &p, &[]));
    let reason = reason.replace(&repo.path().display().to_string(), "[REPO]");
    insta::assert_snapshot!(reason, @r"
    greenlight: 1 of 2 gates are red (unit). Fix what they report below, then finish again; `greenlight verify` in [REPO] shows the same.

    gate unit: FAIL exit=3
    command: echo 'assertion failed: 2 + 2 == 5' >&2; exit 3
    last 29 of 29 bytes of output:
    assertion failed: 2 + 2 == 5

    (greenlight block 1 of at most 5 in a row for this session)
    ");
}

#[test]
fn recognised_output_is_given_as_its_compact_digest() {
    let repo = TempRepo::worktree_with_commit();
    repo.write(
        "tap.txt",
        "TAP version 13\nok 1 - adds\nnot ok 2 - subtracts\n  ---\n  operator: equal\n  expected: 1\n  actual:   2\n  at: Test.<anonymous> (test/math.js:9:5)\n  ...\n\n1..2\n# tests 2\n# pass  1\n# fail  1\n",
    );
    repo.verify_yaml("version: 1\ngates:\n  - id: test\n    command: cat tap.txt; exit 1\n");
    let p = payload(Agent::Codex, "Stop", false, "s", repo.path());
    let reason = assert_blocks(&hook(&repo, &p, &[]));
    assert!(
        reason.contains(
            "exit 1 · tap · 1 passed, 1 failed, 0 skipped\nFAIL subtracts (test/math.js:9): operator: equal, expected: 1, actual: 2\n"
        ),
        "{reason}"
    );
    assert!(!reason.contains("TAP version 13"), "no raw tail: {reason}");
}

#[test]
fn huge_output_stays_within_the_reason_budget() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: a\n    command: seq 1 100000; exit 1\n  - id: b\n    command: seq 1 100000 >&2; exit 2\n",
    );
    let p = payload(Agent::Claude, "Stop", true, "s", repo.path());
    let reason = assert_blocks(&hook(&repo, &p, &[]));
    assert!(reason.len() <= 8192 + 100, "{} bytes", reason.len());
    assert!(reason.contains("gate a: FAIL exit=1"), "{reason}");
    assert!(reason.contains("gate b: FAIL exit=2"), "{reason}");
    assert!(reason.contains("100000\n"), "the tail is the end: {reason}");
}

#[test]
fn a_broken_config_never_traps_the_agent() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml("version: 1\ngates:\n  - id: Bad Id\n    command: \"true\"\n");
    for (i, (agent, event, active)) in every_shape().into_iter().enumerate() {
        let p = payload(agent, event, active, &format!("s{i}"), repo.path());
        let message = assert_allows_saying(&hook(&repo, &p, &[]));
        assert!(message.contains("the verify.yaml is broken"), "{message}");
        assert!(
            message.contains("verify.yaml:3"),
            "names the line: {message}"
        );
    }
}

/// A user-level hook fires in every repository; one without a verify.yaml used to get "run
/// greenlight init" on every stop. It is allowed silently, with a note on stderr only.
#[test]
fn a_missing_config_allows_silently_so_a_user_hook_is_quiet_elsewhere() {
    let repo = TempRepo::worktree_with_commit();
    for (i, (agent, event, active)) in every_shape().into_iter().enumerate() {
        let p = payload(agent, event, active, &format!("s{i}"), repo.path());
        let run = hook(&repo, &p, &[]);
        assert_allows_silently(&run);
        assert!(
            run.stderr
                .contains("no .greenlight/verify.yaml or .commandmate/verify.yaml"),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn the_cap_blocks_n_times_then_allows_saying_the_gates_are_still_red() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(RED);
    let n = 3;
    for i in 1..=n {
        // The first stop of a chain says stop_hook_active false, the rest true, as the agents do.
        let p = payload(Agent::Claude, "Stop", i > 1, "capped", repo.path());
        let reason = assert_blocks(&hook(&repo, &p, &["--max-blocks", "3"]));
        assert!(
            reason.contains(&format!("block {i} of at most 3")),
            "{reason}"
        );
    }
    let p = payload(Agent::Claude, "Stop", true, "capped", repo.path());
    let message = assert_allows_saying(&hook(&repo, &p, &["--max-blocks", "3"]));
    assert!(
        message.contains("still red (unit) after 3 blocks in a row"),
        "{message}"
    );
    // Giving up ends the chain: the next stop (a new request) is judged afresh.
    let p = payload(Agent::Claude, "Stop", false, "capped", repo.path());
    let reason = assert_blocks(&hook(&repo, &p, &["--max-blocks", "3"]));
    assert!(reason.contains("block 1 of at most 3"), "{reason}");
}

#[test]
fn the_default_cap_is_five_and_ignores_stop_hook_active() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(RED);
    // Codex-shaped, and stop_hook_active always false: greenlight counts on its own.
    for i in 1..=5 {
        let p = payload(Agent::Codex, "Stop", false, "codex-session", repo.path());
        let reason = assert_blocks(&hook(&repo, &p, &[]));
        assert!(
            reason.contains(&format!("block {i} of at most 5")),
            "{reason}"
        );
    }
    let p = payload(Agent::Codex, "Stop", false, "codex-session", repo.path());
    assert_allows_saying(&hook(&repo, &p, &[]));
}

#[test]
fn a_green_run_resets_the_count() {
    let repo = TempRepo::worktree_with_commit();
    // The session's gates are fixed when it begins: the work they test goes red, green, red.
    repo.verify_yaml("version: 1\ngates:\n  - id: unit\n    command: sh unit.sh\n");
    repo.write("unit.sh", "exit 3\n");
    let p = payload(Agent::Claude, "Stop", true, "resets", repo.path());
    for _ in 0..2 {
        assert_blocks(&hook(&repo, &p, &["--max-blocks", "3"]));
    }
    repo.write("unit.sh", "exit 0\n");
    assert_allows_silently(&hook(&repo, &p, &["--max-blocks", "3"]));
    repo.write("unit.sh", "exit 3\n");
    let reason = assert_blocks(&hook(&repo, &p, &["--max-blocks", "3"]));
    assert!(reason.contains("block 1 of at most 3"), "{reason}");
}

#[test]
fn subagents_and_sessions_are_counted_apart() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(RED);
    let main = payload(Agent::Claude, "Stop", true, "one", repo.path());
    let sub = payload(Agent::Claude, "SubagentStop", true, "one", repo.path());
    let other = payload(Agent::Claude, "Stop", true, "two", repo.path());
    assert!(assert_blocks(&hook(&repo, &main, &["--max-blocks", "1"])).contains("block 1 of"));
    assert!(assert_blocks(&hook(&repo, &sub, &["--max-blocks", "1"])).contains("block 1 of"));
    assert!(assert_blocks(&hook(&repo, &other, &["--max-blocks", "1"])).contains("block 1 of"));
    assert_allows_saying(&hook(&repo, &main, &["--max-blocks", "1"]));
}

#[test]
fn max_blocks_zero_only_reports() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(RED);
    let p = payload(Agent::Codex, "SubagentStop", false, "s", repo.path());
    let message = assert_allows_saying(&hook(&repo, &p, &["--max-blocks", "0"]));
    assert!(message.contains("still red (unit)"), "{message}");
}

#[test]
fn malformed_stdin_is_a_non_blocking_error() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(RED);
    for (stdin, what) in [
        (&b""[..], "stdin is empty"),
        (b"{\"cwd\": ", "not JSON"),
        (b"[\"Stop\"]", "expected a JSON object, found an array"),
        (b"{\"stop_hook_active\": \"yes\"}", "invalid type"),
    ] {
        let run = hook_raw(&repo, stdin, &[]);
        assert_eq!(
            run.code, 1,
            "1 is non-blocking (2 would block): {}",
            run.stderr
        );
        assert_eq!(run.stdout, "", "nothing on stdout");
        assert!(
            run.stderr
                .starts_with("greenlight hook stop: stdin is not a Stop hook payload")
                && run.stderr.contains(what),
            "{:?}: {}",
            String::from_utf8_lossy(stdin),
            run.stderr
        );
    }
}

#[test]
fn a_bad_flag_is_a_non_blocking_error_too() {
    let repo = TempRepo::worktree_with_commit();
    // A usage error exits before reading the payload, so the payload may meet a closed pipe.
    let run = repo
        .cli(["hook", "stop", "--max-blocks", "lots"])
        .offer_stdin("{}")
        .run();
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(run.stdout, "");
    assert!(run.stderr.contains("--max-blocks"), "{}", run.stderr);
}

/// Runs `greenlight hook session-start` with the payload Claude Code sends at SessionStart.
fn session_start(repo: &TempRepo, session: &str) -> HookRun {
    let p = json!({
        "session_id": session,
        "transcript_path": format!("/home/u/.claude/projects/p/{session}.jsonl"),
        "cwd": repo.path().display().to_string(),
        "hook_event_name": "SessionStart",
        "source": "startup"
    });
    let state = state(repo);
    let Run {
        code,
        stdout,
        stderr,
        ..
    } = repo
        .cli(["hook", "session-start", "--state", state.to_str().unwrap()])
        .stdin(p.to_string())
        .run();
    let run = HookRun {
        code,
        answer: None,
        stdout,
        stderr,
    };
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "", "SessionStart output would reach the model");
    run
}

/// Makes `origin` a real bare repository holding the current `main`.
fn real_origin(repo: &TempRepo) -> PathBuf {
    let bare = repo.home().join("origin.git");
    let ok = std::process::Command::new("git")
        .args(["init", "-q", "--bare", "-b", "main"])
        .arg(&bare)
        .status()
        .unwrap();
    assert!(ok.success());
    repo.git(&["remote", "add", "origin", bare.to_str().unwrap()]);
    repo.git(&["push", "-q", "origin", "main:main"]);
    repo.git(&["fetch", "-q", "origin"]);
    bare
}

/// An agent that ran `git push origin HEAD:main && git fetch` moved `origin/HEAD` past its own
/// work, and the hook said "nothing to judge" about red gates. Work is now counted from the
/// base recorded when the session began.
#[test]
fn a_push_and_fetch_after_session_start_cannot_let_a_red_stop_through() {
    let repo = TempRepo::primary();
    real_origin(&repo);
    repo.verify_yaml(RED);
    repo.commit_all("gates");
    repo.git(&["push", "-q", "origin", "HEAD:main"]);
    repo.git(&["fetch", "-q", "origin"]);
    session_start(&repo, "pushy");
    // The agent's turn: a commit, pushed and fetched, so origin/HEAD is HEAD again.
    repo.write("src/lib.rs", "broken\n");
    repo.commit_all("agent work");
    repo.git(&["push", "-q", "origin", "HEAD:main"]);
    repo.git(&["fetch", "-q", "origin"]);
    assert_eq!(
        repo.git(&["rev-parse", "origin/HEAD"]),
        repo.git(&["rev-parse", "HEAD"])
    );
    let p = payload(Agent::Claude, "Stop", false, "pushy", repo.path());
    let reason = assert_blocks(&hook(&repo, &p, &[]));
    assert!(reason.contains("gate unit: FAIL exit=3"), "{reason}");
    // A subagent of the same session counts from the same base.
    let p = payload(Agent::Claude, "SubagentStop", false, "pushy", repo.path());
    assert_blocks(&hook(&repo, &p, &[]));
}

/// Without a SessionStart record (an older install, another agent), a stop with nothing to
/// count cannot tell a pushed session from an idle one: it runs the gates on HEAD.
#[test]
fn without_a_recorded_base_a_stop_with_nothing_to_count_runs_the_gates() {
    let repo = TempRepo::primary();
    real_origin(&repo);
    repo.verify_yaml(RED);
    repo.commit_all("gates");
    repo.git(&["push", "-q", "origin", "HEAD:main"]);
    repo.git(&["fetch", "-q", "origin"]);
    let p = payload(Agent::Codex, "Stop", false, "unrecorded", repo.path());
    let run = hook(&repo, &p, &[]);
    let reason = assert_blocks(&run);
    assert!(reason.contains("gate unit: FAIL exit=3"), "{reason}");
    assert!(
        run.stderr
            .contains("no base commit was recorded when this session began"),
        "{}",
        run.stderr
    );
    // The next stop of the session counts from the base recorded at its first stop; its last
    // stop was red, so it is judged again rather than let go as "nothing changed".
    assert_blocks(&hook(&repo, &p, &[]));
}

#[test]
fn a_primary_checkout_without_work_is_not_judged_and_with_work_is() {
    let repo = TempRepo::primary();
    repo.verify_yaml(RED);
    repo.commit_all("gates");
    repo.git(&["update-ref", "refs/remotes/origin/main", "HEAD"]);
    session_start(&repo, "s");
    let p = payload(Agent::Claude, "Stop", false, "s", repo.path());
    let run = hook(&repo, &p, &[]);
    assert_allows_silently(&run);
    assert!(
        run.stderr.contains("nothing to judge, no gate ran"),
        "{}",
        run.stderr
    );
    // Work in the primary checkout is judged (skipInPrimaryCheckout does not apply to the hook).
    repo.write("src/new.rs", "fn main() {}\n");
    let reason = assert_blocks(&hook(&repo, &p, &[]));
    assert!(reason.contains("gate unit: FAIL exit=3"), "{reason}");
}

#[test]
fn a_repository_without_a_commit_is_not_trapped() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let git = std::process::Command::new("git")
        .args(["init", "-q", "-b", "main"])
        .current_dir(&root)
        .status()
        .unwrap();
    assert!(git.success());
    std::fs::create_dir_all(root.join(".commandmate")).unwrap();
    std::fs::write(root.join(".commandmate/verify.yaml"), RED).unwrap();
    let p = payload(Agent::Claude, "Stop", false, "s", &root);
    let state = root.join("state.db");
    let out = Cli::new(["hook", "stop", "--state", state.to_str().unwrap()])
        .current_dir(&root)
        .stdin(p.to_string())
        .run();
    assert_eq!(out.code, 0);
    let answer = out.json();
    assert!(answer.get("decision").is_none(), "{answer}");
    assert!(
        answer["systemMessage"]
            .as_str()
            .unwrap()
            .contains("has no commit yet"),
        "{answer}"
    );
}

#[test]
fn a_session_started_in_a_subdirectory_finds_the_worktree_gates() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(RED);
    let p = payload(Agent::Codex, "Stop", false, "s", &repo.path().join("src"));
    let reason = assert_blocks(&hook(&repo, &p, &[]));
    assert!(reason.contains("gate unit: FAIL exit=3"), "{reason}");
}

#[test]
fn an_unwritable_state_database_allows_the_stop_and_says_why() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(RED);
    // A directory where the database file should be: SQLite cannot open it.
    let bad = repo.home().join("state-is-a-dir");
    std::fs::create_dir_all(&bad).unwrap();
    let p = payload(Agent::Claude, "Stop", true, "s", repo.path());
    let run = hook_raw(
        &repo,
        p.to_string().as_bytes(),
        &["--state", bad.to_str().unwrap()],
    );
    let message = assert_allows_saying(&run);
    assert!(
        message.contains("the gates are red (unit), but the block count cannot be kept"),
        "{message}"
    );
}

/// The gates that judge a session are the ones it began with: an agent that rewrites
/// verify.yaml during its turn (here: red gates replaced by one that always passes) is still
/// judged by the file as it was at SessionStart, and told so on stderr.
#[test]
fn a_verify_yaml_rewritten_during_the_session_does_not_judge_it() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(RED);
    repo.commit_all("gates");
    session_start(&repo, "rewriter");
    repo.write("src/lib.rs", "broken\n");
    repo.verify_yaml(GREEN);
    let p = payload(Agent::Claude, "Stop", false, "rewriter", repo.path());
    let run = hook(&repo, &p, &[]);
    let reason = assert_blocks(&run);
    assert!(reason.contains("gate unit: FAIL exit=3"), "{reason}");
    assert!(
        run.stderr.contains("changed since this session began"),
        "{}",
        run.stderr
    );
    // Deleting it changes nothing either (without a record, no file would allow the stop).
    std::fs::remove_file(repo.path().join(".commandmate/verify.yaml")).unwrap();
    let reason = assert_blocks(&hook(&repo, &p, &[]));
    assert!(reason.contains("gate unit: FAIL exit=3"), "{reason}");
    repo.verify_yaml(GREEN);
    // A new session takes the file as it is then.
    session_start(&repo, "next");
    let p = payload(Agent::Claude, "Stop", false, "next", repo.path());
    assert_allows_silently(&hook(&repo, &p, &[]));
}

/// Without a SessionStart record, the file is fixed at the session's first decision.
#[test]
fn a_verify_yaml_rewritten_after_the_first_stop_does_not_judge_the_session() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(RED);
    repo.write("src/lib.rs", "broken\n");
    let p = payload(
        Agent::Codex,
        "Stop",
        false,
        "unrecorded-rewriter",
        repo.path(),
    );
    assert_blocks(&hook(&repo, &p, &[]));
    repo.verify_yaml(GREEN);
    let reason = assert_blocks(&hook(&repo, &p, &[]));
    assert!(reason.contains("gate unit: FAIL exit=3"), "{reason}");
}

/// The hook reads greenlight's own `.greenlight/verify.yaml` (version 2 is allowed there), found
/// from a subdirectory, before CommandMate's file beside it, and says once that it did.
#[test]
fn the_hook_reads_greenlight_s_own_config_first_from_a_subdirectory() {
    let repo = TempRepo::worktree_with_commit();
    repo.write(".commandmate/verify.yaml", GREEN);
    repo.greenlight_yaml(
        "version: 2\ngates:\n  - id: unit\n    command: echo 'red in the v2 file' >&2; exit 3\n",
    );
    repo.write("sub/x.txt", "x\n");
    let p = payload(Agent::Claude, "Stop", false, "s", &repo.path().join("sub"));
    let run = hook(&repo, &p, &[]);
    let reason = assert_blocks(&run);
    assert!(reason.contains("red in the v2 file"), "{reason}");
    assert!(
        run.stderr.contains("greenlight reads") && run.stderr.contains("ignores the other"),
        "{}",
        run.stderr
    );
}

/// What verify says on stderr beside its gate lines, the hook says too: a result cache turned
/// off (here: a cache directory inside the worktree) and a gate's process that outlived it,
/// each named, with the verdict unchanged.
#[test]
fn the_hook_says_on_stderr_what_verify_would_warn_about() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 2\ngates:\n  - id: unit\n    command: \"true\"\n  - id: spawner\n    command: \"sleep 600 & exit 0\"\n    cache: false\n",
    );
    let p = payload(Agent::Claude, "Stop", false, "s", repo.path());
    let state = state(&repo);
    let run = repo
        .cli(["hook", "stop", "--state", state.to_str().unwrap()])
        .env(
            "GREENLIGHT_CACHE_DIR",
            repo.path().join(".greenlight-cache"),
        )
        .stdin(p.to_string().as_bytes())
        .run();
    assert_eq!(run.code, 0, "{}", run.render());
    assert!(
        run.stderr.contains("the result cache is off for this run")
            && run.stderr.contains("is inside this worktree"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("gate spawner left 1 process(es) running after it ended; all were killed")
            && run.stderr.contains("sleep 600"),
        "{}",
        run.stderr
    );
}
