//! Who may change a goal's gates, and when: a goal without gates is never done, the agent's own
//! processes cannot touch them, and a person's change while the loop runs applies at the next
//! turn boundary without crashing it.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use greenlight_testkit::greenlight_bin;

use crate::goal_support::{Fixture, GATE, finish};

/// An agent ran `greenlight goal gate clear` during its turn: the loop then died with `gate id 1
/// is not a live gate` (exit 1) and `goal resume` said `done: every gate is green` with no gate.
#[test]
fn an_agent_cannot_clear_add_or_remove_its_own_goals_gates() {
    let fx = Fixture::new();
    let bin = greenlight_bin();
    let state = fx.state();
    // The last two edits clear the environment first: the marker is gone, but the agent is
    // still a descendant of the goal's runner.
    let body = format!(
        "for a in clear 'add true' 'remove 1'; do '{0}' goal gate $a --state '{1}' >> \"$S/edits.out\" 2>&1; echo \"exit $?\" >> \"$S/edits.out\"; done\nfor a in 'add true' 'remove 1'; do env -i '{0}' goal gate $a --state '{1}' >> \"$S/edits.out\" 2>&1; echo \"exit $?\" >> \"$S/edits.out\"; done\n[ $N -ge 2 ] && echo good > value.txt\necho edited",
        bin.display(),
        state.display()
    );
    let agent = fx.script("agent.sh", &body);
    let out = fx.run_goal("fix it", &agent, GATE, &[]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(
        out.stdout.contains("every gate is green"),
        "{}",
        out.render()
    );
    let edits = std::fs::read_to_string(fx.scratch().join("edits.out")).unwrap();
    assert_eq!(edits.matches("exit 2").count(), 10, "{edits}");
    assert!(!edits.contains("exit 0"), "{edits}");
    assert!(
        edits.contains("cannot be changed from inside its own run"),
        "{edits}"
    );
    let status = fx.status();
    let gates = status["gates"].as_array().unwrap();
    assert_eq!(gates.len(), 1, "{status}");
    assert_eq!(gates[0]["command"], GATE);
    // The one gate judged both turns: red, then green.
    let runs = crate::goal_support::of_kind(&fx.log(), "gate-run");
    assert_eq!(runs.len(), 2);
}

/// `goal gate clear` (or removing the last gate) on a paused goal, then `goal resume`: the
/// empty gate phase marked the goal done.
#[test]
fn the_last_gate_of_a_paused_goal_cannot_be_removed_so_resume_is_never_done_without_gates() {
    let fx = Fixture::new();
    let agent = fx.script("agent.sh", "echo looked");
    let out = fx.run_goal("fix it", &agent, GATE, &["--retries", "1"]);
    assert_eq!(out.code, 75, "{}", out.render());
    for args in [&["gate", "clear"][..], &["gate", "remove", "1"][..]] {
        let out = fx.goal(args);
        assert_eq!(out.code, 2, "{}", out.render());
        assert!(
            out.stderr.contains("must keep at least one gate"),
            "{}",
            out.render()
        );
    }
    // Replacing it works: add the new gate first, then remove the old one.
    assert_eq!(fx.goal(&["gate", "add", "true"]).code, 0);
    let out = fx.goal(&["gate", "remove", "1"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(out.stdout, "1. true\n");
}

/// A person removing the failing gate from another terminal while the agent works: the gate
/// phase that follows uses the gates as they are then, and nothing crashes.
#[test]
fn a_gate_changed_by_a_person_while_the_agent_works_applies_at_the_turn_boundary() {
    let fx = Fixture::new();
    let agent = fx.script(
        "agent.sh",
        "touch \"$S/working\"\nwhile [ ! -f \"$S/go\" ]; do sleep 0.05; done\necho waited",
    );
    let child = fx.spawn_run("fix it", &agent, GATE, &[]);
    fx.wait_for_marker("working", Duration::from_secs(20));
    fx.swap_gate_1_for_true_then_go();
    let run = finish(child);
    let (code, stdout, stderr) = (run.code, run.stdout, run.stderr);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("gate 1 PASS exit=0  $ true"), "{stdout}");
    assert!(
        !stdout.contains("check.sh"),
        "the removed gate ran: {stdout}"
    );
}

/// `--gate "$UNSET"` finished at once with "every gate is green": `sh -c ''` exits 0.
#[test]
fn an_empty_or_blank_gate_command_is_a_usage_error() {
    let fx = Fixture::new();
    let agent = fx.script("agent.sh", "echo hi");
    for blank in ["", "   ", "\t"] {
        let out = fx.run_goal("g", &agent, blank, &[]);
        assert_eq!(out.code, 2, "{}", out.render());
        assert!(
            out.stderr.contains("--gate needs a command"),
            "{}",
            out.render()
        );
    }
    assert_eq!(fx.calls("agent.sh"), 0);
    let out = fx.goal(&["status"]);
    assert_eq!(out.code, 2, "no goal was created: {}", out.render());

    let out = fx.run_goal("g", &agent, GATE, &["--retries", "1"]);
    assert_eq!(out.code, 75, "{}", out.render());
    let out = fx.goal(&["gate", "add", " "]);
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(out.stderr.contains("must not be empty"), "{}", out.render());
}

/// `goal gate list` in a worktree without a goal says what it needs.
#[test]
fn gate_commands_without_a_goal_say_they_need_one() {
    let fx = Fixture::new();
    let out = fx.goal(&["gate", "list"]);
    assert_eq!(out.code, 2, "{}", out.render());
    assert!(
        out.stderr
            .contains("`goal gate` works on the gates of a worktree's active or paused goal")
            && out.stderr.contains("greenlight goal run"),
        "{}",
        out.render()
    );
}

/// With verify.yaml's gates, one time limit (the largest `timeoutSec`) applied to all of them:
/// a gate declared with 1 s ran for 600.
#[test]
fn verify_yaml_gates_keep_their_own_time_limit() {
    let fx = Fixture::new();
    fx.repo.verify_yaml(
        "version: 1\ngates:\n  - id: slow\n    command: sleep 5\n    timeoutSec: 1\n  - id: long\n    command: \"true\"\n    timeoutSec: 600\n",
    );
    let agent = fx.script("agent.sh", "echo looked");
    let out = fx.goal(&["run", "g", "--agent", &fx.agent(&agent), "--retries", "1"]);
    assert_eq!(out.code, 75, "{}", out.render());
    let status = fx.status();
    assert_eq!(status["goal"]["gate_timeout_sec"], 600);
    assert_eq!(status["gates"][0]["timeout_sec"], 1);
    assert_eq!(status["gates"][1]["timeout_sec"], 600);
    let runs = crate::goal_support::of_kind(&fx.log(), "gate-run");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["payload"]["verdict"], "timeout", "{:?}", runs[0]);
}

/// With verify.yaml's gates, `mutex` was dropped: a goal's gate ran while `verify` (or another
/// goal) held the machine-wide lock it must share.
#[test]
fn verify_yaml_gates_run_under_their_mutex() {
    let fx = Fixture::new();
    fx.repo.verify_yaml(
        "version: 1\ngates:\n  - id: e2e\n    command: \"true\"\n    timeoutSec: 1\n    mutex: e2e-port\n",
    );
    // A live holder: this test process, on this host.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let lock = fx.repo.lock_root().join("e2e-port.lock");
    std::fs::create_dir_all(&lock).unwrap();
    std::fs::write(
        lock.join("owner"),
        format!(
            "{{\"pid\":{},\"host\":\"{}\",\"token\":\"held-by-the-test\",\"acquiredAt\":0}}\n",
            std::process::id(),
            host.trim()
        ),
    )
    .unwrap();
    let agent = fx.script("agent.sh", "echo looked");
    let out = fx.goal(&["run", "g", "--agent", &fx.agent(&agent), "--retries", "1"]);
    assert_eq!(
        out.code,
        75,
        "the gate ran without its lock: {}",
        out.render()
    );
    let status = fx.status();
    assert_eq!(status["gates"][0]["mutex"], "e2e-port");
    let last = &status["gates"][0]["last"];
    assert_eq!(last["verdict"], "timeout", "{status}");
    let evidence = last["evidence"].as_str().unwrap();
    assert!(
        evidence.contains("machine-wide lock `e2e-port` (held by pid"),
        "{evidence}"
    );
    // Released by its holder, the lock is taken and the gate runs.
    std::fs::remove_dir_all(&lock).unwrap();
    assert_eq!(fx.goal(&["gate", "list"]).code, 0);
    let out = fx.goal(&["resume"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(!lock.exists(), "the goal left the lock behind");
}

/// A gate added from another terminal while the gate phase ran was never run: the phase passed
/// the gates it had read and the goal was done without the new one.
#[test]
fn a_gate_added_while_the_gates_run_judges_before_the_goal_is_done() {
    let fx = Fixture::new();
    // The first gate waits, on its first run, for the test to add a second gate.
    let waiter = fx.script(
        "waiter.sh",
        "if [ $N -eq 1 ]; then touch \"$S/gating\"; while [ ! -f \"$S/go\" ]; do sleep 0.05; done; fi\nexit 0",
    );
    let agent = fx.script("agent.sh", "echo looked");
    let waiter_gate = format!("sh {}", waiter.display());
    let child = fx.spawn_run("fix it", &agent, &waiter_gate, &["--retries", "1"]);
    fx.wait_for_marker("gating", Duration::from_secs(20));
    let out = fx.goal(&["gate", "add", GATE]);
    assert_eq!(out.code, 0, "{}", out.render());
    std::fs::write(fx.scratch().join("go"), "").unwrap();
    let run = finish(child);
    let (code, stdout, stderr) = (run.code, run.stdout, run.stderr);
    assert_eq!(code, 75, "done without the added gate: {stdout}\n{stderr}");
    let status = fx.status();
    assert_eq!(status["gates"][1]["command"], GATE);
    assert_eq!(status["gates"][1]["last"]["verdict"], "fail", "{status}");
}

/// A gate removed by a person while it runs: its result has no live gate to land on, and the
/// loop died with `gate id 1 is not a live gate`. The phase now starts over with the gates as
/// they are.
#[test]
fn a_gate_removed_while_it_runs_restarts_the_phase_instead_of_crashing() {
    let fx = Fixture::new();
    let waiter = fx.script(
        "waiter.sh",
        "touch \"$S/gating\"; while [ ! -f \"$S/go\" ]; do sleep 0.05; done\nexit 1",
    );
    let agent = fx.script("agent.sh", "echo looked");
    let waiter_gate = format!("sh {}", waiter.display());
    let child = fx.spawn_run("fix it", &agent, &waiter_gate, &[]);
    fx.wait_for_marker("gating", Duration::from_secs(20));
    fx.swap_gate_1_for_true_then_go();
    let run = finish(child);
    let (code, stdout, stderr) = (run.code, run.stdout, run.stderr);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("gate 1 PASS exit=0  $ true"), "{stdout}");
    assert_eq!(fx.calls("agent.sh"), 1);
    let runs = crate::goal_support::of_kind(&fx.log(), "gate-run");
    assert_eq!(runs.len(), 1, "only the live gate's result was recorded");
}
