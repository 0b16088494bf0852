//! The real tool host on real temp directories: each tool's results and limits, and the
//! sandbox (containment, symlinks, FIFOs, all-or-nothing patches).

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::path::Path;
use std::time::Duration;

use greenlight_openai::host::WorktreeHost;
use greenlight_openai::tools::{ToolHost, ToolLimits, ToolReply, ToolRequest};
use serde_json::{Value, json};

fn host(root: &Path, limits: ToolLimits) -> WorktreeHost {
    WorktreeHost::new(root, limits, None, Vec::new(), Duration::from_millis(200))
}

async fn call(host: &WorktreeHost, name: &str, arguments: Value) -> ToolReply {
    let spec = host.specs().into_iter().find(|s| s.name == name);
    let reply = host
        .call(&ToolRequest {
            name: name.into(),
            arguments,
            deadline: Duration::from_secs(10),
        })
        .await;
    // Every result the real host returns has its tool's shape.
    if let (ToolReply::Ok(value), Some(spec)) = (&reply, spec) {
        spec.result.check(name, value).unwrap();
    }
    reply
}

fn ok(reply: ToolReply) -> Value {
    match reply {
        ToolReply::Ok(v) => v,
        other => panic!("expected a result, got {other:?}"),
    }
}

fn refused(reply: ToolReply) -> String {
    match reply {
        ToolReply::Refused(m) => m,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn failed(reply: ToolReply) -> String {
    match reply {
        ToolReply::Failed(m) => m,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test]
async fn read_file_pages_long_files_and_numbers_lines() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (1..=10).map(|n| format!("line {n}\n")).collect();
    std::fs::write(dir.path().join("f.txt"), text).unwrap();
    let limits = ToolLimits {
        read_lines: 4,
        ..ToolLimits::default()
    };
    let h = host(dir.path(), limits);
    let first = ok(call(&h, "read_file", json!({"path": "f.txt"})).await);
    assert_eq!(first["total_lines"], 10);
    assert_eq!(first["next_start_line"], 5);
    assert_eq!(
        first["content"],
        "     1\tline 1\n     2\tline 2\n     3\tline 3\n     4\tline 4\n"
    );
    let last = ok(call(&h, "read_file", json!({"path": "f.txt", "start_line": 9})).await);
    assert_eq!(last["content"], "     9\tline 9\n    10\tline 10\n");
    assert!(last.get("next_start_line").is_none_or(Value::is_null));
    let err = refused(call(&h, "read_file", json!({"path": "f.txt", "lines": 3})).await);
    assert!(err.contains("unknown field `lines`"), "{err}");
    let err = failed(call(&h, "read_file", json!({"path": "missing.txt"})).await);
    assert!(err.contains("cannot open `missing.txt`"), "{err}");
}

#[tokio::test]
async fn non_utf8_bytes_are_replaced_not_dropped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("b.txt"), b"caf\xe9 ok\n").unwrap();
    let h = host(dir.path(), ToolLimits::default());
    let v = ok(call(&h, "read_file", json!({"path": "b.txt"})).await);
    assert_eq!(v["content"], "     1\tcaf\u{fffd} ok\n");
}

#[tokio::test]
async fn a_fifo_a_directory_and_an_oversized_file_are_refused_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("big.txt"), "x".repeat(2000)).unwrap();
    let limits = ToolLimits {
        max_file_bytes: 1000,
        ..ToolLimits::default()
    };
    let h = host(dir.path(), limits);
    let started = std::time::Instant::now();
    let err = failed(call(&h, "read_file", json!({"path": "pipe"})).await);
    assert!(err.contains("not a regular file"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(2));
    let err = failed(call(&h, "read_file", json!({"path": "sub"})).await);
    assert!(err.contains("is a directory; use list_dir"), "{err}");
    let err = failed(call(&h, "read_file", json!({"path": "big.txt"})).await);
    assert!(err.contains("over the 1000-byte limit"), "{err}");
}

#[tokio::test]
async fn every_file_tool_refuses_paths_that_leave_the_worktree() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret\n").unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), dir.path().join("s.txt"))
        .unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero")).unwrap();
    let h = host(dir.path(), ToolLimits::default());
    let abs = outside.path().join("secret.txt");
    let abs = abs.to_str().unwrap();
    for (tool, args) in [
        ("read_file", json!({"path": "../secret.txt"})),
        ("read_file", json!({"path": abs})),
        ("read_file", json!({"path": "link/secret.txt"})),
        ("read_file", json!({"path": "s.txt"})),
        ("read_file", json!({"path": "zero"})),
        ("list_dir", json!({"path": "link"})),
        ("search", json!({"pattern": "secret", "path": "link"})),
        (
            "write_file",
            json!({"path": "link/new.txt", "content": "x"}),
        ),
        ("write_file", json!({"path": "s.txt", "content": "x"})),
        (
            "write_file",
            json!({"path": "a/../../x.txt", "content": "x"}),
        ),
        (
            "apply_patch",
            json!({"patch": "--- a/link/secret.txt\n+++ b/link/secret.txt\n@@ -1 +1 @@\n-secret\n+public\n"}),
        ),
    ] {
        let err = refused(call(&h, tool, args.clone()).await);
        assert!(err.starts_with("refused:"), "{tool} {args}: {err}");
    }
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(),
        "secret\n"
    );
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
}

#[tokio::test]
async fn search_finds_regex_and_literal_matches_skipping_git_and_symlinks() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("o.txt"), "needle outside\n").unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::create_dir_all(dir.path().join(".git")).unwrap();
    std::fs::write(
        dir.path().join("src/a.rs"),
        "fn add() {}\nlet x = a+b; // needle\n",
    )
    .unwrap();
    std::fs::write(dir.path().join(".git/config"), "needle in git\n").unwrap();
    std::fs::write(dir.path().join("bin.dat"), b"needle\0binary").unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
    let h = host(dir.path(), ToolLimits::default());
    let v = ok(call(&h, "search", json!({"pattern": "needle"})).await);
    assert_eq!(v["matches"], json!(["src/a.rs:2: let x = a+b; // needle"]));
    let v = ok(call(&h, "search", json!({"pattern": "a+b", "literal": true})).await);
    assert_eq!(v["matches"].as_array().unwrap().len(), 1);
    let v = ok(call(
        &h,
        "search",
        json!({"pattern": "fn \\w+\\(", "path": "src"}),
    )
    .await);
    assert_eq!(v["matches"], json!(["src/a.rs:1: fn add() {}"]));
    let err = refused(call(&h, "search", json!({"pattern": "("})).await);
    assert!(err.contains("literal: true"), "{err}");
    let limited = host(
        dir.path(),
        ToolLimits {
            search_matches: 1,
            ..ToolLimits::default()
        },
    );
    let v = ok(call(&limited, "search", json!({"pattern": "."})).await);
    assert_eq!(v["matches"].as_array().unwrap().len(), 1);
    assert!(v["stopped"].as_str().unwrap().contains("1 matches"), "{v}");
}

#[tokio::test]
async fn list_dir_sorts_names_and_says_how_many_it_left_out() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["b.txt", "a.txt", "c.txt"] {
        std::fs::write(dir.path().join(name), "12").unwrap();
    }
    std::fs::create_dir(dir.path().join("d")).unwrap();
    let h = host(
        dir.path(),
        ToolLimits {
            list_entries: 3,
            ..ToolLimits::default()
        },
    );
    let v = ok(call(&h, "list_dir", json!({})).await);
    assert_eq!(
        v["entries"],
        json!([
            {"name": "a.txt", "kind": "file", "bytes": 2},
            {"name": "b.txt", "kind": "file", "bytes": 2},
            {"name": "c.txt", "kind": "file", "bytes": 2},
        ])
    );
    assert_eq!(v["omitted"], 1);
}

#[tokio::test]
async fn write_file_creates_directories_and_says_whether_it_created_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let h = host(dir.path(), ToolLimits::default());
    let v = ok(call(
        &h,
        "write_file",
        json!({"path": "new/deep/f.txt", "content": "é\n"}),
    )
    .await);
    assert_eq!(
        v,
        json!({"path": "new/deep/f.txt", "bytes": 3, "created": true})
    );
    let v = ok(call(
        &h,
        "write_file",
        json!({"path": "new/deep/f.txt", "content": "x"}),
    )
    .await);
    assert_eq!(v["created"], false);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("new/deep/f.txt")).unwrap(),
        "x"
    );
}

#[tokio::test]
async fn a_patch_applies_to_every_file_or_to_none() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\n").unwrap();
    std::fs::write(dir.path().join("b.txt"), "three\nfour\n").unwrap();
    let h = host(dir.path(), ToolLimits::default());
    let bad = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n--- a/b.txt\n+++ b/b.txt\n@@ -1,2 +1,2 @@\n three\n-five\n+FIVE\n";
    let err = failed(call(&h, "apply_patch", json!({"patch": bad})).await);
    assert!(err.contains("hunk 1 of `b.txt`"), "{err}");
    assert!(err.contains("nothing was changed"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "one\ntwo\n"
    );
    let good = "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n--- /dev/null\n+++ b/c.txt\n@@ -0,0 +1 @@\n+new\n--- a/b.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-three\n-four\n";
    let v = ok(call(&h, "apply_patch", json!({"patch": good})).await);
    assert_eq!(
        v["files"],
        json!([
            {"path": "a.txt", "action": "modified", "hunks": 1},
            {"path": "c.txt", "action": "created", "hunks": 1},
            {"path": "b.txt", "action": "deleted", "hunks": 1},
        ])
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "one\nTWO\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("c.txt")).unwrap(),
        "new\n"
    );
    assert!(!dir.path().join("b.txt").exists());
    let err = failed(
        call(
            &h,
            "apply_patch",
            json!({"patch": "--- /dev/null\n+++ b/c.txt\n@@ -0,0 +1 @@\n+again\n"}),
        )
        .await,
    );
    assert!(err.contains("but it exists"), "{err}");
}

#[tokio::test]
async fn run_kills_what_a_command_leaves_running_and_bounds_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let h = host(
        dir.path(),
        ToolLimits {
            run_output_bytes: 100,
            ..ToolLimits::default()
        },
    );
    let v = ok(call(
        &h,
        "run",
        json!({"command": "sleep 300 & echo started; exit 3"}),
    )
    .await);
    assert_eq!(v["exit_code"], 3);
    assert_eq!(v["leftovers_killed"], 1, "{v}");
    let v = ok(call(&h, "run", json!({"command": "seq 1 1000"})).await);
    assert!(v["output"].as_str().unwrap().ends_with("1000\n"), "{v}");
    assert!(v["output_cut_bytes"].as_u64().unwrap() > 3000, "{v}");
    let err = refused(call(&h, "run", json!({"command": "  "})).await);
    assert!(err.contains("empty"), "{err}");
}
