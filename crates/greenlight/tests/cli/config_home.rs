//! Where verify.yaml is found: greenlight's own `.greenlight/verify.yaml` first, CommandMate's
//! `.commandmate/verify.yaml` kept to CommandMate's version 1 contract, `greenlight config
//! move` between them, and greenlight's own files never counted as work.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use greenlight_testkit::TempRepo;

const OURS_V2: &str =
    "# greenlight's own\nversion: 2\ngates:\n  - id: ours\n    command: touch ran-ours\n";
const THEIRS_V1: &str =
    "version: 1\ngates:\n  - id: theirs\n    command: touch ran-theirs; exit 9\n";

#[test]
fn greenlight_s_home_is_read_first_from_a_subdirectory_and_the_other_file_is_named_once() {
    let repo = TempRepo::worktree_with_commit();
    repo.write(".commandmate/verify.yaml", THEIRS_V1);
    repo.greenlight_yaml(OURS_V2);
    repo.write("sub/keep", "");
    let out = repo.greenlight(["verify", "--cwd", "sub"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(out.stdout.contains("GATE ours PASS"), "{}", out.render());
    assert!(!out.stdout.contains("theirs"), "{}", out.render());
    // The gates ran where their file belongs, not in the subdirectory.
    assert!(repo.path().join("ran-ours").exists());
    assert!(!repo.path().join("ran-theirs").exists());
    assert_eq!(
        out.stderr.matches("ignores the other").count(),
        1,
        "{}",
        out.render()
    );
}

/// CommandMate's suite: a `.commandmate/verify.yaml` with `version: 2` is refused, exit 2, no
/// verdict; greenlight used to run it as its own version 2.
#[test]
fn version_2_in_commandmate_s_file_is_refused_as_commandmate_refuses_it() {
    let repo = TempRepo::worktree_with_commit();
    repo.write(".commandmate/verify.yaml", OURS_V2);
    repo.write("elsewhere/v2.yaml", OURS_V2);
    for args in [
        vec!["verify"],
        vec!["verify", "--config", "elsewhere/v2.yaml"],
    ] {
        let out = repo.greenlight(&args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.render());
        assert_eq!(out.stdout, "", "no RESULT line: {}", out.render());
        for needle in [
            ":2: version must be 1, found `2`",
            ".greenlight/verify.yaml",
            "`greenlight config move`",
        ] {
            assert!(out.stderr.contains(needle), "{needle}: {}", out.render());
        }
        assert!(!repo.path().join("ran-ours").exists(), "a gate ran");
    }
}

#[test]
fn version_1_in_commandmate_s_file_runs_and_counts_as_commandmate_counts_it() {
    let repo = TempRepo::worktree_with_commit();
    repo.write(
        ".commandmate/verify.yaml",
        "version: 1\ngates:\n  - id: theirs\n    command: \"true\"\n",
    );
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(
        out.stdout.lines().next(),
        Some("GATE work-evidence PASS commits=1 uncommitted=1"),
        "{}",
        out.render()
    );
    assert!(
        !out.stderr.contains("ignores the other"),
        "{}",
        out.render()
    );
}

#[test]
fn config_move_moves_the_bytes_and_says_the_git_commands_that_record_it() {
    let repo = TempRepo::worktree_with_commit();
    // Odd spacing and a comment: the move keeps bytes, it does not rewrite.
    let text =
        "# gates\nversion: 2\ngates:\n  -   id: ours\n      command: touch ran-ours   # here\n";
    repo.write(".commandmate/verify.yaml", text);
    repo.commit_all("v2 in the wrong home");
    let out = repo.greenlight(["config", "move"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(repo.read(".greenlight/verify.yaml").as_deref(), Some(text));
    assert!(!repo.path().join(".commandmate").exists());
    assert!(
        out.stdout.ends_with(
            "  git add .greenlight/verify.yaml\n  git rm --cached --quiet .commandmate/verify.yaml\n"
        ),
        "{}",
        out.render()
    );
    let verify = repo.greenlight(["verify"]);
    assert_eq!(verify.code, 0, "{}", verify.render());
    assert!(
        verify.stdout.contains("GATE ours PASS"),
        "{}",
        verify.render()
    );
}

#[test]
fn config_move_refuses_an_existing_target_and_a_version_1_file_unless_asked() {
    let repo = TempRepo::worktree_with_commit();
    repo.write(".commandmate/verify.yaml", THEIRS_V1);
    let v1 = repo.greenlight(["config", "move"]);
    assert_eq!(v1.code, 2, "{}", v1.render());
    assert!(v1.stderr.contains("--any-version"), "{}", v1.render());
    assert_eq!(
        repo.read(".commandmate/verify.yaml").as_deref(),
        Some(THEIRS_V1)
    );

    repo.greenlight_yaml(OURS_V2);
    let taken = repo.greenlight(["config", "move", "--any-version"]);
    assert_eq!(taken.code, 2, "{}", taken.render());
    assert!(
        taken.stderr.contains("already exists"),
        "{}",
        taken.render()
    );
    assert_eq!(
        repo.read(".greenlight/verify.yaml").as_deref(),
        Some(OURS_V2)
    );
    assert_eq!(
        repo.read(".commandmate/verify.yaml").as_deref(),
        Some(THEIRS_V1)
    );

    std::fs::remove_file(repo.path().join(".greenlight/verify.yaml")).unwrap();
    let moved = repo.greenlight(["config", "move", "--any-version"]);
    assert_eq!(moved.code, 0, "{}", moved.render());
    assert_eq!(
        repo.read(".greenlight/verify.yaml").as_deref(),
        Some(THEIRS_V1)
    );
    // Never committed: there is nothing to `git rm`.
    assert!(!moved.stdout.contains("git rm"), "{}", moved.render());
}

/// A v2 gate's `matchers:` paths are relative to the file's directory, so a matcher file kept
/// in `.commandmate/` would not be found after the move: the move is refused, nothing changes.
#[test]
fn config_move_refuses_a_file_whose_relative_matcher_path_would_break() {
    let repo = TempRepo::worktree_with_commit();
    let matcher = r#"{"problemMatcher":[{"owner":"x","pattern":[{"regexp":"^(.*):(\\d+): (.*)$","file":1,"line":2,"message":3}]}]}"#;
    repo.write(".commandmate/m.json", matcher);
    let text = "version: 2\ngates:\n  - id: ours\n    command: \"true\"\n    matchers: [m.json]\n";
    repo.write(".commandmate/verify.yaml", text);
    let out = repo.greenlight(["config", "move"]);
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(out.stderr.contains("m.json"), "{}", out.render());
    assert!(
        out.stderr.contains("relative to the file's directory"),
        "{}",
        out.render()
    );
    assert_eq!(repo.read(".commandmate/verify.yaml").as_deref(), Some(text));
    assert!(!repo.path().join(".greenlight").exists());

    // Written from the shared root, the same file moves and still finds its matcher.
    let text = text.replace("[m.json]", "[../.commandmate/m.json]");
    repo.write(".commandmate/verify.yaml", &text);
    let out = repo.greenlight(["config", "move"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(
        repo.read(".greenlight/verify.yaml").as_deref(),
        Some(text.as_str())
    );
}

/// Installing greenlight's hooks, or writing and committing its config, used to count as work,
/// so the first `verify` judged greenlight's own files.
#[test]
fn greenlight_s_own_files_are_not_work_and_a_user_s_edit_beside_them_is() {
    let repo = TempRepo::worktree();
    repo.greenlight_yaml("version: 1\ngates:\n  - id: unit\n    command: \"true\"\n");
    let install = repo.greenlight(["hook", "install", "--agent", "claude"]);
    assert_eq!(install.code, 0, "{}", install.render());
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 21, "{}", out.render());
    assert_eq!(
        out.stdout,
        "GATE work-evidence FAIL commits=0 uncommitted=0\nRESULT not_started\n"
    );
    for needle in [
        "greenlight's own files (.greenlight/",
        "work-evidence runs the gates only on work done here",
        "pass --skip-work-evidence",
    ] {
        assert!(out.stderr.contains(needle), "{needle}: {}", out.render());
    }

    // Committed, greenlight's config is still not work.
    repo.git(&["add", ".greenlight"]);
    repo.git(&["commit", "-q", "-m", "greenlight's config"]);
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 21, "{}", out.render());

    // A user's own setting beside greenlight's handlers is work.
    let settings = repo.read(".claude/settings.json").unwrap();
    let edited = settings.replacen('{', "{\n  \"model\": \"opus\",", 1);
    repo.write(".claude/settings.json", edited);
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(
        out.stdout
            .starts_with("GATE work-evidence PASS commits=0 uncommitted=1\n"),
        "{}",
        out.render()
    );
}
