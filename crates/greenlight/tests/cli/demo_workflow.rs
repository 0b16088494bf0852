//! `greenlight demo workflow`, through the real binary: a gate redo, three members fanned out,
//! the landed barrier catching the one that wrote nothing, and the others landed on main in
//! order — offline, in a temp dir that is gone afterwards unless kept.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::path::Path;
use std::time::{Duration, Instant};

use greenlight_testkit::TempRepo;

/// Runs the demo with its temp dirs under `tmp`; returns (exit code, stdout, stderr).
fn demo(repo: &TempRepo, tmp: &Path, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["demo", "workflow"];
    args.extend(extra);
    let out = repo.command(args).env("TMPDIR", tmp).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = greenlight_proc::git::command(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The lines of `text` that appear in `want`'s order (each found after the one before).
fn in_order(text: &str, want: &[&str]) {
    let mut from = 0;
    for line in want {
        match text[from..].find(line) {
            Some(at) => from += at + line.len(),
            None => panic!("`{line}` not found (in order) in:\n{text}"),
        }
    }
}

#[test]
fn the_workflow_demo_redoes_a_red_gate_catches_a_false_done_and_lands_the_rest_in_order() {
    let repo = TempRepo::primary();
    let tmp = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let (code, stdout, stderr) = demo(&repo, tmp.path(), &["--keep"]);
    let took = started.elapsed();
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(took < Duration::from_secs(30), "the demo took {took:?}");
    assert!(
        stdout.contains("workflow run 1 completed: every step finished"),
        "{stdout}"
    );
    in_order(
        &stdout,
        &[
            "dispatch  helper\n",
            "gate      helper-tested: FAIL",
            "dispatch  helper (attempt 2)",
            "gate      helper-tested: PASS",
            "settled   ops[mul]: deliverable-not-landed",
            "join      written (quorum:2): met — passed add, sub; failed mul",
            "land      land[add]: landed: the target moved",
            "land      land[sub]: landed: the target moved",
        ],
    );
    // The three members were dispatched together (maxFanout 3) before any settled.
    let first_settle = stdout.find("settled   ops[").unwrap();
    for item in ["add", "sub", "mul"] {
        let dispatched = stdout.find(&format!("dispatch  ops[{item}]")).unwrap();
        assert!(dispatched < first_settle, "{stdout}");
    }

    // What --keep kept: main, checked out in the project, advanced by two landing merges whose
    // trees hold the two operations that were written, and not the one that was only claimed.
    let kept = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("calc").is_dir())
        .unwrap_or_else(|| panic!("nothing kept: {stdout}"));
    let project = kept.join("calc");
    assert!(
        stdout.contains(&format!("kept: {}", project.display())),
        "{stdout}"
    );
    let subjects = git(&project, &["log", "--first-parent", "--format=%s", "main"]);
    assert_eq!(
        subjects.lines().collect::<Vec<_>>(),
        [
            "Land sub (land of workflow run 1)",
            "Land add (land of workflow run 1)",
            "calc: the calculator, no operation yet"
        ]
    );
    assert_eq!(
        git(&project, &["status", "--porcelain"]),
        "",
        "the checkout follows main"
    );
    assert!(project.join("ops/add.sh").is_file() && project.join("ops/sub.sh").is_file());
    assert!(!project.join("ops/mul.sh").exists());
    let test = std::process::Command::new("sh")
        .arg("test.sh")
        .current_dir(&project)
        .output()
        .unwrap();
    assert!(
        test.status.success(),
        "{}",
        String::from_utf8_lossy(&test.stdout)
    );
    // No scratch worktree of a landing is left.
    let worktrees = git(&project, &["worktree", "list", "--porcelain"]);
    assert!(!worktrees.contains("greenlight/land"), "{worktrees}");
    assert!(
        !project
            .join(".git/greenlight/land")
            .read_dir()
            .is_ok_and(|mut d| d.next().is_some())
    );
    std::fs::remove_dir_all(&kept).unwrap();

    // Without --keep, nothing of it is left in the temp dir, and the directory it was started
    // from is untouched.
    let (code, stdout, stderr) = demo(&repo, tmp.path(), &[]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
}
