//! Config files a repository controls are read without blocking and bounded: a FIFO, a symlink
//! to `/dev/zero` or a directory in place of verify.yaml, a manifest or a hook settings file is
//! refused at once with the file's name, never waited on or read without end.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use greenlight_testkit::TempRepo;

/// Far longer than any of these commands needs; a hang is killed here and fails the test.
const HANG: Duration = Duration::from_secs(30);

struct Done {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs the command to its end, or kills it after [`HANG`] and fails.
fn bounded(mut cmd: Command) -> Done {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > HANG {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running after {HANG:?}: it hung on the file");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    Done {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn mkfifo(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let ok = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(ok.success());
}

#[test]
fn a_fifo_verify_yaml_is_refused_by_verify_goal_run_and_init_without_hanging() {
    let repo = TempRepo::worktree_with_commit();
    let config = repo.path().join(".commandmate/verify.yaml");
    mkfifo(&config);

    let verify = bounded(repo.command(["verify"]));
    assert_eq!(verify.code, Some(2), "{}", verify.stderr);
    assert!(
        verify.stderr.contains(".commandmate/verify.yaml")
            && verify
                .stderr
                .contains("a FIFO (named pipe), not a regular file"),
        "{}",
        verify.stderr
    );

    let goal = bounded(repo.command(["goal", "run", "make it pass", "--agent", "command:true"]));
    assert_ne!(goal.code, Some(0), "{}", goal.stderr);
    assert!(
        goal.stderr.contains("verify.yaml") && goal.stderr.contains("a FIFO"),
        "{}",
        goal.stderr
    );

    repo.write("Makefile", "test:\n\ttrue\n");
    let init = bounded(repo.command(["init", "--write", "--force"]));
    assert_eq!(init.code, Some(2), "{}{}", init.stdout, init.stderr);
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
    let verify = bounded(repo.command(["verify"]));
    assert_eq!(verify.code, Some(2), "{}", verify.stderr);
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
    let init = bounded(repo.command(["init"]));
    assert_eq!(init.code, Some(0), "{}", init.stderr);
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
    let out = bounded(repo.command(["hook", "install", "--agent", "claude"]));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
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
    let stdin = repo.home().join("payload.json");
    std::fs::write(&stdin, payload).unwrap();
    let state = repo.home().join("state.db");
    let mut cmd = repo.command(["hook", "stop", "--state", state.to_str().unwrap()]);
    cmd.stdin(std::fs::File::open(&stdin).unwrap());
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > HANG {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the hook hung on a FIFO verify.yaml");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let message = answer["systemMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains("the verify.yaml is broken") && message.contains("a FIFO"),
        "{answer}"
    );
}
