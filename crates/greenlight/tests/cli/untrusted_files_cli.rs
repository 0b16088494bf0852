//! Config files a repository controls are read without blocking and bounded: a FIFO, a symlink
//! to `/dev/zero` or a directory in place of verify.yaml, a manifest or a hook settings file is
//! refused at once with the file's name, never waited on or read without end.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::time::Duration;

use greenlight_testkit::TempRepo;
use greenlight_testkit::files::mkfifo;

/// Far longer than any of these commands needs; a hang is killed then and fails the test.
const HANG: Duration = Duration::from_secs(30);

#[test]
fn a_fifo_verify_yaml_is_refused_by_verify_goal_run_and_init_without_hanging() {
    let repo = TempRepo::worktree_with_commit();
    let config = repo.path().join(".commandmate/verify.yaml");
    mkfifo(&config);

    let verify = repo.cli(["verify"]).within(HANG).run();
    assert_eq!(verify.code, 2, "{}", verify.stderr);
    assert!(
        verify.stderr.contains(".commandmate/verify.yaml")
            && verify
                .stderr
                .contains("a FIFO (named pipe), not a regular file"),
        "{}",
        verify.stderr
    );

    let goal = repo
        .cli(["goal", "run", "make it pass", "--agent", "command:true"])
        .within(HANG)
        .run();
    assert_ne!(goal.code, 0, "{}", goal.stderr);
    assert!(
        goal.stderr.contains("verify.yaml") && goal.stderr.contains("a FIFO"),
        "{}",
        goal.stderr
    );

    repo.write("Makefile", "test:\n\ttrue\n");
    let init = repo.cli(["init", "--write", "--force"]).within(HANG).run();
    assert_eq!(init.code, 2, "{}{}", init.stdout, init.stderr);
    assert!(
        init.stderr.contains("verify.yaml") && init.stderr.contains("FIFO"),
        "{}",
        init.stderr
    );
}

#[test]
fn a_verify_yaml_symlinked_to_dev_zero_is_a_clear_error() {
    let repo = TempRepo::worktree_with_commit();
    std::fs::create_dir_all(repo.path().join(".commandmate")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", repo.path().join(".commandmate/verify.yaml")).unwrap();
    let verify = repo.cli(["verify"]).within(HANG).run();
    assert_eq!(verify.code, 2, "{}", verify.stderr);
    assert!(
        verify
            .stderr
            .contains("verify.yaml: cannot read the config file (it is a character device, not a regular file)"),
        "{}",
        verify.stderr
    );
}

#[test]
fn init_lists_a_fifo_or_device_manifest_under_not_drafted_and_goes_on() {
    let repo = TempRepo::worktree_with_commit();
    mkfifo(&repo.path().join("package.json"));
    std::os::unix::fs::symlink("/dev/zero", repo.path().join("Cargo.toml")).unwrap();
    repo.write("Makefile", "test:\n\ttrue\n");
    let init = repo.cli(["init"]).within(HANG).run();
    assert_eq!(init.code, 0, "{}", init.stderr);
    assert!(
        init.stdout
            .contains("  package.json: not read: it is a FIFO (named pipe), not a regular file\n"),
        "{}",
        init.stdout
    );
    assert!(
        init.stdout
            .contains("  Cargo.toml: not read: it is a character device, not a regular file\n"),
        "{}",
        init.stdout
    );
    assert!(init.stdout.contains("make test"), "{}", init.stdout);
}

#[test]
fn hook_install_refuses_a_fifo_settings_file_without_hanging() {
    let repo = TempRepo::worktree_with_commit();
    let settings = repo.path().join(".claude/settings.json");
    mkfifo(&settings);
    let out = repo
        .cli(["hook", "install", "--agent", "claude"])
        .within(HANG)
        .run();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("settings.json") && out.stderr.contains("a FIFO"),
        "{}",
        out.stderr
    );
}

#[test]
fn the_stop_hook_reports_a_fifo_verify_yaml_as_broken_without_hanging() {
    let repo = TempRepo::worktree_with_commit();
    mkfifo(&repo.path().join(".commandmate/verify.yaml"));
    let payload = format!(
        "{{\"session_id\":\"s\",\"cwd\":\"{}\",\"hook_event_name\":\"Stop\"}}",
        repo.path().display()
    );
    let state = repo.home().join("state.db");
    let out = repo
        .cli(["hook", "stop", "--state", state.to_str().unwrap()])
        .stdin(payload)
        .within(HANG)
        .run();
    assert_eq!(out.code, 0);
    let answer = out.json();
    let message = answer["systemMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains("the verify.yaml is broken") && message.contains("a FIFO"),
        "{answer}"
    );
}
