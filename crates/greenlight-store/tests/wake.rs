//! The writer's side of the wake-ups: a commit pokes every socket in the wake directory beside
//! the file, and with nobody listening (no directory, or a socket whose listener is gone) a
//! commit neither fails nor waits.

#![allow(clippy::unwrap_used)] // a test that cannot set up its fixture should stop loudly

use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

use greenlight_store::greenlight_stream::{ActivityKind, FrameBody, StreamId};
use greenlight_store::wake::{self, Waker};
use greenlight_store::{AgentSpec, Family, NewGoal, Store};

fn goal(store: &mut Store, dir: &std::path::Path) -> i64 {
    let new = NewGoal {
        worktree: dir.to_path_buf(),
        text: "wake".into(),
        agent: AgentSpec {
            family: Family::Command,
            model: None,
            argv_template: Some(vec!["true".into()]),
            endpoint: None,
        },
        judge: None,
        max_turns: 1,
        retries: 1,
        gate_timeout_sec: 60,
        gates: vec!["true".into()],
    };
    store.write(|tx| tx.create_goal(&new)).unwrap().0
}

fn append(store: &mut Store, goal: i64) {
    let body = FrameBody::Activity {
        turn: 1,
        kind: ActivityKind::Output,
        text: "x".into(),
    };
    store
        .write(|tx| tx.append_frame(StreamId::Goal(goal), &body))
        .unwrap();
}

fn poked(socket: &UnixDatagram) -> bool {
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut byte = [0u8; 4];
    socket
        .recv(&mut byte)
        .is_ok_and(|n| &byte[..n] == wake::POKE)
}

#[test]
fn the_wake_directory_sits_beside_the_database() {
    assert_eq!(
        wake::dir_for(std::path::Path::new("/state/greenlight/state.db")),
        std::path::Path::new("/state/greenlight/state.db-wake")
    );
}

#[test]
fn a_commit_pokes_every_socket_in_the_wake_directory_after_it_committed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let mut store = Store::open(&db).unwrap();
    let goal = goal(&mut store, dir.path());
    let wake_dir = wake::dir_for(&db);
    std::fs::create_dir(&wake_dir).unwrap();
    let first = UnixDatagram::bind(wake_dir.join("a")).unwrap();
    let second = UnixDatagram::bind(wake_dir.join("b")).unwrap();
    append(&mut store, goal);
    assert!(poked(&first), "the first listener was poked");
    assert!(poked(&second), "the second listener was poked");
    // Poked after the commit: a reader on another connection already sees the frame.
    let reader = Store::open(&db).unwrap();
    use greenlight_store::Reads;
    assert_eq!(reader.frames_since(0, 100).unwrap().len(), 2);
}

#[test]
fn with_a_dead_listeners_socket_or_a_full_queue_a_commit_neither_fails_nor_waits() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let mut store = Store::open(&db).unwrap();
    let goal = goal(&mut store, dir.path());
    let wake_dir = wake::dir_for(&db);
    std::fs::create_dir(&wake_dir).unwrap();
    // A listener that was killed: its socket file stays, nobody reads it.
    drop(UnixDatagram::bind(wake_dir.join("dead")).unwrap());
    // A listener that never reads: its queue fills after a few hundred pokes.
    let _deaf = UnixDatagram::bind(wake_dir.join("deaf")).unwrap();
    let started = Instant::now();
    for _ in 0..2000 {
        append(&mut store, goal);
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(60),
        "2,000 commits took {took:?}: a full or dead listener must not hold a writer"
    );
}

#[test]
fn a_poke_with_nobody_listening_costs_microseconds() {
    let dir = tempfile::tempdir().unwrap();
    let mut waker = Waker::new(wake::dir_for(&dir.path().join("state.db")));
    let started = Instant::now();
    for _ in 0..10_000 {
        waker.poke();
    }
    let each = started.elapsed() / 10_000;
    // One failed directory open: a couple of microseconds; a durable commit is milliseconds.
    assert!(
        each < Duration::from_micros(100),
        "a poke with no wake directory took {each:?}"
    );
}

#[test]
fn a_symlink_in_the_wake_directory_is_not_followed_to_the_socket_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let mut store = Store::open(&db).unwrap();
    let goal = goal(&mut store, dir.path());
    let wake_dir = wake::dir_for(&db);
    std::fs::create_dir(&wake_dir).unwrap();
    let elsewhere = UnixDatagram::bind(dir.path().join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), wake_dir.join("link")).unwrap();
    let listener = UnixDatagram::bind(wake_dir.join("listener")).unwrap();
    append(&mut store, goal);
    assert!(poked(&listener), "the socket in the directory was poked");
    elsewhere.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 4];
    assert!(
        elsewhere.recv(&mut byte).is_err(),
        "the socket the symlink names got a poke"
    );
}
