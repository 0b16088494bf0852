//! The machine-wide mutex through the real binary: CommandMate's lock directory protocol,
//! waits reported apart from durations, stale same-host takeover, foreign hosts never broken.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::fs;
use std::process::Stdio;
use std::time::{Duration, Instant};

use greenlight_testkit::TempRepo;
use greenlight_testkit::procs::hostname;

const ONE_MUTEX_GATE: &str = "version: 1\ngates:\n  - id: e2e\n    command: \"true\"\n    mutex: e2e-port\n    timeoutSec: 5\n";

#[test]
fn a_free_mutex_reports_waited_zero_and_is_released() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(ONE_MUTEX_GATE);
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(out.lines()[1], "GATE e2e PASS exit=0 duration=0s waited=0s");
    let lock = repo.lock_root().join("e2e-port.lock");
    assert!(
        out.stderr.contains(&format!(
            "[mutex] name=e2e-port waited=0.0s lock={}",
            lock.display()
        )),
        "{}",
        out.stderr
    );
    assert!(!lock.exists(), "the lock outlived the run");
}

#[test]
fn a_held_mutex_is_waited_for_and_the_wait_is_not_duration() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(ONE_MUTEX_GATE);
    // Held by a live process on this host (this test): greenlight must wait, not break it.
    let dir = repo.plant_lock(
        "e2e-port",
        i64::from(std::process::id()),
        &hostname(),
        "held-by-test",
    );
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1300));
        fs::remove_dir_all(dir).unwrap();
    });
    let out = repo.greenlight(["verify"]);
    releaser.join().unwrap();
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(out.lines()[1], "GATE e2e PASS exit=0 duration=0s waited=1s");
}

#[test]
fn a_dead_holder_on_this_host_is_taken_over() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(ONE_MUTEX_GATE);
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = i64::from(dead.id());
    dead.wait().unwrap();
    repo.plant_lock("e2e-port", dead_pid, &hostname(), "stale");
    let started = Instant::now();
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(out.lines()[1], "GATE e2e PASS exit=0 duration=0s waited=0s");
    assert!(
        out.stderr.contains(&format!(
            "broke a stale lock (recorded holder pid {dead_pid} on this host"
        )),
        "{}",
        out.stderr
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(!repo.lock_root().join("e2e-port.lock").exists());
}

#[test]
fn a_foreign_host_lock_is_never_taken_and_the_run_is_skipped() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml("version: 1\ngates:\n  - id: e2e\n    command: touch ran\n    mutex: e2e-port\n    timeoutSec: 1\n  - id: lint\n    command: \"true\"\n");
    // pid 1 is dead nowhere we can tell: another host's pid says nothing about this machine.
    let dir = repo.plant_lock("e2e-port", 999_999, "elsewhere.invalid", "foreign");
    let before = fs::read_to_string(dir.join("owner")).unwrap();
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 22, "{}", out.render());
    assert_eq!(
        out.lines(),
        [
            "GATE work-evidence PASS commits=1 uncommitted=1",
            "GATE e2e SKIP reason=mutex-wait waited=1s",
            "GATE lint PASS exit=0 duration=0s",
            "RESULT skipped"
        ]
    );
    assert!(
        out.stderr
            .contains("[mutex] held by pid 999999 on elsewhere.invalid"),
        "{}",
        out.stderr
    );
    assert!(repo.read("ran").is_none(), "the gate ran without its lock");
    assert_eq!(
        fs::read_to_string(dir.join("owner")).unwrap(),
        before,
        "a foreign lock was touched"
    );
}

#[test]
fn a_real_failure_outranks_a_missing_verdict() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml("version: 1\ngates:\n  - id: e2e\n    command: \"true\"\n    mutex: m\n    timeoutSec: 1\n  - id: unit\n    command: exit 1\n");
    repo.plant_lock("m", 999_999, "elsewhere.invalid", "foreign");
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 20, "{}", out.render());
    assert_eq!(out.lines().last(), Some(&"RESULT failed"));
}

#[test]
fn greenlight_holds_the_lock_in_commandmates_format_while_the_gate_runs() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml("version: 1\ngates:\n  - id: e2e\n    command: cat \"$CM_VERIFY_LOCK_ROOT/e2e-port.lock/owner\" > seen-owner\n    mutex: e2e-port\n");
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 0, "{}", out.render());
    let raw = repo.read("seen-owner").unwrap();
    let owner: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(owner.as_object().unwrap().len(), 5, "owner record: {raw}");
    // The same fields in the same order as CommandMate writes them, then the pid namespace.
    let at = |key: &str| {
        raw.find(&format!("\"{key}\":"))
            .unwrap_or_else(|| panic!("no {key} in {raw}"))
    };
    assert!(
        at("pid") < at("host")
            && at("host") < at("token")
            && at("token") < at("acquiredAt")
            && at("acquiredAt") < at("pidNs"),
        "{raw}"
    );
    assert!(owner["pidNs"].as_u64().is_some_and(|ns| ns > 0), "{raw}");
    assert_eq!(owner["host"], hostname());
    assert!(
        owner["pid"].as_i64().unwrap() > 0
            && owner["acquiredAt"].as_i64().unwrap() > 1_700_000_000_000
    );
    assert!(!owner["token"].as_str().unwrap().is_empty());
}

#[test]
fn two_runs_in_parallel_worktrees_never_overlap_on_one_mutex() {
    let a = TempRepo::worktree_with_commit();
    let b = TempRepo::worktree_with_commit();
    let log = a.home().join("overlap.log");
    let gate = format!(
        "version: 1\ngates:\n  - id: e2e\n    command: echo start >> {0}; sleep 1; echo end >> {0}\n    mutex: shared-port\n    timeoutSec: 20\n",
        log.display()
    );
    a.verify_yaml(&gate);
    b.verify_yaml(&gate);
    let root = a.lock_root().to_path_buf();
    let first = a
        .command(["verify"])
        .env("CM_VERIFY_LOCK_ROOT", &root)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let second = b
        .command(["verify"])
        .env("CM_VERIFY_LOCK_ROOT", &root)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (one, two) = (
        first.wait_with_output().unwrap(),
        second.wait_with_output().unwrap(),
    );
    assert!(one.status.success() && two.status.success());
    assert_eq!(
        fs::read_to_string(&log).unwrap(),
        "start\nend\nstart\nend\n",
        "the two gates overlapped"
    );
    let waited: Vec<String> = [one, two]
        .iter()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .nth(1)
                .unwrap()
                .to_owned()
        })
        .collect();
    // Both gates ran for their second, one of them got the lock at once; how long the other
    // waited depends on how far apart the two processes started, which a loaded machine skews.
    let line = regex::Regex::new(r"^GATE e2e PASS exit=0 duration=1s waited=\d+s$").unwrap();
    assert!(waited.iter().all(|l| line.is_match(l)), "{waited:?}");
    assert!(
        waited.iter().any(|l| l.ends_with("waited=0s")),
        "{waited:?}"
    );
}

/// A verify holding a mutex is SIGKILLed while another waits: the waiter saw the holder's pid
/// dead and took the lock while the killed run's gate still ran, so two gates ran under one
/// mutex. The waiter must end the dead holder's gate first, and say so.
#[test]
fn a_sigkilled_holders_gate_is_ended_before_a_waiter_takes_its_mutex() {
    let a = TempRepo::worktree_with_commit();
    let b = TempRepo::worktree_with_commit();
    let shared = a.home().join("shared");
    fs::create_dir_all(&shared).unwrap();
    // Each gate writes its pid, then checks whether the other's gate is still alive (a zombie,
    // its reaping pending, has ended).
    let gate = |me: &str, other: &str| {
        format!(
            "version: 1\ngates:\n  - id: e2e\n    command: echo $$ > {dir}/{me}.pid; if [ -f {dir}/{other}.pid ] && state=$(cut -d' ' -f3 /proc/$(cat {dir}/{other}.pid)/stat 2>/dev/null) && [ \"$state\" != Z ]; then echo \"overlap $state\" >> {dir}/overlap; fi; sleep 3\n    mutex: shared-port\n    timeoutSec: 20\n",
            dir = shared.display()
        )
    };
    a.verify_yaml(&gate("a", "b"));
    b.verify_yaml(&gate("b", "a"));
    let root = a.lock_root().to_path_buf();
    let mut holder = a
        .command(["verify"])
        .env("CM_VERIFY_LOCK_ROOT", &root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let holders_gate = greenlight_testkit::procs::wait_for_pid(&shared.join("a.pid"));
    let waiter = b
        .command(["verify"])
        .env("CM_VERIFY_LOCK_ROOT", &root)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The waiter has made its start-up sweep and is polling the lock.
    std::thread::sleep(Duration::from_millis(700));
    assert!(!shared.join("b.pid").exists(), "the waiter did not wait");
    greenlight_testkit::procs::signal("-9", holder.id());
    let holder_pid = holder.id();
    holder.wait().unwrap();
    let out = waiter.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        !shared.join("overlap").exists(),
        "the waiter's gate started while the killed holder's gate ran\n{stderr}"
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        !greenlight_testkit::procs::alive(holders_gate),
        "the killed holder's gate outlived the takeover"
    );
    assert!(
        stderr.contains(&format!(
            "broke a stale lock (recorded holder pid {holder_pid} on this host no longer exists)"
        )) && stderr.contains(&format!(
            "process(es) the dead holder pid {holder_pid} had left running under the lock:"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("sleep 3"),
        "the ended gate is named: {stderr}"
    );
}

/// A pid means something only in its pid namespace: a holder whose record names another
/// namespace is never judged dead here, however dead its pid looks, as a holder on another
/// host is not. A record without a namespace (CommandMate's) is still judged by its pid.
#[test]
fn a_dead_looking_holder_from_another_pid_namespace_is_never_taken_over() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: e2e\n    command: \"true\"\n    mutex: m\n    timeoutSec: 1\n",
    );
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    let ours = fs::read_link("/proc/self/ns/pid").unwrap();
    let ours: u64 = ours
        .to_str()
        .unwrap()
        .trim_start_matches("pid:[")
        .trim_end_matches(']')
        .parse()
        .unwrap();
    let dir = repo.lock_root().join("m.lock");
    fs::create_dir_all(&dir).unwrap();
    let record = |ns: u64| {
        format!(
            "{{\"pid\":{dead_pid},\"host\":\"{}\",\"token\":\"t\",\"acquiredAt\":1700000000000,\"pidNs\":{ns}}}\n",
            hostname()
        )
    };
    fs::write(dir.join("owner"), record(ours + 1)).unwrap();
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 22, "{}", out.render());
    assert_eq!(out.lines()[1], "GATE e2e SKIP reason=mutex-wait waited=1s");
    assert!(dir.join("owner").exists(), "the foreign lock was broken");
    // The same record in our own namespace is a dead holder on this host: taken over.
    fs::write(dir.join("owner"), record(ours)).unwrap();
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(out.stderr.contains("broke a stale lock"), "{}", out.stderr);
    assert!(!dir.exists());
}
