//! Crash safety and clean interruption of `greenlight goal run`, through the real binary:
//! `kill -9` during a dispatch and during a gate, then `greenlight goal resume`, with the event
//! log and the dispatch ledger checked row by row; SIGTERM and Ctrl-C pausing cleanly.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::time::Duration;

use crate::goal_support::{Fixture, GATE, assert_contiguous, finish, kill_group, pgid_of};
use greenlight_testkit::procs;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);

/// (turn, kind) of every event.
fn turn_kinds(events: &[Value]) -> Vec<(Value, String)> {
    events
        .iter()
        .map(|e| (e["turn"].clone(), e["kind"].as_str().unwrap().to_owned()))
        .collect()
}

fn tk(turn: Option<u32>, kind: &str) -> (Value, String) {
    (turn.map_or(Value::Null, Value::from), kind.to_owned())
}

/// (turn, kind) of the events a goal records up to its first dispatch's start: what a crash
/// during turn 1 finds in the log, before whatever that crash itself left.
fn until_first_dispatch() -> Vec<(Value, String)> {
    vec![
        tk(None, "goal-created"),
        tk(None, "gate-added"),
        tk(Some(1), "turn-started"),
        tk(Some(1), "prompt"),
        tk(Some(1), "dispatch-started"),
    ]
}

/// An agent that hangs on its first call (after saying where it is) and fixes the value after.
fn hanging_then_fixing(fx: &Fixture) -> std::path::PathBuf {
    fx.script(
        "agent.sh",
        "if [ $N -eq 1 ]; then echo $$ > \"$S/agent.pid\"; sleep 30; fi\necho good > value.txt\necho fixed",
    )
}

/// A gate that hangs on its first run (after saying where it is), then runs the check.
fn hanging_gate(fx: &Fixture) -> String {
    let gate = fx.script(
        "gate.sh",
        "if [ $N -eq 1 ]; then echo $$ > \"$S/gate.pid\"; sleep 30; fi\nsh check.sh",
    );
    format!("sh {}", gate.display())
}

#[test]
fn kill_9_during_a_dispatch_then_resume_records_it_interrupted_and_retries_within_budget() {
    let fx = Fixture::new();
    let agent = hanging_then_fixing(&fx);
    let child = fx.spawn_run("fix the value", &agent, GATE, &[]);
    let runner = child.id();
    fx.wait_for_marker("agent.pid", WAIT);
    procs::signal("-KILL", runner);
    let code = finish(child).code;
    assert_eq!(code, 128 + 9);
    // Nothing in-process survives SIGKILL: the agent is still running, orphaned...
    let agent_pid = fx.pid_in("agent.pid");
    assert!(
        procs::alive(agent_pid),
        "the orphaned agent should still be running before resume"
    );

    // What the crash left: the dispatch in flight, the turn open, the goal still active.
    let status = fx.status();
    assert_eq!(status["goal"]["state"], "active");
    let ledger = status["dispatches"].as_array().unwrap();
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0]["outcome"], "in-flight");
    let before = fx.log();
    assert_eq!(turn_kinds(&before), until_first_dispatch());

    let out = fx.goal(&["resume"]);
    assert_eq!(out.code, 0, "{}", out.render());
    // ...until the next runner of the goal finds it by its run marker and ends it.
    assert!(
        !procs::alive(agent_pid),
        "resume left the dead runner's agent running: {}",
        out.render()
    );
    assert!(
        out.stdout.contains(&format!(
            "an earlier run of goal 1 left running:\n  pid {agent_pid} "
        )),
        "{}",
        out.render()
    );
    assert_eq!(fx.calls("agent.sh"), 2);
    assert_eq!(
        fx.prompt("agent.sh", 2),
        fx.prompt("agent.sh", 1),
        "the interrupted turn is retried with the same prompt"
    );

    let after = fx.log();
    assert_contiguous(&after);
    assert_eq!(
        after[..before.len()],
        before[..],
        "the log before the crash is unchanged"
    );
    assert_eq!(
        turn_kinds(&after[before.len()..]),
        [
            tk(None, "recovered"),
            tk(Some(2), "turn-started"),
            tk(Some(2), "prompt"),
            tk(Some(2), "dispatch-started"),
            tk(Some(2), "dispatch-ended"),
            tk(Some(2), "gate-run"),
            tk(Some(2), "turn-ended"),
            tk(None, "goal-done"),
        ]
    );
    let recovered = &after[before.len()]["payload"];
    assert_eq!(
        recovered["interrupted_dispatches"],
        json!([ledger[0]["id"]])
    );
    assert_eq!(recovered["interrupted_turns"], json!([1]));

    let status = fx.status();
    assert_eq!(status["goal"]["state"], "done");
    let ledger = status["dispatches"].as_array().unwrap();
    assert_eq!(ledger.len(), 2, "{ledger:?}");
    assert_eq!(
        (ledger[0]["turn"].clone(), ledger[0]["attempt"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(ledger[0]["outcome"], "interrupted");
    assert_eq!(ledger[0]["reason"], "dispatch-interrupted");
    assert!(ledger[0]["ended_at"].is_i64());
    assert_eq!(
        (ledger[1]["turn"].clone(), ledger[1]["attempt"].clone()),
        (json!(2), json!(1))
    );
    assert_eq!(ledger[1]["outcome"], "ok");
    assert_eq!(
        status["goal"]["turns_used"], 2,
        "the interrupted turn counts against the budget"
    );
}

#[test]
fn kill_9_during_a_gate_then_resume_runs_the_owed_gates_before_dispatching_again() {
    let fx = Fixture::new();
    let agent = fx.script("agent.sh", "echo good > value.txt\necho fixed");
    let gate = hanging_gate(&fx);
    let child = fx.spawn_run("fix the value", &agent, &gate, &[]);
    fx.wait_for_marker("gate.pid", WAIT);
    procs::signal("-KILL", child.id());
    let code = finish(child).code;
    assert_eq!(code, 128 + 9);
    let gate_pid = fx.pid_in("gate.pid");
    assert!(
        procs::alive(gate_pid),
        "the orphaned gate should still be running before resume"
    );

    let before = fx.log();
    let mut want = until_first_dispatch();
    want.push(tk(Some(1), "dispatch-ended"));
    assert_eq!(turn_kinds(&before), want);

    let out = fx.goal(&["resume"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(
        !procs::alive(gate_pid),
        "resume left the dead runner's gate running: {}",
        out.render()
    );
    assert_eq!(
        fx.calls("agent.sh"),
        1,
        "the finished dispatch was not repeated"
    );
    assert_eq!(fx.calls("gate.sh"), 2);

    let after = fx.log();
    assert_contiguous(&after);
    assert_eq!(after[..before.len()], before[..]);
    assert_eq!(
        turn_kinds(&after[before.len()..]),
        [
            tk(None, "recovered"),
            tk(Some(1), "gate-run"),
            tk(Some(1), "turn-ended"),
            tk(None, "goal-done"),
        ]
    );
    let recovered = &after[before.len()]["payload"];
    assert_eq!(recovered["interrupted_dispatches"], json!([]));
    assert_eq!(recovered["interrupted_turns"], json!([]));
    assert_eq!(recovered["gates_owed"], json!([1]));
    let run = &after[before.len() + 1]["payload"];
    assert_eq!(run["verdict"], "pass");
    assert_eq!(run["replayed"], false);
    assert_eq!(after[before.len() + 2]["payload"]["outcome"], "done");

    let status = fx.status();
    assert_eq!(status["goal"]["state"], "done");
    let ledger = status["dispatches"].as_array().unwrap();
    assert_eq!(ledger.len(), 1, "{ledger:?}");
    assert_eq!(ledger[0]["outcome"], "ok");
    assert_eq!(status["goal"]["turns_used"], 1);
}

#[test]
fn kill_9_during_a_failing_gate_phase_keeps_earlier_results_and_resume_goes_on_from_them() {
    // Gate 1 fails on turn 1 (recorded); turn 2's gate phase is killed; resume must keep the
    // recorded failure (attempt 1), run turn 2's gates once, and count attempts from there.
    let fx = Fixture::new();
    let agent = fx.script(
        "agent.sh",
        "echo $N > notes.txt\nif [ $N -ge 3 ]; then echo good > value.txt; fi\necho turn $N",
    );
    let gate = fx.script(
        "gate.sh",
        "if [ $N -eq 2 ]; then echo $$ > \"$S/gate.pid\"; sleep 30; fi\nsh check.sh",
    );
    let gate = format!("sh {}", gate.display());
    let child = fx.spawn_run("fix", &agent, &gate, &[]);
    fx.wait_for_marker("gate.pid", WAIT);
    procs::signal("-KILL", child.id());
    finish(child);
    kill_group("-KILL", pgid_of(fx.pid_in("gate.pid")));
    let before = fx.log();
    let gate_runs_before: Vec<_> = before.iter().filter(|e| e["kind"] == "gate-run").collect();
    assert_eq!(gate_runs_before.len(), 1);
    assert_eq!(fx.status()["gates"][0]["attempts"], 1);

    let out = fx.goal(&["resume"]);
    assert_eq!(out.code, 0, "{}", out.render());
    let after = fx.log();
    assert_contiguous(&after);
    assert_eq!(after[..before.len()], before[..]);
    let runs: Vec<_> = after
        .iter()
        .filter(|e| e["kind"] == "gate-run")
        .map(|e| {
            (
                e["turn"].clone(),
                e["payload"]["verdict"].clone(),
                e["payload"]["attempt"].clone(),
            )
        })
        .collect();
    assert_eq!(
        runs,
        [
            (json!(1), json!("fail"), json!(1)),
            (json!(2), json!("fail"), json!(2)),
            (json!(3), json!("pass"), json!(0)),
        ]
    );
    // Turn 2's evidence reached turn 3.
    assert!(fx.prompt("agent.sh", 3).contains("(attempt 2/3)"));
    let ledger = fx.status()["dispatches"].as_array().unwrap().clone();
    let turns: Vec<_> = ledger.iter().map(|d| d["turn"].clone()).collect();
    assert_eq!(turns, [1, 2, 3], "each turn dispatched once");
}

#[test]
fn sigterm_during_a_dispatch_pauses_cleanly_and_leaves_no_process() {
    let fx = Fixture::new();
    let agent = hanging_then_fixing(&fx);
    let child = fx.spawn_run("fix the value", &agent, GATE, &[]);
    fx.wait_for_marker("agent.pid", WAIT);
    let agent_pid = fx.pid_in("agent.pid");
    procs::signal("-TERM", child.id());
    let run = finish(child);
    let (code, stdout, stderr) = (run.code, run.stdout, run.stderr);
    assert_eq!(code, 143, "{stdout}{stderr}");
    assert!(
        stdout.contains("paused (paused-by-user): paused by SIGTERM"),
        "{stdout}"
    );
    assert!(!procs::alive(agent_pid), "the agent outlived `goal run`");

    let status = fx.status();
    assert_eq!(status["goal"]["state"], "paused");
    assert_eq!(status["goal"]["pause"]["reason"], "paused-by-user");
    let ledger = status["dispatches"].as_array().unwrap();
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0]["outcome"], "interrupted");
    assert_eq!(ledger[0]["reason"], "dispatch-interrupted");

    let out = fx.goal(&["resume"]);
    assert_eq!(out.code, 0, "{}", out.render());
    let ledger = fx.status()["dispatches"].as_array().unwrap().clone();
    assert_eq!(ledger.len(), 2);
    assert_eq!(ledger[1]["outcome"], "ok");
}

#[test]
fn ctrl_c_during_a_gate_pauses_cleanly_and_resume_runs_the_gate_without_redispatching() {
    let fx = Fixture::new();
    let agent = fx.script("agent.sh", "echo good > value.txt\necho fixed");
    let gate = hanging_gate(&fx);
    let child = fx.spawn_run("fix the value", &agent, &gate, &[]);
    fx.wait_for_marker("gate.pid", WAIT);
    let gate_pid = fx.pid_in("gate.pid");
    procs::signal("-INT", child.id());
    let run = finish(child);
    let (code, stdout, stderr) = (run.code, run.stdout, run.stderr);
    assert_eq!(code, 130, "{stdout}{stderr}");
    assert!(
        stdout.contains("paused (paused-by-user): paused by Ctrl-C"),
        "{stdout}"
    );
    assert!(!procs::alive(gate_pid), "the gate outlived `goal run`");
    let status = fx.status();
    assert_eq!(status["goal"]["pause"]["reason"], "paused-by-user");
    assert!(
        fx.log().iter().all(|e| e["kind"] != "gate-run"),
        "an interrupted gate is not a result"
    );

    let out = fx.goal(&["resume"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(
        fx.calls("agent.sh"),
        1,
        "the finished dispatch was not repeated"
    );
    assert_eq!(fx.status()["dispatches"].as_array().unwrap().len(), 1);
}

#[test]
fn a_second_runner_of_the_same_goal_is_refused() {
    let fx = Fixture::new();
    let agent = hanging_then_fixing(&fx);
    let child = fx.spawn_run("fix the value", &agent, GATE, &[]);
    fx.wait_for_marker("agent.pid", WAIT);
    let second = fx.goal(&["resume"]);
    assert_eq!(second.code, 2, "{}", second.render());
    assert!(
        second.stderr.contains("is already running"),
        "{}",
        second.render()
    );
    // It said "resuming goal N…" before it was refused.
    assert!(!second.stdout.contains("resuming"), "{}", second.render());
    procs::signal("-TERM", child.id());
    assert_eq!(finish(child).code, 143);
}

#[test]
fn goal_pause_from_another_terminal_stops_the_running_loop_at_its_next_step() {
    let fx = Fixture::new();
    let agent = fx.script(
        "agent.sh",
        "if [ $N -eq 1 ]; then echo $$ > \"$S/agent.pid\"; sleep 1; fi\necho good > value.txt\necho fixed",
    );
    let child = fx.spawn_run("fix the value", &agent, GATE, &[]);
    fx.wait_for_marker("agent.pid", WAIT);
    let paused = fx.goal(&["pause"]);
    assert_eq!(paused.code, 0, "{}", paused.render());
    let run = finish(child);
    let (code, stdout, stderr) = (run.code, run.stdout, run.stderr);
    assert_eq!(code, 75, "{stdout}{stderr}");
    assert!(
        stdout.contains("goal 1 is paused (paused-by-user): paused with `greenlight goal pause`"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("gate 1"),
        "no gate ran after the pause: {stdout}"
    );
    let status = fx.status();
    assert_eq!(status["goal"]["state"], "paused");
    assert_eq!(status["goal"]["pause"]["reason"], "paused-by-user");
    // The dispatch that was running is recorded as it ended, and resume picks up from there.
    assert_eq!(status["dispatches"][0]["outcome"], "ok");
    let out = fx.goal(&["resume"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(
        fx.calls("agent.sh"),
        1,
        "the finished dispatch was not repeated"
    );
}

/// `kill -9` of `goal run` with a `{prompt_file}` agent left `greenlight-prompt-*` in the temp
/// dir (0644, holding the prompt) forever: one more per crash.
#[test]
fn a_prompt_file_is_private_and_a_kill_9_leaves_none_after_the_next_run() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fixture::new();
    let tmp = fx.scratch().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let agent = hanging_then_fixing(&fx);
    let child = fx
        .run_command("fix the value", &agent, GATE, &[])
        .env("TMPDIR", &tmp)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let runner = child.id();
    fx.wait_for_marker("agent.pid", WAIT);
    let dirs: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let name = dirs[0].file_name().unwrap().to_str().unwrap().to_owned();
    assert!(
        name.starts_with(&format!("greenlight-prompt-{runner}-")),
        "{name}"
    );
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dirs[0]), 0o700);
    assert_eq!(mode(&dirs[0].join("prompt.txt")), 0o600);
    procs::signal("-KILL", runner);
    finish(child);
    assert!(
        dirs[0].exists(),
        "SIGKILL cannot clean up; the next run must"
    );

    let out = fx.goal_env(&["resume"], &[("TMPDIR", tmp.as_os_str())]);
    assert_eq!(out.code, 0, "{}", out.render());
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A database write error exited 2 (usage) with a raw `Error: stepping, database disk image is
/// malformed (11)`; docs/state.md says 1, and the user needs the file and what to do.
#[test]
fn a_damaged_state_database_exits_1_naming_the_file_and_what_to_do() {
    use std::io::{Seek, SeekFrom, Write};
    let fx = Fixture::new();
    // Creates the database (no goal yet: a usage error).
    assert_eq!(fx.goal(&["status"]).code, 2);
    let state = fx.state();
    // The page of the `goals` table (SQLite's own reader says which), damaged: the file opens,
    // and the first write to that table fails.
    let page: u64 = rusqlite::Connection::open(&state)
        .unwrap()
        .query_row(
            "select rootpage from sqlite_schema where name = 'goals'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .open(&state)
        .unwrap();
    file.seek(SeekFrom::Start((page - 1) * 4096)).unwrap();
    file.write_all(&[0xA5; 4096]).unwrap();
    drop(file);
    let agent = fx.script("agent.sh", "echo hi");
    let out = fx.run_goal("g", &agent, GATE, &[]);
    assert_eq!(out.code, 1, "{}", out.render());
    assert!(
        out.stderr.contains(state.to_str().unwrap()),
        "{}",
        out.render()
    );
    assert!(
        out.stderr
            .contains("the file is damaged; move it (and its -wal and -shm files) aside"),
        "{}",
        out.render()
    );
    assert_eq!(fx.calls("agent.sh"), 0);
}

/// `goal run` shares the lock root with `verify`, so it sweeps the same way before its gates:
/// a gate a killed `verify` left running is ended and named (before, only verify swept, and
/// the README said goal run did too).
#[test]
fn goal_run_ends_the_gates_a_killed_verify_left_running() {
    let fx = Fixture::new();
    fx.repo.verify_yaml(&format!(
        "version: 1\ngates:\n  - id: slow\n    command: echo $$ > {}/orphan.pid; sleep 30\n",
        fx.scratch().display()
    ));
    let verify = fx
        .repo
        .command(["verify"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let orphan = fx.pid_in("orphan.pid");
    procs::signal("-KILL", verify.id());
    assert_eq!(finish(verify).code, 128 + 9);
    assert!(
        procs::alive(orphan),
        "the killed verify's gate runs on, orphaned"
    );
    let agent = fx.script("agent.sh", "echo good > value.txt\necho fixed");
    let out = fx.run_goal("fix the value", &agent, GATE, &[]);
    let survived = procs::alive(orphan);
    procs::end(orphan);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(
        !survived,
        "goal run left the killed verify's gate running: {}",
        out.render()
    );
    assert!(out.stderr.contains("sleep 30\n"), "{}", out.render());
    assert!(
        out.stderr.contains(&format!(
            "gate process(es) left running by an earlier greenlight that was killed before it could end them:\n  pid {orphan} /bin/sh -c echo"
        )),
        "{}",
        out.render()
    );
}
