//! Small words that were wrong: a count of one takes the singular, a heading is not printed
//! over an empty list, and a column in a message counts from 1.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::fs;

use greenlight_testkit::TempRepo;

#[test]
fn a_digest_of_one_error_says_1_error_not_1_errors() {
    let repo = TempRepo::worktree();
    // Real `go test` output with a build failure: one error, counted by the tool itself.
    let output = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../greenlight-digest/tests/fixtures/go-test/build-fail/output.txt"
    );
    let out = repo.greenlight(["digest", "--exit-code", "2", output]);
    assert_eq!(out.code, 0, "{}", out.render());
    let first = out.stdout.lines().next().unwrap();
    assert_eq!(first, "exit 2 · go-test · 0 failed, 1 error");
}

#[test]
fn init_that_drafts_nothing_prints_no_empty_gates_heading() {
    let repo = TempRepo::worktree();
    let out = repo.greenlight(["init"]);
    assert_eq!(out.code, 1, "{}", out.render());
    assert!(!out.stdout.contains("gates drafted"), "{}", out.render());
    assert!(
        out.stderr
            .contains("greenlight init: found nothing to gate"),
        "{}",
        out.render()
    );

    // With only a skipped source, a plain sentence (not an empty `0 gates drafted:` heading)
    // stands before the list of what was not drafted.
    repo.write("package.json", "{\n");
    let out = repo.greenlight(["init"]);
    assert_eq!(out.code, 1, "{}", out.render());
    insta::assert_snapshot!(out.stdout, @r"
    no gate drafted
    not drafted:
      package.json: not valid JSON at line 2 column 1: EOF while parsing an object
    ");
}

#[test]
fn a_settings_file_cut_after_a_newline_is_reported_at_column_1_not_0() {
    let repo = TempRepo::worktree();
    repo.write(".claude/settings.json", "{\n  \"hooks\": {\n");
    let out = repo.greenlight(["hook", "install", "--agent", "claude"]);
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(
        out.stderr
            .contains(".claude/settings.json:3:1: not valid JSON (EOF while parsing an object)"),
        "{}",
        out.render()
    );
    assert!(
        fs::read_to_string(repo.path().join(".claude/settings.json")).unwrap()
            == "{\n  \"hooks\": {\n",
        "the broken file was touched"
    );
}
