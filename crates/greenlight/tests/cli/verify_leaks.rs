//! Nothing a gate starts outlives it, and no output breaks the tail: each test names the
//! processes by pid and checks, after greenlight exits, that none of them is alive.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::fs;
use std::process::Stdio;
use std::time::{Duration, Instant};

use greenlight_testkit::{TempRepo, procs, signal_and_wait};

/// The pids a gate wrote into `file` of the worktree, whitespace-separated.
pub(crate) fn pids(repo: &TempRepo, file: &str) -> Vec<i32> {
    let text = repo
        .read(file)
        .unwrap_or_else(|| panic!("{file} was not written"));
    let pids: Vec<i32> = text
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(!pids.is_empty(), "{file} is empty");
    pids
}

#[test]
fn a_timed_out_gate_whose_grandchild_ignores_sigterm_leaves_nothing() {
    let repo = TempRepo::worktree_with_commit();
    // The inner shell and its sleep ignore SIGTERM; the leader does not, and exits first.
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: stubborn\n    command: sh -c 'trap \"\" TERM; echo $$ >> pids; sleep 600 & echo $! >> pids; wait' & echo $! >> pids; wait\n    timeoutSec: 1\n",
    );
    let started = Instant::now();
    let out = repo
        .command(["verify"])
        .env("GREENLIGHT_KILL_GRACE_MS", "500")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(20), "{stderr}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("GATE stubborn TIMEOUT exit=124 duration=1s")
    );
    assert!(
        stderr.contains("outlived SIGTERM and were killed at the end of the grace period"),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(8));
    let found = pids(&repo, "pids");
    assert_eq!(found.len(), 3);
    procs::assert_all_dead(&found, "processes survived greenlight");
}

#[test]
fn a_passing_gate_that_backgrounds_a_sleep_leaves_nothing_and_says_so() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml("version: 1\ngates:\n  - id: bg\n    command: sleep 600 & echo $! > bg.pid\n");
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(out.lines()[1], "GATE bg PASS exit=0 duration=0s");
    let pid = pids(&repo, "bg.pid");
    assert!(
        out.stderr
            .contains(&format!("leaked pid {} sleep 600", pid[0])),
        "{}",
        out.stderr
    );
    procs::assert_all_dead(&pid, "processes survived greenlight");
}

#[test]
fn a_child_that_escapes_with_setsid_is_found_and_killed() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: esc\n    command: setsid sh -c 'echo $$ > esc.pid; exec sleep 600' & sleep 0.3\n",
    );
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 0, "{}", out.render());
    let pid = pids(&repo, "esc.pid");
    assert!(
        out.stderr
            .contains("(had escaped the gate's process group)"),
        "{}",
        out.stderr
    );
    procs::assert_all_dead(&pid, "processes survived greenlight");
}

#[test]
fn a_double_fork_into_a_new_session_is_found_and_killed() {
    let repo = TempRepo::worktree_with_commit();
    // The middle shell exits at once, orphaning the sleep in a session of its own.
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: df\n    command: setsid sh -c 'sleep 600 & echo $! > df.pid' ; sleep 0.2; exit 1\n",
    );
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 20, "{}", out.render());
    let pid = pids(&repo, "df.pid");
    assert!(
        out.stderr
            .contains(&format!("leaked pid {} sleep 600", pid[0])),
        "{}",
        out.stderr
    );
    procs::assert_all_dead(&pid, "processes survived greenlight");
}

fn interrupt_during_a_gate(signal: &str, expected_code: i32) {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: long\n    command: sleep 600 & echo $! >> pids; echo $$ >> pids; wait\n    mutex: held\n",
    );
    let child = repo
        .command(["verify"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    repo.wait_for_pids("pids", 2, Duration::from_secs(10));
    let lock = repo.lock_root().join("held.lock");
    assert!(lock.exists(), "the gate runs without its lock");
    let out = signal_and_wait(child, signal, Duration::from_secs(8));
    let (stdout, stderr) = (&out.stdout, &out.stderr);
    assert_eq!(out.code, expected_code, "{stdout}\n{stderr}");
    assert!(
        !stdout.contains("RESULT"),
        "an interrupted run has no RESULT: {stdout}"
    );
    assert!(stderr.contains("interrupted by"), "{stderr}");
    assert!(!lock.exists(), "the lock outlived the interrupted run");
    procs::assert_all_dead(&pids(&repo, "pids"), "processes survived greenlight");
}

#[test]
fn sigterm_to_greenlight_ends_the_gate_group_releases_the_lock_and_exits_143() {
    interrupt_during_a_gate("-TERM", 143);
}

#[test]
fn sigint_to_greenlight_ends_the_gate_group_releases_the_lock_and_exits_130() {
    interrupt_during_a_gate("-INT", 130);
}

#[test]
fn invalid_utf8_and_nul_bytes_still_give_a_valid_nonempty_tail() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml("version: 1\ngates:\n  - id: bytes\n    command: printf 'before\\000mid\\377\\376after\\n'; exit 1\n");
    let out = repo.command(["verify"]).output().unwrap();
    assert_eq!(out.status.code(), Some(20));
    let stderr = std::str::from_utf8(&out.stderr).expect("greenlight's stderr is valid UTF-8");
    assert!(
        stderr.contains("before\0mid\u{fffd}\u{fffd}after\n"),
        "{stderr:?}"
    );
}

#[test]
#[ignore = "needs /usr/bin/time (Debian package time): run scripts/test"]
fn a_gate_printing_one_gib_keeps_memory_bounded_and_the_tail_holds_the_end() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: loud\n    command: yes 'a line of output' | head -c 1073741824; echo; echo THE-LAST-LINE; exit 1\n    timeoutSec: 300\n",
    );
    let rss_file = repo.home().join("rss");
    let bin = greenlight_testkit::greenlight_bin();
    let mut cmd = std::process::Command::new("/usr/bin/time");
    cmd.arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&rss_file)
        .arg(bin)
        .arg("verify");
    let base = repo.command(["verify"]);
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = cmd
        .current_dir(repo.path())
        .output()
        .expect("/usr/bin/time is installed (Debian package `time`)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(20), "{stderr}");
    assert!(stderr.contains("last 8192 of 1073741839 bytes"), "{stderr}");
    assert!(
        stderr.contains("\nTHE-LAST-LINE\n--- end gate loud ---"),
        "{stderr}"
    );
    // time(1) writes "Command exited with non-zero status N" before the figure.
    let report = fs::read_to_string(&rss_file).unwrap();
    let peak_kib: u64 = report.lines().last().unwrap().trim().parse().unwrap();
    assert!(
        peak_kib < 64 * 1024,
        "peak RSS {peak_kib} KiB is over 64 MiB"
    );
    eprintln!("peak RSS while a gate printed 1 GiB: {peak_kib} KiB");
}

#[test]
fn sigkill_to_greenlight_leaves_gates_that_the_next_run_ends() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml("version: 1\ngates:\n  - id: long\n    command: sleep 600 & echo $! >> pids; echo $$ >> pids; wait\n");
    let mut child = repo
        .command(["verify"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    repo.wait_for_pids("pids", 2, Duration::from_secs(10));
    child.kill().unwrap(); // SIGKILL: nothing in greenlight can act on it
    child.wait().unwrap();
    let orphans = pids(&repo, "pids");
    assert!(
        orphans.iter().all(|&p| procs::alive(p)),
        "the gate should outlive a SIGKILLed greenlight"
    );

    // A later run sharing its lock root (here: in another worktree) ends them before its first
    // gate. Runs with another lock root (every other test) leave them alone.
    let other = TempRepo::worktree_with_commit();
    other.verify_yaml("version: 1\ngates:\n  - id: a\n    command: \"true\"\n");
    let untouched = other.greenlight(["verify"]);
    assert!(!untouched.stderr.contains("ended"), "{}", untouched.stderr);
    assert!(
        orphans.iter().all(|&p| procs::alive(p)),
        "a run with another lock root swept them"
    );
    let out = other
        .command(["verify"])
        .env("CM_VERIFY_LOCK_ROOT", repo.lock_root())
        .output()
        .unwrap();
    let out = greenlight_testkit::Run::from_output(out, &[]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(
        out.stderr
            .contains("ended 2 gate process(es) left running by an earlier greenlight"),
        "{}",
        out.stderr
    );
    procs::assert_all_dead(&orphans, "processes survived greenlight");
}

#[test]
fn a_child_that_escapes_with_setsid_and_clears_its_environment_is_still_killed() {
    let repo = TempRepo::worktree_with_commit();
    // `env -i` drops greenlight's gate token; only adoption (child subreaper) can find it.
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: esc\n    command: setsid env -i /bin/sh -c 'echo $$ > esc.pid; exec /bin/sleep 600' & sleep 0.3\n",
    );
    let started = Instant::now();
    let out = repo.greenlight(["verify"]);
    assert_eq!(out.code, 0, "{}", out.render());
    let pid = pids(&repo, "esc.pid");
    assert!(
        out.stderr
            .contains(&format!("leaked pid {} /bin/sleep 600", pid[0])),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("output pipe stayed open"),
        "{}",
        out.stderr
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "greenlight waited on the pipe: {:?}",
        started.elapsed()
    );
    procs::assert_all_dead(&pid, "processes survived greenlight");
}

/// In a container, greenlight's session leader lives outside its pid namespace, so its session
/// id reads 0. Every run there used to panic when it reaped the gates' escapees (`getsid`
/// returned 0). The test makes that namespace with `unshare` (root, or a user namespace), twice:
/// under `sh` as the namespace's init, and with greenlight itself as init (pid 1, a container's
/// entrypoint). Already in such a namespace, as in a CI container, it runs greenlight directly.
#[test]
fn a_run_whose_session_leader_is_outside_its_pid_namespace_reaps_escapees_and_passes() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml(
        "version: 1\ngates:\n  - id: escapee\n    command: setsid sh -c 'echo left' ; sleep 0.2; echo ok\n",
    );
    let session_read_as_zero =
        procs::stat_fields("self").is_some_and(|fields| fields.get(3).is_some_and(|s| s == "0"));
    let runs = if session_read_as_zero {
        vec![("directly", repo.command(["verify"]).output().unwrap())]
    } else {
        vec![
            ("under sh as init", in_new_pid_namespace(&repo, true)),
            ("as init", in_new_pid_namespace(&repo, false)),
        ]
    };
    for (how, out) in runs {
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(0), "{how}: {stdout}\n{stderr}");
        assert!(
            stdout.contains("GATE escapee PASS exit=0"),
            "{how}: {stdout}"
        );
        assert!(!stderr.contains("panicked"), "{how}: {stderr}");
    }
}

/// `greenlight verify` in `repo`, in a new pid namespace with its own `/proc`: as root, else in
/// a user namespace; fails loudly when neither is allowed.
fn in_new_pid_namespace(repo: &TempRepo, under_sh: bool) -> std::process::Output {
    let direct = repo.command(["verify"]);
    let run = |user: bool| {
        let mut cmd = std::process::Command::new("unshare");
        if user {
            cmd.args(["--user", "--map-root-user"]);
        }
        cmd.args(["--pid", "--fork", "--mount-proc"]);
        if under_sh {
            cmd.args(["sh", "-c", "\"$@\"; exit $?", "sh"]);
        }
        cmd.arg(direct.get_program())
            .args(direct.get_args())
            .current_dir(direct.get_current_dir().unwrap());
        for (name, value) in direct.get_envs() {
            match value {
                Some(value) => cmd.env(name, value),
                None => cmd.env_remove(name),
            };
        }
        cmd.output().expect("unshare (util-linux) runs")
    };
    let refused =
        |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).starts_with("unshare:");
    let mut out = run(false);
    if refused(&out) {
        out = run(true);
    }
    assert!(
        !refused(&out),
        "this test needs a new pid namespace (root, or user namespaces allowed): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A gate that starts `setsid env -i /bin/sh -c '…; exec /bin/sleep 600'` with its output
/// closed: out of the gate's group, its token dropped, holding no pipe. Only the subreaper's
/// adoption can find it. The escapee writes its pid to `file` and the gate waits for that.
fn escaping_gate(file: &str) -> String {
    format!(
        "rm -f {file}; setsid env -i /bin/sh -c 'echo $$ > {file}; exec /bin/sleep 600' >/dev/null 2>&1 </dev/null & while ! [ -s {file} ]; do sleep 0.05; done"
    )
}

/// Each gate's `cached` flag in a `--format json` run, in config order.
fn cached_flags(doc: &serde_json::Value) -> Vec<bool> {
    doc["gates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["cached"].as_bool().unwrap())
        .collect()
}

/// With `jobs` above 1 no gate may claim every process the subreaper adopts (whose would it
/// be?), so an escapee that also dropped the token was found by nothing: it outlived verify, the
/// report said `leftovers: []` and the PASS was cached as clean. Once no gate runs, whatever
/// is still adopted is the run's: killed, reported, and nothing of the run is cached.
#[test]
fn gates_at_once_leave_no_escapee_without_the_token_and_such_a_run_caches_nothing() {
    let repo = TempRepo::worktree_with_commit();
    repo.write("src/input.txt", "x\n");
    repo.verify_yaml(&format!(
        "version: 2\noptions:\n  jobs: 2\ngates:\n  - id: esc\n    command: {}\n    inputs: [src]\n  - id: alongside\n    command: sleep 1\n    inputs: [src]\n",
        escaping_gate("esc.pid")
    ));
    for run in ["first", "second"] {
        let out = repo.greenlight(["verify", "--format", "json"]);
        let pid = pids(&repo, "esc.pid")[0];
        procs::assert_all_dead(
            &[pid],
            &format!("{run} run: the escapee survived greenlight"),
        );
        assert_eq!(out.code, 0, "{run}: {}", out.render());
        let doc = out.json();
        let left: Vec<i64> = doc["leftovers"]
            .as_array()
            .unwrap_or_else(|| panic!("{run}: no run leftovers in {doc:#}"))
            .iter()
            .map(|p| p["pid"].as_i64().unwrap())
            .collect();
        assert_eq!(left, [i64::from(pid)], "{run}: {doc:#}");
        // Nothing of the first run was stored, so the second runs both gates again.
        assert_eq!(cached_flags(&doc), [false, false], "{run}: {doc:#}");
        assert!(
            out.stderr
                .contains(&format!("leaked pid {pid} /bin/sleep 600")),
            "{run}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains("no result of this run was cached"),
            "{run}: {}",
            out.stderr
        );
    }
}

/// The same escapee from a gate that ran alone (its neighbour needs it) is that gate's own: it
/// is reported on the gate, which is not stored, and the gate after it is.
#[test]
fn an_escapee_of_a_gate_that_ran_alone_is_named_on_it_and_only_it_goes_uncached() {
    let repo = TempRepo::worktree_with_commit();
    repo.write("src/input.txt", "x\n");
    repo.verify_yaml(&format!(
        "version: 2\noptions:\n  jobs: 2\ngates:\n  - id: esc\n    command: {}\n    inputs: [src]\n  - id: after\n    command: \"true\"\n    needs: [esc]\n    inputs: [src]\n",
        escaping_gate("esc.pid")
    ));
    let first = repo.greenlight(["verify", "--format", "json"]);
    let pid = pids(&repo, "esc.pid")[0];
    procs::assert_all_dead(&[pid], "the escapee survived greenlight");
    assert_eq!(first.code, 0, "{}", first.render());
    let doc = first.json();
    assert_eq!(
        doc["gates"][0]["attempts"][0]["leftovers"][0]["pid"], pid,
        "{doc:#}"
    );
    assert_eq!(doc["leftovers"], serde_json::json!([]), "{doc:#}");
    assert!(
        first
            .stderr
            .contains("gate esc left 1 process(es) running after it ended"),
        "{}",
        first.stderr
    );
    let second = repo.greenlight(["verify", "--format", "json"]);
    procs::assert_all_dead(&pids(&repo, "esc.pid"), "the escapee survived greenlight");
    assert_eq!(
        cached_flags(&second.json()),
        [false, true],
        "{}",
        second.render()
    );
}

/// A `keys` command runs before any gate, with no gate to claim what it leaves: its escapee
/// is the run's, killed, and the run caches nothing.
#[test]
fn an_escapee_of_a_keys_command_is_killed_and_its_run_caches_nothing() {
    let repo = TempRepo::worktree_with_commit();
    repo.write("src/input.txt", "x\n");
    repo.verify_yaml(&format!(
        "version: 2\noptions:\n  jobs: 2\ngates:\n  - id: a\n    command: \"true\"\n    inputs: [src]\n    keys: [\"{}; echo key\"]\n",
        escaping_gate("key.pid")
    ));
    for run in ["first", "second"] {
        let out = repo.greenlight(["verify", "--format", "json"]);
        let pid = pids(&repo, "key.pid")[0];
        procs::assert_all_dead(
            &[pid],
            &format!("{run} run: the escapee survived greenlight"),
        );
        assert_eq!(out.code, 0, "{run}: {}", out.render());
        let doc = out.json();
        assert_eq!(doc["leftovers"][0]["pid"], pid, "{run}: {doc:#}");
        assert_eq!(cached_flags(&doc), [false], "{run}: {doc:#}");
    }
}

/// Verify waits on git before its gates (work-evidence, the workspace listing), and a git call
/// can hang: here a clean filter, which `git status` runs on a tracked file whose stamps changed,
/// sleeps (fsmonitor hooks, this test's first subject, are off for every git call of a run
/// now). Verify's runtime was blocked in that wait, so SIGTERM was not even seen until git
/// returned. Now signals are caught on a thread of their own and, once the gates' grace and the
/// drain limit have passed, every child still running is killed: verify exits 143 within
/// seconds and leaves nothing.
#[test]
fn sigterm_ends_verify_while_a_git_call_it_waits_on_hangs() {
    let repo = TempRepo::worktree_with_commit();
    repo.verify_yaml("version: 2\ngates:\n  - id: a\n    command: \"true\"\n");
    repo.write(".gitattributes", "watched.txt filter=slow\n");
    repo.write("watched.txt", "the same bytes\n");
    repo.commit_all("a file behind a clean filter");
    let hook = repo.home().join("clean-filter");
    let hook_pids = repo.home().join("filter.pids");
    fs::write(
        &hook,
        format!(
            "#!/bin/sh\necho $$ >> '{}'\nexec sleep 600\n",
            hook_pids.display()
        ),
    )
    .unwrap();
    fs::set_permissions(
        &hook,
        <fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    )
    .unwrap();
    repo.git(&["config", "filter.slow.clean", hook.to_str().unwrap()]);
    // New stamps, the same bytes: git status reads the file through its filter to compare.
    fs::File::options()
        .write(true)
        .open(repo.path().join("watched.txt"))
        .unwrap()
        .set_modified(std::time::UNIX_EPOCH + Duration::from_secs(1_000_000))
        .unwrap();
    let mut child = repo
        .command(["verify"])
        .env("GREENLIGHT_KILL_GRACE_MS", "500")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let read_pids = || procs::pids_in(&fs::read_to_string(&hook_pids).unwrap_or_default());
    let hung = procs::wait_until(Duration::from_secs(10), "git ran the clean filter", || {
        (!read_pids().is_empty()).then(read_pids)
    });
    procs::signal("-TERM", child.id());
    let limit = Instant::now() + Duration::from_secs(8);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > limit {
            let _ = child.kill();
            let _ = child.wait();
            for pid in read_pids() {
                procs::end(pid);
            }
            panic!("SIGTERM did not end verify within 8 s while git waited on its filter");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(status.code(), Some(143), "{stderr}");
    assert!(stderr.contains("interrupted by SIGTERM"), "{stderr}");
    procs::assert_all_dead(&hung, "the filter git waited on survived verify");
}
