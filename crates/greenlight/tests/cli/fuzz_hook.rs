//! Fuzzing `greenlight hook stop` through the real binary: the Stop and SubagentStop payloads
//! Claude Code and Codex send, mutated as JSON (fields dropped, retyped, nested deep, huge
//! numbers, long and NUL-holding strings) and then as bytes (flips, truncation, inserted control
//! bytes and invalid UTF-8). Whatever arrives on stdin, the hook exits 0 with nothing or one JSON
//! object on stdout (a block carries its reason), or 1 with nothing on stdout and the problem on
//! stderr; it never panics, never dies by a signal, never hangs.
//!
//! Cases: `GREENLIGHT_FUZZ_CASES` (48 by default, scripts/test runs 1000), bounded by
//! `GREENLIGHT_FUZZ_SECONDS`.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::time::{Duration, Instant};

use greenlight_testkit::TempRepo;
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::fuzz_support;

/// One passing and one failing gate: blocks, the cap and its messages are all reachable.
const RED: &str = "version: 1\ngates:\n  - id: lint\n    command: \"true\"\n  - id: unit\n    command: echo 'assertion failed' >&2; exit 3\n";

fn claude(cwd: &str, event: &str, session: &str) -> Value {
    json!({
        "session_id": session,
        "transcript_path": "/home/u/.claude/projects/p/t.jsonl",
        "cwd": cwd,
        "permission_mode": "default",
        "hook_event_name": event,
        "stop_hook_active": false,
        "last_assistant_message": "Done: every test passes.",
        "agent_id": "a1",
        "agent_type": "general-purpose"
    })
}

fn codex(cwd: &str, event: &str, session: &str) -> Value {
    json!({
        "session_id": session,
        "turn_id": "turn-7",
        "transcript_path": null,
        "cwd": cwd,
        "hook_event_name": event,
        "model": "gpt-5-codex",
        "stop_hook_active": true,
        "last_assistant_message": "Done."
    })
}

/// A JSON value a field may be replaced with.
fn odd_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        Just(json!(true)),
        Just(json!(0)),
        Just(json!(-1)),
        Just(json!(u64::MAX)),
        Just(json!(1.5e300)),
        Just(json!("")),
        Just(json!("a\u{0}b")),
        Just(json!("\u{202e}\u{feff}")),
        Just(json!("x".repeat(100_000))),
        Just(json!([])),
        Just(json!({})),
        Just(json!({"nested": {"deeper": [1, 2, 3]}})),
        "[ -~]{0,40}".prop_map(Value::String),
        (0u32..200).prop_map(|depth| { (0..depth).fold(json!(1), |inner, _| json!([inner])) }),
    ]
}

#[derive(Debug, Clone)]
enum Edit {
    Remove(usize),
    Replace(usize, Value),
    Add(String, Value),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<usize>().prop_map(Edit::Remove),
        (any::<usize>(), odd_value()).prop_map(|(i, v)| Edit::Replace(i, v)),
        ("[a-z_]{1,12}", odd_value()).prop_map(|(k, v)| Edit::Add(k, v)),
    ]
}

fn apply_edits(mut payload: Value, edits: &[Edit]) -> Value {
    let Some(map) = payload.as_object_mut() else {
        return payload;
    };
    for e in edits {
        let keys: Vec<String> = map.keys().cloned().collect();
        match e {
            Edit::Remove(i) if !keys.is_empty() => {
                map.remove(&keys[i % keys.len()]);
            }
            Edit::Replace(i, v) if !keys.is_empty() => {
                map.insert(keys[i % keys.len()].clone(), v.clone());
            }
            Edit::Add(k, v) => {
                map.insert(k.clone(), v.clone());
            }
            _ => {}
        }
    }
    payload
}

fn check(repo: &TempRepo, stdin: &[u8]) -> Result<(), TestCaseError> {
    let state = repo.home().join("state.db");
    let out = fuzz_support::run(
        repo.command(["hook", "stop", "--state", state.to_str().unwrap()]),
        stdin,
        Duration::from_secs(60),
    )?;
    let shown = || {
        format!(
            "stdin {:?}\nexit {:?} signal {:?}\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&stdin[..stdin.len().min(2_000)]),
            out.code,
            out.signal,
            out.stdout,
            out.stderr
        )
    };
    prop_assert!(out.signal.is_none(), "killed by a signal: {}", shown());
    prop_assert!(!out.stderr.contains("panicked"), "panicked: {}", shown());
    match out.code.unwrap() {
        1 => {
            prop_assert_eq!(
                &out.stdout,
                "",
                "a refused payload prints nothing on stdout: {}",
                shown()
            );
            prop_assert!(
                out.stderr.contains("greenlight hook stop:"),
                "a refused payload says why on stderr: {}",
                shown()
            );
        }
        0 => {
            if !out.stdout.is_empty() {
                prop_assert!(
                    out.stdout.ends_with('\n') && out.stdout.matches('\n').count() == 1,
                    "stdout is one JSON line or nothing: {}",
                    shown()
                );
                let answer: Value = serde_json::from_str(out.stdout.trim_end()).map_err(|e| {
                    TestCaseError::fail(format!("stdout is not JSON ({e}): {}", shown()))
                })?;
                prop_assert!(answer.is_object(), "{}", shown());
                if let Some(decision) = answer.get("decision") {
                    prop_assert_eq!(decision, "block", "{}", shown());
                    prop_assert!(
                        answer["reason"].is_string(),
                        "a block has a reason: {}",
                        shown()
                    );
                } else {
                    prop_assert!(
                        answer["systemMessage"].is_string(),
                        "an allow with JSON carries a message: {}",
                        shown()
                    );
                }
            }
        }
        other => {
            return Err(TestCaseError::fail(format!(
                "exit {other}: the hook exits 0 or 1 only: {}",
                shown()
            )));
        }
    }
    Ok(())
}

#[test]
fn a_mutated_stop_payload_is_answered_or_refused_never_a_crash() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(RED);
    let cwd = repo.path().display().to_string();
    let start = Instant::now();
    let budget = fuzz_support::budget();
    let ran = std::cell::Cell::new(0u32);
    proptest!(fuzz_support::config(), |(
        is_claude in any::<bool>(),
        subagent in any::<bool>(),
        session in "[a-z0-9-]{0,12}",
        edits in proptest::collection::vec(edit(), 0..4),
        mutations in proptest::collection::vec(fuzz_support::mutation(), 0..3),
    )| {
        if start.elapsed() < budget {
            ran.set(ran.get() + 1);
            let event = if subagent { "SubagentStop" } else { "Stop" };
            let base = if is_claude { claude(&cwd, event, &session) } else { codex(&cwd, event, &session) };
            let text = apply_edits(base, &edits).to_string();
            let stdin = fuzz_support::apply(text.as_bytes(), &mutations);
            check(&repo, &stdin)?;
        }
    });
    assert!(
        ran.get() > 0,
        "the time budget ran out before the first case"
    );
    eprintln!(
        "fuzz hook stop: {} mutated payloads in {:?}",
        ran.get(),
        start.elapsed()
    );
}

/// Inputs byte mutations do not reach: nothing, whitespace, a lone scalar, nesting past the
/// JSON reader's depth limit, 16 MiB of payload, and two objects back to back.
#[test]
fn extreme_stdin_is_answered_or_refused() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(RED);
    let cwd = repo.path().display().to_string();
    let valid = claude(&cwd, "Stop", "s").to_string();
    let mut huge = claude(&cwd, "Stop", "big");
    huge["last_assistant_message"] = json!("y".repeat(16 << 20));
    let inputs: Vec<Vec<u8>> = vec![
        Vec::new(),
        b" \n\t\r\n".to_vec(),
        b"42".to_vec(),
        b"null".to_vec(),
        format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000)).into_bytes(),
        format!(
            "{{\"a\":{}1{}}}",
            "{\"b\":".repeat(10_000),
            "}".repeat(10_000)
        )
        .into_bytes(),
        huge.to_string().into_bytes(),
        format!("{valid}{valid}").into_bytes(),
        format!("{valid}\n\0").into_bytes(),
    ];
    for stdin in inputs {
        check(&repo, &stdin).unwrap();
    }
}
