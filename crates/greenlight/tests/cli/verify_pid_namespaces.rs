//! Runs in different pid namespaces sharing one lock root: a pid in a lock record or a run
//! token means something only in its own namespace, so neither run may judge the other's by
//! it. Both directions, through the real binary, one run on this side and one in a namespace
//! made with `unshare --pid --fork --mount-proc` (root).

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use greenlight_testkit::TempRepo;
use greenlight_testkit::procs::{alive, wait_until};

/// A gate that holds the mutex for three seconds and logs its start and end to `log`.
fn gate(log: &Path) -> String {
    format!(
        "version: 1\ngates:\n  - id: e2e\n    command: echo start >> {0}; sleep 3; echo end >> {0}\n    mutex: shared-port\n    timeoutSec: 30\n",
        log.display()
    )
}

/// A pid that no process has here now, well above what a fresh namespace hands out.
fn a_free_pid() -> i32 {
    (40_000..400_000)
        .step_by(7)
        .find(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        .unwrap()
}

/// `greenlight verify` in `repo` with `root` as lock root, in a new pid namespace where it
/// gets `pid` (its namespace's `ns_last_pid` set just below), a pid that is free out here: the
/// case where a pid read in the wrong namespace looks dead.
fn verify_in_new_namespace(repo: &TempRepo, root: &Path, pid: i32) -> Child {
    let direct = repo.command(["verify"]);
    let mut cmd = Command::new("unshare");
    cmd.args(["--pid", "--fork", "--mount-proc", "sh", "-c"])
        .arg(format!(
            "echo {} > /proc/sys/kernel/ns_last_pid && \"$@\"; exit $?",
            pid - 1
        ))
        .arg("sh")
        .arg(direct.get_program())
        .args(direct.get_args())
        .current_dir(direct.get_current_dir().unwrap());
    for (name, value) in direct.get_envs() {
        match value {
            Some(value) => cmd.env(name, value),
            None => cmd.env_remove(name),
        };
    }
    cmd.env("CM_VERIFY_LOCK_ROOT", root)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unshare (util-linux) runs")
}

fn verify_here(repo: &TempRepo, root: &Path) -> Child {
    repo.command(["verify"])
        .env("CM_VERIFY_LOCK_ROOT", root)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finished(child: Child, who: &str) -> String {
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        !stderr.starts_with("unshare:"),
        "this test needs root for a new pid namespace: {stderr}"
    );
    assert_eq!(out.status.code(), Some(0), "{who}: {stdout}\n{stderr}");
    stdout.into_owned()
}

fn wait_for_start(log: &Path) {
    wait_until(
        std::time::Duration::from_secs(20),
        "the first gate started",
        || fs::read_to_string(log).ok().filter(|t| t.contains("start")),
    );
}

/// The run here sweeps at start and waits for the mutex while a run in a namespace holds it.
/// Before, the namespace run's pid looked dead here: its live gate was SIGKILLed as an orphan
/// (`FAIL exit=137`) and its lock broken.
#[test]
#[ignore = "needs root and unshare: run scripts/test"]
fn a_run_here_never_judges_a_live_run_in_another_pid_namespace_dead() {
    let (inside, here) = (
        TempRepo::worktree_with_commit(),
        TempRepo::worktree_with_commit(),
    );
    let log = inside.home().join("gates.log");
    inside.verify_yaml(&gate(&log));
    here.verify_yaml(&gate(&log));
    let root = inside.lock_root().to_path_buf();
    let pid = a_free_pid();
    let holder = verify_in_new_namespace(&inside, &root, pid);
    wait_for_start(&log);
    assert!(
        !alive(pid),
        "pid {pid} was taken out here meanwhile; run again"
    );
    let waiter = verify_here(&here, &root);
    let holder_out = finished(holder, "the run in the namespace");
    let waiter_out = finished(waiter, "the run here");
    assert!(holder_out.contains("GATE e2e PASS exit=0"), "{holder_out}");
    assert!(waiter_out.contains("GATE e2e PASS exit=0"), "{waiter_out}");
    assert_eq!(
        fs::read_to_string(&log).unwrap(),
        "start\nend\nstart\nend\n",
        "the two gates overlapped"
    );
}

/// The other way round: a run in a namespace waits for a mutex a run here holds. Before, the
/// holder's pid looked dead in the namespace (nothing there has it) and its lock was broken.
#[test]
#[ignore = "needs root and unshare: run scripts/test"]
fn a_run_in_a_pid_namespace_never_judges_a_live_holder_here_dead() {
    let (inside, here) = (
        TempRepo::worktree_with_commit(),
        TempRepo::worktree_with_commit(),
    );
    let log = here.home().join("gates.log");
    inside.verify_yaml(&gate(&log));
    here.verify_yaml(&gate(&log));
    let root = here.lock_root().to_path_buf();
    let holder = verify_here(&here, &root);
    wait_for_start(&log);
    let waiter = verify_in_new_namespace(&inside, &root, a_free_pid());
    let holder_out = finished(holder, "the run here");
    let waiter_out = finished(waiter, "the run in the namespace");
    assert!(holder_out.contains("GATE e2e PASS exit=0"), "{holder_out}");
    assert!(waiter_out.contains("GATE e2e PASS exit=0"), "{waiter_out}");
    assert_eq!(
        fs::read_to_string(&log).unwrap(),
        "start\nend\nstart\nend\n",
        "the two gates overlapped"
    );
}
