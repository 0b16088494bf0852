//! A goal's `run: remote` gate on a real BuildGrid with a real `greenlight worker`: the goal
//! loop runs it on the cluster through verify.yaml's `options.remote`, and a goal run killed
//! with SIGKILL while the gate runs there re-attaches to the same operation on resume instead
//! of running the gate again.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::time::Duration;

use crate::goal_support::{Fixture, finish};
use crate::worker::{Worker, grid as reapi, unique_pool as unique};
use greenlight_testkit::procs;

#[test]
#[ignore = "needs BuildGrid: run scripts/test"]
fn a_goal_killed_while_its_remote_gate_runs_reattaches_on_resume() {
    let fx = Fixture::new();
    let pool = unique("goal");
    let cache = tempfile::tempdir().unwrap();
    let _worker = Worker::start(&pool, 1, &cache.path().join("cache"), &pool);
    // First run: say where it runs, take long enough to be killed under, then the check.
    let gate = fx.script(
        "gate.sh",
        "if [ $N -eq 1 ]; then echo $$ > \"$S/gate.pid\"; sleep 4; fi\nsh check.sh",
    );
    let command = format!("sh {}", gate.display());
    fx.repo.verify_yaml(&format!(
        "version: 2\noptions:\n  cache: off\n  remote:\n    endpoint: {}\n    platform:\n      pool: {pool}\ngates:\n  - id: check\n    command: {command}\n    timeoutSec: 300\n    run: remote\n",
        reapi()
    ));
    fx.repo.commit_all("the check runs on the cluster");
    let agent = fx.script("agent.sh", "echo good > value.txt\necho fixed");
    let child = fx.spawn_run("fix the value", &agent, &command, &[]);
    fx.wait_for_marker("gate.pid", Duration::from_secs(30));
    let gate_pid = fx.pid_in("gate.pid");
    procs::signal("-KILL", child.id());
    assert_eq!(finish(child).code, 128 + 9);
    assert!(
        procs::alive(gate_pid),
        "the gate runs on the worker, not in the killed goal's group"
    );

    let out = fx.goal(&["resume"]);
    assert_eq!(out.code, 0, "{}", out.render());
    assert_eq!(fx.status()["goal"]["state"], "done", "{}", out.render());
    assert_eq!(
        fx.calls("gate.sh"),
        1,
        "resume re-attached to the running operation instead of running the gate again"
    );
    assert_eq!(
        fx.calls("agent.sh"),
        1,
        "the finished dispatch was not repeated"
    );
    assert!(!procs::alive(gate_pid));
}
