//! What `greenlight verify` tells a person when it judged nothing or could not count work: the
//! one line after `RESULT not_started` / `skipped`, a mutex lock with no readable owner, a base
//! ref that shares no commit with HEAD, gate output on a non-terminal stderr, and help texts that
//! say what the flags need and where the documentation is.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::fs;
use std::process::Command;

use greenlight_testkit::TempRepo;

fn last_stderr_line(stderr: &str) -> &str {
    stderr.lines().last().unwrap_or_default()
}

#[test]
fn not_started_ends_with_one_line_saying_why_and_what_to_do() {
    let repo = TempRepo::worktree();
    let config = repo.home().join("verify.yaml");
    fs::write(
        &config,
        "version: 1\ngates:\n  - id: a\n    command: \"true\"\n",
    )
    .unwrap();
    let out = repo.greenlight(["verify", "--config", config.to_str().unwrap()]);
    assert_eq!(out.code, 21, "{}", out.render());
    assert_eq!(
        last_stderr_line(&out.stderr),
        format!(
            "greenlight: RESULT not_started (no commit and no change since origin/main in {}): make a change or a commit, or pass --skip-work-evidence to run the gates anyway",
            repo.path().display()
        )
    );

    fs::write(
        &config,
        "version: 1\ngates:\n  - id: a\n    command: \"true\"\noptions:\n  requireCommit: true\n",
    )
    .unwrap();
    repo.write("src/a.rs", "fn a() {}\n");
    let out = repo.greenlight(["verify", "--config", config.to_str().unwrap()]);
    assert_eq!(out.code, 21, "{}", out.render());
    assert_eq!(
        last_stderr_line(&out.stderr),
        "greenlight: RESULT not_started (no commit since origin/main, and options.requireCommit is set): commit the changes, or pass --skip-work-evidence to run the gates anyway"
    );
}

#[test]
fn skipped_in_the_primary_checkout_names_the_option_and_git_worktree_add() {
    let repo = TempRepo::primary();
    repo.verify_yaml("version: 1\ngates:\n  - id: a\n    command: \"true\"\n");
    let out = repo.greenlight(["verify", "--format", "json"]);
    assert_eq!(out.code, 22, "{}", out.render());
    let last = last_stderr_line(&out.stderr);
    assert!(last.starts_with("greenlight: RESULT skipped: "), "{last}");
    for needle in [
        "is the primary checkout",
        "git worktree add",
        "`skipInPrimaryCheckout: false`",
        ".commandmate/verify.yaml",
    ] {
        assert!(last.contains(needle), "{needle} missing: {last}");
    }
}

/// A lock directory as a holder killed between `mkdir` and writing its record leaves it, or
/// with a record nobody can read.
fn ownerless_lock(repo: &TempRepo, owner: Option<&str>) -> std::path::PathBuf {
    let dir = repo.lock_root().join("e2e-port.lock");
    fs::create_dir_all(&dir).unwrap();
    if let Some(text) = owner {
        fs::write(dir.join("owner"), text).unwrap();
    }
    dir
}

#[test]
fn a_fresh_lock_with_a_garbage_owner_is_waited_for_and_the_wait_message_says_why() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: e2e\n    command: touch ran\n    mutex: e2e-port\n    timeoutSec: 1\n",
    );
    let dir = ownerless_lock(&repo, Some("garbage\n"));
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 22, "{}", out.render());
    assert!(repo.read("ran").is_none(), "the gate ran without its lock");
    assert!(dir.join("owner").exists(), "a fresh lock was taken");
    assert!(
        out.stderr.contains(
            "greenlight: the lock names no holder: its owner file is not a lock record (`garbage`). greenlight reclaims such a lock once it is older than the gate's timeout (1s, at least 10s)"
        ),
        "{}",
        out.stderr
    );
    assert!(
        last_stderr_line(&out.stderr).starts_with("greenlight: RESULT skipped: a gate reached no verdict because its mutex lock stayed held"),
        "{}",
        out.stderr
    );
}

#[test]
fn an_old_lock_without_an_owner_file_is_reclaimed_after_the_gates_timeout() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: e2e\n    command: touch ran\n    mutex: e2e-port\n    timeoutSec: 1\n",
    );
    let dir = ownerless_lock(&repo, None);
    let touched = Command::new("touch")
        .args(["-d", "1 hour ago"])
        .arg(&dir)
        .status()
        .unwrap();
    assert!(touched.success());
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(repo.read("ran").is_some());
    assert!(!dir.exists(), "the reclaimed lock was not released");
    assert!(
        out.stderr.contains(&format!(
            "greenlight: reclaimed the lock {}: it has no owner file, and it was older than the gate's 1s timeout",
            dir.display()
        )),
        "{}",
        out.stderr
    );
}

#[test]
fn a_base_ref_with_no_merge_base_is_a_clear_error_not_an_empty_git_one() {
    let repo = TempRepo::worktree();
    repo.git(&["checkout", "-q", "--orphan", "unrelated"]);
    repo.write("other.txt", "x\n");
    repo.commit_all("a history of its own");
    let config = repo.home().join("verify.yaml");
    fs::write(
        &config,
        "version: 1\ngates:\n  - id: a\n    command: \"true\"\n",
    )
    .unwrap();
    let out = repo.greenlight(["verify", "--config", config.to_str().unwrap()]);
    insta::assert_snapshot!(out.render(), @r"
    exit: 2
    --- stdout
    --- stderr
    greenlight: base ref `origin/main` and HEAD share no commit (no merge-base), so the work since it cannot be counted; pass a --base-ref that this branch grew from, or --skip-work-evidence (which still needs a base ref that names a commit)
    ");
}

#[test]
fn gate_output_reaches_a_non_terminal_stderr_without_escape_sequences() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: colour\n    command: printf '\\033[31mred\\033[0m text\\n10%%\\r100%%\\n\\033]0;title\\007done\\n'; exit 1\n",
    );
    let out = repo.greenlight(["verify"]);
    insta::assert_snapshot!(out.render(), @r"
    exit: 20
    --- stdout
    GATE work-evidence PASS commits=1 uncommitted=1
    GATE colour FAIL exit=1 duration=0s
    RESULT failed
    --- stderr
    --- gate colour (FAIL exit=1): all 42 bytes ---
    red text
    100%
    done
    --- end gate colour ---
    1 gate: 1 red in [S]s
    ");
    assert!(!out.stderr.contains(['\x1b', '\r']), "{:?}", out.stderr);
}

#[test]
fn help_says_skip_work_evidence_still_needs_a_base_ref_and_links_docs_to_the_repository() {
    let repo = TempRepo::worktree();
    let help = repo.greenlight(["verify", "--help"]);
    assert_eq!(help.code, 0, "{}", help.render());
    let flat = help.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("--skip-work-evidence Do not check that work happened here before running gates. A base ref is still required and must name a commit"),
        "{flat}"
    );
    let repository = env!("CARGO_PKG_REPOSITORY");
    assert!(
        !repository.is_empty(),
        "the binary's package names no repository"
    );
    for args in [
        &["verify", "--help"][..],
        &["hook", "--help"],
        &["hook", "stop", "--help"],
        &["goal", "--help"],
        &["init", "--help"],
        &["digest", "--help"],
        &["agent", "--help"],
        &["--help"],
    ] {
        let out = repo.greenlight(args.iter().copied());
        let flat = out.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
        for (at, _) in flat.match_indices("docs/") {
            let after = &flat[at..];
            let end = after.find(')').unwrap_or(after.len());
            assert!(
                after[..end].contains(&format!(" at {repository}")),
                "`greenlight {}` points to a docs/ file an installed binary does not have: {}",
                args.join(" "),
                &after[..end]
            );
        }
    }
}

/// git that cannot run is not "not a git repository": with git missing from PATH, or greenlight
/// out of file descriptors (`ulimit -n 12`), verify said the worktree was no repository. It
/// says what failed: the spawn error here, git's exit code and first stderr line elsewhere.
#[test]
fn git_that_cannot_run_is_named_not_reported_as_no_repository() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml("version: 1\ngates:\n  - id: a\n    command: \"true\"\n");
    let empty = repo.home().join("no-git-here");
    fs::create_dir_all(&empty).unwrap();
    let out = repo
        .cli(["verify", "--no-record"])
        .env("PATH", &empty)
        .run();
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(
        !out.stderr.contains("not a git repository"),
        "{}",
        out.render()
    );
    assert!(
        out.render().ends_with("--- stderr\ngreenlight: git failed while checking that [REPO] is a git worktree: cannot start git (is it installed and on PATH?): No such file or directory (os error 2)\n"),
        "{}",
        out.render()
    );

    let direct = repo.command(["verify", "--no-record"]);
    let mut limited = Command::new("sh");
    limited
        .args(["-c", "ulimit -n 16 && exec \"$@\"", "sh"])
        .arg(direct.get_program())
        .args(direct.get_args())
        .current_dir(repo.path());
    for (name, value) in direct.get_envs() {
        match value {
            Some(value) => limited.env(name, value),
            None => limited.env_remove(name),
        };
    }
    let out = limited.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("not a git repository"), "{stderr}");
    assert!(
        stderr.contains("greenlight: git failed while ")
            && stderr.contains("cannot start git: Too many open files (os error 24)"),
        "{stderr}"
    );

    // And a directory that is truly no repository still says so.
    let outside = tempfile::tempdir().unwrap();
    let out = repo
        .cli([
            "verify",
            "--no-record",
            "--config",
            repo.path()
                .join(".commandmate/verify.yaml")
                .to_str()
                .unwrap(),
            "--cwd",
            outside.path().to_str().unwrap(),
        ])
        .run();
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(
        out.stderr
            .contains(": not a git repository; run verify inside a git worktree"),
        "{}",
        out.render()
    );
}
