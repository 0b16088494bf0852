//! A worker that stalls past its lease (SIGSTOP) while its goal runs on this machine, through
//! the real binary on a SQLite store: the worker that takes the item finds the goal's runner
//! alive, holds the item and waits instead of failing it; once the stalled one resumes, sees
//! its lease lost and stops, the taker finishes the goal.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::time::{Duration, Instant};

use greenlight_store::{QueueState, Reads, Store};
use greenlight_testkit::TempRepo;
use greenlight_testkit::files::write_executable;

use crate::goal_queue::{claims_of, submit_gated, wait_exit, worker};
use crate::serve_cli::EndOnDrop;

#[test]
fn a_taker_waits_for_a_stalled_holder_on_this_machine_and_finishes_the_goal() {
    let repo = TempRepo::primary();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("state.db");
    let marker = dir.path().join("first-turn");
    let turns = dir.path().join("turns");
    let script = dir.path().join("agent.sh");
    // The first turn hangs; the next one makes the gate pass.
    write_executable(
        &script,
        &format!(
            "#!/bin/sh\necho turn >> '{t}'\nif [ -e '{m}' ]; then touch done.txt; else touch '{m}'; sleep 60; fi\necho done\n",
            t = turns.display(),
            m = marker.display()
        ),
    );
    let store_url = store.to_str().unwrap();
    submit_gated(
        store_url,
        repo.path(),
        "outlast a stall",
        &format!("command:{}", script.display()),
        "test -f done.txt",
    );

    let stalled = worker(store_url, "stalled", dir.path(), "2s", dir.path());
    let _stalled_reaper = EndOnDrop(stalled.id() as i32);
    let start = Instant::now();
    while !marker.exists() {
        assert!(start.elapsed() < Duration::from_secs(60), "no first turn");
        std::thread::sleep(Duration::from_millis(20));
    }
    greenlight_testkit::procs::signal("-STOP", stalled.id());
    let taker = worker(store_url, "taker", dir.path(), "2s", dir.path());
    let _taker_reaper = EndOnDrop(taker.id() as i32);

    // The lease (2 s) runs out and the taker claims the item; it must still hold it, unended,
    // while the stalled holder sleeps.
    let queue = Store::open(&store).unwrap();
    let item = queue.queue_items().unwrap().remove(0).id;
    let start = Instant::now();
    while claims_of(&queue, item).len() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "nobody took the item"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(2));
    let now = queue.queue_item(item).unwrap().unwrap();
    assert_eq!(
        (now.state, now.outcome.as_deref()),
        (QueueState::Claimed, None),
        "the taker holds the item while the holder is stalled; its log:\n{}",
        std::fs::read_to_string(dir.path().join("taker.log")).unwrap_or_default()
    );

    greenlight_testkit::procs::signal("-CONT", stalled.id());
    wait_exit(taker, Duration::from_secs(60), "the taker");
    wait_exit(
        stalled,
        Duration::from_secs(30),
        "the stalled worker, resumed",
    );
    let now = queue.queue_item(item).unwrap().unwrap();
    assert_eq!(now.outcome.as_deref(), Some("done"));
    assert_eq!(
        claims_of(&queue, item),
        [(1, "stalled".to_owned()), (2, "taker".to_owned())]
    );
    let goal = queue.goal(now.goal.unwrap()).unwrap().unwrap();
    assert_eq!(goal.state, greenlight_store::GoalState::Done);
    let turns = std::fs::read_to_string(&turns).unwrap();
    assert_eq!(
        turns.lines().count(),
        2,
        "the hung turn and the finishing one"
    );
}
